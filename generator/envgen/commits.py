"""How envgen writes and recognises a git commit: 40 hex digits in full, 7 when shown next to others."""

from __future__ import annotations

import re

FULL_SHA = re.compile(r"[0-9a-fA-F]{40}")
# What an abbreviated commit (`git rev-parse --short`, a commit in a URL) looks like.
_ABBREVIATED = re.compile(r"[0-9a-fA-F]{7,39}")
# How many hex digits a commit is shown with in reports (git's own default abbreviation).
SHORT_SHA = 7


def is_full_commit(text: str) -> bool:
    """Whether `text` is a full 40-hex commit (either case; envgen writes them lower-case)."""
    return FULL_SHA.fullmatch(text) is not None


def is_abbreviated_commit(text: str) -> bool:
    """Whether `text` looks like an abbreviated commit (7 to 39 hex digits), which envgen never pins to."""
    return _ABBREVIATED.fullmatch(text) is not None
