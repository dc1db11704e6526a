"""What `envgen status --watch` finds when a matrix no longer says what upstream says (pure).

From facts gathered elsewhere (the releases an index offers, the refs a remote lists, the blob a
page is now, a moved source's requirements) to findings: a pending package that became installable,
a moved source whose requirements conflict with the matrix's pins or overrides, new release refs,
newer releases of a pin, a changed page. Each is one line of text and an object of `--json`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from envgen.commits import is_full_commit, short_commit
from envgen.model import Page, TracedRequirement
from envgen.names import package_key
from envgen.redact import redact_url
from envgen.resolve.pypi.conflicts import by_name, find_conflicts, met_by
from envgen.resolve.pypi.offered import Offer
from envgen.urls import compare_url

INSTALLABLE, CONFLICT, RELEASE_REFS, NEWER, PAGE = (
    "installable",
    "conflict",
    "release-refs",
    "newer-release",
    "page",
)
# How many versions or refs a line shows (the JSON has them all).
_SHOWN = 4

Environments = Mapping[str, Mapping[str, str]]  # platform -> its marker environment


@dataclass(frozen=True)
class Finding:
    """One way the matrix no longer says what upstream says: its kind, what it is about, one line
    of text, and the details `--json` gives (docs/status-json.md)."""

    kind: str
    subject: str
    message: str
    details: Mapping[str, object] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "message": self.message,
            "details": dict(self.details),
        }


@dataclass(frozen=True)
class WatchReport:
    """Every finding of one env, and every host or ref that could not be asked (exit code 3)."""

    findings: tuple[Finding, ...] = ()
    errors: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {"findings": [f.as_dict() for f in self.findings], "errors": list(self.errors)}


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return f"{shown} and {len(items) - _SHOWN} more" if len(items) > _SHOWN else shown


def _demand(req: TracedRequirement) -> dict[str, object]:
    return {"requirement": req.text, "origin": str(req.origin)}


def _where(req: TracedRequirement) -> str:
    return f"{req.origin.file}:{req.origin.line}" if req.origin.line else req.origin.file


# --- a pending package with a release that meets what the sources ask ----------------------------


def installable(
    name: str,
    note: str,
    asks: Sequence[TracedRequirement],
    offer: Offer | None,
    environments: Environments,
) -> Finding | None:
    """A finding when `offer` holds a release meeting `asks` (the sources' requirements on the
    pending `name`) on every platform of `environments`."""
    if offer is None or not offer.versions:
        return None
    meeting = set(offer.versions)
    for environment in environments.values():
        here = by_name(asks, environment).get(package_key(name), ())
        meeting &= set(met_by(here, offer.versions) if here else offer.versions)
    if not meeting:
        return None
    versions = [str(v) for v in sorted(meeting, reverse=True)]
    asked = "; ".join(f"{r.text} ({r.origin})" for r in asks) or "no source asks anything of it"
    message = (
        f"pending {name} has a release: {offer.index} offers {_listed(versions)}, which meets "
        f"what the sources ask ({asked}); the matrix still says: {note}"
    )
    details = {"index": offer.index, "versions": versions, "asks": [_demand(r) for r in asks]}
    return Finding(INSTALLABLE, name, message, {**details, "note": note})


# --- newer releases of a pinned package ----------------------------------------------------------


def _series(version: Version) -> tuple[int, ...]:
    return (*version.release, 0)[:2]


def exact_pin(specifier: str) -> Version | None:
    """The version of a specifier that is one exact pin (`==2.10.0.post4`), else None."""
    spec = list(SpecifierSet(specifier))
    if len(spec) != 1 or spec[0].operator != "==" or "*" in spec[0].version:
        return None
    return Version(spec[0].version)


def newer_releases(name: str, specifier: str, offer: Offer | None) -> Finding | None:
    """A finding when a pin `==X` of `name` has newer releases in its own series (major.minor: post
    and patch releases); `newest` tells of later series too. Pre-releases count only beside a
    pre-release pin; a local version of the pin itself (`+cpu`) is no newer release."""
    pinned = exact_pin(specifier)
    if offer is None or pinned is None:
        return None
    spec = SpecifierSet(specifier)

    def newer(v: Version) -> bool:
        counted = pinned.is_prerelease or not v.is_prerelease
        return v > pinned and counted and not spec.contains(v, prereleases=True)

    later = sorted(filter(newer, offer.versions))
    same = [str(v) for v in later if _series(v) == _series(pinned)]
    if not same:
        return None
    series = ".".join(map(str, _series(pinned)))
    newest = f" (newest {later[-1]})" if str(later[-1]) != same[-1] else ""
    message = f"{name} {specifier}: newer in {series} on {offer.index}: {_listed(same)}{newest}"
    details = {"pinned": str(pinned), "index": offer.index, "newer": same, "newest": str(later[-1])}
    return Finding(NEWER, name, message, details)


# --- new release refs of a source ----------------------------------------------------------------


def _ref_version(name: str, pattern: str) -> Version | None:
    """The version the `*` of `pattern` stands for in the ref `name`; None if it does not match."""
    prefix, _, suffix = pattern.partition("*")
    fits = name.startswith(prefix) and name.endswith(suffix)
    if len(name) <= len(prefix) + len(suffix) or not fits:
        return None
    try:
        return Version(name[len(prefix) : len(name) - len(suffix)])
    except InvalidVersion:
        return None


def ref_names(refs: Iterable[str]) -> list[str]:
    """The branch and tag names among a remote's refs (`refs/heads/x`, `refs/tags/x`), each once."""
    prefixes = ("refs/heads/", "refs/tags/")
    return sorted({r.removeprefix(p) for r in refs for p in prefixes if r.startswith(p)})


