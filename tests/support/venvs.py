"""Fresh venvs with pip in them, without paying for ensurepip every time.

`python -m venv` spends seconds in ensurepip installing pip and setuptools. A fresh venv here is the
same venv (this interpreter, symlinks, no system site-packages) made without pip, then given a copy
of the site-packages of one venv that ensurepip filled once per test session. pip is then importable
(`python -m pip`, as the recipe and the checks call it); only pip's console scripts are missing.
"""

from __future__ import annotations

import os
import shutil
import sys
import venv
from pathlib import Path

import pytest
from envgen.commands.cache import TAG, TAG_TEXT
from envgen.example.condapkgs import bundled_pip_wheel
from envgen.installer import bytecode
from envgen.installer.destinations import make_venv

from tests.support.shared import build_once


def site_packages(prefix: Path) -> Path:
    (found,) = prefix.glob("lib/python*/site-packages")
    return found


def pip_site_packages(factory: pytest.TempPathFactory) -> Path:
    """The site-packages of a venv made by `python -m venv` (with ensurepip), built once per
    session: by envgen's make_venv without seed wheels, whose way it is (test_venv_seed.py holds
    it to the venvs uv seeds)."""

    def build(path: Path) -> None:
        make_venv(sys.executable, path / "env", [])

    return site_packages(build_once(factory, "venv-with-pip", build) / "env")


def fresh_venv(path: Path, pip_from: Path, *, only_pip: bool = False) -> Path:
    """A new venv at `path` whose site-packages is a copy of `pip_from` (see pip_site_packages);
    with `only_pip`, of pip alone (not setuptools)."""
    venv.EnvBuilder(symlinks=True, with_pip=False).create(path)
    target = site_packages(path)
    for entry in pip_from.iterdir():
        if entry.name == "__pycache__" or (only_pip and entry.name.split("-")[0] != "pip"):
            continue
        if entry.is_dir():
            shutil.copytree(entry, target / entry.name, symlinks=True, copy_function=link_or_copy)
        else:
            link_or_copy(entry, target / entry.name)
    return path


def link_or_copy(source: str | Path, target: str | Path) -> None:
    """A hard link where the file system allows one, else a copy: 1,640 files per venv, whose copies
    took about 0.3 s of CPU (0.03 s linked). Sharing the files is safe because nothing writes into
    an installed file: pip removes one before writing its replacement, and Python replaces bytecode
    by renaming a new file over it."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def seeded_cache(factory: pytest.TempPathFactory, cache: Path) -> Path:
    """`cache` made as envgen leaves its cache after the first env on a machine: tagged, and holding
    the bytecode of this interpreter's venv seeds, pip and setuptools (the example's conda pip is
    made from the same pip wheel: its files have the same bytes), compiled once per session by
    envgen's own make_venv.

    For a test whose cache is its own for another reason (nothing of the example in it, a cache to
    scan, a killed child's leftovers kept apart): its envs' pip then starts compiled, as on a
    machine after its first env, instead of compiling pip and setuptools anew, one to two seconds
    of CPU each time. Compiling into an empty cache is test_bytecode's and test_install's subject.
    The files are hard links: pyc_worker writes each file anew, never into one."""

    def build(path: Path) -> None:
        seeds = sorted(bundled_pip_wheel().parent.glob("*.whl"))
        make_venv(sys.executable, path / "venv", seeds, bytecode=path / "cache")

    store = build_once(factory, "bytecode-store", build) / "cache" / bytecode.ENTRY
    cache.mkdir(parents=True, exist_ok=True)
    (cache / TAG).write_text(TAG_TEXT)
    if store.is_dir():  # none where this python's ensurepip has no wheels to seed a venv from
        shutil.copytree(store, cache / bytecode.ENTRY, copy_function=link_or_copy)
    return cache
