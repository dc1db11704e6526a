"""`envgen check`: static checks of a lock, a re-solve, then a throwaway install with smoke imports;
always cleaned."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from envgen.commands.check.from_bundle import check_from_bundle
from envgen.commands.check.options import CheckOptions
from envgen.commands.check.report import FAILED, OK, SKIPPED, CheckReport, Step, step_of
from envgen.commands.check.static import pip_by_name, python_of, static_steps
from envgen.commands.check.throwaway import throwaway_steps
from envgen.digests import short_digest
from envgen.errors import ConflictError, EnvgenError, NetworkError
from envgen.inputs.credentials import lock_credentials
from envgen.inputs.matrix import load_env
from envgen.installer.sources import IndexSource
from envgen.installer.tools import installer_named
from envgen.lockio.integrity import checked_lock
from envgen.lockio.store import no_lock
from envgen.model import Lock, Matrix, PipPackage
from envgen.names import package_key
from envgen.platforms import host_platform
from envgen.project import Project
from envgen.resolve.conda.stage import solve_conda_preferring
from envgen.resolve.pypi.stage import PypiLock, lock_pypi
from envgen.resolve.resolvers import Resolvers
from envgen.resolve.settings import Settings

log = logging.getLogger(__name__)
_T = TypeVar("_T")


def pinned_matrix(matrix: Matrix, lock: Lock, platform: str) -> Matrix:
    """The matrix with every pip package pinned to what the lock has for `platform` (pure)."""
    entries = pip_by_name(lock, platform)
    packages = []
    named = set()
    for package in matrix.packages:
        name = package_key(package.name)
        named.add(name)
        entry = entries.get(name)
        if entry is not None and package.url is None and package.pending is None:
            package = msgspec.structs.replace(package, specifier=f"=={entry.version}")
        packages.append(package)
    packages += [
        PipPackage(e.name, f"=={e.version}")
        for key, e in sorted(entries.items())
        if key not in named
    ]
    return msgspec.structs.replace(matrix, packages=tuple(packages))


def solve_step(matrix: Matrix, lock: Lock, settings: Settings) -> Step:
    """Resolve again with every package pinned to its locked version, in `settings`: the same files
    must come out."""
    problems: list[str] = []
    # one line per host: its failure -> the platforms it failed
    unreachable: dict[str, list[str]] = {}
    conflicts: list[dict[str, object]] = []  # the direct layer's, where no resolution was found
    resolvers = Resolvers.real(settings)
    for platform in lock.platforms:
        pip_again = functools.partial(_pip_again, matrix, lock, platform, settings, resolvers)
        again = _again(platform, problems, unreachable, pip_again, conflicts)
        if again is None:
            continue
        before = {(package_key(e.name), e.version, e.sha256) for e in lock.pip_for(platform)}
        after = {(package_key(e.name), e.version, e.sha256) for e in again.entries}
        problems += [
            f"{platform}: the lock has {n} {v} ({short_digest(s)}), not resolved now"
            for n, v, s in sorted(before - after)
        ]
        problems += [
            f"{platform}: resolved now {n} {v} ({short_digest(s)}), not in the lock"
            for n, v, s in sorted(after - before)
        ]
    entries = f"{len(lock.pip)} entries"
    step = _solve_verdict("solve: same pip set", problems, unreachable, entries, lock)
    return dataclasses.replace(step, conflicts=tuple(conflicts))


def _pip_again(
    matrix: Matrix, lock: Lock, platform: str, settings: Settings, resolvers: Resolvers
) -> PypiLock:
    pinned = pinned_matrix(matrix, lock, platform)
    python = python_of(lock, matrix, platform)
    yml = f"locks/{lock.env}.yml"
    # The archives' wheels as locked: their requirements are resolved again too.
    return lock_pypi(
        pinned,
        platform,
        python,
        lock.sources,
        settings,
        runner=resolvers.uv,
        reader=resolvers.indexes,
        pinned_from=yml,
        archives=lock.archives,
    )


def _again(
    platform: str,
    problems: list[str],
    unreachable: dict[str, list[str]],
    solve: Callable[[], _T],
    conflicts: list[dict[str, object]] | None = None,
) -> _T | None:
    """`solve()` for `platform`, or None with its failure recorded: a network failure once per host,
    naming every platform that failed on it; any other as a problem of the platform (a conflict's
    data also in `conflicts`)."""
    try:
        return solve()
    except NetworkError as exc:
        # The same hosts failing alike on several platforms: one failure, without the platform.
        unreachable.setdefault(exc.failure, []).append(platform)
    except EnvgenError as exc:
        problems.append(f"{platform}: {exc.message}")
        if isinstance(exc, ConflictError) and conflicts is not None:
            conflicts += exc.conflicts
    return None


def _solve_verdict(
    name: str, problems: list[str], unreachable: dict[str, list[str]], entries: str, lock: Lock
) -> Step:
    hosts = [f"{failure} ({', '.join(platforms)})" for failure, platforms in unreachable.items()]
    if hosts and not problems:
        # Not a verdict on the lock: the step fails as unreachable and check exits 3, not 4.
        return Step(
            name, FAILED, "an index or channel could not be reached", tuple(hosts), unreachable=True
        )
    return step_of(name, problems + hosts, f"{entries} on {len(lock.platforms)} platforms")


def conda_solve_step(matrix: Matrix, lock: Lock, settings: Settings) -> Step:
    """Solve the conda part again, preferring every locked file: each must still be a file the
    channels serve (matched by its sha256, so a changed hash shows even where the env step installs
    no conda package: --venv, --no-env), and the same set must come out. Skipped for a lock
    without a conda part."""
    if not lock.has_conda:
        return Step("solve: same conda set", SKIPPED, "the env has no conda part (no [conda])")
    problems: list[str] = []
    # one line per host: its failure -> the platforms it failed
    unreachable: dict[str, list[str]] = {}
    for platform in lock.platforms:
        locked = lock.conda_for(platform)
        solve = functools.partial(solve_conda_preferring, matrix, platform, locked, settings)
        again = _again(platform, problems, unreachable, solve)
        if again is None:
            continue
        problems += [
            f"{platform}: the channels serve no file with the locked sha256 of "
            f"{e.name} {e.version} {e.build} "
            f"({short_digest(e.sha256)})"
            for e in again.unavailable
        ]
        before = {(e.name, e.version, e.build, e.sha256) for e in locked}
        after = {(e.name, e.version, e.build, e.sha256) for e in again.entries}
        problems += [
            f"{platform}: the lock has {n} {v} {b} ({short_digest(s)}), not solved now"
            for n, v, b, s in sorted(before - after)
        ]
        problems += [
            f"{platform}: solved now {n} {v} {b} ({short_digest(s)}), not in the lock"
            for n, v, b, s in sorted(after - before)
        ]
    return _solve_verdict(
        "solve: same conda set", problems, unreachable, f"{len(lock.conda)} entries", lock
    )


def _load(project: Project, env: str) -> tuple[Lock, Matrix, tuple[str, ...]] | Step:
    """The lock of `env`, its matrix and the lock's integrity problems, or the failed step when the
    lock cannot be read (the verdict of check). No lock at all or a malformed matrix is bad input
    (exit 2): there is nothing to verify."""
    try:
        checked = checked_lock(project, env)
    except EnvgenError as exc:
        return Step("static: lock parses", FAILED, exc.message)
    if checked is None:
        raise no_lock(project, env)
    if checked.lock is None:
        return Step("static: lock parses", FAILED, "; ".join(checked.problems))
    # Named by the env asked for: an env read from the file (another, when edited) is an
    # integrity problem, never the name of a message, file or hint.
    return msgspec.structs.replace(checked.lock, env=env), load_env(project, env), checked.problems


def _static_and_solve(
    project: Project,
    lock: Lock,
    matrix: Matrix,
    integrity: tuple[str, ...],
    *,
    solve: bool,
    cache: Path,
    frozen: bool,
) -> list[Step]:
    """The static steps, then the re-solve (skipped when a static step failed, or with
    --no-solve)."""
    log.info("check %s: static checks", lock.env)
    counts = f"{len(lock.conda)} conda, {len(lock.pip)} pip, {len(lock.sources)} sources"
    steps = [
        Step("static: lock parses", OK, counts),
        *static_steps(project, lock, matrix, integrity, frozen=frozen),
    ]
    names = ("solve: same pip set", "solve: same conda set")
    if any(s.status == FAILED for s in steps):
        return [*steps, *(Step(name, SKIPPED, "static checks failed") for name in names)]
    if not solve:
        return [*steps, *(Step(name, SKIPPED, "--no-solve") for name in names)]
    # What the re-solve takes from the process, read once for every platform and both parts.
    settings = Settings.read(os.environ, cache=cache)
    log.info("check %s: resolving the pip set again with every version pinned", lock.env)
    steps.append(solve_step(matrix, lock, settings))
    log.info("check %s: solving the conda part again, preferring every locked file", lock.env)
    return [*steps, conda_solve_step(matrix, lock, settings)]


def _env_steps(
    project: Project, lock: Lock, matrix: Matrix, options: CheckOptions, settings: Settings
) -> tuple[list[Step], str | None]:
    """The throwaway env of this host's part of `lock`, installed from its channels and indexes
    with the lock's credentials, in `settings`."""
    credentials = lock_credentials(lock, project.channels_dir, matrix, settings.variables)
    source = IndexSource(project, credentials, settings=settings)
    return throwaway_steps(
        lock,
        source,
        installer_named(options.installer, settings),
        options,
        platform=host_platform(),
        settings=settings,
        npu=matrix.npu,
    )


