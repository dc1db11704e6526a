"""The one rule for a file written where the user says (`-o`): a regular file or a new path only,
never in the project's locks/, never through a symlink, never onto a device or FIFO; whole or not at
all."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from envgen import atomic
from envgen.errors import InputError
from envgen.project import Project

_HINT = "give -o a new path or a regular file outside locks/"


def checked_output(path: Path, project: Project) -> None:
    """Refuse (InputError, exit 2, naming it) a `path` an output must not replace."""
    try:
        mode: int | None = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        why = str(exc.strerror)
        raise InputError(
            f"cannot write {path}: {why}", hint=_HINT, file=str(path), reason=why
        ) from exc
    if mode is not None and stat.S_ISLNK(mode):
        problem = "is a symbolic link: an output is never written through one"
    elif mode is not None and not stat.S_ISREG(mode):
        problem = "is not a regular file (a directory, device, FIFO or socket)"
    elif _inside(path.absolute().parent, project.locks_dir):
        problem = f"is in {project.locks_dir}, which only `envgen lock` writes"
    else:
        return
    raise InputError(f"{path} {problem}", hint=_HINT, file=str(path), reason=problem)


def _inside(directory: Path, locks: Path) -> bool:
    """Whether `directory` is `locks` or below it, however either is spelled (or linked)."""
    real, protected = os.path.realpath(directory), os.path.realpath(locks)
    return real == protected or real.startswith(protected + os.sep)


@contextmanager
def output_file(path: Path, project: Project) -> Iterator[BinaryIO]:
    """A handle whose bytes replace `path` when the block ends without an error.

    They go to a part file beside `path` (`atomic.py`), created as any new file is (mode 0666 less
    the umask), renamed over `path` once complete: no reader sees half a file, and an error or an
    interrupt leaves nothing behind. `path` is checked before, and again just before the rename."""
    checked_output(path, project)
    opened = False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic.part_file(path) as part:
            opened = True
            yield part.handle
            part.place(path, check=lambda target: checked_output(target, project))
    except OSError as exc:
        if opened:
            raise
        why = str(exc.strerror)
        raise InputError(
            f"cannot write {path}: {why}", hint=_HINT, file=str(path), reason=why
        ) from exc
