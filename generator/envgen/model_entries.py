"""The locked packages of one platform (frozen, no I/O): a conda entry, a pip artifact, and the
python among the conda entries. `model.py` holds them in a Lock."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec


class CondaEntry(msgspec.Struct, frozen=True):
    """A locked conda package for one platform."""

    name: str
    version: str
    build: str
    platform: str
    url: str
    md5: str
    sha256: str
    depends: tuple[tuple[str, str], ...] = ()


class PipEntry(msgspec.Struct, frozen=True):
    """A locked pip artifact for one platform: one wheel (or an sdist, flagged) pinned by URL and
    sha256."""

    name: str
    version: str
    platform: str
    url: str
    sha256: str
    depends: tuple[tuple[str, str], ...] = ()
    index: str | None = None
    sdist: bool = False


def python_versions(entries: Iterable[CondaEntry]) -> tuple[str, ...]:
    """The versions of the `python` package among one platform's conda entries, sorted (a lock holds
    one)."""
    return tuple(sorted({e.version for e in entries if e.name == "python"}))
