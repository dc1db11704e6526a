"""interrupts.leave ends the process even when the interrupt came inside Thread.start(), and takes
the per-env mutex a worker still holds with it."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest
from envgen import interrupts, network
from envgen.cli.running import guarded
from envgen.credentials import NO_CREDENTIALS
from envgen.lockio.env_mutex import env_lock
from envgen.project import Project
from envgen.resolve.conda.stage import rattler_client


def test_a_thread_listed_but_never_started_is_not_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A signal inside ThreadPoolExecutor.submit -> Thread.start() leaves the new thread listed by
    # threading.enumerate() (in its "limbo") without ever running; joining it raises RuntimeError.
    never_started = threading.Thread(target=lambda: None)
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.current_thread(), never_started])
    exits: list[int] = []

    def fake_exit(code: int) -> None:
        exits.append(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    interrupts.leave(143, timeout=0.1)
    assert exits == [143]


@pytest.mark.parametrize(("code", "status"), [(0, 0), (None, 0), (3, 3)])
def test_a_process_that_made_a_rattler_client_ends_without_finalizing_under_its_threads(
    monkeypatch: pytest.MonkeyPatch, code: int | None, status: int
) -> None:
    # rattler's runtime threads call the headers middleware back; an interpreter finalizing under
    # such a call aborts (PyGILState_Release), so the command line leaves through os._exit once the
    # command is done.
    monkeypatch.setattr(network, "native_threads", threading.Event())
    exits: list[int] = []
    monkeypatch.setattr(os, "_exit", exits.append)
    monkeypatch.setattr(signal, "signal", lambda *_: None)

    def command() -> None:
        rattler_client(NO_CREDENTIALS, network.limits())
        sys.exit(code)

    with pytest.raises(SystemExit):  # os._exit is replaced here, so the SystemExit goes on
        guarded(command)
    assert exits == [status]


def test_a_mutex_a_worker_still_holds_is_removed_as_envgen_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker in a solve, which nothing can kill, does not reach its `finally` within the moment
    `leave` waits (under load, before: locks/.demo.lock outlived the interrupted `envgen lock`); one
    that released it removed its own file, and a mutex file of another process is not touched."""
    project = Project(tmp_path)
    held, done = threading.Event(), threading.Event()

    def worker() -> None:
        with env_lock(project, "demo"):
            held.set()
            done.wait(10)

    (tmp_path / "locks").mkdir()
    others = tmp_path / "locks" / ".other.lock"
    others.write_text("4242\nelsewhere\n")
    exits: list[int] = []
    monkeypatch.setattr(os, "_exit", exits.append)
    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert held.wait(10)
        assert (tmp_path / "locks" / ".demo.lock").is_file()
        interrupts.leave(130, timeout=0.1)
        assert exits == [130]
        assert not (tmp_path / "locks" / ".demo.lock").exists()
        assert others.is_file()
    finally:
        done.set()
        thread.join()
    interrupts.leave(130, timeout=0.1)  # nothing held any more: nothing to remove
    assert exits == [130, 130] and sorted(p.name for p in (tmp_path / "locks").iterdir()) == [
        ".other.lock"
    ]
