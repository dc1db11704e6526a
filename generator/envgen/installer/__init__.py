"""Install a Lock into an env: the core (`core.py`) reads through a source (`sources.py`), creates
a destination (`destinations.py`) and hands the pip part to pip or uv (`tools.py`)."""
