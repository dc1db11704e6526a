"""PyPI resolution for one platform: matrix pins + source requirements -> uv -> one pinned artifact
each."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508

from envgen import platforms
from envgen.errors import ConflictError, InputError, VerificationError
from envgen.inputs.channels import IndexAccess, expand_url
from envgen.model import (
    AppliedOverride,
    LockedArchive,
    LockedSource,
    Matrix,
    Origin,
    PipEntry,
    TracedRequirement,
)
from envgen.names import package_key, vcs_of
from envgen.redact import redact_url, strip_credentials
from envgen.resolve.pypi import overrides, uv_pylock
from envgen.resolve.pypi.offered import Offers
from envgen.resolve.pypi.uv_compile import (
    Inputs,
    UvJob,
    UvRunner,
    plan_uv_compile,
    run_uv_compile,
)
from envgen.resolve.settings import Settings
from envgen.urls import index_of, url_host

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PypiLock:
    """The pip side of one platform: entries sorted by name, the overrides as applied, the
    requirements given uv."""

    entries: tuple[PipEntry, ...]
    overrides: tuple[AppliedOverride, ...] = ()
    requirements: tuple[TracedRequirement, ...] = ()


def _parse(text: str, origin: Origin) -> Pep508:
    try:
        return Pep508(text)
    except InvalidRequirement as exc:
        raise origin.error(f"{text!r} is not a PEP 508 requirement: {exc}") from exc


def _excluded(
    matrix: Matrix, platform: str, sources: Sequence[LockedSource], mine: Sequence[LockedArchive]
) -> set[str]:
    """The names no index resolves on `platform`: what a source provides, a pending package, an
    archive's wheels, and what the matrix leaves out."""
    provided = {package_key(s.distribution) for s in matrix.sources}
    provided |= {package_key(ls.source.distribution) for ls in sources}
    provided |= {package_key(m.name) for a in mine for m in a.members}
    pending = {package_key(p.name) for p in matrix.packages if p.pending is not None}
    pending |= {package_key(e.name) for e in matrix.exclusions if e.applies(platform)}
    return provided | pending


def gather_inputs(
    matrix: Matrix,
    platform: str,
    sources: Sequence[LockedSource],
    environ: Mapping[str, str],
    pinned_from: str | None = None,
    archives: Sequence[LockedArchive] = (),
) -> Inputs:
    """The requirements uv resolves for `platform`: matrix pins and source requirements, with
    origins.

    Requirements on a name a source provides or on a pending package are dropped (and excluded from
    the resolution), and so are git requirements: those are sources, locked by commit elsewhere.
    With `pinned_from` (a lock file), the matrix's versions are that lock's, and their origin says
    so.
    """
    mine = [a for a in archives if a.platform == platform]
    excluded = _excluded(matrix, platform, sources, mine)
    requirements: list[TracedRequirement] = []
    index_for: dict[str, str] = {}
    hashes: dict[str, tuple[str, Origin]] = {}
    direct: set[str] = set()
    for package in matrix.packages:
        name = package_key(package.name)
        if package.pending is not None or name in excluded:
            continue
        key = ("pip", "packages", package.name)
        if package.url:
            origin = matrix.origin(*key, "url")
            url = expand_url(package.url, str(origin), environ)
            extras = f"[{','.join(package.extras)}]" if package.extras else ""
            marker = f" ; {package.marker}" if package.marker else ""
            requirements.append(
                TracedRequirement(f"{package.name}{extras} @ {url}{marker}", origin)
            )
            direct.add(name)
            if package.sha256:
                hashes[name] = (package.sha256.lower(), matrix.origin(*key, "sha256"))
        else:
            # A package written without a version (`mbridge = {}`) has no version key to point at.
            origin = matrix.origin(*key, "version") if package.specifier else matrix.origin(*key)
            if pinned_from is not None:
                origin = Origin(file=pinned_from, key=f"the locked {package.name}")
            requirements.append(TracedRequirement(str(_parse(package.requirement, origin)), origin))
        index = package.index_for(platform)
        if index:
            index_for[name] = index
    requirements += _source_requirements(sources, excluded, direct)
    requirements += _archive_requirements(mine, excluded)
    scoped = overrides.scope(matrix, requirements, excluded)
    kept = set(scoped)
    return Inputs(
        requirements=scoped,
        replaced=tuple(r for r in requirements if r not in kept),
        index_for=tuple(sorted(index_for.items())),
        excluded=tuple(sorted(excluded)),
        direct=tuple(sorted(direct)),
        hashes=tuple(sorted(hashes.items())),
    )


