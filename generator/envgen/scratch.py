"""The one temporary-directory helper for work that must not outlive a run unless asked to.

`children_scratch` is also the TMPDIR of every child started meanwhile."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Where pip, uv, git, venv/ensurepip and the recipe's tools make their temporary files.
_TMP_VARIABLES = ("TMPDIR", "TMP", "TEMP")


@contextmanager
def scratch_dir(prefix: str, *, keep: bool = False) -> Iterator[Path]:
    """A new directory in the system's temp dir, removed on success, failure and interrupt unless
    `keep`. It is made inside the block that removes it, so an interrupt as it is made leaves
    nothing (a name of 64 random bits is never taken)."""
    path = Path(tempfile.gettempdir()) / f"{prefix}{secrets.token_hex(8)}"
    try:
        path.mkdir(mode=0o700)
        yield path
    except FileExistsError:
        keep = True  # another's, never removed
        raise
    finally:
        if not keep:
            _removed(path)


def _removed(path: Path) -> None:
    """`path` removed to the end: a Ctrl-C meanwhile (a second one) takes effect once it is gone."""
    interrupted = False
    while True:
        try:
            shutil.rmtree(path, ignore_errors=True)
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt


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
