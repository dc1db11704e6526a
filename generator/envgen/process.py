"""The one subprocess helper: command, cwd, env, timeout; a failure carries the stderr tail.

`run` waits; `start` returns a `Running` child to wait for or stop later; each child runs in its
own process group, tracked for interrupts."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from envgen import interrupts
from envgen.errors import ToolError
from envgen.redact import redact_text

TAIL_LINES = 25

log = logging.getLogger(__name__)


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last lines of a tool's output, for an error message."""
    return "\n".join(text.strip().splitlines()[-lines:])


class TimedOut(ToolError):
    """A command ran past its timeout and was killed; callers that know the host it waited on say
    so."""


class Runner(Protocol):
    """What runs a subprocess for envgen: `run` below, or a stand-in where a real process adds
    nothing to a test."""

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


class Running:
    """A child `start`ed and not yet waited for: `wait` for its result, or `stop` it (killed, then
    reaped)."""

    def __init__(
        self, proc: subprocess.Popen[str], shown: str, secrets: tuple[str, ...], input: str | None
    ) -> None:
        self.proc, self.shown, self.secrets, self.input = proc, shown, secrets, input
        self.started = time.monotonic()

    def wait(
        self, timeout: float | None = None, *, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Its output, once it has ended; `timeout` counts from its start. See `run`."""
        proc = self.proc
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - self.started))
        try:
            with proc:
                try:
                    stdout, stderr = proc.communicate(self.input, timeout=left)
                except subprocess.TimeoutExpired as exc:
                    interrupts.kill_group(proc)
                    proc.communicate()
                    raise TimedOut(f"`{self.shown}` did not finish within {timeout:g} s") from exc
                except BaseException:
                    # the main thread was interrupted: the child must not outlive the wait
                    interrupts.kill_group(proc)
                    raise
        finally:
            interrupts.untrack(proc)
        interrupts.check()  # killed by an interrupt: its failure is not the tool's
        # `envgen -v` shows every command envgen runs, with its time and exit code.
        log.debug(
            "ran `%s`: exit code %d in %.2f s",
            self.shown,
            proc.returncode,
            time.monotonic() - self.started,
        )
        completed = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        if check and completed.returncode != 0:
            out = tail(completed.stderr or completed.stdout)
            raise ToolError(
                f"`{self.shown}` failed with exit code "
                f"{completed.returncode}:\n{redact_text(out, self.secrets)}"
            )
        return completed

    def stop(self) -> None:
        """Kill it and what it started (its output no longer matters); a `wait` under way returns at
        once."""
        # once reaped, its process group id may be another process's
        if self.proc.returncode is None:
            interrupts.kill_group(self.proc)


def start(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    secrets: tuple[str, ...] = (),
    pass_fds: Sequence[int] = (),
) -> Running:
    """Start a command quietly, its output captured, in its own process group and tracked for
    interrupts.

    Its output pipes fill up unless someone `wait`s: a caller that starts it to wait later waits in
    a thread.
    """
    argv = [os.fspath(c) for c in cmd]
    shown = redact_text(" ".join(argv), secrets)
    interrupts.check()
    # An interrupt between the fork and `track` would leave the child unknown: taken after both.
    with interrupts.deferring():
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                # Its own process group: Ctrl-C reaches envgen alone, which stops the children
                # itself and so knows why they ended (envgen.interrupts).
                process_group=0,
                pass_fds=tuple(pass_fds),
            )
        except FileNotFoundError as exc:
            raise ToolError(
                f"cannot run `{shown}`: {exc.strerror}", hint=f"install {argv[0]!r} and retry"
            ) from exc
        interrupts.track(proc)
    return Running(proc, shown, secrets, input)


def run(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    check: bool = True,
    input: str | None = None,
    secrets: tuple[str, ...] = (),
    pass_fds: Sequence[int] = (),
) -> subprocess.CompletedProcess[str]:
    """Run a command quietly and capture its output.

    `env` replaces the environment when given; `pass_fds` stay open in the child (an in-memory
    netrc). With `check`, a non-zero exit raises ToolError naming the command and the tail of its
    stderr (credentials and `secrets` redacted); callers that map failures to other errors pass
    `check=False` and read `returncode`.
    """
    running = start(cmd, cwd=cwd, env=env, input=input, secrets=secrets, pass_fds=pass_fds)
    return running.wait(timeout, check=check)
