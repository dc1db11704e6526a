"""Where the core modules' log records go: stderr, one line each (rich on a terminal)."""

from __future__ import annotations

import logging
import sys


def setup_logging(quiet: bool) -> None:
    """Progress and warnings of the core modules go to stderr; `-q` keeps only warnings.

    On a terminal rich formats them; elsewhere (CI logs, pipes) each record stays one unwrapped line.
    """
    handler: logging.Handler
    if sys.stderr.isatty():
        # Imported here: rich costs more start-up time than a no-op `envgen lock` spends on anything else.
        from rich.console import Console
        from rich.logging import RichHandler

        handler = RichHandler(console=Console(stderr=True), show_time=False, show_path=False, markup=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)-7s %(message)s"))
    root = logging.getLogger("envgen")
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING if quiet else logging.INFO)
    root.propagate = False
