"""`envgen lock`: resolve sources, then conda and pip per platform, and write one Lock atomically."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from generator.conda import python_version, solve_conda, virtual_packages
from generator.lockfile import env_lock, input_digests, input_hash, read_lock, write_lock
from generator.matrix import load_matrix
from generator.model import AppliedOverride, CondaEntry, Lock, LockedSource, Matrix, Pending, PipEntry
from generator.paths import Project, cache_dir
from generator.pypi import lock_pypi
from generator.recipe import render_recipe
from generator.sources import resolve_sources

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LockResult:
    """What `lock_env` did for one env: "locked" (files written) or "up-to-date" (nothing to do)."""

    env: str
    status: str
    lock: Lock


@dataclass(frozen=True)
class _PlatformLock:
    conda: tuple[CondaEntry, ...]
    pip: tuple[PipEntry, ...]
    overrides: tuple[AppliedOverride, ...]


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
    cache = cache or cache_dir()
    matrix = load_project_matrix(project, env)
    with env_lock(project, env):
        previous = read_lock(project, env)
        if previous is not None and not force and not update:
            inputs = _inputs(project, matrix, previous.sources)
            if input_hash(inputs) == previous.input_hash:
                log.info("%s: up to date (input hash %s)", env, previous.input_hash[:12])
                return LockResult(env, "up-to-date", previous)
        kept = {s.source.name: s for s in previous.sources} if previous else {}
        log.info("%s: resolving %d git sources", env, len(matrix.sources))
        sources = resolve_sources(matrix, cache=cache, previous=kept, update=update)
        platforms = _lock_platforms(matrix, sources, cache=cache, offline=offline)
        lock = assemble_lock(matrix, sources, platforms, _inputs(project, matrix, sources))
        log.info("%s: writing %s", env, project.lock_yml(env).relative_to(project.root))
        write_lock(project, env, lock, render_recipe(lock))
        return LockResult(env, "locked", lock)


def load_project_matrix(project: Project, env: str) -> Matrix:
    """The env's matrix, its path relative to the project root, so nothing written depends on the checkout's place."""
    path = project.template(env)
    matrix = load_matrix(path, project.channels_dir)
    return replace(matrix, path=path.relative_to(project.root).as_posix())


def lock_envs(
    project: Project,
    envs: Sequence[str],
    *,
    update: Collection[str] | bool = (),
    force: bool = False,
    offline: bool = False,
) -> list[LockResult]:
    """Lock several envs concurrently (they share nothing but the caches); results in the given order."""
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(envs)))) as pool:
        futures = [pool.submit(lock_env, project, e, update=update, force=force, offline=offline) for e in envs]
        return [f.result() for f in futures]


def summarize(result: LockResult) -> dict[str, object]:
    """The JSON-able summary `envgen lock --json` prints for one env."""
    lock = result.lock
    return {
        "env": result.env,
        "status": result.status,
        "input_hash": lock.input_hash,
        "platforms": {p: {"conda": len(lock.conda_for(p)), "pip": len(lock.pip_for(p))} for p in lock.platforms},
        "sources": {s.source.name: {"ref": s.source.ref, "commit": s.commit} for s in lock.sources},
        "pending": {p.name: p.note for p in lock.pending},
        "overrides": {o.override.name: o.override.reason for o in lock.overrides},
        "builds_from_source": sorted({f"{e.name}=={e.version}" for e in lock.pip if e.sdist}),
    }


def _lock_platforms(
    matrix: Matrix, sources: Sequence[LockedSource], *, cache: Path, offline: bool
) -> dict[str, _PlatformLock]:
    """Per platform, conda first (it decides the exact python), then pip for that python."""

    def one(platform: str) -> _PlatformLock:
        conda = solve_conda(matrix, platform, cache=cache)
        python = python_version(conda)
        log.info("%s %s: conda solved, %d packages, python %s", matrix.name, platform, len(conda), python)
        pypi = lock_pypi(matrix, platform, python, sources, cache=cache, offline=offline)
        log.info("%s %s: pip resolved, %d packages", matrix.name, platform, len(pypi.entries))
        return _PlatformLock(conda, pypi.entries, pypi.overrides)

    with ThreadPoolExecutor(max_workers=len(matrix.platforms)) as pool:
        return dict(zip(matrix.platforms, pool.map(one, matrix.platforms), strict=True))


def _inputs(project: Project, matrix: Matrix, sources: Sequence[LockedSource]) -> tuple[tuple[str, str], ...]:
    vpkgs = {p: virtual_packages(matrix, p) for p in matrix.platforms}
    return input_digests(project.root / matrix.path, project.channel_files(matrix), sources, vpkgs)


def assemble_lock(
    matrix: Matrix,
    sources: Sequence[LockedSource],
    platforms: dict[str, _PlatformLock],
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
