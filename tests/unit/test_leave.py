"""interrupts.leave ends the process even when the interrupt came inside Thread.start()."""

from __future__ import annotations

import os
import signal
import sys
import threading

import pytest
from envgen import interrupts, network
from envgen.cli.running import guarded
from envgen.credentials import NO_CREDENTIALS
from envgen.resolve.conda_stage import rattler_client


def test_a_thread_listed_but_never_started_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
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
    # rattler's runtime threads call the headers middleware back; an interpreter finalizing under such a call
    # aborts (PyGILState_Release), so the command line leaves through os._exit once the command is done.
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
