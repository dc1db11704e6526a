"""How envgen shows a sha256 (a file's, a lock's inputs, its content hash) next to others: 12 hex
digits."""

from __future__ import annotations

SHORT_DIGEST = 12


def short_digest(sha256: str) -> str:
    """A sha256 as messages, reports and exports show it: its first `SHORT_DIGEST` hex digits."""
    return sha256[:SHORT_DIGEST]
