"""Matrix -> resolved parts: git sources pinned, the pip side through uv, the conda side through
rattler."""
