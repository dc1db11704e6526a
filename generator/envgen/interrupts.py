"""Ctrl-C and SIGTERM while envgen works: stop the work, and say truthfully whether a lock was
written.

The one module that installs, restores and blocks signal handlers (`on_signals`, `ignore_signals`,
`held`, `worker_thread`), or has them wait (`deferring`): the command line says what a
handler does, this module makes it one. The exception is the instant before it is imported:
`envgen.__main__` sets the handler of start-up.

Envs are locked in worker threads, but a signal interrupts only the main thread. So an interrupt
sets `cancelled`, kills the child processes (uv, git) the workers wait on, and waits for any lock
write already past its commit point. A worker checks `cancelled` before each child process and at
the commit point; a write begun before the interrupt finishes (old files or new files, never a mix),
one not begun never starts.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from types import FrameType
from typing import TYPE_CHECKING, Any

from envgen.errors import EnvgenError

if TYPE_CHECKING:  # the command line imports this module first thing: only what it needs at once
    import subprocess
    from pathlib import Path

# How long an interrupt waits for a write in progress (temp files and renames in locks/:
# milliseconds).
COMMIT_WAIT = 30.0

cancelled = threading.Event()
_lock = threading.Lock()
_children: set[subprocess.Popen[str]] = set()
_committing: set[str] = set()
_written: list[str] = []
# what the interrupted work removed (a half-installed prefix), for the message
_cleaned: list[str] = []
_held: set[Path] = set()  # the mutex files this process holds (envgen.lockio.env_mutex)
_command = ["lock"]
# What a command that writes no lock says when interrupted before its work recorded anything more.
_NOTHING_DONE = {
    "install": "nothing was installed",
    "bundle": "no bundle was written",
    "check": "the check stopped before its verdict: nothing was installed or written",
    "cache clean": "nothing was removed from the cache",
}
_idle = threading.Condition(_lock)

# The signals that stop envgen's work: Ctrl-C, and a supervisor's (a CI job cancelled) SIGTERM.
SIGNALS = (signal.SIGINT, signal.SIGTERM)
# What signal.signal takes and returns: a function of (signal number, frame), SIG_IGN, SIG_DFL or
# None.
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class Interrupted(EnvgenError):
    """The work stopped because the user (or a supervisor) interrupted it."""

    exit_code = 130


def worker_thread() -> None:
    """Initializer of a worker thread: signals go to the main thread, never to this one.

    The main thread waits on the workers' futures; a signal the kernel hands to a worker would reach
    the main thread only once that worker finished (and wrote its lock). Child processes inherit the
    mask, so a tool a library starts (a build backend) is not killed by Ctrl-C half-way either:
    envgen stops it.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, set(SIGNALS))


def background_thread() -> None:
    """Initializer of a worker thread whose work only fills the time uv takes (a warm-up, the
    preflight, an import ahead of its use): as `worker_thread`, and yielding the CPU to uv where
    both want it (a higher nice value for this thread alone, where the system has per-thread
    priorities: Linux)."""
    worker_thread()
    if sys.platform == "linux":
        try:
            thread = threading.get_native_id()
            now = os.getpriority(os.PRIO_PROCESS, thread)
            os.setpriority(os.PRIO_PROCESS, thread, min(19, now + BACKGROUND_NICE))
        except OSError:
            pass  # a priority is only a preference


# How much lower a background thread runs than the rest (nice(1) steps; 10 is nice's default).
BACKGROUND_NICE = 10


def on_signals(handler: Handler) -> dict[int, Handler]:
    """Handle SIGINT and SIGTERM with `handler`; the handlers it replaced, for `restore`."""
    return {sig: signal.signal(sig, handler) for sig in SIGNALS}


def restore(previous: Mapping[int, Handler]) -> None:
    """Put back the handlers `on_signals` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def ignore_signals() -> None:
    """SIGINT and SIGTERM do nothing from now on: the command is done and reported, and a signal
    would only turn a true exit status into "killed"."""
    on_signals(signal.SIG_IGN)


def terminate_as_interrupt() -> None:
    """SIGTERM raises KeyboardInterrupt as Ctrl-C does, for work that cleans up on KeyboardInterrupt
    alone."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)


@contextmanager
def held() -> Iterator[list[int]]:
    """Record SIGINT/SIGTERM instead of acting on them; the caller acts once it can clean up.

    A Ctrl-C that lands inside `Popen` (after the fork, before it returns) would otherwise leave a
    child that nobody knows the pid of. Handlers set here are Python functions, so the child's exec
    resets them.
    """
    signals: list[int] = []
    previous = on_signals(lambda number, _frame: signals.append(number))
    try:
        yield signals
    finally:
        restore(previous)


# Set while the main thread runs a block a signal must not break (`deferring`); the signals that
# came meanwhile, delivered once it ends.
_waiting: list[bool] = []
_deferred: list[int] = []


