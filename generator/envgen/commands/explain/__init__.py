"""`envgen why`, `envgen tree` and `envgen audit`: a lock explained from `locks/` alone."""
