"""interrupts.py installs and restores the handlers of SIGINT and SIGTERM: what it holds, it gives
back."""

from __future__ import annotations

import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

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


def test_before_the_command_line_is_ready_a_signal_ends_it_saying_nothing_was_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    previous = {sig: signal.getsignal(sig) for sig in interrupts.SIGNALS}
    try:
        interrupts.until_ready()
        with pytest.raises(SystemExit) as ended:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.getsignal(signal.SIGTERM)
    finally:
        interrupts.restore(previous)
    assert ended.value.code == 128 + signal.SIGTERM
    assert (
        capsys.readouterr().err
        == "interrupted: nothing was written (the previous lock files are unchanged)\n"
    )


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
