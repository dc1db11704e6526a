"""Is a lock still fresh? The no-op `envgen lock`: the inputs the lock records compared with the
files, without loading the matrix or anything resolving needs. The modes that write nothing
(`--check`, `--dry-run`) first refuse, as `status` and `install` do, a lock whose files are not as
`envgen lock` wrote them, and take `status`'s verdict on its derived files."""

from __future__ import annotations

import logging
from pathlib import Path

from envgen.errors import InputError, VerificationError
from envgen.inputs.extends import read_layered
from envgen.lockio import seal
from envgen.lockio.exports.names import derived_texts
from envgen.lockio.input_hashes import still_current
from envgen.lockio.store import LockTexts, lock_of, recorded_inputs
from envgen.project import Project

log = logging.getLogger(__name__)

_UNSEALED = "the lock files do not hash to the content hash they record"


def unchanged_hash(project: Project, texts: LockTexts, *, strict: bool = False) -> str | None:
    """The input hash recorded for the lock whose files are `texts` when every input it records
    still holds, its files are intact and every derived file is there for it; None when stale,
    absent or unreadable (a re-lock then reads it all properly).

    Reads the files the lock records digests of, the derived files (their headers name the input
    hash, their bytes hash to the derived hash the sealed sources.toml records), and the glibc floor
    of the matrix (its virtual packages depend on it): the matrix is not validated, so a no-op lock
    loads none of what resolving needs. A matrix whose bytes are those it was locked from was valid
    then. With `strict` (the modes that write nothing, once `require_untouched` passed) the verdict
    is `status`'s too (commands/lock/freshness.py): the matrix loaded, the lock read, every derived
    file rendered and compared byte for byte.
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
    derived = derived_texts(project.locks_dir, env, platforms, digest)
    if derived is None:
        log.info("%s: a derived file is missing or from another lock: locking again", env)
        return None
    if not texts.intact:
        log.info("%s: %s: locking again", env, _UNSEALED)
        return None
    if recorded.derived_hash is not None and recorded.derived_hash != seal.derived_hash(derived):
        log.warning(
            "%s: a derived file was edited after `envgen lock` wrote it: locking again", env
        )
        return None
    # A lock written before the derived hash was recorded: each derived file compared with the
    # lock's rendering instead, as `status` compares it.
    if (strict or recorded.derived_hash is None) and _stale_for_status(project, texts):
        return None
    return digest


def _stale_for_status(project: Project, texts: LockTexts) -> bool:
    """Whether `status` calls the lock of `texts` stale (a derived file not byte for byte what the
    lock renders, the matrix loaded for its comments)."""
    # Imported here: the matrix loader, the schemas and the exporters are no part of the no-op.
    from envgen.commands.lock.freshness import freshness

    lock = lock_of(texts)
    reasons = freshness(project, texts.env, lock).reasons if lock is not None else ("no lock",)
    if reasons:
        log.info("%s: %s: locking again", texts.env, reasons[0])
    return bool(reasons)


def require_untouched(project: Project, texts: LockTexts) -> None:
    """For the modes that write nothing: the checks `status` and `install` make of a lock before
    trusting it, with their exit codes. A field the hostile-input reader refuses is InputError
    (exit 2) naming it; files not as `envgen lock` wrote them (lockio/integrity.py) or a derived
    file edited by hand are VerificationError (exit 4). No lock at all passes."""
    from envgen.lockio.exports.derived import hand_edits
    from envgen.lockio.integrity import checked, tampered

    found = checked(texts)
    if found is None:
        return
    if found.problems or found.lock is None:
        raise tampered(found.problems, texts.env)
    edits = hand_edits(project.locks_dir, found.lock)
    if edits:
        listed = "\n".join(f"  {edit}" for edit in edits)
        raise VerificationError(
            f"the lock of {texts.env} was tampered with:\n{listed}",
            hint=f"a derived file is never edited by hand: `envgen lock {texts.env} --force` "
            "writes it again",
        )


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
