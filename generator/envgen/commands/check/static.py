"""The static steps of `envgen check`: input hash, matrix pins, dependencies, indexes and the recipe
file.

All but static_steps are pure functions of a Lock and its Matrix."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet

import msgspec
import rattler
from packaging.markers import Marker
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envgen.commands.check.report import OK, SKIPPED, Step, step_of
from envgen.commands.lock.freshness import input_changes
from envgen.commits import is_full_commit
from envgen.digests import short_digest
from envgen.lockio.consistency import explained, violations
from envgen.lockio.exports.derived import derived_files, derived_problems
from envgen.model import Lock, Matrix, PipEntry, PipPackage
from envgen.names import package_key
from envgen.platforms import marker_environment
from envgen.project import Project
from envgen.redact import strip_credentials


def python_of(lock: Lock, matrix: Matrix, platform: str) -> str:
    """The python the pip part was resolved for: the lock's own, else (a lock without one) the
    matrix's."""
    return lock.python_for(platform) or matrix.python


def pip_by_name(lock: Lock, platform: str) -> dict[str, PipEntry]:
    return {package_key(e.name): e for e in lock.pip_for(platform)}


def version_in(specifier: str, version: str) -> bool:
    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _applies(marker: str | None, environment: dict[str, str]) -> bool:
    return marker is None or Marker(marker).evaluate(environment)


def pin_problems(matrix: Matrix, lock: Lock) -> list[str]:
    """Every matrix pin (pip packages, conda specs, sources) that the lock does not satisfy, per
    platform."""
    problems: list[str] = []
    if tuple(sorted(matrix.platforms)) != tuple(sorted(lock.platforms)):
        problems.append(
            f"platforms: the matrix has {', '.join(matrix.platforms)}, the lock "
            f"{', '.join(lock.platforms)}"
        )
    provided = {package_key(s.source.distribution) for s in lock.sources}
    for platform in lock.platforms:
        environment = marker_environment(platform, python_of(lock, matrix, platform))
        entries = pip_by_name(lock, platform)
        for package in _own_pins(matrix):
            problems += _package_problems(package, platform, environment, entries, provided, matrix)
        problems += _conda_problems(matrix, lock, platform)
    locked = {s.source.name: s for s in lock.sources}
    for source in matrix.sources:
        found = locked.get(source.name)
        # The file naming the source's URL (an extending file may change only its build variables).
        where = f"{matrix.file_of('sources', source.name, 'url')}: sources.{source.name}"
        if found is None:
            problems.append(f"{where}: not in the lock")
        # A lock records the URL without credentials; the matrix may give it with them.
        elif (strip_credentials(found.source.url), found.source.ref, found.source.cherry_picks) != (
            strip_credentials(source.url),
            source.ref,
            source.cherry_picks,
        ):
            problems.append(
                f"{where}: the lock has {strip_credentials(found.source.url)} {found.source.ref}"
            )
        elif is_full_commit(source.ref) and source.ref.lower() != found.commit:
            problems.append(f"{where}: pinned to {source.ref}, locked at {found.commit}")
    return problems


def _own_pins(matrix: Matrix) -> list[PipPackage]:
    """The matrix's packages, the pins an override replaces dropped: the dependencies step holds the
    lock to the override instead."""
    gone = {package_key(o.name) for o in matrix.overrides}
    own = []
    for package in matrix.packages:
        replaced = package_key(package.name) in gone
        own.append(msgspec.structs.replace(package, specifier="") if replaced else package)
    return own


def _package_problems(
    package: PipPackage,
    platform: str,
    environment: dict[str, str],
    entries: dict[str, PipEntry],
    provided: AbstractSet[str],
    matrix: Matrix,
) -> list[str]:
    name = package_key(package.name)
    if package.pending is not None or not _applies(package.marker, environment) or name in provided:
        return []
    where = str(matrix.origin("pip", "packages", package.name))
    entry = entries.get(name)
    if entry is None:
        return [f"{where}: not locked for {platform}"]
    problems = []
    if package.specifier and not version_in(package.specifier, entry.version):
        problems.append(f"{where}: wants {package.specifier}, {platform} has {entry.version}")
    if package.sha256 and package.sha256.lower() != entry.sha256:
        problems.append(
            f"{where}: sha256 {package.sha256} in the matrix, {entry.sha256} in the "
            f"lock ({platform})"
        )
    return problems


def _conda_problems(matrix: Matrix, lock: Lock, platform: str) -> list[str]:
    problems = []
    entries = {e.name: e for e in lock.conda_for(platform)}
    for text in matrix.conda_specs:
        spec = rattler.MatchSpec(text)
        name = spec.name.normalized
        entry = entries.get(name)
        where = f"{matrix.file_of('conda', 'specs')}: conda.specs {text!r}"
        if entry is None:
            problems.append(f"{where}: {name} is not locked for {platform}")
        elif spec.version and not rattler.VersionSpec(spec.version).matches(
            rattler.Version(entry.version)
        ):
            problems.append(f"{where}: {platform} has {name} {entry.version}")
        elif spec.build and not fnmatch.fnmatchcase(entry.build, spec.build):
            problems.append(f"{where}: {platform} has {name} build {entry.build}")
    return problems


