"""envgen as a user gets it: a wheel built from this checkout, installed into a fresh venv, offline.

The wheel is built from a copy of the sources (the checkout stays clean) by `python -m build
--no-isolation`. Its dependencies are not fetched: the distributions its Requires-Dist name, and
theirs in turn, are linked from this interpreter's site-packages into the venv file by file as their
RECORDs list them, and `pip check` in the venv proves the set complete. Nothing else of this
environment is visible there (no system site-packages, no path file), so an import the wheel does
not declare, or data it does not ship, fails as it would for a user.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.venvs import fresh_venv, site_packages

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "generator")


def clean_environment() -> dict[str, str]:
    """This environment without the machine's pip configuration or anything pointing into this
    checkout."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))
    }
    env["PIP_CONFIG_FILE"] = os.devnull
    # linked files belong to this environment: leave no bytecode there
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def build_wheel(where: Path) -> Path:
    """The wheel of this checkout, built from a copy of its sources under `where`."""
    src = where / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
            shutil.copytree(REPO / name, src / name, ignore=ignore)
        else:
            src.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    _run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(where / "dist"),
            str(src),
        ]
    )
    (wheel,) = (where / "dist").glob("envgen-*.whl")
    return wheel


def wheel_requires(wheel: Path) -> list[str]:
    """The Requires-Dist lines of `wheel`'s METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        (name,) = (
            n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1
        )
        headers = HeaderParser().parsestr(zf.read(name).decode())
    return headers.get_all("Requires-Dist") or []


def dependency_closure(requires: list[str]) -> list[metadata.Distribution]:
    """The installed distributions `requires` needs, transitively, with the extras asked for along
    the way."""
    todo = [(Requirement(text), "") for text in requires]
    seen: set[tuple[str, str]] = set()
    found: dict[str, metadata.Distribution] = {}
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        dist = found.setdefault(name, metadata.distribution(requirement.name))
        for wanted in ("", *requirement.extras):
            if (name, wanted) not in seen:
                seen.add((name, wanted))
                todo += [(Requirement(text), wanted) for text in dist.requires or []]
    return list(found.values())


def link_distribution(dist: metadata.Distribution, prefix: Path) -> None:
    """Make `dist`, installed here, importable in the venv at `prefix`: its top-level entries in
    site-packages and its executables elsewhere (uv's binary in bin/) are symlinked. Scripts are
    left out: their shebang names this environment's interpreter."""
    site, target_site = Path(str(dist.locate_file(""))), site_packages(prefix)
    for file in dist.files or []:
        top = file.parts[0]
        if top == "__pycache__":
            continue
        if top != "..":
            if not os.path.lexists(target_site / top):
                (target_site / top).symlink_to(site / top)
            continue
        source = Path(os.path.normpath(site / file))
        if not source.is_file() or source.read_bytes()[:2] == b"#!":
            continue
        link = prefix / source.relative_to(sys.prefix)
        link.parent.mkdir(parents=True, exist_ok=True)
        if not os.path.lexists(link):
            link.symlink_to(source)


def install_wheel(where: Path, pip_from: Path) -> Path:
    """A fresh venv under `where` holding envgen from its wheel and its dependencies; returns the
    venv."""
    wheel = build_wheel(where / "build")
    # pip alone: setuptools, when a dependency needs it, comes linked in at the version the wheel's
    # set has.
    prefix = fresh_venv(where / "venv", pip_from, only_pip=True)
    for dist in dependency_closure(wheel_requires(wheel)):
        link_distribution(dist, prefix)
    pip = [str(prefix / "bin" / "python"), "-m", "pip"]
    _run([*pip, "install", "--no-deps", "--no-index", "--no-cache-dir", str(wheel)])
    # every requirement of envgen and of what it pulls in is there, at a fitting version
    _run([*pip, "check"])
    return prefix


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=clean_environment())
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited with {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
