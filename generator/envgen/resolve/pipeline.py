"""Re-lock one env: git sources, then conda and pip per platform, assembled into a Lock and written atomically."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from envgen.errors import InputError
from envgen.lockio.lockfile import read_lock, write_lock
from envgen.lockio.state import input_hash, project_inputs
from envgen.model import AppliedOverride, CondaEntry, Lock, LockedSource, Matrix, Pending, PipEntry
from envgen.project import Project
from envgen.recipe.render import render_recipe
from envgen.resolve.conda_stage import python_version, solve_conda
from envgen.resolve.git_sources import resolve_sources
from envgen.resolve.pip_stage import lock_pypi

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlatformLock:
    """What the conda and pip stages resolved for one platform."""

    conda: tuple[CondaEntry, ...]
    pip: tuple[PipEntry, ...]
    overrides: tuple[AppliedOverride, ...]


def relock(project: Project, matrix: Matrix, *, update: Collection[str] | bool, offline: bool, cache: Path) -> Lock:
    """Resolve everything for `matrix` (keeping recorded source commits unless updated) and write the lock."""
    kept = {} if update is True else previous_sources(project, matrix.name)
    log.info("%s: resolving %d git sources", matrix.name, len(matrix.sources))
    sources = resolve_sources(matrix, cache=cache, previous=kept, update=update)
    platforms = lock_platforms(matrix, sources, cache=cache, offline=offline)
    lock = assemble_lock(matrix, sources, platforms, project_inputs(project, matrix, sources))
    log.info("%s: writing %s", matrix.name, project.lock_yml(matrix.name).relative_to(project.root))
    write_lock(project, matrix.name, lock, render_recipe(lock))
    return lock


def previous_sources(project: Project, env: str) -> dict[str, LockedSource]:
    """The sources of the lock on disk by name, whose commits a re-lock keeps; {} when there is no lock."""
    try:
        previous = read_lock(project, env)
    except InputError as exc:
        raise InputError(
            f"{exc.message}\n(the previous lock is read to keep the commits it pins)",
            hint=f"restore locks/{env}.* (e.g. `git checkout -- locks/`), or run `envgen lock {env} --update-all` "
            "to pin every source afresh",
        ) from exc
    return {s.source.name: s for s in previous.sources} if previous else {}


def lock_platforms(
    matrix: Matrix, sources: Sequence[LockedSource], *, cache: Path, offline: bool
) -> dict[str, PlatformLock]:
    """Per platform, concurrently: conda first (it decides the exact python), then pip for that python."""

    def one(platform: str) -> PlatformLock:
        conda = solve_conda(matrix, platform, cache=cache)
        python = python_version(conda)
        log.info("%s %s: conda solved, %d packages, python %s", matrix.name, platform, len(conda), python)
        pypi = lock_pypi(matrix, platform, python, sources, cache=cache, offline=offline)
        log.info("%s %s: pip resolved, %d packages", matrix.name, platform, len(pypi.entries))
        return PlatformLock(conda, pypi.entries, pypi.overrides)

    with ThreadPoolExecutor(max_workers=len(matrix.platforms)) as pool:
        return dict(zip(matrix.platforms, pool.map(one, matrix.platforms), strict=True))


def assemble_lock(
    matrix: Matrix,
    sources: Sequence[LockedSource],
    platforms: dict[str, PlatformLock],
    inputs: tuple[tuple[str, str], ...],
) -> Lock:
    """The Lock of a matrix from what each stage resolved (pure)."""
    overrides: dict[str, AppliedOverride] = {}
    for result in platforms.values():
        for applied in result.overrides:
            seen = overrides.get(applied.override.name)
            replaced = set(applied.replaced) | (set(seen.replaced) if seen else set())
            overrides[applied.override.name] = AppliedOverride(
                applied.override, tuple(sorted(replaced, key=lambda r: (r.text, str(r.origin))))
            )
    pending = [Pending(p.name, p.pending) for p in matrix.packages if p.pending]
    if matrix.cann.pending:
        pending.append(Pending("CANN", matrix.cann.note or ""))
    return Lock(
        env=matrix.name,
        platforms=matrix.platforms,
        input_hash=input_hash(inputs),
        conda=tuple(e for p in matrix.platforms for e in platforms[p].conda),
        pip=tuple(e for p in matrix.platforms for e in platforms[p].pip),
        sources=tuple(sources),
        overrides=tuple(overrides[k] for k in sorted(overrides)),
        pending=tuple(sorted(pending, key=lambda p: p.name.lower())),
        channels=matrix.channels,
        indexes=matrix.indexes,
        cann=matrix.cann,
        activation_env=matrix.activation_env,
        profiles=matrix.profiles,
        checks=matrix.checks,
        inputs=inputs,
    )
