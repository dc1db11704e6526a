"""An env's python that envgen runs with `-c` or `-m` imports nothing from where envgen was started:
a module file there (a checkout's `json.py`) would otherwise come first on its sys.path."""

from __future__ import annotations

import os
import sys
import venv
from pathlib import Path

import pytest
from envgen.commands.check.report import OK
from envgen.commands.check.throwaway import installed_set_step
from envgen.installer.interpreter import run_interpreter
from envgen.process import run

from tests.support.builders import make_lock, tools_at

# Imported by every probe envgen runs in an env: a stand-in that leaves a mark where it ran.
PLANTED = "import pathlib\npathlib.Path(__file__).with_name('RAN').touch()\nraise SystemExit(9)\n"


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding a `json.py` of its own, made the current one."""
    here = tmp_path / "checkout"
    here.mkdir()
    (here / "json.py").write_text(PLANTED)
    monkeypatch.chdir(here)
    return here


def test_a_module_in_the_working_directory_is_not_imported(planted: Path) -> None:
    cmd = [sys.executable, "-c", "import json; print(json.dumps([1]))"]
    # The planted module is what plain `python -c` imports here: the test can tell (unmeasured:
    # `make coverage`'s start-up in a child imports json before the working directory is asked).
    plain = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_PROCESS_")}
    assert run(cmd, check=False, env=plain).returncode == 9 and (planted / "RAN").exists()
    (planted / "RAN").unlink()
    proc = run_interpreter(cmd)
    assert proc.stdout == "[1]\n"
    assert not (planted / "RAN").exists()


def test_the_installed_set_is_read_past_a_planted_module(planted: Path, tmp_path: Path) -> None:
    """A venv of nothing: its probe must run (JSON, not the planted module's exit 9) and find the
    lock's nothing installed."""
    prefix = tmp_path / "env"
    venv.EnvBuilder(symlinks=True, with_pip=False).create(prefix)
    step = installed_set_step(prefix, make_lock(), "linux-64", tools_at(tmp_path))
    assert step.status == OK, step
    assert not (planted / "RAN").exists()
