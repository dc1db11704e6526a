"""Where the core modules' log records go: stderr, one unwrapped line each, never padded."""

from __future__ import annotations

import logging
import sys
import threading
import time
from concurrent.futures import Future
from typing import Any

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


class _Holding(logging.Filter):
    """Keeps back the records below ERROR that reach one handler, until `release` hands them on in
    their order (or forgets them); a record of another thread meanwhile waits for it."""

    def __init__(self, handler: logging.Handler) -> None:
        super().__init__()
        self.handler, self.holding = handler, True
        self.held: list[logging.LogRecord] = []
        self.guard = threading.RLock()

    def filter(self, record: logging.LogRecord) -> bool:
        with self.guard:
            if self.holding and record.levelno < logging.ERROR:
                self.held.append(record)
                return False
        return True

    def release(self, least: int) -> None:
        """Hand on the held records of level `least` or above, in their order; hold no more."""
        with self.guard:
            held, self.held, self.holding = self.held, [], False
            for record in held:
                if record.levelno >= least:
                    self.handler.handle(record)
        self.handler.removeFilter(self)


class HeldProgress:
    """envgen's progress and warnings (its records below ERROR, from every thread) held back while
    a check runs alongside the work: told in their order once the check passes (`after`); when it
    failed, only the warnings are told (the progress told of work that was stopped, and the check's
    error is what matters, but a warning about the inputs still holds)."""

    def __init__(self) -> None:
        self._holding = [_Holding(h) for h in logging.getLogger("envgen").handlers]
        for each in self._holding:
            each.handler.addFilter(each)

    def release(self, least: int = logging.NOTSET) -> None:
        """Tell what was held of level `least` or above and hold nothing more; once is enough."""
        for each in self._holding:
            each.release(least)

    def after(self, check: Future[Any]) -> None:
        """Released as soon as `check` ends without an error (else held until `end`)."""
        check.add_done_callback(lambda done: self.release() if _passed(done) else None)

    def end(self, check: Future[Any] | None) -> None:
        """Released; only the warnings when `check` ended with an error."""
        failed = check is not None and check.done() and not _passed(check)
        self.release(logging.WARNING if failed else logging.NOTSET)


def _passed(check: Future[Any]) -> bool:
    return not check.cancelled() and check.exception() is None
