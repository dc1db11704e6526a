"""interrupts.py installs and restores the handlers of SIGINT and SIGTERM: what it holds, it gives
back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from envgen import interrupts


def test_held_signals_are_recorded_and_the_handlers_restored() -> None:
    before = {sig: signal.getsignal(sig) for sig in interrupts.SIGNALS}
    with interrupts.held() as held:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        signal.getsignal(signal.SIGINT)  # a bytecode or two: the main thread has run the handlers
    assert held == [signal.SIGTERM, signal.SIGINT]
    assert {sig: signal.getsignal(sig) for sig in interrupts.SIGNALS} == before


def test_on_signals_returns_what_restore_puts_back() -> None:
    before = {sig: signal.getsignal(sig) for sig in interrupts.SIGNALS}
    previous = interrupts.on_signals(signal.SIG_IGN)
    try:
        assert previous == before
        assert all(signal.getsignal(sig) == signal.SIG_IGN for sig in interrupts.SIGNALS)
        os.kill(os.getpid(), signal.SIGTERM)  # ignored: the test goes on
    finally:
        interrupts.restore(previous)
    assert {sig: signal.getsignal(sig) for sig in interrupts.SIGNALS} == before


def test_a_terminated_demo_raises_keyboard_interrupt_as_ctrl_c_does() -> None:
    before = signal.getsignal(signal.SIGTERM)
    try:
        interrupts.terminate_as_interrupt()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, before)


# What the envgen script says when a signal ends it before the command line was ready.
NOT_READY = "interrupted: nothing was written (the previous lock files are unchanged)"


@pytest.mark.parametrize(
    ("signum", "delay"),
    [(signal.SIGINT, delay) for delay in (0.0, 0.001, 0.003, 0.01, 0.02, 0.03)]
    + [(signal.SIGTERM, 0.003)],
    ids=lambda value: str(value),
)
def test_a_signal_during_start_up_ends_envgen_quietly(signum: int, delay: float) -> None:
    """From the moment envgen's own code runs (`envgen.__main__` imported), a signal at any instant
    of start-up (the imports of the command line take tens of milliseconds) ends it with 130 or 143
    and one line. The child's verbose imports (PYTHONVERBOSE) say when that moment came; the signal
    follows it by `delay`, within the rest of `--version`'s run (about 70 ms with verbose imports,
    the command modules imported only as a command runs). Before: a signal in the import of
    interrupts.py printed a KeyboardInterrupt traceback and ended the process by SIGINT (-2)."""
    script = Path(sys.executable).parent / "envgen"
    environ = {**os.environ, "PYTHONVERBOSE": "1"}
    child = subprocess.Popen(
        [script, "--version"],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stderr is not None
        seen = [child.stderr.readline()]
        while seen[-1] and "import 'envgen.__main__'" not in seen[-1]:
            seen.append(child.stderr.readline())
        assert seen[-1], "envgen never imported envgen.__main__: " + "".join(seen[-20:])
        time.sleep(delay)
        child.send_signal(signum)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert (child.returncode, out) == (128 + signum, ""), err[-3000:]
    assert NOT_READY + "\n" in err


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread priorities are Linux's")
def test_a_background_thread_runs_lower_and_takes_no_signal() -> None:
    """What only fills the time uv takes runs at a higher nice value than the rest of envgen (this
    thread is untouched), and like every worker never receives SIGINT or SIGTERM."""
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def seen() -> tuple[int, set[int]]:
        niceness = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return niceness, signal.pthread_sigmask(signal.SIG_BLOCK, [])

    with ThreadPoolExecutor(1, initializer=interrupts.background_thread) as pool:
        niceness, blocked = pool.submit(seen).result()
    assert niceness == min(19, own + interrupts.BACKGROUND_NICE)
    assert set(interrupts.SIGNALS) <= blocked
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own


@pytest.fixture
def command_handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The command line's handler on SIGINT and SIGTERM, inside a command's work; what it recorded
    as SIGTERMs."""
    from envgen.cli import running

    terminated: list[int] = []
    monkeypatch.setattr(running, "_terminated", terminated)
    monkeypatch.setattr(running, "_working", [True])
    monkeypatch.setattr(running, "_stopping", [])
    previous = interrupts.on_signals(running.on_signal)
    try:
        yield terminated
    finally:
        interrupts.restore(previous)


def test_a_signal_during_a_wait_reaches_the_handler_once_the_wait_returned(
    command_handler: list[int],
) -> None:
    """The command line's handler defers a signal while the main thread blocks on another thread
    (a raise inside `threading`'s waiting could release a lock twice), and gets it again after."""
    done, inside = threading.Event(), []
    with pytest.raises(KeyboardInterrupt), interrupts.deferring():
        timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM))
        timer.start()
        assert not done.wait(0.3)
        timer.join()
        inside.append(list(command_handler))  # the wait ran to its end: nothing raised in it
    assert inside == [[]]
    assert command_handler == [signal.SIGTERM]


