"""What a lock on disk predicts of its own re-lock: per platform the python its conda part pins and
its pip pins, and the sources it records; taken from the files as lockio/store.py read them.

A re-lock starts uv on this prediction before anything else (`resolve/head_start.py`), so it does
not wait for the yml's schema: it reads the yml's YAML document (the one the re-lock then
validates through the schema, loaded once) for each entry's name, version, platform and artifact,
checked for shape only. It is a guess, never a result: anything unexpected predicts nothing, and a
run started on a wrong prediction is not used (it stands in only for a uv run planned from the
validated lock).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from envgen.digests import is_sha256
from envgen.errors import InputError
from envgen.lockio.conda_lock_yml import lock_document
from envgen.lockio.store import LockTexts
from envgen.model import LockedArchive, LockedSource

# What `--python-version` may be given: a version a conda solve chose, no option hidden in it.
_PYTHON = re.compile(r"[0-9]+(?:\.[0-9]+){1,2}")
_FIELDS = ("manager", "name", "version", "platform")


class Predicted(NamedTuple):
    """A pip entry as a preference: its name and version (resolve/preferences.py validates both),
    and its artifact's URL and sha256 (a 64-hex digest, or "" when the lock has none such), whose
    metadata the re-lock will most likely read again."""

    name: str
    version: str
    url: str
    sha256: str


@dataclass(frozen=True)
class Prediction:
    """Per platform, the python and the pip pins of the lock."""

    python: Mapping[str, str]
    pip: Mapping[str, tuple[Predicted, ...]]


def predict(texts: LockTexts) -> Prediction | None:
    """The prediction of the lock whose files are `texts`; None when there is none or it does not
    read as expected (the re-lock proper reads the same texts, and reports on them)."""
    if texts.unreadable is not None or texts.yml is None or texts.sources is None:
        return None
    try:
        packages = lock_document(texts.yml, texts.names[0]).get("package")
    except InputError:
        return None
    if not isinstance(packages, list) or not all(_plain(entry) for entry in packages):
        return None
    python: dict[str, set[str]] = {}
    pip: dict[str, list[Predicted]] = {}
    for entry in packages:
        manager, name, version, platform = (entry[k] for k in _FIELDS)
        if manager == "pip":
            pip.setdefault(platform, []).append(_pinned(entry))
        elif name == "python":
            python.setdefault(platform, set()).add(version)
    # One python per platform, and a version: `--python-version` takes it.
    single = {p: next(iter(v)) for p, v in python.items() if len(v) == 1}
    pythons = {p: v for p, v in single.items() if _PYTHON.fullmatch(v)}
    return Prediction(pythons, {p: tuple(pins) for p, pins in pip.items()})


def recorded_sources(texts: LockTexts) -> tuple[LockedSource, ...] | None:
    """The sources the lock records (its sources.toml, read through its schema); None when it does
    not read. Asked only for a matrix with sources: the schema (msgspec) is not imported before uv
    starts otherwise."""
    from envgen.lockio.sources_toml import parse_sources_toml

    if texts.unreadable is not None or texts.sources is None:
        return None
    try:
        return parse_sources_toml(texts.sources, texts.names[1]).lock.sources
    except InputError:  # the re-lock proper reads the same text, and reports on it
        return None


def recorded_archives(texts: LockTexts) -> tuple[LockedArchive, ...] | None:
    """The archives the lock records (their URLs and sha256, which a re-lock keeps); None when its
    sources.toml does not read. Asked only for a matrix with archives."""
    from envgen.lockio.sources_toml import parse_sources_toml

    if texts.unreadable is not None or texts.sources is None:
        return None
    try:
        return parse_sources_toml(texts.sources, texts.names[1]).lock.archives
    except InputError:  # the re-lock proper reads the same text, and reports on it
        return None


def _plain(entry: Any) -> bool:
    """Whether a package entry has the fields a prediction reads, each a string."""
    return isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in _FIELDS)


def _pinned(entry: dict[str, Any]) -> Predicted:
    hashes, url = entry.get("hash"), entry.get("url")
    sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
    if not isinstance(sha256, str) or not is_sha256(sha256) or not isinstance(url, str):
        return Predicted(entry["name"], entry["version"], "", "")
    return Predicted(entry["name"], entry["version"], url, sha256)
