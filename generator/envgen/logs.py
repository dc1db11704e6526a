"""Where the core modules' log records go: stderr, one unwrapped line each, never padded."""

from __future__ import annotations

import logging
import sys
import time

import click

_COLORS = {"WARNING": "yellow", "ERROR": "red", "DEBUG": "blue"}


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """One line per record, its level coloured (when asked) and nothing else; a closed stderr is no
    error."""

    def __init__(self, color: bool, timed: bool) -> None:
        super().__init__(sys.stderr)
        self.color, self.timed = color, timed
        self.started = time.time()

    def format(self, record: logging.LogRecord) -> str:
        level = f"{record.levelname:<7}"
        color = _COLORS.get(record.levelname) if self.color else None
        if color:  # INFO stays plain: click.style would still append its reset
            level = click.style(level, fg=color)
        # With -v every line carries the seconds since start: the time of each stage is the gap
        # between lines.
        elapsed = f"{record.created - self.started:7.2f}s " if self.timed else ""
        return f"{level} {elapsed}{record.getMessage()}".rstrip()

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], BrokenPipeError):  # `envgen lock 2>&1 | head -1`
            return
        super().handleError(record)


def setup_logging(*, quiet: bool = False, verbose: int = 0, color: bool = False) -> None:
    """Progress and warnings of the core go to stderr: `quiet` only errors, `verbose` debug records
    (the commands run, with the seconds since start), `verbose` 2 the libraries' debug records too.
    """
    handler = _Handler(color, timed=verbose > 0)
    root = logging.getLogger("envgen")
    root.handlers[:] = [handler]
    root.propagate = False
    root.setLevel(logging.ERROR if quiet else logging.DEBUG if verbose else logging.INFO)
    # urllib3 warns of each retry; envgen reports the failure once, in one line (network.py's limits
    # bound them).
    logging.getLogger("urllib3").setLevel(logging.DEBUG if verbose >= 2 else logging.ERROR)
    if verbose >= 2:
        logging.basicConfig(handlers=[handler], level=logging.DEBUG, force=True)
