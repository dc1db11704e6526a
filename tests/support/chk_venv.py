"""The session's one venv of the example's `demo` lock, installed once for real, and check's
throwaway install replaced by a copy of it: for the tests whose subject is what check decides
around the install (which steps skip or fail, what is kept, --frozen), not the install."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.commands.check import command as check
from envgen.example.project import Example
from envgen.installer.core import Destination, Request, Source

from tests.support.shared import build_once
from tests.support.venvs import link_or_copy

ENV = "demo"


def shared_venv(factory: pytest.TempPathFactory, example: Example) -> Path:
    """The venv `envgen install demo --venv --installer uv` makes of the served `example`'s lock
    (any served copy's: they build the same bytes), made once per session, pip's bytecode
    compiled (`compile_pip`); read only."""

    def build(path: Path) -> None:
        argv = ["install", ENV, "--venv", "--installer", "uv", "--prefix", str(path / "env")]
        result = CliRunner().invoke(cli, [*argv, "-q", "--root", str(example.root)])
        assert result.exit_code == 0, result.output
        compile_pip(path / "env")

    return build_once(factory, "chk-demo-venv", build) / "env"


def compile_pip(prefix: Path) -> None:
    """pip's bytecode in the venv at `prefix`, compiled by its python, for a venv the session
    shares across its checks. uv installs the seeds uncompiled, so where PYTHONDONTWRITEBYTECODE
    is set (this project's machines) each check's `pip check` compiled pip anew: about 1 s of CPU
    per check, for the same answer (pip check reads metadata, not bytecode)."""
    (pip,) = prefix.glob("lib/python*/site-packages/pip")
    python = prefix / "bin" / "python"
    subprocess.run([python, "-m", "compileall", "-q", pip], check=True, stdout=subprocess.DEVNULL)


def copied_install(
    factory: pytest.TempPathFactory, example: Example, monkeypatch: pytest.MonkeyPatch
) -> list[Request]:
    """Every `envgen check` of the test installs its throwaway env as a copy of `shared_venv`
    (milliseconds; the install is seconds), through the install seam of check's options: the
    command line stays the path checked. Returns the requests the install is given, in order.

    Its files are hard links where the file system allows (venvs.link_or_copy: a copy of its
    1,800 files took about 0.5 s of CPU): a check reads the env, and a test that changes its copy
    removes files, never writes into one."""
    shared = shared_venv(factory, example)
    requests: list[Request] = []

    def copied(request: Request, source: Source, env: Destination, *_: object) -> None:
        requests.append(request)
        shutil.copytree(shared, env.path, symlinks=True, copy_function=link_or_copy)

    monkeypatch.setattr(
        check, "CheckOptions", functools.partial(check.CheckOptions, install=copied)
    )
    return requests
