"""A stand-in of PyPI's JSON API for a locked example: a directory to serve on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

from envgen.example.project import ENV, Example
from envgen.lockio.store import require_lock
from envgen.project import Project
from packaging.utils import canonicalize_name


def releases(example: Example) -> set[tuple[str, str]]:
    """The lock's pip packages from an index (archive wheels and sources left out), every
    platform's."""
    lock = require_lock(Project(example.root), ENV)
    return {
        (canonicalize_name(e.name), e.version)
        for platform in lock.platforms
        for e in lock.pip_for(platform)
    }


def stand_in(root: Path, example: Example, advisories: dict[str, list[dict[str, object]]]) -> Path:
    """A directory served as PyPI's JSON API: an answer for each of the lock's pip packages (no
    vulnerability unless `advisories` names it); anything else is a 404."""
    for name, version in sorted(releases(example)):
        page = root / "pypi" / name / version / "json"
        page.parent.mkdir(parents=True, exist_ok=True)
        body = {"info": {"name": name, "version": version}, "urls": []}
        page.write_text(json.dumps(body | {"vulnerabilities": advisories.get(name, [])}))
    return root
