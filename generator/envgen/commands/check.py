"""`envgen check`: static checks of a lock, a re-solve, then a throwaway install with smoke imports; always cleaned."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from packaging.utils import canonicalize_name

from envgen.commands.check_report import FAILED, OK, SKIPPED, CheckReport, Step, step_of
from envgen.commands.check_static import pip_by_name, python_of, static_steps
from envgen.commands.check_throwaway import EnvInstaller, throwaway_steps
from envgen.commands.install_bundle import check_from_bundle
from envgen.errors import ConflictError, EnvgenError, NetworkError
from envgen.inputs.credentials import lock_credentials
from envgen.inputs.matrix import load_env
from envgen.installer import Installer, install_env
from envgen.lockio.exports.names import pylock_name, requirements_name
from envgen.lockio.integrity import checked_lock
from envgen.lockio.store import no_lock
from envgen.model import Lock, Matrix, PipPackage
from envgen.platforms import host_platform
from envgen.project import Project
from envgen.resolve.conda_stage import solve_conda_preferring
from envgen.resolve.pip_stage import PypiLock, lock_pypi
from envgen.resolve.settings import Settings

log = logging.getLogger(__name__)
_T = TypeVar("_T")


def pinned_matrix(matrix: Matrix, lock: Lock, platform: str) -> Matrix:
    """The matrix with every pip package pinned to what the lock has for `platform` (pure)."""
    entries = pip_by_name(lock, platform)
    packages = []
    named = set()
    for package in matrix.packages:
        name = canonicalize_name(package.name)
        named.add(name)
        entry = entries.get(name)
        if entry is not None and package.url is None and package.pending is None:
            package = dataclasses.replace(package, specifier=f"=={entry.version}")
        packages.append(package)
    packages += [PipPackage(e.name, f"=={e.version}") for key, e in sorted(entries.items()) if key not in named]
    return dataclasses.replace(matrix, packages=tuple(packages))


def solve_step(matrix: Matrix, lock: Lock, *, cache: Path) -> Step:
    """Resolve again with every package pinned to its locked version: the same files must come out."""
    problems: list[str] = []
    unreachable: dict[str, list[str]] = {}  # one line per host: its failure -> the platforms it failed
    conflicts: list[dict[str, object]] = []  # the direct layer's, where no resolution was found
    for platform in lock.platforms:
        pip_again = functools.partial(_pip_again, matrix, lock, platform, cache)
        again = _again(platform, problems, unreachable, pip_again, conflicts)
        if again is None:
            continue
        before = {(canonicalize_name(e.name), e.version, e.sha256) for e in lock.pip_for(platform)}
        after = {(canonicalize_name(e.name), e.version, e.sha256) for e in again.entries}
        problems += [
            f"{platform}: the lock has {n} {v} ({s[:12]}), not resolved now" for n, v, s in sorted(before - after)
        ]
        problems += [
            f"{platform}: resolved now {n} {v} ({s[:12]}), not in the lock" for n, v, s in sorted(after - before)
        ]
    entries = f"{len(lock.pip)} entries"
    step = _solve_verdict("solve: same pip set", problems, unreachable, entries, lock)
    return dataclasses.replace(step, conflicts=tuple(conflicts))


def _pip_again(matrix: Matrix, lock: Lock, platform: str, cache: Path) -> PypiLock:
    pinned = pinned_matrix(matrix, lock, platform)
    python = python_of(lock, matrix, platform)
    yml = f"locks/{lock.env}.yml"
    settings = Settings.read(os.environ, cache=cache)
    # The archives' wheels as locked: their requirements are resolved again too.
    return lock_pypi(
        pinned,
        platform,
        python,
        lock.sources,
        settings,
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
    """`solve()` for `platform`, or None with its failure recorded: a network failure once per host, naming every
    platform that failed on it; any other as a problem of the platform (a conflict's data also in
    `conflicts`)."""
    try:
        return solve()
    except NetworkError as exc:
        failure = exc.message.splitlines()[0].replace(f" while locking {platform}", "").replace(f" for {platform}", "")
        unreachable.setdefault(failure, []).append(platform)
    except EnvgenError as exc:
        problems.append(f"{platform}: {exc.message}")
        if isinstance(exc, ConflictError) and conflicts is not None:
            conflicts += exc.conflicts
    return None


def _solve_verdict(name: str, problems: list[str], unreachable: dict[str, list[str]], entries: str, lock: Lock) -> Step:
    hosts = [f"{failure} ({', '.join(platforms)})" for failure, platforms in unreachable.items()]
    if hosts and not problems:
        # Not a verdict on the lock: the step fails as unreachable and check exits 3, not 4.
        return Step(name, FAILED, "an index or channel could not be reached", tuple(hosts), unreachable=True)
    return step_of(name, problems + hosts, f"{entries} on {len(lock.platforms)} platforms")


def conda_solve_step(matrix: Matrix, lock: Lock, *, cache: Path) -> Step:
    """Solve the conda part again, preferring every locked file: each must still be a file the channels serve
    (matched by its sha256, so a changed hash shows even where the env step installs no conda package: --venv,
    --no-env), and the same set must come out."""
    problems: list[str] = []
    unreachable: dict[str, list[str]] = {}  # one line per host: its failure -> the platforms it failed
    for platform in lock.platforms:
        locked = lock.conda_for(platform)
        settings = Settings.read(os.environ, cache=cache)
        solve = functools.partial(solve_conda_preferring, matrix, platform, locked, settings)
        again = _again(platform, problems, unreachable, solve)
        if again is None:
            continue
        problems += [
            f"{platform}: the channels serve no file with the locked sha256 of {e.name} {e.version} {e.build} "
            f"({e.sha256[:12]})"
            for e in again.unavailable
        ]
        before = {(e.name, e.version, e.build, e.sha256) for e in locked}
        after = {(e.name, e.version, e.build, e.sha256) for e in again.entries}
        problems += [
            f"{platform}: the lock has {n} {v} {b} ({s[:12]}), not solved now" for n, v, b, s in sorted(before - after)
        ]
        problems += [
            f"{platform}: solved now {n} {v} {b} ({s[:12]}), not in the lock" for n, v, b, s in sorted(after - before)
        ]
    return _solve_verdict("solve: same conda set", problems, unreachable, f"{len(lock.conda)} entries", lock)


def _load(project: Project, env: str) -> tuple[Lock, Matrix, tuple[str, ...]] | Step:
    """The lock of `env`, its matrix and the lock's integrity problems, or the failed step when the lock cannot
    be read (the verdict of check). No lock at all or a malformed matrix is bad input (exit 2): there is nothing
    to verify."""
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
    return dataclasses.replace(checked.lock, env=env), load_env(project, env), checked.problems


def _static_and_solve(
    project: Project, lock: Lock, matrix: Matrix, integrity: tuple[str, ...], *, solve: bool, cache: Path
) -> list[Step]:
    """The static steps, then the re-solve (skipped when a static step failed, or with --no-solve)."""
    log.info("check %s: static checks", lock.env)
    counts = f"{len(lock.conda)} conda, {len(lock.pip)} pip, {len(lock.sources)} sources"
    steps = [Step("static: lock parses", OK, counts), *static_steps(project, lock, matrix, integrity)]
    names = ("solve: same pip set", "solve: same conda set")
    if any(s.status == FAILED for s in steps):
        return [*steps, *(Step(name, SKIPPED, "static checks failed") for name in names)]
    if not solve:
        return [*steps, *(Step(name, SKIPPED, "--no-solve") for name in names)]
    log.info("check %s: resolving the pip set again with every version pinned", lock.env)
    steps.append(solve_step(matrix, lock, cache=cache))
    log.info("check %s: solving the conda part again, preferring every locked file", lock.env)
    return [*steps, conda_solve_step(matrix, lock, cache=cache)]


def check_env(
    project: Project,
    env: str,
    *,
    cache: Path,
    venv: bool = False,
    require_npu: bool = False,
    keep: bool = False,
    solve: bool = True,
    throwaway: bool = True,
    require_env: bool = False,
    install: EnvInstaller = install_env,
    installer: Installer = "pip",
    bundle: Path | None = None,
    lock_sha256: str | None = None,
) -> CheckReport:
    """Check the lock of `env`: static steps, a re-solve, a throwaway install on this host. Raises
    only for bad input (no lock, a malformed matrix), bugs and interrupts (the throwaway env is
    removed even then). The env's pip part comes from the lock's derived file (requirements.txt
    with pip, the pylock with uv), with the lock's credentials; with `bundle`, from that bundle
    with no network, trusted through the project's lock or `lock_sha256` (bundle_trust.py)."""
    if bundle is not None:
        bundled = functools.partial(check_from_bundle, project, env, bundle, cache=cache)
        return bundled(venv=venv, require_npu=require_npu, keep=keep, lock_sha256=lock_sha256)
    platform = host_platform()
    steps: list[Step] = []

    def report(kept: str | None = None) -> CheckReport:
        return CheckReport(env, platform, tuple(steps), kept, require_env=require_env)

    loaded = _load(project, env)
    if isinstance(loaded, Step):
        steps.append(loaded)
        return report()
    lock, matrix, integrity = loaded
    steps += _static_and_solve(project, lock, matrix, integrity, solve=solve, cache=cache)
    if any(s.status == FAILED for s in steps if s.name.startswith("static")):
        steps.append(Step("env: install", SKIPPED, "static checks failed"))
        return report()
    if not throwaway or platform not in lock.platforms:
        steps.append(Step("env: install", SKIPPED, "--no-env" if not throwaway else f"the lock has no {platform} part"))
        return report()
    derived = requirements_name(env, platform) if installer == "pip" else pylock_name(env, platform)
    credentials = lock_credentials(lock, project.channels_dir, matrix, os.environ)
    env_steps, kept = throwaway_steps(
        lock,
        project.install_sh(env),
        platform=platform,
        venv=venv,
        cache=cache,
        require_npu=require_npu,
        keep=keep,
        install=functools.partial(install, credentials=credentials),
        npu=matrix.npu,
        installer=installer,
        requirements=project.locks_dir / derived,
    )
    steps += env_steps
    return report(kept)
