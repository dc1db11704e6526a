"""pip check's verdict read through the runner seam (InterpreterRunner): the parsing needs no real
env."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from envgen.commands.check.report import FAILED, OK
from envgen.commands.check.throwaway import pip_check_step

from tests.support.builders import tools_at


class PipCheckSays:
    """A Runner answering `pip check` with fixed output, recording the command it was given."""

    def __init__(self, stdout: str, returncode: int, stderr: str = "") -> None:
        self.stdout, self.returncode, self.stderr = stdout, returncode, stderr
        self.commands: list[list[str]] = []

    def __call__(
        self, cmd: Sequence[str | os.PathLike[str]], **_: object
    ) -> subprocess.CompletedProcess[str]:
        self.commands.append([os.fspath(c) for c in cmd])
        return subprocess.CompletedProcess(list(cmd), self.returncode, self.stdout, self.stderr)


def test_broken_requirements_fail_except_on_ignored_names(tmp_path: Path) -> None:
    runner = PipCheckSays(
        "app 1.0 requires lib, which is not installed.\n"
        "tool 2.0 has requirement Pending-Pkg>=1, but you have pending-pkg 0.5.\n",
        1,
    )
    step = pip_check_step(tmp_path, {"pending-pkg"}, tools_at(tmp_path), runner)
    assert runner.commands == [[str(tmp_path / "bin" / "python"), "-m", "pip", "check"]]
    assert (step.status, step.problems) == (
        FAILED,
        ("app 1.0 requires lib, which is not installed.",),
    )


def test_a_clean_env_and_a_pip_that_cannot_run(tmp_path: Path) -> None:
    assert (
        pip_check_step(
            tmp_path, set(), tools_at(tmp_path), PipCheckSays("No broken requirements found.\n", 0)
        ).status
        == OK
    )
    crashed = pip_check_step(
        tmp_path,
        set(),
        tools_at(tmp_path),
        PipCheckSays("", 1, "Traceback ...\nModuleNotFoundError: pip\n"),
    )
    assert crashed.status == FAILED and "ModuleNotFoundError: pip" in crashed.problems[0]
