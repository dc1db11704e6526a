"""The pip part: the indexes, uv's resolution per platform, overrides, and the explanation of a
conflict."""
