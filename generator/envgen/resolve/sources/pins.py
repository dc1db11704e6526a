"""Pin git sources: refs to commits, fetched into a cache, cherry-picks applied, requirements read
at the tree."""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from envgen.commits import is_full_commit, short_commit
from envgen.errors import EnvgenError, InputError, MatrixError
from envgen.model import METADATA, LockedSource, Matrix, Source, TracedRequirement
from envgen.names import package_key
from envgen.redact import redact_url, strip_credentials
from envgen.resolve.git.cache import CachedRepo, apply_cherry_picks, cached_repo, has_commits
from envgen.resolve.git.remote import upstream_commit
from envgen.resolve.movable import NOTHING, Movable
from envgen.resolve.settings import Settings
from envgen.resolve.sources.metadata import BuildSettings, Declared, declared_dependencies
from envgen.resolve.sources.requirements import digest_files, read_requirements, split_requirements
from envgen.resolve.sources.submodules import gitlinks, lock_submodules
from envgen.resolve.sources.tree import InstalledTree, check_paths, extras_lines, relabelled

logger = logging.getLogger(__name__)
_T = TypeVar("_T")


def kept_commit(
    source: Source,
    previous: Mapping[str, LockedSource],
    update: Movable,
) -> str | None:
    """The recorded commit to keep, if the source is unchanged and not asked to update."""
    old = previous.get(source.name)
    if old is None or update.covers(source.name):
        return None
    # A lock records URLs without credentials: compare them so.
    recorded = (strip_credentials(old.source.url), old.source.ref, old.source.cherry_picks)
    same = recorded == (strip_credentials(source.url), source.ref, source.cherry_picks)
    return old.commit if same else None


def asks_remote(
    source: Source,
    previous: Mapping[str, LockedSource],
    update: Movable,
    settings: Settings,
) -> bool:
    """Whether pinning `source` asks its remote: for its refs (a commit not kept, a ref not a full
    commit) or for a commit or cherry-pick the git cache lacks."""
    commit = kept_commit(source, previous, update)
    if commit is None and is_full_commit(source.ref):
        commit = source.ref.lower()
    if commit is None:
        return True
    shas = (commit, *source.cherry_picks)
    return not has_commits(settings.cache, source.url, shas, settings.git)


def _pin(
    source: Source,
    settings: Settings,
    *,
    kept: str | None,
    matrix_names: frozenset[str],
    build: BuildSettings,
) -> tuple[LockedSource, tuple[Source, ...]]:
    """One source pinned: its requirements, its submodules (the installed tree's gitlinks, fixed by
    its commit: they never drift) and the git requirements it brings."""
    for pick in source.cherry_picks:
        if not is_full_commit(pick):
            raise InputError(
                f"source {source.name}: cherry-pick {pick!r} is not a full 40-hex commit",
                hint="name each cherry-pick by its full commit sha",
                key=f"sources.{source.name}.cherry-picks",
            )
    if kept:
        commit = kept
    elif is_full_commit(source.ref):
        commit = source.ref.lower()
    else:
        commit = upstream_commit(source, settings.git)
    with cached_repo(settings.cache, source.url, source.name, settings.git) as repo:
        what = "recorded commit" if kept else "commit"
        read = _read_tree(repo, source, commit, what, matrix_names, build)
        # The installed tree's gitlinks, fixed by its commit; none for a source that opts out.
        links = gitlinks(repo, read.head) if source.submodules else []
    logger.info("source %s: %s -> %s", source.name, source.ref, commit)
    locked = LockedSource(
        source,
        commit,
        read.requirements,
        digest=read.digest,
        tree=read.tree,
        picked=read.picked,
        metadata_fallback=read.fallback,
        submodules=lock_submodules(settings.cache, source.name, links, settings.git),
    )
    return locked, read.discovered


