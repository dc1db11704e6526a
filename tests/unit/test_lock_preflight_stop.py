"""A preflight that fails while the re-locks run (commands/lock/command.py): its error is the one
raised, the re-locks are stopped as an interrupt stops them (their children killed), and the
process may go on once they ended."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from envgen import interrupts
from envgen.commands.lock import command as lock
from envgen.errors import NetworkError, Unreached
from envgen.process import run

UNANSWERED = "2 hosts that the lock needs did not answer; nothing was locked"


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    workers = ThreadPoolExecutor(2, initializer=interrupts.worker_thread)
    yield workers
    interrupts.reset()
    workers.shutdown(wait=True)


def test_a_failed_preflight_kills_the_relocks_children_and_is_the_error_raised(
    pool: ThreadPoolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ample on a loaded machine: the wait ends when the re-lock does
    monkeypatch.setattr(lock, "STOP_WAIT", 30.0)
    relocking = pool.submit(run, ["sleep", "62"])  # a re-lock waiting on git or uv

    def preflight() -> None:
        raise NetworkError(UNANSWERED, hosts=[Unreached("127.0.0.1:9", "connection refused")])

    with pytest.raises(NetworkError, match="did not answer"):
        lock._wait_for({"demo": relocking}, pool.submit(preflight))
    # killed, not left to run
    assert isinstance(relocking.exception(timeout=10), interrupts.Interrupted)
    assert not interrupts.cancelled.is_set()  # every re-lock ended: the process may go on


def test_a_relock_that_does_not_stop_leaves_the_process_stopped(
    pool: ThreadPoolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A re-lock inside a library call (a conda solve) cannot be killed: the flag stays set, so it
    writes nothing when it comes back, and the command line leaves without waiting for it
    (interrupts.leave)."""
    monkeypatch.setattr(lock, "STOP_WAIT", 0.1)
    release = threading.Event()
    stuck = pool.submit(release.wait, 30)

    def preflight() -> None:
        raise NetworkError(UNANSWERED, hosts=[Unreached("127.0.0.1:9", "connection refused")])

    with pytest.raises(NetworkError, match="did not answer"):
        lock._wait_for({"demo": stuck}, pool.submit(preflight))
    assert interrupts.cancelled.is_set()
    release.set()
