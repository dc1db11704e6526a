"""`envgen status --watch`: upstream asked whether a matrix still says what it says (the effects).

The indexes for pending packages and for newer releases of pins, each drifted source's new tree for
requirements that conflict with the matrix, each watched source's remote for its release refs, each
watched page's repository for the blob the page is now. What was found is judged in
`watch_findings.py`; a host that could not be asked is an error of the report (exit code 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from packaging.requirements import Requirement

from envgen import platforms
from envgen.commands.status import watch_findings as judge
from envgen.commits import is_full_commit
from envgen.errors import EnvgenError, ResolutionError
from envgen.inputs.channels import IndexAccess
from envgen.model import Lock, Matrix, PipPackage, TracedRequirement
from envgen.names import package_key
from envgen.resolve.git.cache import cached_repo
from envgen.resolve.git.remote import ls_remote, resolve_ref
from envgen.resolve.pypi.offered import Offer, candidate_indexes, fetch_offers
from envgen.resolve.pypi.overrides import override_origin
from envgen.resolve.settings import Settings
from envgen.resolve.sources.pins import requirements_at

Found = list[judge.Finding]


class _Asked:
    """What a watch asked so far: each remote's refs once, and every failure in one line."""

    def __init__(self, settings: Settings, accesses: Sequence[IndexAccess]) -> None:
        self.settings = settings
        self.accesses = tuple(accesses)
        self.errors: list[str] = []
        self._refs: dict[str, Mapping[str, str] | None] = {}

    def failed(self, exc: EnvgenError) -> None:
        self.errors.append(exc.headline or type(exc).__name__)

    def refs(self, url: str, who: str) -> Mapping[str, str] | None:
        """The refs `url` lists (`git ls-remote`, mirrors honoured); None when it did not answer."""
        if url not in self._refs:
            try:
                self._refs[url] = ls_remote(url, self.settings.git, source=who)
            except EnvgenError as exc:
                self._refs[url] = None
                self.failed(exc)
        return self._refs[url]

    def offers(self, wanted: Mapping[str, Sequence[IndexAccess]]) -> dict[str, Offer]:
        """The offer of each package of `wanted` on its indexes; a failed index page is an error."""
        offers = fetch_offers(wanted, self.accesses, self.settings.limits)
        self.errors += offers.errors.values()
        return dict(offers.found)


def watch_env(
    matrix: Matrix,
    lock: Lock | None,
    drifted: Sequence[tuple[str, str, str]],
    settings: Settings,
) -> judge.WatchReport:
    """Everything the watch finds for `matrix` and its `lock`, asked in `settings`; `drifted` is
    each source whose ref names another commit upstream now: (name, ref, that commit)."""
    asked = _Asked(settings, [settings.access(i) for i in matrix.indexes])
    environments = {p: platforms.marker_environment(p, matrix.python) for p in matrix.platforms}
    found = [
        *_index_findings(matrix, lock, asked, environments),
        *_moved_findings(matrix, lock, drifted, asked, environments),
        *_release_findings(matrix, asked),
        *_page_findings(matrix, asked),
    ]
    return judge.WatchReport(tuple(found), tuple(dict.fromkeys(asked.errors)))


def _names(indexes: Sequence[IndexAccess]) -> tuple[str, ...]:
    return tuple(i.name for i in indexes)


def _index_findings(
    matrix: Matrix,
    lock: Lock | None,
    asked: _Asked,
    environments: judge.Environments,
) -> Found:
    """Pending packages with a release meeting what the lock's sources ask (with no lock yet, what
    they ask is unknown: none is judged); newer releases of pins."""
    every = tuple(sorted(asked.accesses, key=lambda i: i.explicit))  # defaults first, in order
    pending = [p for p in matrix.packages if p.pending is not None and lock is not None]
    pinned = [p for p in matrix.packages if not p.url and judge.exact_pin(p.specifier)]
    wanted: dict[tuple[str, ...], dict[str, Sequence[IndexAccess]]] = {}
    for package in pending:
        wanted.setdefault(_names(every), {})[package.name] = every
    for package in pinned:
        for platform in matrix.platforms:
            where = candidate_indexes(package.name, package.index_for(platform), asked.accesses)
            wanted.setdefault(_names(where), {})[package.name] = where
    offers = {group: asked.offers(names) for group, names in wanted.items()}
    asks = [r for ls in (lock.sources if lock else ()) for r in ls.requirements]
    found: Found = []
    for package in pending:
        offer = offers[_names(every)].get(package.name)
        mine = [r for r in asks if _name(r) == package_key(package.name)]
        hit = judge.installable(package.name, package.pending or "", mine, offer, environments)
        found += [hit] if hit else []
    for group, names in wanted.items():
        for package in (p for p in pinned if p.name in names):
            offer = offers[group].get(package.name)
            hit = judge.newer_releases(package.name, package.specifier, offer)
            found += [hit] if hit and hit not in found else []
    return found