def _source_requirements(
    sources: Sequence[LockedSource],
    excluded: Collection[str],
    direct: set[str],
) -> list[TracedRequirement]:
    """The sources' requirements uv resolves; a name locked by URL is added to `direct`."""
    requirements = []
    for locked in sources:
        for req in locked.requirements:
            parsed = _parse(req.text, req.origin)
            if vcs_of(parsed.url):
                log.debug(
                    "%s: %s is a git requirement, locked as a source", req.origin, parsed.name
                )
                continue
            if package_key(parsed.name) in excluded:
                continue
            if parsed.url and not req.constraint:
                direct.add(package_key(parsed.name))
            requirements.append(
                TracedRequirement(str(parsed), req.origin, constraint=req.constraint)
            )
    return requirements


def _archive_requirements(
    archives: Sequence[LockedArchive],
    excluded: Collection[str],
) -> list[TracedRequirement]:
    """What the wheels of the platform's archives require (evaluated for it when locked)."""
    return [
        TracedRequirement(text, Origin(file=f"archive {a.name}", key=f"{m.filename} Requires-Dist"))
        for a in archives
        for m in a.members
        for text in m.requires
        if package_key(Pep508(text).name) not in excluded
    ]


def ordered_indexes(matrix: Matrix, accesses: Mapping[str, IndexAccess]) -> list[IndexAccess]:
    """Default indexes first in matrix order (the first one is uv's default), then explicit ones."""
    return [accesses[i.name] for i in matrix.default_indexes] + [
        accesses[i.name] for i in matrix.indexes if i.explicit
    ]


def entry_index(
    choice: uv_pylock.Choice, inputs: Inputs, indexes: Sequence[IndexAccess]
) -> str | None:
    """The index an artifact came from: the one its URL lies under, the pinned one, or the sole
    default one.

    uv's pylock.toml does not say; PyPI's files live on another host than its index, hence the
    fallbacks.
    """
    name = choice.package.name
    if name in inputs.direct:
        return None
    # its path, not query or fragment
    found = index_of(choice.artifact.url, [(i.name, i.url) for i in indexes])
    if found:
        return found
    chosen = dict(inputs.index_for).get(name)
    if chosen:
        return chosen
    defaults = [i.name for i in indexes if not i.explicit]
    return defaults[0] if len(defaults) == 1 else None


def apply_overrides(
    matrix: Matrix,
    inputs: Inputs,
    entries: Sequence[PipEntry],
    platform: str,
    environment: Mapping[str, str],
) -> tuple[AppliedOverride, ...]:
    """Each matrix override with the direct-layer requirements it replaced here; one warning line
    each."""
    versions = {package_key(e.name): e.version for e in entries}
    applied = []
    for override in matrix.overrides:
        here = overrides.replaced(override, inputs.replaced, environment)
        version = versions.get(package_key(override.name))
        log.warning(
            "%s", overrides.describe(platform, override, overrides.judge(here, version), version)
        )
        applied.append(overrides.applied(override, here))
    return tuple(applied)


def _check_matrix_hashes(choices: Sequence[uv_pylock.Choice], inputs: Inputs) -> None:
    """Every artifact the matrix locks by sha256 must be the one uv chose."""
    hashes = dict(inputs.hashes)
    for choice in choices:
        expected = hashes.get(choice.package.name)
        if expected and expected[0] != choice.artifact.sha256:
            raise VerificationError(
                f"{redact_url(strip_credentials(choice.artifact.url))} has sha256 "
                f"{choice.artifact.sha256}, "
                f"but {expected[1]} says {expected[0]}",
                hint="fix the sha256 in the matrix if the file was replaced on purpose",
                package=choice.package.name,
                host=url_host(choice.artifact.url),
                reason=f"has sha256 {choice.artifact.sha256}, but {expected[1]} says {expected[0]}",
            )


class IndexReader(Protocol):
    """What the pip stage asks the indexes (`index_client.Indexes`): the core metadata of each
    chosen artifact, by choice; the names among locked entries whose version their index (by name
    in `indexes`) still offers; when uv finds no resolution, the releases each package of the
    direct layer is offered (offered.OfferReader)."""

    def metadata(
        self, choices: Sequence[uv_pylock.Choice], indexes: Sequence[IndexAccess]
    ) -> dict[uv_pylock.Choice, str]: ...

    def offered(
        self,
        entries: Sequence[PipEntry],
        indexes: Mapping[str, IndexAccess],
    ) -> set[str]: ...

    def offers(
        self, wanted: Mapping[str, Sequence[IndexAccess]], indexes: Sequence[IndexAccess]
    ) -> Offers: ...