def deferred(signum: int) -> bool:
    """For the command line's handler: whether the main thread is inside a block a signal must not
    break (`deferring`); the signal is then kept for it, and the handler returns at once."""
    if not _waiting:
        return False
    _deferred.append(signum)
    return True


@contextmanager
def deferring() -> Iterator[None]:
    """SIGINT and SIGTERM deferred while the main thread runs the block (the command line's handler
    asks `deferred`), then delivered to the handler again, SIGTERM first (its exit status says a
    supervisor stopped envgen). For what a raise in the middle would leave broken:
    - a wait on other threads (a future, a condition; it must have a timeout): a raise inside
      `threading`'s waiting can leave its lock released twice, and the interrupt then surfaced as
      "RuntimeError: release unlocked lock", an internal error, instead of its message;
    - the start of a child process: raised between its fork and `track`, it would leave the child
      running, unknown to the interrupt that kills the others.
    Nothing is swapped: entering and leaving set and clear one flag. Elsewhere than in the main
    thread a signal never arrives: nothing is deferred."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _waiting.append(True)
    try:
        yield
    finally:
        _waiting.pop()
        kept = sorted(set(_deferred), key=lambda number: number != signal.SIGTERM)
        _deferred.clear()
        for number in kept:  # the handler's raise wins over one of the block's own
            signal.raise_signal(number)


def check() -> None:
    """Raise Interrupted when an interrupt has been requested (a worker's safe stopping point)."""
    if cancelled.is_set():
        raise Interrupted("interrupted")


def track(proc: subprocess.Popen[Any]) -> None:
    """Track `proc` until `untrack`, so an interrupt can kill it (killed at once when one came
    already)."""
    with _lock:
        _children.add(proc)
    if cancelled.is_set():
        kill_group(proc)


def untrack(proc: subprocess.Popen[Any]) -> None:
    with _lock:
        _children.discard(proc)


@contextmanager
def commit_point(env: str) -> Iterator[None]:
    """Around writing an env's lock files: refused once interrupted, and waited for by an interrupt
    after."""
    with _lock:
        if cancelled.is_set():
            raise Interrupted(f"interrupted before the lock of {env} was written")
        _committing.add(env)
    done = False
    try:
        yield
        done = True
    finally:
        with _lock:
            _committing.discard(env)
            if done:
                _written.append(env)
            _idle.notify_all()


def interrupt() -> list[str]:
    """Stop the work: refuse new commits, kill child processes, wait for writes in progress; the
    envs written."""
    with _lock:
        cancelled.set()
        for proc in _children:
            kill_group(proc)
        _idle.wait_for(lambda: not _committing, timeout=COMMIT_WAIT)
        return list(_written)


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kill a child and what it started (each child leads its own process group, see
    process.run)."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def cleaned(note: str) -> None:
    """Record what the interrupted work removed or left, for the message it ends with."""
    with _lock:
        _cleaned.append(note)


def begin(command: str) -> None:
    """The command this process runs: only `lock` writes locks, and an interrupt says what the
    command left."""
    _command[0] = command


def message(written: list[str]) -> str:
    """What an interrupted command says about what it wrote: the locks, what it removed (an
    install), or that the command it ran did nothing yet."""
    with _lock:
        notes = list(_cleaned)
    if notes:
        return f"interrupted: {'; '.join(notes)}"
    if written:
        return f"interrupted: the new lock of {', '.join(written)} was written"
    if _command[0] in _NOTHING_DONE:
        return f"interrupted: {_NOTHING_DONE[_command[0]]}"
    return "interrupted: nothing was written (the previous lock files are unchanged)"


@contextmanager
def holding(path: Path) -> Iterator[None]:
    """Around holding the mutex file `path`: removed by `leave` if this process exits while it is
    held."""
    with _lock:
        _held.add(path)
    try:
        yield
    finally:
        with _lock:
            _held.discard(path)


def leave(code: int, timeout: float = 1.0) -> None:
    """End the process after an interrupt was reported: the files are settled and the message
    printed.

    Worker threads get a moment to unwind (their children are dead) and clean up, but one stuck in a
    solver, which cannot be killed, must not keep envgen from exiting (as joining it at interpreter
    exit would). A mutex file such a worker still holds is removed here: no lock write can begin any
    more (`cancelled`), and it would otherwise outlive the process, as one killed outright leaves
    it.
    """
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        # An interrupt inside Thread.start() leaves a thread listed that never started: nothing to
        # wait for.
        if (
            thread is not threading.current_thread()
            and not thread.daemon
            and thread.ident is not None
        ):
            thread.join(max(0.0, deadline - time.monotonic()))
    with _lock:
        for path in _held:
            with suppress(OSError):
                path.unlink()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def written() -> list[str]:
    """The envs whose lock files this process wrote."""
    with _lock:
        return list(_written)


def reset() -> None:
    """Forget a previous interrupt (tests run several commands in one process)."""
    with _lock:
        cancelled.clear()
        _written.clear()
        _cleaned.clear()
