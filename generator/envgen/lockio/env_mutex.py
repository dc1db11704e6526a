"""The per-env file lock: two `envgen lock` runs on one env do not interleave."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import filelock

from envgen.errors import InputError
from envgen.project import Project

log = logging.getLogger(__name__)


@contextlib.contextmanager
def env_lock(project: Project, env: str) -> Iterator[None]:
    """Hold locks/.<env>.lock so two `envgen lock` runs on one env do not interleave."""
    path = project.locks_dir / f".{env}.lock"
    try:
        project.locks_dir.mkdir(parents=True, exist_ok=True)
        guard = filelock.FileLock(path)
        try:
            guard.acquire(timeout=0)
        except filelock.Timeout:
            log.info("%s: waiting for another `envgen lock` of this env to finish", env)
            guard.acquire()
    except OSError as exc:  # an unwritable locks/, or a lock file another user owns
        raise InputError(
            f"cannot take the per-env lock {path}: {exc.strerror or exc}",
            hint="locks/ and its .<env>.lock files must be writable by you; remove a stale one another user left",
        ) from exc
    try:
        yield
    finally:
        guard.release()
