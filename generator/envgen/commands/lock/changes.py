"""What a re-lock that writes nothing (`lock --check`, `lock --dry-run`) would change under locks/,
and why: the files whose bytes would differ, read through lockio/store.py, and the inputs that
changed since the lock on disk was written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from envgen.lockio.store import LockTexts, recorded_inputs, unwritten_changes

if TYPE_CHECKING:
    from envgen.project import Project
    from envgen.resolve.pipeline import Relocked

NO_LOCK = "no lock yet"
EDITED = "its files do not hash to the content hash they record (edited since `envgen lock`)"
ADDED, CHANGED = "added", "changed"


@dataclass(frozen=True)
class Unwritten:
    """What a re-lock would have done to locks/: each file it would write that differs from the
    disk (path, ADDED or CHANGED), and why the lock on disk is not that one."""

    files: tuple[tuple[str, str], ...]
    reasons: tuple[str, ...]


def unwritten(
    project: Project, texts: LockTexts, relocked: Relocked, matrix_path: str
) -> Unwritten:
    """What writing `relocked` over the lock files `texts` (as read) would change, and why."""
    lock = relocked.lock
    found = unwritten_changes(project, texts.env, lock, relocked.recipe, relocked.derived)
    files = tuple((path, CHANGED if existed else ADDED) for path, existed in found)
    if not files:
        return Unwritten((), ())
    return Unwritten(files, reasons(texts, lock.inputs, matrix_path, files))


def without_lock(texts: LockTexts) -> Unwritten:
    """What a lock where there is none would change: its three files added (`--check` does not
    resolve to say which derived files come with them)."""
    return Unwritten(tuple((name, ADDED) for name in texts.names), (NO_LOCK,))


def reasons(
    texts: LockTexts,
    inputs: tuple[tuple[str, str], ...],
    matrix_path: str,
    files: tuple[tuple[str, str], ...],
) -> tuple[str, ...]:
    """Why the lock on disk is not the one a re-lock writes: no lock, the inputs that changed since
    it was written (the input digests it records against `inputs`), its files edited; else the
    derived files missing (what a moving flag moves says its own reason)."""
    # Here, not at the top: freshness.py loads matrices, which the no-op lock never imports.
    from envgen.commands.lock.freshness import stale_reasons

    if not texts.present:
        return (NO_LOCK,)
    recorded = recorded_inputs(texts)
    if recorded is None:
        found = [f"{texts.names[1]} records no input digests"]
    else:
        found = list(stale_reasons(recorded.inputs.items(), inputs, matrix_path))
    if not texts.intact:
        found.append(EDITED)
    if not found:
        found = [f"{path} missing" for path, change in files if change == ADDED]
    return tuple(found)