@dataclass(frozen=True)
class _Tree:
    """A source's tree at a commit, as a lock reads it: the commit after the cherry-picks (`head`),
    its tree, the requirements that count, the git requirements it brings, their digest."""

    head: str
    tree: str
    picked: tuple[str, ...]
    requirements: tuple[TracedRequirement, ...]
    discovered: tuple[Source, ...]
    digest: str
    fallback: str | None


def _read_tree(
    repo: CachedRepo,
    source: Source,
    commit: str,
    what: str,
    matrix_names: frozenset[str],
    settings: BuildSettings,
) -> _Tree:
    """`commit` fetched (`what` it is, for messages), the cherry-picks applied, its requirements."""
    repo.fetch(commit, depth=1, what=what)
    for pick in source.cherry_picks:
        repo.fetch(pick, depth=2, what="cherry-pick")
    picked = apply_cherry_picks(repo, commit, source.cherry_picks) if source.cherry_picks else ()
    head = picked[-1] if picked else commit
    # Asked of the repository's object reader (no git process of its own); git's own failure
    # message where the reader has no answer.
    found = repo.objects.info(f"{head}^{{tree}}")
    tree = (
        found.sha
        if found is not None
        else repo.git("rev-parse", "--verify", "--end-of-options", f"{head}^{{tree}}").strip()
    )
    view = _installed_tree(repo, source, head)
    lines, files = read_requirements(source, view.read_listed, head)
    declared = Declared()
    if source.dependencies == METADATA:
        read, export = view.read_project, view.export
        declared = declared_dependencies(source, tree, read, export, settings, commit=head)
        if not declared.fallback:
            extras = extras_lines(view, f"source {source.name} at commit {short_commit(head)}")
            declared = Declared(relabelled(view, declared.lines) + extras)
    if declared.fallback:
        listed = ", ".join(source.requirements) or "none listed"
        logger.warning(
            "source %s: its declared dependencies cannot be read (%s); only its "
            "requirement files count (%s)",
            source.name,
            declared.fallback,
            listed,
        )
    # The guide installs the listed files, then the project itself (`pip install -e .`); a
    # requirement both list keeps the file's origin.
    written = {line.text for line in lines}
    counted = (*lines, *(line for line in declared.lines if line.text not in written))
    requirements, discovered = split_requirements(source, counted, matrix_names)
    metadata = tuple((f"{line.file} {line.key}", line.text.encode()) for line in declared.lines)
    digest = digest_files(files + metadata)
    return _Tree(head, tree, picked, requirements, discovered, digest, declared.fallback)


def _installed_tree(repo: CachedRepo, source: Source, head: str) -> InstalledTree:
    """The tree at `head` as the source's install sees it, its declared paths checked against it."""
    check_paths(source, head, functools.partial(repo.objects.entry, head))
    read, export = functools.partial(repo.read, head), functools.partial(repo.export, head)
    return InstalledTree(source, read, export)


def requirements_at(
    matrix: Matrix,
    source: Source,
    commit: str,
    settings: Settings,
) -> tuple[TracedRequirement, ...]:
    """The requirements `source` declares at `commit` (an upstream commit its ref moved to), read as
    a lock reads them: cherry-picks applied, the listed files and the declared metadata."""
    names, build = _matrix_names(matrix), _build_settings(matrix, settings)
    with cached_repo(settings.cache, source.url, source.name, settings.git) as repo:
        return _read_tree(repo, source, commit, "upstream commit", names, build).requirements


def _matrix_names(matrix: Matrix) -> frozenset[str]:
    """The names a source provides: no requirement on them is resolved from an index."""
    return frozenset(package_key(n) for s in matrix.sources for n in (s.name, s.distribution))


def _build_settings(matrix: Matrix, settings: Settings) -> BuildSettings:
    """How a source's metadata is built: the matrix's indexes and its pins for this host, the
    cache, the variables."""
    indexes = tuple(settings.access(i) for i in matrix.indexes)
    index_for = _host_index_for(matrix, settings.host)
    return BuildSettings(
        indexes,
        settings.cache,
        settings.variables,
        settings.limits,
        index_for=index_for,
        uv=settings.uv,
    )


