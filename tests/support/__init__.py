"""Shared test builders: matrices, locks and the A5 PyPI set."""
