"""Is a lock still fresh? The no-op `envgen lock`: the inputs the lock records compared with the
files, without loading the matrix or anything resolving needs."""

from __future__ import annotations

import logging
from pathlib import Path

from envgen.errors import InputError
from envgen.inputs.extends import read_layered
from envgen.lockio.exports.names import derived_present
from envgen.lockio.input_hashes import still_current
from envgen.lockio.store import LockTexts, recorded_inputs
from envgen.project import Project

log = logging.getLogger(__name__)

_UNSEALED = "the lock files do not hash to the content hash they record"


def unchanged_hash(project: Project, texts: LockTexts) -> str | None:
    """The input hash recorded for the lock whose files are `texts` when every input it records
    still holds, its files are intact and every derived file is there for it; None when stale,
    absent or unreadable (a re-lock then reads it all properly).

    Reads the files the lock records digests of, the derived files' headers, and the glibc floor of
    the matrix (its virtual packages depend on it): the matrix is not validated, so a no-op lock
    loads none of what resolving needs. A matrix whose bytes are those it was locked from was valid
    then.
    """
    env = texts.env
    recorded = recorded_inputs(texts)
    if recorded is None:
        return None
    digest, inputs = recorded.input_hash, dict(recorded.inputs)
    glibc = _glibc_floor(project.template(env))
    if glibc is None or not still_current(project, env, inputs, glibc):
        return None
    prefix = "virtual-packages:"
    platforms = [k.removeprefix(prefix) for k in inputs if k.startswith(prefix)]
    if not derived_present(project.locks_dir, env, platforms, digest):
        log.info("%s: a derived file is missing or from another lock: locking again", env)
        return None
    if not texts.intact:
        log.info("%s: %s: locking again", env, _UNSEALED)
        return None
    return digest


def _glibc_floor(matrix_path: Path) -> str | None:
    """`[system] glibc` of a matrix, the files it extends merged in; None when it does not read
    (the re-lock that follows reports why)."""
    try:
        layered = read_layered(matrix_path)
    except InputError:
        return None
    system = layered.data.get("system")
    glibc = system.get("glibc") if isinstance(system, dict) else None
    return glibc if isinstance(glibc, str) else None
