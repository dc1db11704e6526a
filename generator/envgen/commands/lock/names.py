"""The names `--update` and `--upgrade-package` give, checked before any work: each must be a
source (or, for an upgrade, a package) of one of the envs locked, in its matrix or recorded lock."""

from __future__ import annotations

from collections.abc import Mapping

from envgen.errors import InputError
from envgen.inputs.toml_reader import did_you_mean
from envgen.lockio.store import LockTexts, recorded_inputs
from envgen.names import package_key
from envgen.project import Project
from envgen.resolve.movable import Movable


def known_sources(project: Project, files: Mapping[str, LockTexts]) -> set[str]:
    """The source names of the envs whose lock files are `files`: in their matrices and their
    recorded locks."""
    from envgen.inputs.matrix import load_env

    known: set[str] = set()
    for env, texts in files.items():
        known |= {s.name for s in load_env(project, env).sources}
        recorded = recorded_inputs(texts)
        known |= set(recorded.sources) if recorded else set()
    return known


def check_update_names(
    project: Project,
    files: Mapping[str, LockTexts],
    update: Movable,
) -> None:
    """InputError for a name in `update` that no env has as a source, rather than a lock that moves
    nothing."""
    envs = ", ".join(files)
    known = known_sources(project, files)
    unknown = update.unknown(known)
    if unknown:
        names = ", ".join(sorted(known)) or "none"
        raise InputError(
            f"--update {unknown[0]}: no source of that name in {envs} (matrix or recorded lock)"
            f"{did_you_mean(unknown[0], known)}",
            hint=f"name one of the sources: {names}; or use --update-all",
            key="--update",
        )


def check_upgrade_names(
    project: Project,
    files: Mapping[str, LockTexts],
    upgrade: Movable,
) -> None:
    """InputError for an `--upgrade-package` name that is no package or source of any env, before
    any work."""
    from envgen.inputs.matrix import load_env

    envs = ", ".join(files)
    known = {package_key(n) for n in known_sources(project, files)}
    for env, texts in files.items():
        matrix = load_env(project, env)
        known |= {package_key(p.name) for p in matrix.packages}
        known |= {package_key(spec.split()[0]) for spec in matrix.conda_specs if spec.split()}
        known |= {package_key(n) for n in _locked_names(texts)}
    unknown = upgrade.unknown(known)
    if unknown:
        what = "a package the lock pins, a matrix package or a source"
        raise InputError(
            f"--upgrade-package {unknown[0]}: no package or source of that name in {envs} "
            f"(matrix or recorded lock){did_you_mean(unknown[0], known)}",
            hint=f"name {what}; or use --upgrade for everything",
            key="--upgrade-package",
            package=unknown[0],
        )


def _locked_names(texts: LockTexts) -> set[str]:
    """The names of the packages a lock pins (any platform, conda or pip); none when it does not
    read (the re-lock reports why)."""
    from envgen.lockio.store import lock_of

    try:
        lock = lock_of(texts)
    except InputError:
        return set()
    if lock is None:
        return set()
    return {e.name for e in lock.conda} | {e.name for e in lock.pip}
