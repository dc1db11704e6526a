"""The git sources of a matrix: refs pinned to commits, submodules, the files of a tree, and the
requirements a source declares (its files, and its build metadata)."""
