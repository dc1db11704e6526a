"""Compare two Locks (pure): what changed per platform, source and setting."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import msgspec
from packaging.version import InvalidVersion
from packaging.version import Version as PipVersion

from envgen.digests import short_digest
from envgen.lockdiff.changes import (
    FieldChange,
    ItemChange,
    LockDiff,
    PackageChange,
    SourceChange,
    SubmoduleChange,
    Via,
)
from envgen.model import (
    AppliedOverride,
    CondaEntry,
    Lock,
    LockedSource,
    PipEntry,
    Source,
    Submodule,
)
from envgen.names import package_key
from envgen.redact import redact_url
from envgen.urls import FORGE_URL, compare_url


def diff_locks(old: Lock, new: Lock, *, labels: tuple[str, str] = ("old", "new")) -> LockDiff:
    """What changed from `old` to `new`: packages per platform, sources, overrides, pending items,
    settings."""
    platforms = sorted(set(old.platforms) | set(new.platforms))
    packages: list[PackageChange] = []
    for platform in platforms:
        packages += _diff_entries(
            platform, "conda", _by_name(old.conda_for(platform)), _by_name(new.conda_for(platform))
        )
        packages += _diff_entries(
            platform, "pip", _by_name(old.pip_for(platform)), _by_name(new.pip_for(platform))
        )
    return LockDiff(
        env=new.env,
        old_label=labels[0],
        new_label=labels[1],
        platforms_added=tuple(sorted(set(new.platforms) - set(old.platforms))),
        platforms_removed=tuple(sorted(set(old.platforms) - set(new.platforms))),
        packages=tuple(packages),
        sources=_diff_sources(old.sources, new.sources),
        items=_diff_items(old, new),
    )


def _by_name(entries: Iterable[CondaEntry | PipEntry]) -> dict[str, CondaEntry | PipEntry]:
    return {package_key(e.name) if isinstance(e, PipEntry) else e.name: e for e in entries}


def _diff_entries(
    platform: str,
    manager: str,
    old: Mapping[str, CondaEntry | PipEntry],
    new: Mapping[str, CondaEntry | PipEntry],
) -> list[PackageChange]:
    changes = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        current = after or before
        kind = _kind(manager, before, after)
        if kind is None or current is None:
            continue
        changes.append(
            PackageChange(
                platform=platform,
                manager=manager,
                name=current.name,
                kind=kind,
                old_version=before.version if before else None,
                new_version=after.version if after else None,
                old_build=_build(before),
                new_build=_build(after),
                old_hash=_hash(before),
                new_hash=_hash(after),
                old_url=redact_url(before.url) if before else None,
                new_url=redact_url(after.url) if after else None,
            )
        )
    return changes


def _kind(
    manager: str, before: CondaEntry | PipEntry | None, after: CondaEntry | PipEntry | None
) -> str | None:
    if before is None:
        return "added"
    if after is None:
        return "removed"
    if before.version != after.version:
        order = _compare_versions(manager, before.version, after.version)
        return {1: "upgraded", -1: "downgraded"}.get(order, "changed")
    if _hash(before) != _hash(after):
        return "replaced" if _build(before) == _build(after) else "rebuilt"
    if _build(before) != _build(after) or before.url != after.url:
        return "moved"
    return None


def _compare_versions(manager: str, old: str, new: str) -> int:
    """1 when `new` is newer, -1 when older, 0 when equal or not comparable under the manager's
    rules."""
    if manager == "conda":
        # Imported only when a conda package changed version: a diff of pip pins needs no rattler.
        import rattler
        from rattler.exceptions import InvalidVersionError

        try:
            a, b = rattler.Version(old), rattler.Version(new)
        except InvalidVersionError:
            return 0
        return (b > a) - (b < a)
    try:
        p, q = PipVersion(old), PipVersion(new)
    except InvalidVersion:
        # An unparsable version still differs; it is reported as "changed" without a direction.
        return 0
    return (q > p) - (q < p)


def _build(entry: CondaEntry | PipEntry | None) -> str | None:
    if entry is None:
        return None
    if isinstance(entry, CondaEntry):
        return entry.build
    return entry.url.rsplit("/", 1)[-1].split("#", 1)[0]


def _hash(entry: CondaEntry | PipEntry | None) -> str | None:
    if entry is None:
        return None
    if isinstance(entry, CondaEntry):
        return entry.sha256 or entry.md5
    return entry.sha256


def _same_repo(a: str, b: str) -> bool:
    ma, mb = FORGE_URL.match(a), FORGE_URL.match(b)
    if ma and mb:
        return (ma["host"], ma["owner"].lower(), ma["repo"].lower()) == (
            mb["host"],
            mb["owner"].lower(),
            mb["repo"].lower(),
        )
    return a.removesuffix(".git") == b.removesuffix(".git")


_SOURCE_FIELDS = tuple(
    f.name
    for f in msgspec.structs.fields(Source)
    if f.name not in ("name", "url", "ref", "cherry_picks")
)


def _diff_sources(
    old: Iterable[LockedSource], new: Iterable[LockedSource]
) -> tuple[SourceChange, ...]:
    before = {s.source.name: s for s in old}
    after = {s.source.name: s for s in new}
    changes = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a is None and b is not None:
            changes.append(
                SourceChange(
                    name,
                    "added",
                    new_url=redact_url(b.source.url),
                    new_ref=b.source.ref,
                    new_commit=b.commit,
                )
            )
        elif b is None and a is not None:
            changes.append(
                SourceChange(
                    name,
                    "removed",
                    old_url=redact_url(a.source.url),
                    old_ref=a.source.ref,
                    old_commit=a.commit,
                )
            )
        elif a is not None and b is not None:
            change = _diff_source(a, b)
            if change is not None:
                changes.append(change)
    return tuple(changes)


def _diff_source(a: LockedSource, b: LockedSource) -> SourceChange | None:
    fields = tuple(
        FieldChange(f, _show(getattr(a.source, f)), _show(getattr(b.source, f)))
        for f in _SOURCE_FIELDS
        if getattr(a.source, f) != getattr(b.source, f)
    )
    picks_added = tuple(p for p in b.source.cherry_picks if p not in a.source.cherry_picks)
    picks_removed = tuple(p for p in a.source.cherry_picks if p not in b.source.cherry_picks)
    if a.source.cherry_picks != b.source.cherry_picks and not (picks_added or picks_removed):
        # Same cherry-picks in another order: applied in order, so it is a change of its own.
        fields += (
            FieldChange(
                "cherry-pick order", _show(a.source.cherry_picks), _show(b.source.cherry_picks)
            ),
        )
    moved = (a.source.url, a.source.ref, a.commit) != (b.source.url, b.source.ref, b.commit)
    submodules = _diff_submodules(a.submodules, b.submodules)
    if not (moved or fields or picks_added or picks_removed or submodules):
        return None
    link = None
    if a.commit != b.commit and _same_repo(a.source.url, b.source.url):
        link = compare_url(b.source.url, a.commit, b.commit)
    return SourceChange(
        name=b.source.name,
        kind="changed",
        old_url=redact_url(a.source.url),
        new_url=redact_url(b.source.url),
        old_ref=a.source.ref,
        new_ref=b.source.ref,
        old_commit=a.commit,
        new_commit=b.commit,
        compare_url=link,
        cherry_picks_added=picks_added,
        cherry_picks_removed=picks_removed,
        fields=fields,
        submodules=submodules,
    )


def _diff_submodules(
    old: Iterable[Submodule], new: Iterable[Submodule]
) -> tuple[SubmoduleChange, ...]:
    """The submodules whose commit or URL differ between two records of a source, by path."""
    before = {s.path: s for s in old}
    after = {s.path: s for s in new}
    changes = []
    for path in sorted(set(before) | set(after)):
        a, b = before.get(path), after.get(path)
        if a == b:
            continue
        kind = "added" if a is None else "removed" if b is None else "changed"
        link = (
            compare_url(b.url, a.commit, b.commit) if a and b and _same_repo(a.url, b.url) else None
        )
        changes.append(
            SubmoduleChange(
                path,
                kind,
                old_url=redact_url(a.url) if a else None,
                new_url=redact_url(b.url) if b else None,
                old_commit=a.commit if a else None,
                new_commit=b.commit if b else None,
                compare_url=link,
            )
        )
    return tuple(changes)


def _show(value: object) -> str:
    """A field value as one stable line: env pairs as `K=V`, tuples comma-joined, None as "-"."""
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return ", ".join("=".join(v) if isinstance(v, tuple) else str(v) for v in value) or "-"
    return str(value)


def _override_text(applied: AppliedOverride) -> str:
    """An override as one line: requirement, reason, and for a transitive one what it makes the lock
    contradict."""
    override = applied.override
    text = f"{override.requirement} ({override.reason})"
    if override.transitive:
        text += "; transitive"
    if applied.violates:
        text += f"; violates {', '.join(applied.violates)}"
    return text


def _diff_items(old: Lock, new: Lock) -> tuple[ItemChange, ...]:
    sections: list[tuple[str, Callable[[Lock], dict[str, str]]]] = [
        ("override", lambda lock: {o.override.name: _override_text(o) for o in lock.overrides}),
        ("pending", lambda lock: {p.name: p.note for p in lock.pending}),
        ("channel", lambda lock: {c.name: redact_url(c.url) for c in lock.channels}),
        ("index", lambda lock: {i.name: _show_index(i.url, i.explicit) for i in lock.indexes}),
        ("cann", lambda lock: {"version": lock.cann.version} if lock.cann else {}),
        ("activation", lambda lock: dict(lock.activation_env)),
        ("profile", lambda lock: {p.name: _show(p.env) for p in lock.profiles}),
        (
            "check",
            lambda lock: {
                c.module: f"{c.distribution or '-'} {c.version or '-'} needs {c.needs}"
                for c in lock.checks
            },
        ),
        ("input", lambda lock: dict(lock.inputs)),
        ("archive", _archives),
        ("excluded", _exclusions),
        ("link", _links),
    ]
    changes = []
    for section, view in sections:
        before, after = view(old), view(new)
        for name in sorted(set(before) | set(after)):
            a, b = before.get(name), after.get(name)
            if a == b:
                continue
            kind = "added" if a is None else "removed" if b is None else "changed"
            changes.append(ItemChange(section, name, kind, a, b))
    return tuple(changes)


def _archives(lock: Lock) -> dict[str, str]:
    """Each archive of a platform (its sha256 and URL), each wheel taken from it (its version and
    sha256)."""
    shown = {}
    for a in lock.archives:
        shown[f"{a.name} ({a.platform})"] = f"sha256 {short_digest(a.sha256)} {a.url}"
        for m in a.members:
            shown[f"{a.name} ({a.platform}): {m.name}"] = (
                f"{m.version} sha256 {short_digest(m.sha256)}"
            )
    return shown


def _exclusions(lock: Lock) -> dict[str, str]:
    where = {e.name: f" ({', '.join(e.platforms)})" if e.platforms else "" for e in lock.exclusions}
    return {e.name: f"{e.reason}{where[e.name]}" for e in lock.exclusions}


def _links(lock: Lock) -> dict[str, str]:
    return {link.target: f"in {link.directory or '.'}: {link.reason}" for link in lock.links}


def _show_index(url: str, explicit: bool) -> str:
    return f"{redact_url(url)} (explicit)" if explicit else redact_url(url)


def with_via(diff: LockDiff, old: Via, new: Via) -> LockDiff:
    """`diff` with each pip change naming the root that brought the package in: on the new side,
    and for a removed package on the old one (see changes.Via)."""
    packages = tuple(
        msgspec.structs.replace(
            c,
            via=(old if c.kind == "removed" else new)(c.platform, package_key(c.name)),
        )
        if c.manager == "pip"
        else c
        for c in diff.packages
    )
    return msgspec.structs.replace(diff, packages=packages)
