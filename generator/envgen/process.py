"""The one subprocess helper: command, cwd, env, timeout; a failure carries the stderr tail."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from envgen.errors import ToolError
from envgen.redact import redact_text

TAIL_LINES = 25


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last lines of a tool's output, for an error message."""
    return "\n".join(text.strip().splitlines()[-lines:])


class Runner(Protocol):
    """What runs a subprocess for envgen: `run` below, or a stand-in where a real process adds nothing to a test."""

    def __call__(
        self,
        cmd: Sequence[str | os.PathLike[str]],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        check: bool = True,
        input: str | None = None,
        secrets: tuple[str, ...] = (),
    ) -> subprocess.CompletedProcess[str]: ...


def run(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    check: bool = True,
    input: str | None = None,
    secrets: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Run a command quietly and capture its output.

    `env` replaces the environment when given. With `check`, a non-zero exit raises ToolError naming the
    command and the tail of its stderr (credentials and `secrets` redacted); callers that map failures to
    other errors pass `check=False` and read `returncode`.
    """
    argv = [os.fspath(c) for c in cmd]
    shown = redact_text(" ".join(argv), secrets)
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            timeout=timeout,
            input=input,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError as exc:
        raise ToolError(f"cannot run `{shown}`: {exc.strerror}", hint=f"install {argv[0]!r} and retry") from exc
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"`{shown}` did not finish within {timeout:.0f} s") from exc
    if check and proc.returncode != 0:
        out = tail(proc.stderr or proc.stdout)
        raise ToolError(f"`{shown}` failed with exit code {proc.returncode}:\n{redact_text(out, secrets)}")
    return proc
