"""A LockDiff rendered as text for a terminal, markdown for a pull request, or JSON; the same diffs,
the same text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

from envgen.commits import is_full_commit, short_commit
from envgen.digests import short_digest
from envgen.lockdiff.changes import (
    ItemChange,
    LockDiff,
    PackageChange,
    SourceChange,
    SubmoduleChange,
)

MARKER = "<!-- envgen-lock-diff -->"
# A platform's table in markdown starts unfolded up to this many rows: a bump is read at a glance, a
# re-lock of everything stays folded.
OPEN_ROWS = 10


def render(diffs: list[LockDiff], fmt: str) -> str:
    """The diffs in one of FORMATS; the same diffs always give the same text."""
    return {"text": render_text, "markdown": render_markdown, "json": render_json}[fmt](diffs)


FORMATS = ("text", "markdown", "json")


def _short(digest: str | None) -> str:
    return short_digest(digest) if digest else "-"


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
    how = (
        "rebuilt under a new file name"
        if change.kind == "rebuilt"
        else "replaced under the same file name"
    )
    return (
        f"{change.manager} {change.name} {change.new_version} on {change.platform}: {how}, "
        f"sha256 {_short(change.old_hash)} -> {_short(change.new_hash)}"
    )


def _headline(diff: LockDiff, sep: str = ", ") -> str:
    return sep.join(_count(kind, count) for kind, count in diff.summary().items()) or "no changes"


def _count(kind: str, count: int) -> str:
    """`2 sources changed`, `1 source changed`: summary keys are plural nouns or verbs."""
    if count == 1:
        kind = (
            kind.replace("sources", "source")
            .replace("platforms", "platform")
            .replace("changes", "change")
        )
    return f"{count} {kind}"


def _ref(ref: str | None) -> str:
    """A ref as shown: a full commit shortened like the commits next to it."""
    if ref and is_full_commit(ref):
        return short_commit(ref)
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
    commit = (
        change.new_short
        if change.old_commit == change.new_commit
        else f"{change.old_short} -> {change.new_short}"
    )
    return f"{ref}: {commit}"


def _source_details(change: SourceChange) -> list[str]:
    lines = []
    if change.kind == "changed" and change.old_url != change.new_url:
        lines.append(f"url {change.old_url} -> {change.new_url}")
    lines += [f"cherry-pick added {p}" for p in change.cherry_picks_added]
    lines += [f"cherry-pick removed {p}" for p in change.cherry_picks_removed]
    lines += [f"{f.field} {f.old} -> {f.new}" for f in change.fields]
    lines += [_submodule_line(s) for s in change.submodules]
    if change.compare_url:
        lines.append(change.compare_url)
    return lines


def _submodule_line(change: SubmoduleChange) -> str:
    old, new = _short(change.old_commit), _short(change.new_commit)
    if change.kind == "added":
        return f"submodule {change.path} added: {change.new_url} @ {new}"
    if change.kind == "removed":
        return f"submodule {change.path} removed: {change.old_url} @ {old}"
    url = f" ({change.old_url} -> {change.new_url})" if change.old_url != change.new_url else ""
    link = f" {change.compare_url}" if change.compare_url else ""
    return f"submodule {change.path}: {old} -> {new}{url}{link}"


def _item_value(item: ItemChange, value: str | None) -> str:
    if value is None:
        return "-"
    return _short(value) if item.section == "input" else value


def _table(rows: Sequence[tuple[str, ...]], indent: str) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def render_text(diffs: list[LockDiff]) -> str:
    """Plain text for a terminal: a headline per env, loud warnings first, then aligned change
    lists."""
    if not diffs:
        return "no lock changes\n"
    out: list[str] = []
    for diff in diffs:
        out.append(f"{diff.env}: {diff.old_label} -> {diff.new_label}")
        out.append(f"  {_headline(diff)}")
        out += [f"  TAMPERED: {problem}" for problem in diff.tampered]
        out += [f"  WARNING: same version, different artifact: {_warning(c)}" for c in diff.loud]
        if diff.platforms_added:
            out.append(f"  platforms added: {', '.join(diff.platforms_added)}")
        if diff.platforms_removed:
            out.append(f"  platforms removed: {', '.join(diff.platforms_removed)}")
        for platform in sorted({c.platform for c in diff.packages}):
            out.append(f"  {platform}")
            rows: list[tuple[str, ...]] = [
                (c.manager, c.name, c.kind, *_arrow(c), f"(via {c.via})" if c.via else "")
                for c in diff.packages
                if c.platform == platform
            ]
            out += _table(rows, "    ")
        if diff.sources:
            out.append("  sources")
            for change in diff.sources:
                out.append(f"    {change.name}  {_source_line(change)}")
                out += [f"      {line}" for line in _source_details(change)]
        if diff.items:
            out.append("  other")
            rows = [
                (i.section, i.name, i.kind, f"{_item_value(i, i.old)} -> {_item_value(i, i.new)}")
                for i in diff.items
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
    import html  # imported here: only the markdown rendering escapes (html.entities, about 1 ms)

    return html.escape(text or "-", quote=False).replace("|", "\\|").replace("\n", " ")


def render_markdown(diffs: list[LockDiff]) -> str:
    """Markdown for a pull-request comment: headline counts, loud warnings, one folded table per
    platform."""
    out = [MARKER, "## envgen lock diff", ""]
    if not diffs:
        out.append("No lock changes.")
        return "\n".join(out) + "\n"
    for diff in diffs:
        out += _markdown_diff(diff)
    return "\n".join(out).rstrip("\n") + "\n"


def _markdown_diff(diff: LockDiff) -> list[str]:
    """One env's section: its headline, warnings, platforms, packages, sources and other changes."""
    out = [f"### `{diff.env}`: `{diff.old_label}` → `{diff.new_label}`", ""]
    out += [f"**{_headline(diff, ' · ')}**", ""]
    out += _markdown_warnings(diff)
    if diff.platforms_added or diff.platforms_removed:
        parts = [f"added {', '.join(diff.platforms_added)}"] if diff.platforms_added else []
        parts += [f"removed {', '.join(diff.platforms_removed)}"] if diff.platforms_removed else []
        out += [f"Platforms: {'; '.join(parts)}", ""]
    for platform in sorted({c.platform for c in diff.packages}):
        out += _markdown_packages(platform, [c for c in diff.packages if c.platform == platform])
    if diff.sources:
        out += ["#### Git sources", "", "| source | ref | commit | details |", "|---|---|---|---|"]
        out += [_source_row(s) for s in diff.sources]
        out.append("")
    if diff.items:
        out += _markdown_items(diff)
    return out


