"""`envgen lock`: an env locked or found fresh, its report, and whether a lock is fresh."""
