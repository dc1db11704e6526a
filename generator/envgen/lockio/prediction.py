"""What a lock on disk predicts of its own re-lock, read quickly: per platform the python its conda part pins
and its pip pins, and the sources it records.

A re-lock starts uv on this prediction before anything else (`resolve/head_start.py`), so the read must not
wait for conda-lock's models, or for a YAML parser: the yml is read line by line as envgen writes it, and the
entries it needs are checked for shape only. It is a guess, never a result: anything unexpected predicts
nothing, and a run started on a wrong prediction is not used (it stands in only for a uv run planned from the
validated lock).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from envgen.errors import InputError
from envgen.inputs.files import read_input_text
from envgen.lockio.sources_toml import parse_sources_toml
from envgen.model import LockedSource
from envgen.project import Project

_SHA256 = re.compile(r"[0-9a-f]{64}")
# What `--python-version` may be given: a version a conda solve chose, nothing an option could hide in.
_PYTHON = re.compile(r"[0-9]+(?:\.[0-9]+){1,2}")


class Pinned(NamedTuple):
    """A pip entry as a preference: its name and version (resolve/preferences.py validates both), and its
    artifact's URL and sha256 (a 64-hex digest, or "" when the lock has none such), whose metadata the re-lock
    will most likely read again."""

    name: str
    version: str
    url: str
    sha256: str


@dataclass(frozen=True)
class Prediction:
    """Per platform, the python and the pip pins of the lock; and its sources (from sources.toml, validated)."""

    python: Mapping[str, str]
    pip: Mapping[str, tuple[Pinned, ...]]
    sources: tuple[LockedSource, ...]


def predict(project: Project, env: str) -> Prediction | None:
    """The prediction of the lock of `env`; None when there is none or it does not read as expected."""
    try:
        entries = _entries(read_input_text(project.lock_yml(env), hint=""))
    except InputError:  # the re-lock proper reads the files again, and reports on them
        return None
    recorded = recorded_sources(project, env)
    if entries is None or recorded is None:
        return None
    python: dict[str, set[str]] = {}
    pip: dict[str, list[Pinned]] = {}
    for entry in entries:
        fields = [entry.get(k) for k in ("manager", "name", "version", "platform")]
        if None in fields:
            return None
        manager, name, version, platform = (f or "" for f in fields)
        if manager == "pip":
            sha256 = entry.get("sha256", "")
            pip.setdefault(platform, []).append(Pinned(name, version, entry.get("url", "") if sha256 else "", sha256))
        elif name == "python":
            python.setdefault(platform, set()).add(version)
    pythons = {p: next(iter(v)) for p, v in python.items() if len(v) == 1 and _PYTHON.fullmatch(next(iter(v)))}
    return Prediction(pythons, {p: tuple(pins) for p, pins in pip.items()}, recorded)


def recorded_sources(project: Project, env: str) -> tuple[LockedSource, ...] | None:
    """The sources the lock of `env` records (its sources.toml alone, validated); None when it does not read."""
    path = project.sources_toml(env)
    try:
        return parse_sources_toml(read_input_text(path, hint=""), str(path)).lock.sources
    except InputError:  # the re-lock proper reads the files again, and reports on them
        return None


# The yml is read line by line, as conda-lock's writer lays it out: under `package:`, an entry per `- name: `
# line, its fields two spaces in, its hashes four. Reading it through YAML (and importing a YAML library)
# would cost the head start more than the rest of its preparation; any other layout predicts nothing.
_FIELD = re.compile(r"  (version|manager|platform|url|hash):(?: (.*))?")
_HASH = re.compile(r"    sha256: ([0-9a-f]{64})")


def _entries(yml: str) -> list[dict[str, str]] | None:
    """Each package entry's name, version, manager, platform, url and sha256, as far as the yml gives them."""
    lines = iter(yml.splitlines())
    if "package:" not in lines:  # consumes the lines up to it
        return None
    entries: list[dict[str, str]] = []
    hashes = False
    for line in lines:
        if line.startswith("- name: "):
            entries.append({"name": _scalar(line.removeprefix("- name: "))})
        elif entries and (field := _FIELD.fullmatch(line)):
            hashes = field.group(1) == "hash"
            if not hashes:
                entries[-1][field.group(1)] = _scalar(field.group(2) or "")
        elif entries and hashes and (digest := _HASH.fullmatch(line)):
            entries[-1]["sha256"] = digest.group(1)
        elif line and not line.startswith(" "):  # the next top-level key: no more entries
            break
    if any("" in e.values() for e in entries):
        return None
    return entries


def _scalar(text: str) -> str:
    """A plain or single-quoted YAML scalar's value; "" for any other (double-quoted, flow, block, tagged)."""
    if text.startswith("'") and text.endswith("'") and len(text) >= 2:
        inner = text[1:-1]
        return inner.replace("''", "'") if "'" not in inner.replace("''", "") else ""
    indicator = not text or text[0] in "[]{},#&*!|>'\"%@`" or text[:2] in ("- ", "? ", ": ") or text in "-?:"
    return "" if indicator or ": " in text or " #" in text or text != text.strip() else text
