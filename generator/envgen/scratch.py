"""The one temporary-directory helper for work that must not outlive a run unless asked to."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

# Where pip, uv, git, venv/ensurepip and the recipe's tools make their temporary files.
_TMP_VARIABLES = ("TMPDIR", "TMP", "TEMP")


_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back meanwhile, then delivered: an interrupt never lands between
    making a directory and taking charge of it, nor half-way through removing one."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextmanager
def scratch_dir(prefix: str, *, keep: bool = False) -> Iterator[Path]:
    """A new directory in the system's temp dir, removed on success, failure and interrupt unless
    `keep`."""
    with ExitStack() as stack:
        with _signals_held():
            path = Path(tempfile.mkdtemp(prefix=prefix))
            if not keep:
                stack.callback(_removed, path)
        yield path


def _removed(path: Path) -> None:
    with _signals_held():
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def children_scratch(prefix: str) -> Iterator[Path]:
    """A scratch directory every child process started meanwhile gets as its temp dir (TMPDIR,
    TMP, TEMP): pip's build directories, uv's throwaway cache, ensurepip's wheels. A child killed
    by an interrupt cannot remove its own; this directory goes with them, whatever happened."""
    with scratch_dir(prefix) as path:
        saved = {name: os.environ.get(name) for name in _TMP_VARIABLES}
        os.environ.update(dict.fromkeys(_TMP_VARIABLES, str(path)))
        try:
            yield path
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
