"""The per-env mutex: two `envgen lock` runs on one env do not interleave, and none leaves a file
behind in locks/."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import filelock

from envgen import interrupts
from envgen.errors import InputError
from envgen.project import Project

log = logging.getLogger(__name__)


@contextlib.contextmanager
def env_lock(project: Project, env: str) -> Iterator[None]:
    """Hold locks/.<env>.lock so two `envgen lock` runs on one env do not interleave.

    filelock's SoftFileLock: the file exists only while the mutex is held (filelock's FileLock
    leaves its file on Unix by design), so a run that fails or is interrupted leaves nothing in
    locks/; one killed outright leaves it with its PID, and the next run on this host breaks it."""
    path = project.locks_dir / f".{env}.lock"
    guard = filelock.SoftFileLock(path)
    try:
        _acquire(guard, env)
        # An interrupted run whose worker does not reach this `finally` before envgen exits still
        # removes it.
        with interrupts.holding(path):
            yield
    finally:
        guard.release()  # nothing to release when it was never taken


def _acquire(guard: filelock.SoftFileLock, env: str) -> None:
    path = Path(guard.lock_file)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            guard.acquire(timeout=0)
        except filelock.Timeout:
            # Another user's, which this user cannot tell stale from held: no wait would end.
            if not os.access(path, os.R_OK) and path.exists():
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path)) from None
            log.info("%s: waiting for another `envgen lock` of this env to finish", env)
            guard.acquire()
    except OSError as exc:  # an unwritable locks/, or a lock file another user owns
        raise InputError(
            f"cannot take the per-env lock {path}: {exc.strerror or exc}",
            hint="locks/ must be writable by you; remove a .<env>.lock another user left",
            file=str(path),
        ) from exc
