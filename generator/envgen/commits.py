"""How envgen writes and recognises a git commit: 40 hex digits in full, 12 when shown
(`short_commit`)."""

from __future__ import annotations

import re

FULL_SHA = re.compile(r"[0-9a-fA-F]{40}")
# What an abbreviated commit (`git rev-parse --short`, a commit in a URL) looks like.
_ABBREVIATED = re.compile(r"[0-9a-fA-F]{7,39}")
# How many hex digits a commit (or a tree or blob) is shown with in every message and report, and in
# the `0+g<commit>` version a setuptools-scm build of a source is given: unambiguous in any
# repository envgen meets, where git's own default of 7 is not.
SHORT_SHA = 12


def short_commit(sha: str) -> str:
    """A commit, tree or blob id as envgen shows it: its first `SHORT_SHA` hex digits."""
    return sha[:SHORT_SHA]


def is_full_commit(text: str) -> bool:
    """Whether `text` is a full 40-hex commit (either case; envgen writes them lower-case)."""
    return FULL_SHA.fullmatch(text) is not None


def is_abbreviated_commit(text: str) -> bool:
    """Whether `text` looks like an abbreviated commit (7 to 39 hex digits), which envgen never pins
    to."""
    return _ABBREVIATED.fullmatch(text) is not None
