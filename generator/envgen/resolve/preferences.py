"""What a re-lock keeps: the previous lock's versions, handed to the resolvers as preferences
(pure).

uv reads an existing `--output-file` as preferences and rattler takes locked records; either keeps a
previous version while the inputs still allow it, so a re-lock moves only what its inputs require or
what is upgraded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import tomli_w
from packaging.version import InvalidVersion, Version

from envgen.names import is_project_name, package_key
from envgen.resolve.movable import Movable


class Preference(Protocol):
    """What a preference is made of: a locked entry's name and version."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...


_E = TypeVar("_E", bound=Preference)


def kept(entries: Sequence[_E], upgrade: Movable) -> tuple[_E, ...]:
    """The previous entries the resolver should keep: all but the upgraded ones."""
    return tuple(e for e in entries if not upgrade.covers(e.name))


def _valid(entry: Preference) -> bool:
    try:
        Version(entry.version)
    except InvalidVersion:
        return False
    return is_project_name(entry.name)


def render_pylock(entries: Sequence[Preference]) -> str:
    """A minimal pylock.toml of the previous pins, which `uv pip compile --output-file` reads as
    preferences.

    Names and versions are all uv takes from it; artifacts come from the indexes again. The lock is
    input like any other: an entry whose name or version is not valid is left out (uv would refuse
    the whole file), and that package is resolved afresh.
    """
    ordered = sorted(entries, key=lambda e: package_key(e.name))
    packages = [{"name": e.name, "version": e.version} for e in ordered if _valid(e)]
    return tomli_w.dumps({"lock-version": "1.0", "created-by": "envgen", "packages": packages})
