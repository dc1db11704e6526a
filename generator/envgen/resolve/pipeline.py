"""The re-lock core: a matrix, its previous lock and the settings in; the Lock, its recipe, its
derived files and what moved out. Git sources first, then per platform conda and pip, assembled
and checked for consistency. Every effect goes through the resolvers (resolve/resolvers.py); the
command (commands/lock/command.py) reads the previous lock and writes what this returns."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

from envgen.errors import ResolutionError
from envgen.lockio.consistency import record, violations
from envgen.lockio.exports.derived import derived_files
from envgen.lockio.input_hashes import input_hash, lock_inputs
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
from envgen.recipe.render import render_recipe
from envgen.resolve.conda.stage import CondaSolve, admits, python_version
from envgen.resolve.moves import (
    SOLVER,
    Move,
    explain_conda,
    explain_pip,
    explain_sources,
    unavailable,
)
from envgen.resolve.preferences import kept
from envgen.resolve.pypi.stage import PypiLock, lock_pypi
from envgen.resolve.request import Relock
from envgen.resolve.resolvers import Resolvers
from envgen.resolve.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlatformLock:
    """What the conda and pip stages resolved for one platform, and what moved against the previous
    lock."""

    conda: tuple[CondaEntry, ...]
    pip: tuple[PipEntry, ...]
    overrides: tuple[AppliedOverride, ...]
    moves: tuple[Move, ...] = ()


@dataclass(frozen=True)
class Relocked:
    """What a re-lock gives to write: the Lock, its recipe, its derived files (name, text), and what
    moved against the previous lock and why (sources, then each platform's packages)."""

    lock: Lock
    recipe: str
    derived: tuple[tuple[str, str], ...]
    moves: tuple[Move, ...]


def relock(request: Relock, settings: Settings, resolvers: Resolvers) -> Relocked:
    """Resolve everything for the matrix of `request`.

    The previous lock gives the source commits to keep unless they move, and the versions the
    resolvers prefer unless upgraded. Raises (and so writes nothing) when a stage fails or the
    resolved set contradicts itself.
    """
    matrix, previous, upgrade = request.matrix, request.previous, request.upgrade
    # The conda part needs nothing of the sources: each platform is solved while they are pinned.
    pool = ThreadPoolExecutor(max_workers=len(matrix.platforms))
    try:
        solving = {
            p: pool.submit(resolvers.conda.solve, matrix, p, kept(conda_of(previous, p), upgrade))
            for p in (matrix.platforms if matrix.has_conda else ())
        }
        sources = resolvers.sources.pin(matrix, request.kept, request.moving)
        archives = lock_archives(request, resolvers)
        platforms = lock_platforms(request, sources, solving, settings, resolvers, archives)
    finally:
        # a source that failed does not wait for the solves
        pool.shutdown(wait=False, cancel_futures=True)
    inputs = lock_inputs(request.files, matrix, sources)
    lock = consistent(assemble_lock(matrix, sources, platforms, inputs, archives), matrix)
    derived = tuple((file.name, file.text) for file in derived_files(lock, matrix))
    moved = explain_sources(previous.sources, sources, request.moving, upgrade) if previous else []
    moved += [m for p in matrix.platforms for m in platforms[p].moves]
    return Relocked(lock, render_recipe(lock), derived, tuple(moved))


def lock_archives(request: Relock, resolvers: Resolvers) -> tuple[LockedArchive, ...]:
    """The matrix's release archives, each keeping the sha256 the previous lock records for its
    URL unless every source moves."""
    if not request.matrix.archives:
        return ()
    assert resolvers.archives is not None, "a matrix with archives needs an archive resolver"
    previous = request.previous
    recorded = () if previous is None or request.moving.everything else previous.archives
    return resolvers.archives.lock(request.matrix, recorded)


def conda_of(previous: Lock | None, platform: str) -> tuple[CondaEntry, ...]:
    return previous.conda_for(platform) if previous else ()


def lock_platforms(
    request: Relock,
    sources: Sequence[LockedSource],
    solving: Mapping[str, Future[CondaSolve]],
    settings: Settings,
    resolvers: Resolvers,
    archives: Sequence[LockedArchive] = (),
) -> dict[str, PlatformLock]:
    """Per platform, concurrently: the conda solve `solving` it (it decides the exact python), then
    pip for that python (the matrix's major.minor one without a conda part). Each stage prefers the
    previous lock's entries of the platform, except those the upgrade covers."""
    matrix = request.matrix

    def one(platform: str) -> PlatformLock:
        solved, python = CondaSolve(()), matrix.python
        if matrix.has_conda:
            solved = solving[platform].result()
            python = python_version(solved.entries)
            count = len(solved.entries)
            log.info(
                "%s %s: conda solved, %d packages, python %s", matrix.name, platform, count, python
            )
        before = request.previous.pip_for(platform) if request.previous else ()
        pypi = lock_pypi(
            matrix,
            platform,
            python,
            sources,
            settings,
            preferred=kept(before, request.upgrade),
            runner=resolvers.uv,
            reader=resolvers.indexes,
            archives=archives,
        )
        log.info("%s %s: pip resolved, %d packages", matrix.name, platform, len(pypi.entries))
        moves = platform_moves(request, platform, solved, pypi, settings, resolvers)
        return PlatformLock(solved.entries, pypi.entries, pypi.overrides, tuple(moves))

    with ThreadPoolExecutor(max_workers=len(matrix.platforms)) as pool:
        return dict(zip(matrix.platforms, pool.map(one, matrix.platforms), strict=True))


def platform_moves(
    request: Relock,
    platform: str,
    solved: CondaSolve,
    pypi: PypiLock,
    settings: Settings,
    resolvers: Resolvers,
) -> list[Move]:
    """What moved on `platform` against the previous lock, and why (nothing without one)."""
    previous, matrix, upgrade = request.previous, request.matrix, request.upgrade
    if previous is None:
        return []
    gone = [e.name for e in solved.unavailable]
    before = previous.conda_for(platform)
    specs, after = matrix.conda_specs, solved.entries
    moves = explain_conda(platform, before, after, specs, upgrade, admits, gone)
    return moves + pip_moves(request, platform, pypi, settings, resolvers)


def pip_moves(
    request: Relock,
    platform: str,
    pypi: PypiLock,
    settings: Settings,
    resolvers: Resolvers,
) -> list[Move]:
    """What moved on the pip side of `platform`; a version gone from its index is warned about."""
    assert request.previous is not None
    before = request.previous.pip_for(platform)
    moves = explain_pip(platform, before, pypi.entries, pypi.requirements, request.upgrade)
    unexplained = {m.name for m in unavailable(moves)}
    if unexplained and not settings.offline:
        asked = [e for e in before if e.name in unexplained]
        offered = resolvers.indexes.offered(asked, settings.accesses(request.matrix.indexes))
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
    if matrix.cann is not None and matrix.cann.pending:
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
        python="" if matrix.has_conda else matrix.python,
    )


def consistent(lock: Lock, matrix: Matrix) -> Lock:
    """`lock` with what its transitive overrides contradict recorded (and told once per pair); any
    other contradiction between locked packages is a failed resolution."""
    found = violations(lock, lambda platform: lock.python_for(platform) or matrix.python)
    recorded, others = record(lock, found)
    if others:
        listed = "".join(f"\n  {v}" for v in others)
        raise ResolutionError(
            f"{matrix.name}: the resolved set does not meet its own requirements:{listed}",
            hint="an index may serve metadata that disagrees with its files; to accept a "
            "contradiction on "
            f"purpose, add an override with `transitive = true` and its reason to {matrix.path}",
        )
    for applied in recorded.overrides:
        for pair in applied.violates:
            where = ", ".join(sorted({v.platform for v in found if v.pair == pair}))
            log.warning(
                "override %s (transitive) contradicts: %s (%s)",
                applied.override.requirement,
                pair,
                where,
            )
    return recorded
