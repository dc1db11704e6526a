"""How a command runs: its body's Outcome, or its error, turned into output and the exit code;
Ctrl-C and SIGTERM reported with what was written; anything else one line and exit 70."""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any

import click

import envgen
from envgen import interrupts, network
from envgen.cli.exit_codes import INTERNAL_ERROR, INTERRUPTED, TERMINATED
from envgen.cli.options import Settings, settings
from envgen.cli.output import Outcome, emit, paint, quiet_pipes
from envgen.errors import EnvgenError, InputError
from envgen.logs import setup_logging

log = logging.getLogger("envgen.cli")

_terminated: list[int] = []
_working: list[bool] = []  # inside a command's work, where an interrupt says what was written
_stopping: list[bool] = []  # an interrupt taken: the work cleans up, then the command leaves


def on_signal(signum: int, frame: FrameType | None) -> None:
    """SIGINT, and SIGTERM (a CI job cancelled, a supervisor stopping envgen) alike, stop the
    work."""
    if interrupts.deferred(signum):  # the main thread takes it between the slices of its wait
        return
    if signum == signal.SIGTERM:
        _terminated.append(signum)
    if _stopping:
        # Stopping already: what the first signal started (a write in progress finished, a new
        # prefix removed, the children killed) is not cut short, which would leave an env's files
        # from two runs or half an env; the command then leaves as the first signal said.
        if len(_stopping) == 1:  # said once: a second entry records that it was
            _stopping.append(True)
            sys.stderr.write(
                "envgen: already stopping: finishing what is being written and cleaning up\n"
            )
        return
    if not _working:  # before or after the work (parsing, printing): nothing is being written now
        sys.stderr.write(interrupts.message(interrupts.written()) + "\n")
        sys.exit(TERMINATED if _terminated else INTERRUPTED)
    _stopping.append(True)
    raise KeyboardInterrupt


def _work(body: Callable[..., Outcome], flags: Settings, *args: Any, **kwargs: Any) -> Outcome:
    """Run a command's body: its Outcome, or the Outcome of the error it raised (`error` set)."""
    interrupts.reset()
    _working.append(True)
    try:
        network.limits()  # a malformed ENVGEN_*_TIMEOUT is bad input, found before any work
        return body(*args, **kwargs)
    except KeyboardInterrupt:
        # Workers may be writing a lock right now: stop them and wait for a write in progress,
        # then say what is on disk (each env's files are from one run: the old or the new ones).
        message = interrupts.message(interrupts.interrupt())
        sys.stderr.write(paint(message, flags, sys.stderr, "red") + "\n")
        sys.exit(TERMINATED if _terminated else INTERRUPTED)
    except (EnvgenError, click.ClickException, OSError) as exc:
        error = _error_of(exc)
        if error is None:
            raise
        return Outcome(exit_code=error.exit_code, error=error)
    finally:
        _working.pop()
        _stopping.clear()


def _error_of(exc: BaseException) -> EnvgenError | None:
    if isinstance(exc, EnvgenError):
        return exc
    if isinstance(exc, click.ClickException):  # a usage error found by a command's own checks
        return InputError(exc.format_message())
    if isinstance(exc, OSError) and exc.filename is not None:
        # A file or directory of the project that cannot be read or written (permissions, a full
        # disk).
        return InputError(
            f"cannot use {exc.filename}: {exc.strerror or exc}",
            hint="check that you may read env-templates/ and channels/ and write locks/",
        )
    return None


def reporting(command: str) -> Callable[[Callable[..., Outcome]], Callable[..., None]]:
    """Run a command's body and turn its Outcome, or the error it raised, into output and the exit
    code."""

    def decorate(body: Callable[..., Outcome]) -> Callable[..., None]:
        @functools.wraps(body)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            interrupts.begin(command)
            flags = settings()
            setup_logging(quiet=flags.quiet, verbose=flags.verbose, color=flags.colored(sys.stderr))
            started = time.monotonic()
            outcome = _work(body, flags, *args, **kwargs)
            spent = time.monotonic() - started
            log.debug("%s: %.2f s, exit code %d", command, spent, outcome.exit_code)
            try:
                emit(command, flags, outcome)
            except BrokenPipeError:
                quiet_pipes()
            sys.exit(outcome.exit_code)

        return wrapper

    return decorate


def guarded(run: Callable[[], object]) -> None:
    """Run the command line: signals reported by `on_signal`, any exception that is not an
    EnvgenError as one line and exit 70 (ENVGEN_DEBUG=1 re-raises it for a developer)."""
    # An index with `trusted_host` in channels/ skips certificate checks by choice: no warning per
    # request (urllib3's InsecureRequestWarning).
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    interrupts.on_signals(on_signal)
    try:
        run()
    except SystemExit as exc:
        running = (interrupts.cancelled, network.abandoned, network.native_threads)
        if any(flag.is_set() for flag in running):
            # A library's threads still running (a request abandoned, rattler's runtime) must not
            # meet the interpreter's finalization.
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            interrupts.leave(code)
        # Done and reported: a signal from here on would only turn a true exit status into "killed".
        interrupts.ignore_signals()
        raise
    except Exception as exc:
        if os.environ.get("ENVGEN_DEBUG"):
            raise
        _internal_error(exc)


def _internal_error(exc: Exception) -> None:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    sys.stderr.write(f"internal error: {type(exc).__name__}: {first}\n")
    bug = f"this is a bug in envgen {envgen.__version__}"
    where = "please file an issue in envgen's repository with the command you ran and this message"
    sys.stderr.write(f"  {bug}: {where} (ENVGEN_DEBUG=1 shows the traceback)\n")
    sys.exit(INTERNAL_ERROR)
