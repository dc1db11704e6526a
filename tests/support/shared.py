"""Build an expensive test artifact once per test session and share it, read-only, across
pytest-xdist workers."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import filelock
import pytest


def session_root(factory: pytest.TempPathFactory) -> Path:
    """The directory every worker of this session can see: under xdist each worker has its own
    basetemp, and their common parent belongs to this run alone; without xdist the basetemp itself.
    """
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """`root/name`, made by `build(path)` by whichever worker gets there first; the others wait for
    it.

    The artifact counts as built only once `build` returns (a marker file says so), so a build that
    failed is started again from an empty directory by the next caller instead of half an artifact
    being shared.
    """
    root = session_root(factory)
    path, built = root / name, root / f"{name}.built"
    with filelock.FileLock(str(root / f"{name}.lock")):
        if not built.is_file():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            build(path)
            built.touch()
    return path
