"""`envgen status`: tampered, fresh or stale, upstream drift, and the watch."""
