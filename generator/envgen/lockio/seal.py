"""What a lock records about itself when written, so a hand edit shows: the content hash, the
derived hash and the file hosts.

The content hash is one sha256 over the three files (yml, sources.toml, recipe) as written, the
sources.toml with the hash's own value blanked; the sources.toml records it (the yml records nothing
of it, so a re-lock that moves only a source leaves the yml's bytes alone). The derived hash is one
sha256 over the derived files (requirements, pylock, Nix) written with them, recorded in the
sources.toml before it is sealed: the no-op lock tells an edited derived file by hashing a few
files, not by rendering them again. The file hosts are, per index, the hosts its artifacts were
served from when locked, when other than the index's own. Pure functions of text and Locks."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envgen.digests import SHA256_HEX
from envgen.urls import url_host

# types only: the no-op lock imports this module (its content hash), and never the model
if TYPE_CHECKING:
    from envgen.model import Index, Lock

# The value the sources.toml renderer writes and `seal` replaces; blanked to the same value before
# hashing, so the hash never covers itself.
UNSEALED = "0" * 64

_LINE = re.compile(rf'^(content-hash = ")({SHA256_HEX})(")$', re.MULTILINE)
_DERIVED = re.compile(rf'^(derived-hash = ")({SHA256_HEX})(")$', re.MULTILINE)


@dataclass(frozen=True)
class Recorded:
    """The content hash the sources.toml records (None when it records none, or more than one) and
    the one the three files hash to."""

    recorded: str | None
    computed: str


# Pure, and a sha256 over a whole lock: `lock --check` checks the integrity of the files, then
# whether they are intact for the no-op's verdict, so the last few texts hashed are kept.
@functools.lru_cache(maxsize=4)
def recorded(yml: str, sources: str, recipe: str) -> Recorded:
    """The content hash the sources.toml records, and the one the three texts hash to."""
    found = _LINE.findall(sources)
    blanked = _LINE.sub(lambda m: m.group(1) + UNSEALED + m.group(3), sources)
    # JSON keeps the three texts apart: bytes shifted from one file to the next do not hash the
    # same.
    computed = hashlib.sha256(json.dumps([yml, blanked, recipe]).encode()).hexdigest()
    return Recorded(found[0][1] if len(found) == 1 else None, computed)


def intact(yml: str, sources: str, recipe: str) -> bool:
    """Whether the sources.toml records the content hash the three texts have."""
    found = recorded(yml, sources, recipe)
    return found.recorded == found.computed


def seal(yml: str, sources: str, recipe: str) -> str:
    """The sources.toml with the content hash of the three files written in (it was rendered with
    UNSEALED in its place); the same texts always seal to the same bytes."""
    digest = recorded(yml, sources, recipe).computed
    sealed, count = _LINE.subn(lambda m: m.group(1) + digest + m.group(3), sources)
    if count != 1:
        raise ValueError(
            "the sources.toml was not rendered with exactly one content-hash line to seal"
        )
    return sealed


def derived_hash(derived: Sequence[tuple[str, str]]) -> str:
    """The one sha256 of the derived files (name, text), whatever their order."""
    return hashlib.sha256(json.dumps(sorted(derived)).encode()).hexdigest()


def with_derived(sources: str, derived: Sequence[tuple[str, str]]) -> str:
    """The sources.toml (rendered with UNSEALED as its derived hash) recording the derived hash of
    `derived`; `seal` then covers it with the rest."""
    filled, count = _DERIVED.subn(
        lambda m: m.group(1) + derived_hash(derived) + m.group(3), sources
    )
    if count != 1:
        raise ValueError("the sources.toml was not rendered with exactly one derived-hash line")
    return filled


def file_hosts(lock: Lock, index: Index) -> tuple[str, ...]:
    """The hosts other than the index's own that served the artifacts the lock took from `index`,
    sorted."""
    own = url_host(index.url)
    return tuple(sorted({url_host(e.url) for e in lock.pip if e.index == index.name} - {own}))


def host_problems(lock: Lock, recorded_hosts: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Every pip artifact of an index whose URL is on a host that index did not serve it from when
    locked (its own host, or the hosts the lock recorded for it): a URL moved after the lock was
    written."""
    indexes = {i.name: i for i in lock.indexes}
    problems = []
    for entry in lock.pip:
        index = indexes.get(entry.index or "")
        if index is None:
            continue
        host = url_host(entry.url)
        served = {url_host(index.url), *recorded_hosts.get(index.name, ())}
        if host not in served:
            problems.append(
                f"{entry.name} {entry.version} ({entry.platform}): its URL is on "
                f"{host or 'no host'}, which index "
                f"{index.name} does not serve (it serves {', '.join(sorted(served))})"
            )
    return problems
