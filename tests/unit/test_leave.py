"""interrupts.leave ends the process even when the interrupt came inside Thread.start()."""

from __future__ import annotations

import os
import threading

import pytest
from envgen import interrupts


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
