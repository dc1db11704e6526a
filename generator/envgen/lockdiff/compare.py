"""Compare two Locks (pure): what changed per platform, source and setting, rendered as text, markdown or JSON."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import rattler
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion
from packaging.version import Version as PipVersion
from rattler.exceptions import InvalidVersionError

from envgen.model import CondaEntry, Lock, LockedSource, PipEntry, Source
from envgen.redact import redact_url

# Kinds of package change, in the order renderings list them.
KINDS = ("added", "removed", "upgraded", "downgraded", "changed", "rebuilt", "replaced", "moved")
# Same version, different artifact hash: "rebuilt" under a new file name, "replaced" under the same one.
HASH_KINDS = ("rebuilt", "replaced")
SHORT_SHA = 7
MARKER = "<!-- envgen-lock-diff -->"
# A platform's table in markdown starts unfolded up to this many rows: a bump is read at a glance, a re-lock
# of everything stays folded.
OPEN_ROWS = 10

_FULL_SHA = re.compile(r"^[0-9a-fA-F]{40}$")
_FORGES = {"github.com": "https://github.com", "gitcode.com": "https://gitcode.com"}
_FORGE_URL = re.compile(
    r"^(?:https?://(?:[^/@]+@)?|ssh://(?:[^/@]+@)?|[^/@:]+@)(?P<host>github\.com|gitcode\.com)[:/]"
    r"(?P<owner>[^/]+)/(?P<repo>[^/]+?)(?:\.git)?/?$"
)


@dataclass(frozen=True)
class PackageChange:
    """One package that differs between two locks on one platform."""

    platform: str
    manager: str  # "conda" or "pip"
    name: str
    kind: str  # one of KINDS
    old_version: str | None = None
    new_version: str | None = None
    old_build: str | None = None  # conda build string or wheel file name
    new_build: str | None = None
    old_hash: str | None = None
    new_hash: str | None = None
    old_url: str | None = None
    new_url: str | None = None

    @property
    def loud(self) -> bool:
        """Same version, different bytes: a rebuilt or replaced artifact someone should look at."""
        return self.kind in HASH_KINDS


@dataclass(frozen=True)
class FieldChange:
    """One field of a source other than ref, commit, url and cherry-picks (env, install flags, ...)."""

    field: str
    old: str
    new: str


@dataclass(frozen=True)
class SourceChange:
    """A git source added, removed or moved to another ref, commit, URL, cherry-picks or settings."""

    name: str
    kind: str  # "added", "removed" or "changed"
    old_url: str | None = None
    new_url: str | None = None
    old_ref: str | None = None
    new_ref: str | None = None
    old_commit: str | None = None
    new_commit: str | None = None
    compare_url: str | None = None
    cherry_picks_added: tuple[str, ...] = ()
    cherry_picks_removed: tuple[str, ...] = ()
    fields: tuple[FieldChange, ...] = ()

    @property
    def old_short(self) -> str | None:
        return self.old_commit[:SHORT_SHA] if self.old_commit else None

    @property
    def new_short(self) -> str | None:
        return self.new_commit[:SHORT_SHA] if self.new_commit else None


@dataclass(frozen=True)
class ItemChange:
    """A named item of a section (override, pending, channel, index, input digest, ...) added/removed/changed."""

    section: str
    name: str
    kind: str  # "added", "removed" or "changed"
    old: str | None = None
    new: str | None = None


@dataclass(frozen=True)
class LockDiff:
    """Everything that differs between an old and a new lock of one env; empty when they are equivalent."""

    env: str
    old_label: str
    new_label: str
    platforms_added: tuple[str, ...] = ()
    platforms_removed: tuple[str, ...] = ()
    packages: tuple[PackageChange, ...] = ()
    sources: tuple[SourceChange, ...] = ()
    items: tuple[ItemChange, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.platforms_added or self.platforms_removed or self.packages or self.sources or self.items)

    @property
    def loud(self) -> tuple[PackageChange, ...]:
        return tuple(c for c in self.packages if c.loud)

    def summary(self) -> dict[str, int]:
        """Counts by kind of change (only the non-zero ones), for headlines."""
        counts: dict[str, int] = {}
        for change in self.packages:
            counts[change.kind] = counts.get(change.kind, 0) + 1
        moved = sum(1 for s in self.sources if s.kind == "changed")
        entries = {
            "sources added": sum(1 for s in self.sources if s.kind == "added"),
            "sources removed": sum(1 for s in self.sources if s.kind == "removed"),
            "sources changed": moved,
            "platforms added": len(self.platforms_added),
            "platforms removed": len(self.platforms_removed),
            "other changes": len(self.items),
        }
        ordered = {kind: counts[kind] for kind in KINDS if counts.get(kind)}
        ordered.update({k: v for k, v in entries.items() if v})
        return ordered


# --- computing ----------------------------------------------------------------------------------------------


def diff_locks(old: Lock, new: Lock, *, labels: tuple[str, str] = ("old", "new")) -> LockDiff:
    """What changed from `old` to `new`: packages per platform, sources, overrides, pending items, settings."""
    platforms = sorted(set(old.platforms) | set(new.platforms))
    packages: list[PackageChange] = []
    for platform in platforms:
        packages += _diff_entries(
            platform, "conda", _by_name(old.conda_for(platform)), _by_name(new.conda_for(platform))
        )
        packages += _diff_entries(platform, "pip", _by_name(old.pip_for(platform)), _by_name(new.pip_for(platform)))
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
    return {str(canonicalize_name(e.name)) if isinstance(e, PipEntry) else e.name: e for e in entries}


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


def _kind(manager: str, before: CondaEntry | PipEntry | None, after: CondaEntry | PipEntry | None) -> str | None:
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
    """1 when `new` is newer, -1 when older, 0 when equal or not comparable under the manager's rules."""
    try:
        if manager == "conda":
            a, b = rattler.Version(old), rattler.Version(new)
            return (b > a) - (b < a)
        p, q = PipVersion(old), PipVersion(new)
        return (q > p) - (q < p)
    except (InvalidVersion, InvalidVersionError):
        # An unparsable version still differs; it is reported as "changed" without a direction.
        return 0


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