def lock_pypi(
    matrix: Matrix,
    platform: str,
    python_version: str,
    sources: Sequence[LockedSource],
    settings: Settings,
    *,
    preferred: Sequence[PipEntry] = (),
    runner: UvRunner,
    reader: IndexReader,
    pinned_from: str | None = None,
    archives: Sequence[LockedArchive] = (),
) -> PypiLock:
    """Resolve the matrix's pip packages and the sources' requirements for `platform` with uv.

    Only the matrix's indexes are used (never the machine's pip/uv config); every package gets
    exactly one artifact for the platform, pinned by URL and sha256. `preferred` versions are kept
    where the inputs allow. uv runs through `runner` and the indexes are asked through `reader`
    (`Resolvers.real`: as planned and over HTTP). `pinned_from` names the lock whose versions the
    matrix was pinned to (check's re-solve). `archives` are the matrix's archives as locked: their
    wheels' requirements are resolved too.
    """
    accesses = settings.accesses(matrix.indexes)
    indexes = ordered_indexes(matrix, accesses)
    inputs = gather_inputs(matrix, platform, sources, settings.variables, pinned_from, archives)
    for package in matrix.packages:
        index = package.index_for(platform)
        if index and index not in accesses:
            raise _not_an_index(matrix, package.name, index, platform)
    log.info("%s: resolving %d PyPI requirements with uv", platform, len(inputs.requirements))
    job = plan_uv_compile(
        matrix,
        platform,
        python_version,
        inputs,
        indexes,
        settings,
        preferred=preferred,
    )
    environment = platforms.marker_environment(platform, python_version)
    text = _resolve(job, matrix, inputs, indexes, environment, settings, runner, reader)
    tags = platforms.platform_tags(platform, python_version, matrix.glibc)
    packages = [p for p in uv_pylock.parse_pylock(text) if uv_pylock.applies(p.marker, environment)]
    priority = uv_pylock.tag_priority(tags)
    choices = [uv_pylock.choose_artifact(p, priority, platform) for p in packages]
    _check_matrix_hashes(choices, inputs)
    metadata = reader.metadata(choices, indexes)
    entries = _entries(choices, inputs, indexes, uv_pylock.Target(environment), platform, metadata)
    return PypiLock(
        entries=tuple(sorted(entries, key=lambda e: e.name)),
        overrides=apply_overrides(matrix, inputs, entries, platform, environment),
        requirements=inputs.requirements,
    )


def _not_an_index(matrix: Matrix, package: str, index: str, platform: str) -> InputError:
    where = matrix.origin("pip", "packages", package, "index")
    reason = f"names {index!r}, which is not an index"
    return InputError(
        f"{where} {reason}",
        file=where.file,
        key=where.key,
        reason=reason,
        package=package,
        platform=platform,
    )


def _resolve(
    job: UvJob,
    matrix: Matrix,
    inputs: Inputs,
    indexes: Sequence[IndexAccess],
    environment: Mapping[str, str],
    settings: Settings,
    runner: UvRunner,
    reader: IndexReader,
) -> str:
    """uv's pylock.toml for the job; when uv finds no resolution, every conflict of the direct layer
    first (the releases offered asked through `reader`), then uv's explanation."""
    try:
        return run_uv_compile(job, matrix, inputs, indexes, settings, runner)
    except ConflictError as exc:
        if settings.offline:
            raise
        # Imported here: only a failed resolution asks the index pages.
        from envgen.resolve.pypi.direct_layer import explain_conflicts

        explained = explain_conflicts(
            exc,
            matrix.path,
            inputs,
            indexes,
            job.platform,
            environment,
            reader,
        )
        if explained is exc:
            raise
        raise explained from exc


def _entries(
    choices: Sequence[uv_pylock.Choice],
    inputs: Inputs,
    indexes: Sequence[IndexAccess],
    target: uv_pylock.Target,
    platform: str,
    texts: Mapping[uv_pylock.Choice, str],
) -> list[PipEntry]:
    """The PipEntry of each chosen artifact, with the dependencies its metadata (`texts`) declares
    on the target."""
    metadata = {c: uv_pylock.parse_metadata(texts[c], c.artifact.filename) for c in choices}
    roots = [Pep508(r.text) for r in inputs.requirements if not r.constraint]
    extras = uv_pylock.requested_extras(
        roots, {c.package.name: m for c, m in metadata.items()}, target
    )
    entries = []
    for choice in choices:
        if choice.sdist:
            log.warning(
                "%s: %s %s has no wheel for this platform and builds from source (%s)",
                platform,
                choice.package.name,
                choice.package.version,
                redact_url(strip_credentials(choice.artifact.url)),
            )
        deps = uv_pylock.depends(
            metadata[choice], target, extras.get(choice.package.name, frozenset())
        )
        entries.append(
            uv_pylock.to_entry(choice, platform, deps, entry_index(choice, inputs, indexes))
        )
    return entries