def test_a_sigterm_kept_with_a_sigint_is_delivered_first(command_handler: list[int]) -> None:
    """Both came during the wait: the exit status is SIGTERM's (143), a supervisor's stop."""
    inside = []
    with pytest.raises(KeyboardInterrupt), interrupts.deferring():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        inside.append(list(command_handler))  # the handler has run for both, and kept them
    assert inside == [[]]
    assert command_handler == [signal.SIGTERM]


def test_an_interrupt_stops_the_main_threads_wait_on_the_re_locks(
    command_handler: list[int],
) -> None:
    """`lock`'s main thread waits on its re-locks in slices: Ctrl-C raises KeyboardInterrupt there,
    between them."""
    from concurrent.futures import Future

    from envgen.commands.lock.command import _wait_for

    never: Future[object] = Future()
    threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
    ends = threading.Timer(30, never.set_result, (None,))  # a failed test ends, never hangs
    ends.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _wait_for({"env": never}, None)  # type: ignore[dict-item]
    finally:
        ends.cancel()
    assert command_handler == []


def test_off_the_main_thread_a_wait_defers_nothing() -> None:
    """A signal only ever reaches the main thread: a wait elsewhere changes nothing for it."""
    seen: list[bool] = []

    def waiting() -> None:
        with interrupts.deferring():
            seen.append(interrupts.deferred(signal.SIGINT))

    thread = threading.Thread(target=waiting)
    thread.start()
    thread.join()
    assert seen == [False]


@pytest.mark.parametrize("working", [False, True])
def test_a_sigterm_says_what_was_written_or_stops_the_work(
    working: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Outside a command's work (parsing, printing) the handler says so and exits 143; inside it,
    it stops the work as Ctrl-C does, remembering that it was a SIGTERM."""
    from envgen.cli import running
    from envgen.cli.exit_codes import TERMINATED

    monkeypatch.setattr(running, "_terminated", [])
    monkeypatch.setattr(running, "_working", [True] if working else [])
    with pytest.raises(KeyboardInterrupt if working else SystemExit) as stopped:
        running.on_signal(signal.SIGTERM, None)
    assert running._terminated == [signal.SIGTERM]
    if not working:
        assert stopped.value.code == TERMINATED
        assert capsys.readouterr().err.startswith("interrupted: ")


def test_a_signal_while_a_child_starts_is_taken_once_it_is_tracked(
    command_handler: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C right after the fork: the KeyboardInterrupt comes once the child is tracked, so the
    interrupt that follows kills it instead of leaving it running unknown."""
    from envgen import process

    real = subprocess.Popen
    started: list[subprocess.Popen[str]] = []

    def forked_then_interrupted(*args: object, **kw: object) -> subprocess.Popen[str]:
        child = real(*args, **kw)  # type: ignore[call-overload]
        started.append(child)
        os.kill(os.getpid(), signal.SIGINT)
        return child  # type: ignore[no-any-return]

    monkeypatch.setattr(subprocess, "Popen", forked_then_interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            process.start(["sleep", "30"])
        (child,) = started
        assert child in interrupts._children
    finally:
        for child in started:
            interrupts.kill_group(child)
            child.wait()
            interrupts.untrack(child)


def test_a_second_signal_while_a_write_finishes_is_no_traceback_and_the_write_is_waited_for(
    command_handler: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    """A second Ctrl-C (or a SIGTERM) while the first waits for the lock being written: said once,
    the wait goes on, and the command exits with the interrupt's message and the status of the
    last signal's kind; the writer finishes, so the message names its env."""
    from envgen.cli import running
    from envgen.cli.options import Settings

    writing, finish = threading.Event(), threading.Event()

    def writer() -> None:
        with interrupts.commit_point("demo"):
            writing.set()
            finish.wait(5)

    def body() -> None:
        thread.start()
        assert writing.wait(5)
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        threading.Timer(0.4, finish.set).start()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the first signal raises here

    thread = threading.Thread(target=writer)
    with pytest.raises(SystemExit) as exited:
        running._work(body, Settings(color="never"))
    thread.join(5)
    err = capsys.readouterr().err
    assert exited.value.code == 143, err  # the SIGTERM that came meanwhile
    assert err.count("already stopping") == 1, err
    assert "demo" in err.splitlines()[-1], err


def test_a_second_signal_during_the_clean_up_of_an_interrupted_command_lets_it_finish(
    command_handler: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    """What the work does on its way out after the first Ctrl-C (removing a new prefix, a scratch
    directory) is not cut short by a second one: it ends, and the command exits 130."""
    from envgen.cli import running
    from envgen.cli.options import Settings

    cleaned = []

    def body() -> None:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the first signal raises here
        finally:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            cleaned.append(True)

    with pytest.raises(SystemExit) as exited:
        running._work(body, Settings(color="never"))
    err = capsys.readouterr().err
    assert exited.value.code == 130, err
    assert cleaned == [True], err
    assert err.count("already stopping") == 1, err
    assert not running._stopping