def check_env(project: Project, env: str, options: CheckOptions) -> CheckReport:
    """Check the lock of `env` as `options` ask: static steps, a re-solve, a throwaway install on
    this host. Raises only for bad input (no lock, a malformed matrix), bugs and interrupts (the
    throwaway env is removed even then). A stale lock fails its static step, and the rest is
    skipped, unless `options.frozen` (checked as it is). The env's pip part comes from the lock's
    derived file (requirements.txt with pip, the pylock with uv), with the lock's credentials; with
    `options.bundle`, from that bundle with no network, trusted through the project's lock or
    `options.lock_sha256` (bundle_trust.py)."""
    platform = host_platform()
    cache, require_env = options.cache, options.require_env
    # What the throwaway env's tools run in: the process's variables as each starts (its scratch
    # TMPDIR), within the limits read once here.
    tools = Settings.live(os.environ, cache=cache)
    if options.bundle is not None:
        return check_from_bundle(project, env, options.bundle, options, tools)
    loaded = _load(project, env)
    if isinstance(loaded, Step):
        return CheckReport(env, platform, (loaded,), None, require_env=require_env)
    lock, matrix, integrity = loaded
    steps = _static_and_solve(
        project,
        lock,
        matrix,
        integrity,
        solve=options.solve,
        cache=cache,
        frozen=options.frozen,
    )
    kept = None
    if any(s.status == FAILED for s in steps if s.name.startswith("static")):
        steps.append(Step("env: install", SKIPPED, "static checks failed"))
    elif not options.throwaway or platform not in lock.platforms:
        why = "--no-env" if not options.throwaway else f"the lock has no {platform} part"
        steps.append(Step("env: install", SKIPPED, why))
    else:
        env_steps, kept = _env_steps(project, lock, matrix, options, tools)
        steps += env_steps
    return CheckReport(env, platform, tuple(steps), kept, require_env=require_env)