def release_refs(
    source: str,
    ref: str,
    patterns: Sequence[str],
    names: Iterable[str],
) -> Finding | None:
    """A finding naming the refs matching `patterns` whose version (the `*` part) is newer than the
    source's own ref's; when its ref matches none (a commit, `main`), the newest release ref. A
    pre-release ref whose final release is there too (`core_v0.13.0rc0` beside `core_v0.13.0`) is
    no news."""
    matched = {n: v for n in names for p in patterns if (v := _ref_version(n, p)) is not None}
    finals = {v.release for v in matched.values() if not v.is_prerelease}
    matched = {n: v for n, v in matched.items() if not (v.is_prerelease and v.release in finals)}
    own = next((v for p in patterns if (v := _ref_version(ref, p)) is not None), None)
    if own is None:
        newer = [max(matched, key=lambda n: matched[n])] if matched else []
        shown = short_commit(ref) if is_full_commit(ref) else ref
        beyond = f"(its ref {shown} matches none)"
    else:
        newer = sorted((n for n, v in matched.items() if v > own), key=lambda n: matched[n])
        beyond = f"beyond {ref}"
    if not newer:
        return None
    message = f"source {source}: release refs {beyond}: {_listed(newer)}"
    details = {"ref": ref, "patterns": list(patterns), "newer": newer}
    return Finding(RELEASE_REFS, source, message, details)


# --- a moved source whose requirements conflict with the matrix ----------------------------------


def new_requirements(
    locked: Sequence[TracedRequirement],
    moved: Sequence[TracedRequirement],
) -> list[TracedRequirement]:
    """The requirements of a moved tree that its locked tree did not have (by text)."""
    before = {r.text for r in locked}
    return [r for r in moved if r.text not in before and not Requirement(r.text).url]


def moved_conflicts(
    source: str,
    moved_to: tuple[str, str],
    moved: Sequence[TracedRequirement],
    matrix: Sequence[TracedRequirement],
    offered: Mapping[str, Offer],
    environments: Environments,
) -> list[Finding]:
    """One finding per requirement of the moved tree (`moved`: those the locked tree did not have)
    that no offered release meets together with the matrix's pin or override on its name
    (`matrix`); `moved_to` is the ref and the commit it names now."""
    found: dict[tuple[str, str], tuple[TracedRequirement, list[TracedRequirement], list[str]]] = {}
    versions = {n: o.versions for n, o in offered.items()}
    for platform, environment in environments.items():
        for conflict in find_conflicts([*matrix, *moved], versions.get, environment):
            ours = [d for d in conflict.demands if d.origin.source is None]
            for theirs in (d for d in conflict.demands if d in moved and ours):
                entry = found.setdefault((theirs.text, str(theirs.origin)), (theirs, ours, []))
                entry[2].append(platform)
    return [_conflict(source, moved_to, *entry) for entry in found.values()]


def _conflict(
    source: str,
    moved_to: tuple[str, str],
    theirs: TracedRequirement,
    ours: list[TracedRequirement],
    platforms: list[str],
) -> Finding:
    ref, upstream = moved_to
    breaks = "; ".join(f"{d.text} ({d.origin})" for d in ours)
    overridden = any((d.origin.key or "").startswith("overrides.") for d in ours)
    then = "a re-lock overrules it" if overridden else "a re-lock fails"
    message = (
        f"source {source} {ref} moved to {short_commit(upstream)}: {_where(theirs)} asks "
        f"{theirs.text}, which the matrix's {breaks} excludes ({then}; {', '.join(platforms)})"
    )
    details = {
        "ref": ref,
        "upstream": upstream,
        "requirement": _demand(theirs),
        "breaks": [_demand(d) for d in ours],
        "platforms": platforms,
    }
    return Finding(CONFLICT, source, message, details)


# --- a page the matrix encodes -------------------------------------------------------------------


def page_changed(page: Page, upstream: str, blob: str | None) -> Finding | None:
    """A finding when the page at `upstream` (the commit its ref names now) is not the blob the
    matrix was written from; `blob` None: the file is gone from that tree."""
    if blob == page.blob:
        return None
    link = compare_url(page.url, page.commit, upstream)
    now = f"blob {short_commit(blob)}" if blob else "gone (moved or removed)"
    message = (
        f"page {page.path} ({page.ref}) changed since the matrix was written: blob "
        f"{short_commit(page.blob)} at {short_commit(page.commit)}, now {now} at "
        f"{short_commit(upstream)}"
    )
    details = {
        "url": redact_url(page.url),
        "ref": page.ref,
        "blob": page.blob,
        "commit": page.commit,
        "upstream_blob": blob,
        "upstream_commit": upstream,
        "compare_url": link,
    }
    return Finding(PAGE, page.path, message + (f"; {link}" if link else ""), details)
