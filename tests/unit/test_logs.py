"""Log lines on stderr: one line per record, only a coloured level carries escape codes."""

from __future__ import annotations

import logging

import pytest
from envgen.logs import setup_logging

log = logging.getLogger("envgen.test")


def test_with_colour_only_a_coloured_level_carries_escapes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: `--color always` wrote `INFO   \\x1b[0m`, a reset after a level with no colour."""
    setup_logging(color=True)
    log.info("resolving 3 git sources")
    log.warning("an override")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "INFO    resolving 3 git sources"
    assert lines[1] == "\x1b[33mWARNING\x1b[0m an override"


def test_without_colour_no_line_carries_escapes(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(color=False)
    log.warning("an override")
    assert capsys.readouterr().err == "WARNING an override\n"


def test_progress_held_is_told_in_order_once_the_check_passes_and_only_warnings_when_it_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: the preflight's verdict came after some 20 solve logs of work it then stopped."""
    from concurrent.futures import Future

    from envgen.logs import HeldProgress

    setup_logging()
    for fails in (False, True):
        check: Future[None] = Future()
        held = HeldProgress()
        held.after(check)
        log.info("solving conda specs for linux-64")
        log.warning("an override")
        log.debug("not shown at INFO")
        log.info("resolving 3 git sources")
        assert capsys.readouterr().err == ""
        if fails:
            check.set_exception(RuntimeError("a host did not answer"))
            log.info("stopped")
            held.end(check)
            # The progress told of stopped work; a warning about the inputs still holds.
            assert capsys.readouterr().err == "WARNING an override\n"
        else:
            check.set_result(None)
            assert capsys.readouterr().err == (
                "INFO    solving conda specs for linux-64\nWARNING an override\n"
                "INFO    resolving 3 git sources\n"
            )
            held.end(check)
        log.info("after")
        assert capsys.readouterr().err == "INFO    after\n"
