"""What changed between two Locks (pure), read from files or git revisions, rendered as text,
markdown or JSON."""
