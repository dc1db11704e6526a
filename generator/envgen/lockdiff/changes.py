"""What a LockDiff holds (pure data): the package, source, submodule, field and item changes
between two Locks of one env, and their counts by kind. Frozen msgspec Structs (classes made in C,
not by dataclasses' generated code); a copy with a field changed through msgspec.structs.replace."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from envgen.commits import short_commit

# Kinds of package change, in the order renderings list them.
KINDS = ("added", "removed", "upgraded", "downgraded", "changed", "rebuilt", "replaced", "moved")
# Same version, different artifact hash: "rebuilt" under a new file name, "replaced" under the same
# one.
HASH_KINDS = ("rebuilt", "replaced")
# The root that brings a pip package into one side's lock, shown compactly (`vllm-ascend
# requirements.txt:38`, `matrix pip.packages.torch`, `override: reason`): (platform, canonical
# name) -> text, or None when the side records no reason for it.
Via = Callable[[str, str], str | None]


class PackageChange(msgspec.Struct, frozen=True):
    """One package that differs between two locks on one platform."""

    platform: str
    manager: str  # "conda" or "pip"
    name: str
    kind: str  # one of KINDS
    old_version: str | None = None
    new_version: str | None = None
    old_build: str | None = None  # conda build string or wheel file name
    new_build: str | None = None
    old_hash: str | None = None
    new_hash: str | None = None
    old_url: str | None = None
    new_url: str | None = None
    # The root that brought a pip package in (see Via); None for conda, or when none is recorded.
    via: str | None = None

    @property
    def loud(self) -> bool:
        """Same version, different bytes: a rebuilt or replaced artifact someone should look at."""
        return self.kind in HASH_KINDS


class FieldChange(msgspec.Struct, frozen=True):
    """One field of a source other than ref, commit, url and cherry-picks (env, install flags,
    ...)."""

    field: str
    old: str
    new: str


class SubmoduleChange(msgspec.Struct, frozen=True):
    """A submodule of a source (by path) added, removed or moved to another commit or URL."""

    path: str
    kind: str  # "added", "removed" or "changed"
    old_url: str | None = None
    new_url: str | None = None
    old_commit: str | None = None
    new_commit: str | None = None
    compare_url: str | None = None


class SourceChange(msgspec.Struct, frozen=True):
    """A git source added, removed or moved to another ref, commit, URL, cherry-picks or
    settings."""

    name: str
    kind: str  # "added", "removed" or "changed"
    old_url: str | None = None
    new_url: str | None = None
    old_ref: str | None = None
    new_ref: str | None = None
    old_commit: str | None = None
    new_commit: str | None = None
    compare_url: str | None = None
    cherry_picks_added: tuple[str, ...] = ()
    cherry_picks_removed: tuple[str, ...] = ()
    fields: tuple[FieldChange, ...] = ()
    submodules: tuple[SubmoduleChange, ...] = ()

    @property
    def old_short(self) -> str | None:
        return short_commit(self.old_commit) if self.old_commit else None

    @property
    def new_short(self) -> str | None:
        return short_commit(self.new_commit) if self.new_commit else None


class ItemChange(msgspec.Struct, frozen=True):
    """A named item of a section (override, pending, channel, index, input digest, ...)
    added/removed/changed."""

    section: str
    name: str
    kind: str  # "added", "removed" or "changed"
    old: str | None = None
    new: str | None = None


class LockDiff(msgspec.Struct, frozen=True):
    """Everything that differs between an old and a new lock of one env; empty when they are
    equivalent."""

    env: str
    old_label: str
    new_label: str
    platforms_added: tuple[str, ...] = ()
    platforms_removed: tuple[str, ...] = ()
    packages: tuple[PackageChange, ...] = ()
    sources: tuple[SourceChange, ...] = ()
    items: tuple[ItemChange, ...] = ()
    # The new side's integrity problems (lockio/integrity.py): its files were edited after `envgen
    # lock`.
    tampered: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        changed = (
            self.platforms_added
            or self.platforms_removed
            or self.packages
            or self.sources
            or self.items
        )
        return not (changed or self.tampered)

    @property
    def loud(self) -> tuple[PackageChange, ...]:
        return tuple(c for c in self.packages if c.loud)

    def summary(self) -> dict[str, int]:
        """Counts by kind of change (only the non-zero ones), for headlines."""
        counts: dict[str, int] = {}
        for change in self.packages:
            counts[change.kind] = counts.get(change.kind, 0) + 1
        moved = sum(1 for s in self.sources if s.kind == "changed")
        entries = {
            "sources added": sum(1 for s in self.sources if s.kind == "added"),
            "sources removed": sum(1 for s in self.sources if s.kind == "removed"),
            "sources changed": moved,
            "platforms added": len(self.platforms_added),
            "platforms removed": len(self.platforms_removed),
            "other changes": len(self.items),
            "integrity problems": len(self.tampered),
        }
        ordered = {kind: counts[kind] for kind in KINDS if counts.get(kind)}
        ordered.update({k: v for k, v in entries.items() if v})
        return ordered