def _host_index_for(matrix: Matrix, host: str | None) -> tuple[tuple[str, str], ...]:
    """The packages the matrix takes from an index on the `host` platform (this machine's): a build
    here takes them from there too. None on a host no lock is made for: no platform's choices."""
    if host is None:
        return ()
    chosen = ((package_key(p.name), p.index_for(host)) for p in matrix.packages)
    return tuple(sorted((name, index) for name, index in chosen if index))


def resolve_sources(
    matrix: Matrix,
    settings: Settings,
    *,
    previous: Mapping[str, LockedSource] | None = None,
    update: Movable = NOTHING,
    jobs: int = 4,
) -> tuple[LockedSource, ...]:
    """Pin every source of `matrix` (and the git requirements they bring) to a commit, in install
    order.

    Repositories live in the cache's `git/`. A source whose url, ref and cherry-picks match its
    `previous` record keeps that commit unless `update` covers it. Sources are resolved `jobs` at a
    time; git requirements found in their files are pinned in a second round and placed right
    after the source that names them.
    """
    previous = previous or {}
    matrix_names = _matrix_names(matrix)
    build = _build_settings(matrix, settings)

    def pin(source: Source) -> tuple[LockedSource, tuple[Source, ...]]:
        kept = kept_commit(source, previous, update)
        return _pin(source, settings, kept=kept, matrix_names=matrix_names, build=build)

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="envgen-git") as pool:
        first = _results({s.name: pool.submit(pin, s) for s in matrix.sources})
        children = _unique_discovered(list(first.values()))
        second = _results(
            {s.name: pool.submit(pin, s) for group in children.values() for s in group}
        )
    pinned = {name: locked for name, (locked, _) in second.items()}
    ordered: list[LockedSource] = []
    for locked, _ in first.values():
        ordered.append(locked)
        ordered.extend(pinned[s.name] for s in children.get(locked.source.name, ()))
    return tuple(ordered)


@dataclass(frozen=True)
class GitPinner:
    """Pins sources with git, through the cache (the re-lock's `SourcePinner`)."""

    settings: Settings

    def pin(
        self,
        matrix: Matrix,
        kept: Mapping[str, LockedSource],
        update: Movable,
    ) -> tuple[LockedSource, ...]:
        logger.info("%s: resolving %d git sources", matrix.name, len(matrix.sources))
        return resolve_sources(matrix, self.settings, previous=kept, update=update)


def _results(futures: Mapping[str, Future[_T]]) -> dict[str, _T]:
    """Every future's result by source name; when several failed, the first one's error names the
    others too."""
    failed = [name for name, future in futures.items() if future.exception() is not None]
    error = futures[failed[0]].exception() if len(failed) > 1 else None
    # A user who sees every unreachable host at once fixes them in one go.
    if isinstance(error, EnvgenError) and not isinstance(error, MatrixError):
        raise error.reworded(
            f"{error.message}\n(sources {', '.join(failed[1:])} failed too)"
        ) from error
    return {name: future.result() for name, future in futures.items()}


def _unique_discovered(
    first: list[tuple[LockedSource, tuple[Source, ...]]],
) -> dict[str, tuple[Source, ...]]:
    """Discovered sources by parent; one named twice is kept where first met (in install order)."""
    seen: dict[str, Source] = {}
    by_parent: dict[str, tuple[Source, ...]] = {}
    for locked, discovered in first:
        mine: list[Source] = []
        for source in discovered:
            earlier = seen.get(source.name)
            if earlier is None:
                seen[source.name] = source
                mine.append(source)
            elif (earlier.url, earlier.ref) != (source.url, source.ref):
                logger.warning(
                    "%s asks for %s at %s@%s; keeping %s@%s from %s",
                    source.origin,
                    source.distribution,
                    redact_url(source.url),
                    source.ref,
                    redact_url(earlier.url),
                    earlier.ref,
                    earlier.origin,
                )
        by_parent[locked.source.name] = tuple(mine)
    return by_parent