def _markdown_warnings(diff: LockDiff) -> list[str]:
    out: list[str] = []
    if diff.tampered:
        edited = "> **Edited after `envgen lock` wrote it:** re-lock instead of editing a lock."
        out += ["> [!CAUTION]", edited]
        out += [f"> - {_cell(problem)}" for problem in diff.tampered]
        out.append("")
    if diff.loud:
        same = "> **Same version, different artifact hash:** check these were rebuilt on purpose."
        out += ["> [!WARNING]", same]
        out += [f"> - {_cell(_warning(c))}" for c in diff.loud]
        out.append("")
    return out


def _markdown_packages(platform: str, changes: list[PackageChange]) -> list[str]:
    """One platform's package changes as a folded table (open when short)."""
    noun = "change" if len(changes) == 1 else "changes"
    details = "<details open>" if len(changes) <= OPEN_ROWS else "<details>"
    out = [f"{details}<summary><b>{platform}</b>: {len(changes)} package {noun}</summary>", ""]
    out += ["| change | manager | package | old | new | via |", "|---|---|---|---|---|---|"]
    for c in changes:
        old, new = _old_new(c)
        kind = f"**{c.kind}** ⚠️" if c.loud else c.kind
        cells = f"| {kind} | {c.manager} | `{_cell(c.name)}` | {_cell(old)} | {_cell(new)} |"
        out.append(f"{cells} {_cell(c.via)} |")
    return [*out, "", "</details>", ""]


def _markdown_items(diff: LockDiff) -> list[str]:
    out = ["#### Other changes", "", "| section | name | change | old | new |"]
    out.append("|---|---|---|---|---|")
    for i in diff.items:
        row = (
            i.section,
            f"`{_cell(i.name)}`",
            i.kind,
            _cell(_item_value(i, i.old)),
            _cell(_item_value(i, i.new)),
        )
        out.append(f"| {' | '.join(row)} |")
    return [*out, ""]


def _source_row(s: SourceChange) -> str:
    if s.kind == "added":
        ref, commit, details = (
            _cell(_ref(s.new_ref)),
            f"`{s.new_short}`",
            f"added {_cell(s.new_url)}",
        )
    elif s.kind == "removed":
        ref, commit, details = (
            _cell(_ref(s.old_ref)),
            f"`{s.old_short}`",
            f"removed {_cell(s.old_url)}",
        )
    else:
        ref = (
            _cell(_ref(s.new_ref))
            if s.old_ref == s.new_ref
            else f"{_cell(_ref(s.old_ref))} → {_cell(_ref(s.new_ref))}"
        )
        commit = (
            f"`{s.new_short}`"
            if s.old_commit == s.new_commit
            else f"`{s.old_short}` → `{s.new_short}`"
        )
        notes = [_cell(line) for line in _source_details(s) if line != s.compare_url]
        if s.compare_url:
            notes.append(f"[compare]({s.compare_url})")
        details = "<br>".join(notes) or "-"
    return f"| `{s.name}` | {ref} | {commit} | {details} |"


def _as_json(diff: LockDiff) -> dict[str, object]:
    data: dict[str, Any] = msgspec.to_builtins(diff)
    data["summary"] = diff.summary()
    data["warnings"] = [_warning(c) for c in diff.loud]
    for source, change in zip(data["sources"], diff.sources, strict=True):
        source["old_short"], source["new_short"] = change.old_short, change.new_short
    return data


def diff_results(diffs: list[LockDiff]) -> list[dict[str, object]]:
    """One JSON-able object per env that differs (the `results` of `envgen diff --json`)."""
    return [_as_json(d) for d in diffs]


def render_json(diffs: list[LockDiff]) -> str:
    """JSON with sorted keys: `{"changed": bool, "diffs": [...]}`, one entry per env that
    differs."""
    payload = {"changed": any(not d.empty for d in diffs), "diffs": [_as_json(d) for d in diffs]}
    return json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
