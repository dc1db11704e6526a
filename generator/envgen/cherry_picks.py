"""How a cherry-pick is committed, the same for the lock and for the recipe.

The lock applies each cherry-pick and records the commit it produced; the recipe applies it again on
the target host and refuses to go on unless it gets that same commit. Both therefore commit with
this identity and date, and with these flags: neither a signing key nor the host's `commit.cleanup`
setting may change the commit a pick produces.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

PICK_ENV: Mapping[str, str] = MappingProxyType(
    {
        "GIT_COMMITTER_NAME": "envgen",
        "GIT_COMMITTER_EMAIL": "envgen@localhost",
        "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+00:00",
    }
)
PICK_FLAGS = ("--no-gpg-sign", "--cleanup=verbatim")
