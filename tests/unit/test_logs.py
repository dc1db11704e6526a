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
