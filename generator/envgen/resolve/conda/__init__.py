"""The conda part: rattler's solve per platform."""
