"""Running a python with `-c` or `-m` (an env's own, itself or through a shell, or the one that
makes a venv): in a new empty directory.

Such a python puts its working directory first on sys.path, so a file where envgen was started (a
`json.py` or a `pip/` in a checkout) would be imported in place of the standard library's module
or the env's own. The command's paths must therefore be absolute."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Protocol

from envgen.process import run
from envgen.scratch import scratch_dir


class InterpreterRunner(Protocol):
    """What runs such a python for envgen: `run_interpreter` below, or a stand-in in a test."""

    def __call__(
        self,
        cmd: Sequence[str | os.PathLike[str]],
        *,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]: ...


def run_interpreter(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`process.run` of `cmd` in a new empty directory, removed after."""
    with scratch_dir("envgen-cwd-") as empty:
        return run(cmd, cwd=empty, env=env, check=check, input=input)
