"""What a sha256 is written as (64 lower-case hex digits), and how envgen shows one (a file's, a
lock's inputs, its content hash) next to others: 12 hex digits."""

from __future__ import annotations

import re

# The sha256 as envgen writes it and every reader takes it; a larger pattern (a TOML or Nix line)
# builds on the fragment.
SHA256_HEX = "[0-9a-f]{64}"
_SHA256 = re.compile(SHA256_HEX)
# A matrix may write the digits in either case (ASCII letters only, as re.ASCII keeps it).
_SHA256_ANY_CASE = re.compile(SHA256_HEX, re.IGNORECASE | re.ASCII)

SHORT_DIGEST = 12


def is_sha256(text: str, *, any_case: bool = False) -> bool:
    """Whether `text` is a whole sha256: 64 lower-case hex digits (either case with `any_case`)."""
    return (_SHA256_ANY_CASE if any_case else _SHA256).fullmatch(text) is not None


def short_digest(sha256: str) -> str:
    """A sha256 as messages, reports and exports show it: its first `SHORT_DIGEST` hex digits."""
    return sha256[:SHORT_DIGEST]