def _name(req: TracedRequirement) -> str:
    return package_key(Requirement(req.text).name)


def matrix_demands(matrix: Matrix) -> list[TracedRequirement]:
    """What the matrix itself asks of the names it decides: each override, and each pin of a name no
    override replaces (an override takes the pin's place in the direct layer)."""
    overridden = {package_key(o.name) for o in matrix.overrides}
    out = [TracedRequirement(o.requirement, override_origin(matrix, o)) for o in matrix.overrides]
    for package in matrix.packages:
        if _decides(package) and package_key(package.name) not in overridden:
            origin = matrix.origin("pip", "packages", package.name, "version")
            out.append(TracedRequirement(package.requirement, origin))
    return out


def _decides(package: PipPackage) -> bool:
    return bool(package.specifier) and package.pending is None and package.url is None


def _moved_findings(
    matrix: Matrix,
    lock: Lock | None,
    drifted: Sequence[tuple[str, str, str]],
    asked: _Asked,
    environments: judge.Environments,
) -> Found:
    """Each drifted source's new requirements that conflict with the matrix's pins or overrides."""
    locked = {ls.source.name: ls for ls in (lock.sources if lock else ())}
    given = {s.name: s for s in matrix.sources}
    demands = matrix_demands(matrix)
    decided = {_name(d) for d in demands}
    # The primary platform's index of each package: where its releases are asked.
    primary = matrix.platforms[0]
    index_for: dict[str, str | None] = {}
    index_for |= {package_key(p.name): p.index_for(primary) for p in matrix.packages}
    found: Found = []
    for name, ref, upstream in drifted:
        if name not in locked:
            continue
        try:
            # The matrix's source carries the credentials the lock's URL leaves out.
            source = given.get(name, locked[name].source)
            moved = requirements_at(matrix, source, upstream, asked.settings)
        except EnvgenError as exc:
            asked.failed(exc)
            continue
        new = judge.new_requirements(locked[name].requirements, moved)
        new = [r for r in new if _name(r) in decided]
        names = map(_name, new)
        wanted = {n: candidate_indexes(n, index_for.get(n), asked.accesses) for n in names}
        offers = asked.offers(wanted) if wanted else {}
        found += judge.moved_conflicts(name, (ref, upstream), new, demands, offers, environments)
    return found


def _release_findings(matrix: Matrix, asked: _Asked) -> Found:
    """Release refs newer than each watched source's ref, from its remote's branches and tags."""
    sources = {s.name: s for s in matrix.sources}
    found: Found = []
    for name, patterns in matrix.watch.releases:
        source = sources[name]
        refs = asked.refs(source.url, name)
        names = judge.ref_names(refs or {})
        hit = judge.release_refs(name, source.ref, patterns, names) if refs else None
        found += [hit] if hit else []
    return found


def _page_findings(matrix: Matrix, asked: _Asked) -> Found:
    """Each watched page at the commit its ref names now, against the blob it was written from."""
    found: Found = []
    for page in matrix.watch.pages:
        who = f"page {page.path}"
        refs = asked.refs(page.url, who)
        if refs is None:
            continue
        try:
            upstream = resolve_ref(refs, page.ref, url=page.url, source=who)
            if not is_full_commit(upstream):  # what a remote says goes into a link, not only to git
                reason = f"{page.ref} names {upstream!r}, not a commit"
                raise ResolutionError(f"{who}: {reason}", host=page.url, reason=reason)
            settings = asked.settings
            with cached_repo(settings.cache, page.url, who, settings.git) as repo:
                repo.fetch(upstream, depth=1, what="commit")
                blob = repo.blob(upstream, page.path)
        except EnvgenError as exc:
            asked.failed(exc)
            continue
        hit = judge.page_changed(page, upstream, blob)
        found += [hit] if hit else []
    return found
