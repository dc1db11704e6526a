"""A Lock on disk: the conda-lock yml, sources.toml, input hashes and the atomic, mutually exclusive
store."""
