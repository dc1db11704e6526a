"""One entry function per CLI command; each takes parsed arguments and returns data for the CLI to
print."""
