"""What a project asks for: strict TOML reading, channels and indexes, the matrix, requirement
files."""
