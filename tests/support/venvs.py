"""Fresh venvs with pip in them, without paying for ensurepip every time.

`python -m venv` spends seconds in ensurepip installing pip and setuptools. A fresh venv here is the same venv
(this interpreter, symlinks, no system site-packages) made without pip, then given a copy of the site-packages
of one venv that ensurepip filled once per test session. pip is then importable (`python -m pip`, as the recipe
and the checks call it); only pip's console scripts are missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from envgen import installer

from tests.support.shared import build_once


def site_packages(prefix: Path) -> Path:
    (found,) = prefix.glob("lib/python*/site-packages")
    return found


def pip_site_packages(factory: pytest.TempPathFactory) -> Path:
    """The site-packages of a venv made by `python -m venv` (with ensurepip), built once per session."""

    def build(path: Path) -> None:
        # Session fixtures start before the per-test cleanup (tests/conftest.py): keep the machine's pip
        # configuration out of ensurepip here too.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull
        subprocess.run([sys.executable, "-m", "venv", str(path / "env")], check=True, capture_output=True, env=env)

    return site_packages(build_once(factory, "venv-with-pip", build) / "env")


def fresh_venv(path: Path, pip_from: Path, *, only_pip: bool = False) -> Path:
    """A new venv at `path` whose site-packages is a copy of `pip_from` (see pip_site_packages); with
    `only_pip`, of pip alone (not setuptools)."""
    venv.EnvBuilder(symlinks=True, with_pip=False).create(path)
    target = site_packages(path)
    for entry in pip_from.iterdir():
        if entry.name == "__pycache__" or (only_pip and entry.name.split("-")[0] != "pip"):
            continue
        if entry.is_dir():
            shutil.copytree(entry, target / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, target / entry.name)
    return path


def substitute_venv_creation(monkeypatch: pytest.MonkeyPatch, pip_from: Path) -> None:
    """In this test, envgen's one `python -m venv` (ensurepip: seconds of CPU per env) is made by fresh_venv
    instead: the same venv of this interpreter with pip importable. envgen's own logic around it (the locked
    python's version, reusing a venv, refusing a non-empty directory) and every other command it runs stay real.
    For tests about what happens in a throwaway env; the demo's and `envgen install`'s tests create theirs."""
    real = installer.run

    def run(cmd: Sequence[str | os.PathLike[str]], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        args = [str(part) for part in cmd]
        if len(args) == 4 and args[0] == sys.executable and args[1:3] == ["-m", "venv"]:
            fresh_venv(Path(args[3]), pip_from)
            return subprocess.CompletedProcess(args, 0, "", "")
        return real(cmd, **kwargs)

    monkeypatch.setattr(installer, "run", run)
