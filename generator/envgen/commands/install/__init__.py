"""`envgen install` and `envgen bundle`: a lock into a prefix, from the indexes or from a bundle,
and the bundle itself with what it is trusted through."""
