"""`envgen lock`: decide whether an env's lock is still fresh, and re-lock it when it is not."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envgen.errors import InputError
from envgen.inputs.matrix import load_env
from envgen.inputs.toml_reader import did_you_mean
from envgen.lockio.state import env_lock, input_hash, project_inputs, recorded_state
from envgen.model import Lock
from envgen.project import Project, cache_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LockResult:
    """What `lock_env` did for one env: "locked" (files written, `lock` set) or "up-to-date" (nothing to do)."""

    env: str
    status: str
    input_hash: str
    lock: Lock | None = None


def lock_env(
    project: Project,
    env: str,
    *,
    update: Collection[str] | bool = (),
    force: bool = False,
    offline: bool = False,
    cache: Path | None = None,
) -> LockResult:
    """Lock one env; a no-op when the recorded input hash still matches (unless forced or updating)."""
    matrix = load_env(project, env)
    with env_lock(project, env):
        state = None if force or update else recorded_state(project, env)
        if state is not None and input_hash(project_inputs(project, matrix, state[1])) == state[0]:
            log.info("%s: up to date (input hash %s)", env, state[0][:12])
            return LockResult(env, "up-to-date", state[0])
        # Imported here: conda-lock's models, uv and git are only needed when something must be resolved.
        from envgen.resolve.pipeline import relock

        lock = relock(project, matrix, update=update, offline=offline, cache=cache or cache_dir())
        return LockResult(env, "locked", lock.input_hash, lock)


def lock_envs(
    project: Project,
    envs: Sequence[str],
    *,
    update: Collection[str] | bool = (),
    force: bool = False,
    offline: bool = False,
) -> list[LockResult]:
    """Lock several envs concurrently (they share nothing but the caches); results in the given order.

    Every name in `update` must be a source of one of the envs (in its matrix or its recorded lock).
    """
    if update is not True and update:
        check_update_names(project, envs, update)
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(envs)))) as pool:
        futures = [pool.submit(lock_env, project, e, update=update, force=force, offline=offline) for e in envs]
        return [f.result() for f in futures]


def check_update_names(project: Project, envs: Sequence[str], update: Collection[str]) -> None:
    """InputError for a name in `update` that no env has as a source, rather than a lock that moves nothing."""
    known: set[str] = set()
    for env in envs:
        known |= {s.name for s in load_env(project, env).sources}
        state = recorded_state(project, env)
        known |= set(state[1]) if state else set()
    unknown = sorted(set(update) - known)
    if unknown:
        names = ", ".join(sorted(known)) or "none"
        raise InputError(
            f"--update {unknown[0]}: no source of that name in {', '.join(envs)} (matrix or recorded lock)"
            f"{did_you_mean(unknown[0], known)}",
            hint=f"name one of the sources: {names}; or use --update-all",
        )


def summarize(result: LockResult) -> dict[str, Any]:
    """The JSON-able summary `envgen lock --json` prints for one env."""
    summary: dict[str, Any] = {"env": result.env, "status": result.status, "input_hash": result.input_hash}
    lock = result.lock
    if lock is not None:
        summary |= {
            "platforms": {p: {"conda": len(lock.conda_for(p)), "pip": len(lock.pip_for(p))} for p in lock.platforms},
            "sources": {s.source.name: {"ref": s.source.ref, "commit": s.commit} for s in lock.sources},
            "pending": {p.name: p.note for p in lock.pending},
            "overrides": {o.override.name: o.override.reason for o in lock.overrides},
            "builds_from_source": sorted({f"{e.name}=={e.version}" for e in lock.pip if e.sdist}),
        }
    return summary