def compare_url(url: str, old_commit: str, new_commit: str) -> str | None:
    """The forge's compare page between two commits of `url`, for GitHub and GitCode repositories."""
    match = _FORGE_URL.match(url)
    if not match:
        return None
    base = _FORGES[match["host"]]
    return f"{base}/{match['owner']}/{match['repo']}/compare/{old_commit}...{new_commit}"


def _same_repo(a: str, b: str) -> bool:
    ma, mb = _FORGE_URL.match(a), _FORGE_URL.match(b)
    if ma and mb:
        return (ma["host"], ma["owner"].lower(), ma["repo"].lower()) == (
            mb["host"],
            mb["owner"].lower(),
            mb["repo"].lower(),
        )
    return a.removesuffix(".git") == b.removesuffix(".git")


_SOURCE_FIELDS = tuple(
    f.name for f in dataclasses.fields(Source) if f.name not in ("name", "url", "ref", "cherry_picks")
)


def _diff_sources(old: Iterable[LockedSource], new: Iterable[LockedSource]) -> tuple[SourceChange, ...]:
    before = {s.source.name: s for s in old}
    after = {s.source.name: s for s in new}
    changes = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a is None and b is not None:
            changes.append(
                SourceChange(name, "added", new_url=redact_url(b.source.url), new_ref=b.source.ref, new_commit=b.commit)
            )
        elif b is None and a is not None:
            changes.append(
                SourceChange(
                    name, "removed", old_url=redact_url(a.source.url), old_ref=a.source.ref, old_commit=a.commit
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
        fields += (FieldChange("cherry-pick order", _show(a.source.cherry_picks), _show(b.source.cherry_picks)),)
    moved = (a.source.url, a.source.ref, a.commit) != (b.source.url, b.source.ref, b.commit)
    if not (moved or fields or picks_added or picks_removed):
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
    )


def _show(value: object) -> str:
    """A field value as one stable line: env pairs as `K=V`, tuples comma-joined, None as "-"."""
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return ", ".join("=".join(v) if isinstance(v, tuple) else str(v) for v in value) or "-"
    return str(value)


def _diff_items(old: Lock, new: Lock) -> tuple[ItemChange, ...]:
    sections: list[tuple[str, Callable[[Lock], dict[str, str]]]] = [
        (
            "override",
            lambda lock: {o.override.name: f"{o.override.requirement} ({o.override.reason})" for o in lock.overrides},
        ),
        ("pending", lambda lock: {p.name: p.note for p in lock.pending}),
        ("channel", lambda lock: {c.name: redact_url(c.url) for c in lock.channels}),
        ("index", lambda lock: {i.name: _show_index(i.url, i.explicit) for i in lock.indexes}),
        ("cann", lambda lock: {"version": lock.cann.version} if lock.cann else {}),
        ("activation", lambda lock: dict(lock.activation_env)),
        ("profile", lambda lock: {p.name: _show(p.env) for p in lock.profiles}),
        (
            "check",
            lambda lock: {c.module: f"{c.distribution or '-'} {c.version or '-'} needs {c.needs}" for c in lock.checks},
        ),
        ("input", lambda lock: dict(lock.inputs)),
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


def _show_index(url: str, explicit: bool) -> str:
    return f"{redact_url(url)} (explicit)" if explicit else redact_url(url)


# --- rendering ----------------------------------------------------------------------------------------------


def render(diffs: list[LockDiff], fmt: str) -> str:
    """The diffs in one of FORMATS; the same diffs always give the same text."""
    return {"text": render_text, "markdown": render_markdown, "json": render_json}[fmt](diffs)


FORMATS = ("text", "markdown", "json")


def _short(digest: str | None) -> str:
    return digest[:SHORT_SHA] if digest else "-"


def _old_new(change: PackageChange) -> tuple[str, str]:
    """What the old and new columns show for a package change."""
    if change.kind in ("added", "removed"):
        return (change.old_version or "-", change.new_version or "-")
    if change.kind in ("upgraded", "downgraded", "changed"):
        return (change.old_version or "-", change.new_version or "-")
    if change.kind == "rebuilt":
        return (
            f"{change.old_version} {change.old_build} sha256:{_short(change.old_hash)}",
            f"{change.new_version} {change.new_build} sha256:{_short(change.new_hash)}",
        )
    if change.kind == "replaced":
        return (
            f"{change.old_version} sha256:{_short(change.old_hash)}",
            f"{change.new_version} sha256:{_short(change.new_hash)}",
        )
    return (f"{change.old_version} {change.old_url}", f"{change.new_version} {change.new_url}")


def _warning(change: PackageChange) -> str:
    how = "rebuilt under a new file name" if change.kind == "rebuilt" else "replaced under the same file name"
    return (
        f"{change.manager} {change.name} {change.new_version} on {change.platform}: {how}, "
        f"sha256 {_short(change.old_hash)} -> {_short(change.new_hash)}"
    )


def _headline(diff: LockDiff, sep: str = ", ") -> str:
    return sep.join(_count(kind, count) for kind, count in diff.summary().items()) or "no changes"


def _count(kind: str, count: int) -> str:
    """`2 sources changed`, `1 source changed`: summary keys are plural nouns or verbs."""
    if count == 1:
        kind = kind.replace("sources", "source").replace("platforms", "platform").replace("changes", "change")
    return f"{count} {kind}"


def _ref(ref: str | None) -> str:
    """A ref as shown: a full commit shortened like the commits next to it."""
    if ref and _FULL_SHA.match(ref):
        return ref[:SHORT_SHA]
    return ref or "-"


def _source_line(change: SourceChange) -> str:
    if change.kind == "added":
        return f"added {change.new_url} {_ref(change.new_ref)} @ {change.new_short}"
    if change.kind == "removed":
        return f"removed {change.old_url} {_ref(change.old_ref)} @ {change.old_short}"
    ref = (
        _ref(change.new_ref)
        if change.old_ref == change.new_ref
        else f"{_ref(change.old_ref)} -> {_ref(change.new_ref)}"
    )
    commit = change.new_short if change.old_commit == change.new_commit else f"{change.old_short} -> {change.new_short}"
    return f"{ref}: {commit}"


def _source_details(change: SourceChange) -> list[str]:
    lines = []
    if change.kind == "changed" and change.old_url != change.new_url:
        lines.append(f"url {change.old_url} -> {change.new_url}")
    lines += [f"cherry-pick added {p}" for p in change.cherry_picks_added]
    lines += [f"cherry-pick removed {p}" for p in change.cherry_picks_removed]
    lines += [f"{f.field} {f.old} -> {f.new}" for f in change.fields]
    if change.compare_url:
        lines.append(change.compare_url)
    return lines


def _item_value(item: ItemChange, value: str | None) -> str:
    if value is None:
        return "-"
    return _short(value) if item.section == "input" else value


def _table(rows: Sequence[tuple[str, ...]], indent: str) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def render_text(diffs: list[LockDiff]) -> str:
    """Plain text for a terminal: a headline per env, loud warnings first, then aligned change lists."""
    if not diffs:
        return "no lock changes\n"
    out: list[str] = []
    for diff in diffs:
        out.append(f"{diff.env}: {diff.old_label} -> {diff.new_label}")
        out.append(f"  {_headline(diff)}")
        out += [f"  WARNING: same version, different artifact: {_warning(c)}" for c in diff.loud]
        if diff.platforms_added:
            out.append(f"  platforms added: {', '.join(diff.platforms_added)}")
        if diff.platforms_removed:
            out.append(f"  platforms removed: {', '.join(diff.platforms_removed)}")
        for platform in sorted({c.platform for c in diff.packages}):
            out.append(f"  {platform}")
            rows = [(c.manager, c.name, c.kind, *_arrow(c)) for c in diff.packages if c.platform == platform]
            out += _table(rows, "    ")
        if diff.sources:
            out.append("  sources")
            for change in diff.sources:
                out.append(f"    {change.name}  {_source_line(change)}")
                out += [f"      {line}" for line in _source_details(change)]
        if diff.items:
            out.append("  other")
            rows = [
                (i.section, i.name, i.kind, f"{_item_value(i, i.old)} -> {_item_value(i, i.new)}") for i in diff.items
            ]
            out += _table(rows, "    ")
    return "\n".join(out) + "\n"


def _arrow(change: PackageChange) -> tuple[str]:
    old, new = _old_new(change)
    if change.kind == "added":
        return (new,)
    if change.kind == "removed":
        return (old,)
    return (f"{old} -> {new}",)


def _cell(text: str | None) -> str:
    """Text safe in a markdown table cell: no pipes, newlines or HTML from package data."""
    return html.escape(text or "-", quote=False).replace("|", "\\|").replace("\n", " ")


def render_markdown(diffs: list[LockDiff]) -> str:
    """Markdown for a pull-request comment: headline counts, loud warnings, one folded table per platform."""
    out = [MARKER, "## envgen lock diff", ""]
    if not diffs:
        out.append("No lock changes.")
        return "\n".join(out) + "\n"
    for diff in diffs:
        out += [f"### `{diff.env}`: `{diff.old_label}` → `{diff.new_label}`", ""]
        out += [f"**{_headline(diff, ' · ')}**", ""]
        if diff.loud:
            out += ["> [!WARNING]", "> **Same version, different artifact hash:** check these were rebuilt on purpose."]
            out += [f"> - {_cell(_warning(c))}" for c in diff.loud]
            out.append("")
        if diff.platforms_added or diff.platforms_removed:
            parts = [f"added {', '.join(diff.platforms_added)}"] if diff.platforms_added else []
            parts += [f"removed {', '.join(diff.platforms_removed)}"] if diff.platforms_removed else []
            out += [f"Platforms: {'; '.join(parts)}", ""]
        for platform in sorted({c.platform for c in diff.packages}):
            changes = [c for c in diff.packages if c.platform == platform]
            noun = "change" if len(changes) == 1 else "changes"
            details = "<details open>" if len(changes) <= OPEN_ROWS else "<details>"
            out += [f"{details}<summary><b>{platform}</b>: {len(changes)} package {noun}</summary>", ""]
            out += ["| change | manager | package | old | new |", "|---|---|---|---|---|"]
            for c in changes:
                old, new = _old_new(c)
                kind = f"**{c.kind}** ⚠️" if c.loud else c.kind
                out.append(f"| {kind} | {c.manager} | `{_cell(c.name)}` | {_cell(old)} | {_cell(new)} |")
            out += ["", "</details>", ""]
        if diff.sources:
            out += ["#### Git sources", "", "| source | ref | commit | details |", "|---|---|---|---|"]
            for s in diff.sources:
                out.append(_source_row(s))
            out.append("")
        if diff.items:
            out += ["#### Other changes", "", "| section | name | change | old | new |", "|---|---|---|---|---|"]
            for i in diff.items:
                row = (
                    i.section,
                    f"`{_cell(i.name)}`",
                    i.kind,
                    _cell(_item_value(i, i.old)),
                    _cell(_item_value(i, i.new)),
                )
                out.append(f"| {' | '.join(row)} |")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _source_row(s: SourceChange) -> str:
    if s.kind == "added":
        ref, commit, details = _cell(_ref(s.new_ref)), f"`{s.new_short}`", f"added {_cell(s.new_url)}"
    elif s.kind == "removed":
        ref, commit, details = _cell(_ref(s.old_ref)), f"`{s.old_short}`", f"removed {_cell(s.old_url)}"
    else:
        ref = (
            _cell(_ref(s.new_ref)) if s.old_ref == s.new_ref else f"{_cell(_ref(s.old_ref))} → {_cell(_ref(s.new_ref))}"
        )
        commit = f"`{s.new_short}`" if s.old_commit == s.new_commit else f"`{s.old_short}` → `{s.new_short}`"
        notes = [_cell(line) for line in _source_details(s) if line != s.compare_url]
        if s.compare_url:
            notes.append(f"[compare]({s.compare_url})")
        details = "<br>".join(notes) or "-"
    return f"| `{s.name}` | {ref} | {commit} | {details} |"


def _as_json(diff: LockDiff) -> dict[str, object]:
    data = dataclasses.asdict(diff)
    data["summary"] = diff.summary()
    data["warnings"] = [_warning(c) for c in diff.loud]
    for source, change in zip(data["sources"], diff.sources, strict=True):
        source["old_short"], source["new_short"] = change.old_short, change.new_short
    return data


def render_json(diffs: list[LockDiff]) -> str:
    """JSON with sorted keys: `{"changed": bool, "diffs": [...]}`, one entry per env that differs."""
    payload = {"changed": any(not d.empty for d in diffs), "diffs": [_as_json(d) for d in diffs]}
    return json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
