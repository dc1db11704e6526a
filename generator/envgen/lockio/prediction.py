"""What a lock on disk predicts of its own re-lock, read quickly: per platform the python its conda part pins
and its pip pins, and the sources it records.

A re-lock starts uv on this prediction before anything else (`resolve/head_start.py`), so the read must not
wait for conda-lock's models: the yml goes through the safe YAML loader alone, and the entries it needs are
checked for shape only. It is a guess, never a result: anything unexpected predicts nothing, and a run started
on a wrong prediction is not used (it stands in only for a uv run planned from the validated lock).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import yaml

from envgen.errors import InputError
from envgen.inputs.files import bounded_nesting, read_input_text, safe_yaml
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
        yml = read_input_text(project.lock_yml(env), hint="")
        sources = read_input_text(project.sources_toml(env), hint="")
        with bounded_nesting("lock"):
            content = safe_yaml(yml)
        recorded = parse_sources_toml(sources, str(project.sources_toml(env))).lock.sources
    except (InputError, yaml.YAMLError):  # the re-lock proper reads the files again, and reports on them
        return None
    packages = content.get("package") if isinstance(content, dict) else None
    if not isinstance(packages, list):
        return None
    python: dict[str, set[str]] = {}
    pip: dict[str, list[Pinned]] = {}
    for package in packages:
        keys = ("manager", "name", "version", "platform")
        fields = [package.get(k) for k in keys] if isinstance(package, dict) else []
        strings = [f for f in fields if isinstance(f, str)]
        if len(strings) != len(keys):
            return None
        manager, name, version, platform = strings
        if manager == "pip":
            pip.setdefault(platform, []).append(Pinned(name, version, *_artifact(package)))
        elif name == "python":
            python.setdefault(platform, set()).add(version)
    pythons = {p: next(iter(v)) for p, v in python.items() if len(v) == 1 and _PYTHON.fullmatch(next(iter(v)))}
    return Prediction(pythons, {p: tuple(pins) for p, pins in pip.items()}, recorded)


def _artifact(package: dict[str, object]) -> tuple[str, str]:
    url, digests = package.get("url"), package.get("hash")
    sha256 = digests.get("sha256") if isinstance(digests, dict) else None
    if not isinstance(url, str) or not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        return "", ""
    return url, sha256
