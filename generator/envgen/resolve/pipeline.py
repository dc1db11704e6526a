"""Re-lock one env: git sources, then conda and pip per platform, assembled into a Lock and written atomically."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from envgen.errors import InputError, ResolutionError
from envgen.lockdiff.moves import SOLVER, Move, explain_conda, explain_pip, explain_sources, unavailable
from envgen.lockio.conda_lock_yml import import_models
from envgen.lockio.consistency import record, violations
from envgen.lockio.exports.derived import derived_files
from envgen.lockio.input_hashes import input_hash, project_inputs
from envgen.lockio.store import LockTexts, lock_of, write_lock
from envgen.model import (
    AppliedOverride,
    CondaEntry,
    Lock,
    LockedArchive,
    LockedSource,
    Matrix,
    Pending,
    PipEntry,
)
from envgen.project import Project
from envgen.recipe.render import render_recipe
from envgen.resolve.archives import lock_archives
from envgen.resolve.conda_stage import CondaSolve, admits, python_version, solve_conda_preferring
from envgen.resolve.git_sources import resolve_sources, sources_to_update
from envgen.resolve.pip_stage import PypiLock, lock_pypi, still_offered
from envgen.resolve.preferences import kept
from envgen.resolve.upgrade import NO_UPGRADE, Upgrade
from envgen.resolve.uv_compile import NOTHING_AHEAD, Ahead

log = logging.getLogger(__name__)

# The sources pinned already from these kept commits and this `update`, if they were (resolve/head_start.py).
Pinned = Callable[[Mapping[str, LockedSource], Collection[str] | bool], "tuple[LockedSource, ...] | None"]


@dataclass(frozen=True)
class PlatformLock:
    """What the conda and pip stages resolved for one platform, and what moved against the previous lock."""

    conda: tuple[CondaEntry, ...]
    pip: tuple[PipEntry, ...]
    overrides: tuple[AppliedOverride, ...]
    moves: tuple[Move, ...] = ()


@dataclass(frozen=True)
class Relocked:
    """A written lock and what moved against the previous lock and why: sources, then each platform's packages."""

    lock: Lock
    moves: tuple[Move, ...]


def relock(
    project: Project,
    matrix: Matrix,
    previous_files: LockTexts,
    *,
    update: Collection[str] | bool,
    offline: bool,
    cache: Path,
    upgrade: Upgrade = NO_UPGRADE,
    ahead: Ahead = NOTHING_AHEAD,
    pinned: Pinned = lambda kept, update: None,
    before_write: Callable[[], None] = lambda: None,
) -> Relocked:
    """Resolve everything for `matrix` and write the lock.

    The previous lock (its files as read, `previous_files`) gives the source commits to keep unless
    updated, and the versions the resolvers prefer unless upgraded. `ahead` gives the uv runs a head
    start began (resolve/head_start.py), and `pinned` the sources it pinned from the same kept
    commits, if it did; `before_write` may still stop the re-lock (with an error) before anything is
    written.
    """
    update = sources_to_update(matrix, update, upgrade)
    previous = read_previous(previous_files, afresh=update is True)
    kept_sources = {} if update is True or previous is None else {s.source.name: s for s in previous.sources}
    # The conda part needs nothing of the sources: each platform is solved while they are pinned.
    pool = ThreadPoolExecutor(max_workers=len(matrix.platforms) + 1)
    try:
        # The writer's conda-lock, imported while the resolvers work (a lock read had it imported).
        pool.submit(import_models)
        solving = {
            p: pool.submit(solve_conda_preferring, matrix, p, kept(conda_of(previous, p), upgrade), cache=cache)
            for p in matrix.platforms
        }
        sources = pinned(kept_sources, update)
        if sources is None:
            log.info("%s: resolving %d git sources", matrix.name, len(matrix.sources))
            sources = resolve_sources(matrix, cache=cache, previous=kept_sources, update=update)
        recorded = () if previous is None or update is True else previous.archives
        archives = lock_archives(matrix, cache=cache, previous=recorded, offline=offline)
        platforms = lock_platforms(
            matrix,
            sources,
            solving,
            cache=cache,
            offline=offline,
            previous=previous,
            upgrade=upgrade,
            ahead=ahead,
            archives=archives,
        )
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a source that failed does not wait for the solves
    inputs = project_inputs(project, matrix, sources)
    lock = consistent(assemble_lock(matrix, sources, platforms, inputs, archives), matrix)
    log.info("%s: writing %s", matrix.name, project.lock_yml(matrix.name).relative_to(project.root))
    derived = [(file.name, file.text) for file in derived_files(lock, matrix)]
    before_write()
    write_lock(project, matrix.name, lock, render_recipe(lock), derived)
    moved = explain_sources(previous.sources, sources, update, upgrade) if previous else []
    return Relocked(lock, tuple(moved) + tuple(m for p in matrix.platforms for m in platforms[p].moves))