def dependencies_step(lock: Lock, python: Callable[[str], str]) -> Step:
    """Every locked package's, source's and override's requirements met by the lock, per platform.

    The only contradictions allowed are those a transitive override records (`violates`): shown, not
    failed.
    """
    found = violations(lock, python)
    problems = [str(v) for v in found if not explained(lock, v)]
    if problems:
        return step_of("static: dependencies", problems)
    recorded = [
        f"override {o.override.requirement} (transitive): {p}"
        for o in lock.overrides
        for p in o.violates
    ]
    detail = (
        f"{len(recorded)} contradiction(s) recorded by transitive overrides" if recorded else ""
    )
    return Step("static: dependencies", OK, detail, tuple(recorded))


def index_problems(matrix: Matrix, lock: Lock) -> list[str]:
    """Packages from an index they may not come from: explicit indexes serve only the packages
    naming them."""
    explicit = {i.name for i in lock.indexes if i.explicit}
    packages = {package_key(p.name): p for p in matrix.packages}
    problems = []
    for entry in lock.pip:
        package = packages.get(package_key(entry.name))
        wanted = package.index_for(entry.platform) if package else None
        came = entry.index or "a direct URL"
        if wanted and entry.index != wanted and not (package and package.url):
            problems.append(
                f"{entry.name} {entry.version} ({entry.platform}) must come from "
                f"{wanted}, came from {came}"
            )
        elif entry.index in explicit and entry.index != wanted:
            problems.append(
                f"{entry.name} {entry.version} ({entry.platform}) came from the "
                f"explicit index {entry.index}, "
                "which serves only the packages that name it"
            )
    return problems


def import_check_problems(matrix: Matrix, lock: Lock) -> list[str]:
    """An import check expecting a version the lock does not have: a pin moved and its check did
    not, which the throwaway env would only find after an install."""
    problems = []
    for check in matrix.checks:
        if check.version is None or check.distribution is None:
            continue
        expected = Version(check.version)
        for platform in lock.platforms:
            entry = pip_by_name(lock, platform).get(package_key(check.distribution))
            if entry is None:
                continue
            locked = Version(entry.version)
            if locked != expected and (
                expected.local is not None or locked.public != expected.public
            ):
                problems.append(
                    f"{platform}: import {check.module} expects {check.distribution} "
                    f"{check.version}, the lock has "
                    f"{entry.version}: set its version in [[checks.imports]] of "
                    f"{matrix.file_of('checks', 'imports')} (or the pin back)"
                )
    return problems


# --- static checks (effects: files)
# ----------------------------------------------------------------------


def freshness_step(project: Project, lock: Lock, matrix: Matrix, *, frozen: bool) -> Step:
    """Whether the lock's inputs changed since it was written (commands/lock/freshness.py); with
    `frozen` not asked: the lock is checked as it is."""
    name = "static: input hash"
    if frozen:
        return Step(name, SKIPPED, "--frozen: the lock as it is, its inputs not compared")
    fix = f"re-lock with `envgen lock {lock.env}`, or check the lock as it is with --frozen"
    changed = input_changes(project, matrix, lock)
    return step_of(name, [f"{r}: {fix}" for r in changed], short_digest(lock.input_hash))


def static_steps(
    project: Project, lock: Lock, matrix: Matrix, integrity: Sequence[str], *, frozen: bool = False
) -> list[Step]:
    """Input hash (unless `frozen`), pins, dependencies, indexes, the derived files (with `frozen`
    their comments aside: they name the matrix's keys), and the integrity of the three lock files
    (`integrity`: their problems, lockio/integrity.py)."""
    derived = derived_problems(project.locks_dir, lock, matrix, as_read=frozen)
    steps = [
        freshness_step(project, lock, matrix, frozen=frozen),
        step_of(
            "static: matrix pins", pin_problems(matrix, lock), f"{len(lock.platforms)} platforms"
        ),
        step_of(
            "static: import checks",
            import_check_problems(matrix, lock),
            f"{len(matrix.checks)} imports",
        ),
        dependencies_step(lock, lambda p: python_of(lock, matrix, p)),
        step_of("static: indexes", index_problems(matrix, lock)),
        step_of(
            "static: derived files",
            [f"{p}: re-lock with `envgen lock {lock.env} --force`" for p in derived],
            f"{len(derived_files(lock, matrix))} files",
        ),
    ]
    files = f"{project.lock_yml(lock.env).name}, .sources.toml, .install.sh"
    fix = (
        f"restore locks/ (git checkout -- locks/) or re-lock with `envgen lock {lock.env} --force`"
    )
    steps.append(step_of("static: integrity", [f"{p}: {fix}" for p in integrity], files))
    return steps
