"""The per-env file lock: two `envgen lock` runs on one env do not interleave."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import filelock

from envgen.project import Project

log = logging.getLogger(__name__)


@contextlib.contextmanager
def env_lock(project: Project, env: str) -> Iterator[None]:
    """Hold locks/.<env>.lock so two `envgen lock` runs on one env do not interleave."""
    project.locks_dir.mkdir(parents=True, exist_ok=True)
    guard = filelock.FileLock(project.locks_dir / f".{env}.lock")
    try:
        guard.acquire(timeout=0)
    except filelock.Timeout:
        log.info("%s: waiting for another `envgen lock` of this env to finish", env)
        guard.acquire()
    try:
        yield
    finally:
        guard.release()