def read_previous(texts: LockTexts, *, afresh: bool) -> Lock | None:
    """The lock whose files are `texts`, whose source commits and versions a re-lock keeps; None
    when there is no lock.

    An unreadable lock stops the re-lock, unless every source moves anyway (`afresh`): then it is ignored.
    """
    env = texts.env
    try:
        return lock_of(texts)
    except InputError as exc:
        if afresh:
            log.warning("%s: ignoring the unreadable previous lock: %s", env, exc.message)
            return None
        raise InputError(
            f"{exc.message}\n(the previous lock is read to keep the commits and versions it pins)",
            hint=f"restore locks/{env}.* (e.g. `git checkout -- locks/`), or run `envgen lock {env} --upgrade` "
            "to lock everything afresh",
        ) from exc


def conda_of(previous: Lock | None, platform: str) -> tuple[CondaEntry, ...]:
    return previous.conda_for(platform) if previous else ()


def lock_platforms(
    matrix: Matrix,
    sources: Sequence[LockedSource],
    solving: Mapping[str, Future[CondaSolve]],
    *,
    cache: Path,
    offline: bool,
    previous: Lock | None = None,
    upgrade: Upgrade = NO_UPGRADE,
    ahead: Ahead = NOTHING_AHEAD,
    archives: Sequence[LockedArchive] = (),
) -> dict[str, PlatformLock]:
    """Per platform, concurrently: the conda solve `solving` it (it decides the exact python), then pip for that
    python.

    Each stage prefers the previous lock's entries of the platform, except those `upgrade` covers.
    """

    def one(platform: str) -> PlatformLock:
        before_conda = conda_of(previous, platform)
        before_pip = previous.pip_for(platform) if previous else ()
        solved = solving[platform].result()
        conda = solved.entries
        python = python_version(conda)
        log.info("%s %s: conda solved, %d packages, python %s", matrix.name, platform, len(conda), python)
        pypi = lock_pypi(
            matrix,
            platform,
            python,
            sources,
            cache=cache,
            offline=offline,
            preferred=kept(before_pip, upgrade),
            ahead=ahead,
            archives=archives,
        )
        log.info("%s %s: pip resolved, %d packages", matrix.name, platform, len(pypi.entries))
        moves: list[Move] = []
        if previous is not None:
            gone = [e.name for e in solved.unavailable]
            moves += explain_conda(platform, before_conda, conda, matrix.conda_specs, upgrade, admits, gone)
            moves += pip_moves(matrix, platform, before_pip, pypi, upgrade, offline)
        return PlatformLock(conda, pypi.entries, pypi.overrides, tuple(moves))

    with ThreadPoolExecutor(max_workers=len(matrix.platforms)) as pool:
        return dict(zip(matrix.platforms, pool.map(one, matrix.platforms), strict=True))


def pip_moves(
    matrix: Matrix, platform: str, before: Sequence[PipEntry], pypi: PypiLock, upgrade: Upgrade, offline: bool
) -> list[Move]:
    """What moved on the pip side of `platform`; a version gone from its index is warned about."""
    moves = explain_pip(platform, before, pypi.entries, pypi.requirements, upgrade)
    unexplained = {m.name for m in unavailable(moves)}
    if unexplained and not offline:
        offered = still_offered(matrix, [e for e in before if e.name in unexplained])
        moves = [replace(m, reason=SOLVER) if m.name in offered else m for m in moves]
    for move in unavailable(moves):
        log.warning(
            "%s: %s %s is no longer offered by the indexes; resolved afresh to %s",
            platform,
            move.name,
            move.old,
            move.new,
        )
    return moves


def assemble_lock(
    matrix: Matrix,
    sources: Sequence[LockedSource],
    platforms: dict[str, PlatformLock],
    inputs: tuple[tuple[str, str], ...],
    archives: Sequence[LockedArchive] = (),
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
        archives=tuple(archives),
        links=matrix.links,
        exclusions=matrix.exclusions,
    )


def consistent(lock: Lock, matrix: Matrix) -> Lock:
    """`lock` with what its transitive overrides contradict recorded (and told once per pair); any other
    contradiction between locked packages is a failed resolution."""
    found = violations(lock, lambda platform: lock.python_for(platform) or matrix.python)
    recorded, others = record(lock, found)
    if others:
        listed = "".join(f"\n  {v}" for v in others)
        raise ResolutionError(
            f"{matrix.name}: the resolved set does not meet its own requirements:{listed}",
            hint="an index may serve metadata that disagrees with its files; to accept a contradiction on "
            f"purpose, add an override with `transitive = true` and its reason to {matrix.path}",
        )
    for applied in recorded.overrides:
        for pair in applied.violates:
            where = ", ".join(sorted({v.platform for v in found if v.pair == pair}))
            log.warning("override %s (transitive) contradicts: %s (%s)", applied.override.requirement, pair, where)
    return recorded
