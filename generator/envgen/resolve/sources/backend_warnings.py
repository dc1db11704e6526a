"""A build backend's warnings, issued again in envgen's process by pyproject_hooks, logged at debug
under the source whose build warned, safely while builds run on several threads."""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from pyproject_hooks import BuildBackendWarning

log = logging.getLogger(__name__)


class BackendWarnings:
    """A backend's warnings, which pyproject_hooks issues again in this process
    (BuildBackendWarning), logged at debug rather than printed between envgen's lines, where -q
    does not reach them.

    `warnings.catch_warnings` swaps process-wide state, and builds run on several threads at once:
    the display hook is swapped once while any build runs, and the thread says whose build warned.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.builds = 0
        self.previous = warnings.showwarning
        self.running = threading.local()

    @contextmanager
    def logged(self, source: str) -> Iterator[None]:
        with self.lock:
            if self.builds == 0:
                self.previous, warnings.showwarning = warnings.showwarning, self.show
            self.builds += 1
        self.running.source = source
        try:
            yield
        finally:
            self.running.source = None
            with self.lock:
                self.builds -= 1
                if self.builds == 0 and warnings.showwarning == self.show:
                    warnings.showwarning = self.previous

    def show(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if not issubclass(category, BuildBackendWarning):
            self.previous(message, category, filename, lineno, file, line)
            return
        source = getattr(self.running, "source", None) or "(unknown)"
        log.debug("source %s: its build backend warns: %s", source, message)


BACKEND_WARNINGS = BackendWarnings()
