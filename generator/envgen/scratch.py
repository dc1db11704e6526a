"""The one temporary-directory helper for work that must not outlive a run unless asked to."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def scratch_dir(prefix: str, *, keep: bool = False) -> Iterator[Path]:
    """A new directory in the system's temp dir, removed on success, failure and interrupt unless `keep`."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)
