"""`envgen audit`'s findings as text, as a markdown table for a pull request, and as JSON-ready
data (pure). A finding on several platforms is one row naming them; every string from an answer or
a lock is shown on one line with control characters escaped, and in markdown with the characters
that would shape the table or the page escaped too."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from envgen.lockgraph.audit import Finding, PlatformAudit
from envgen.lockgraph.render import shown

# A link kept in markdown: http(s), no character that could end it or the table cell.
_LINK = re.compile(r"https?://[A-Za-z0-9._~:/?#\[\]@!$&'*+,;=%-]+")
_SUMMARY = 120


def merged(audits: Sequence[PlatformAudit], ignored: bool = False) -> list[list[Finding]]:
    """The findings (the ignored ones with `ignored`) of every platform, one group per package,
    version and advisory with the finding of each platform, in the order of the first platform."""
    groups: dict[tuple[str, str, str], list[Finding]] = {}
    for audit in audits:
        for finding in audit.ignored if ignored else audit.findings:
            groups.setdefault((finding.name, finding.version, finding.advisory.id), []).append(
                finding
            )
    return list(groups.values())


def _ids(finding: Finding) -> str:
    aliases = finding.advisory.aliases
    return shown(finding.advisory.id + (f" ({', '.join(aliases)})" if aliases else ""))


def _fixed(finding: Finding) -> str:
    return f"fixed in {shown(finding.fixed)}" if finding.fixed else "no fixed release"


def _summary(finding: Finding) -> str:
    text = shown(finding.advisory.summary)
    return text if len(text) <= _SUMMARY else text[: _SUMMARY - 3] + "..."


def audit_text(audits: Sequence[PlatformAudit]) -> list[str]:
    """Each finding: `package version: ID (aliases), fixed in X [platforms]`, its summary and the
    path that brought it in; then the ignored ones with their reasons; then the count."""
    lines: list[str] = []
    for group in merged(audits):
        first = group[0]
        platforms = ", ".join(f.platform for f in group)
        lines.append(
            f"{shown(first.name)} {shown(first.version)}: {_ids(first)}, {_fixed(first)} "
            f"[{platforms}]"
        )
        if first.advisory.summary:
            lines.append(f"  {_summary(first)}")
        if first.path:
            lines.append(f"  path: {first.path}")
    for group in merged(audits, ignored=True):
        first = group[0]
        lines.append(
            f"ignored: {_ids(first)} in {shown(first.name)} {shown(first.version)} "
            f"(audit.ignore.{shown(first.ignored_as)}: {shown(first.ignored or '')})"
        )
    lines.append(_count(audits))
    return lines


def _count(audits: Sequence[PlatformAudit]) -> str:
    findings, ignored = len(merged(audits)), len(merged(audits, ignored=True))
    said = "no known vulnerability" if not findings else _plural(findings, "known vulnerability")
    asked = ", ".join(f"{a.asked} on {a.platform}" for a in audits)
    return f"{said}, {ignored} ignored; pinned packages asked about: {asked}"


def _plural(count: int, what: str) -> str:
    return f"{count} {what}" if count == 1 else f"{count} {what.removesuffix('y')}ies"


def _cell(text: str) -> str:
    """`text` in a markdown table cell: on one line, escaped so that it shapes neither the table
    nor the page (`|`, HTML, emphasis, code spans)."""
    flat = shown(text)
    flat = flat.replace("&", "&amp;").replace("<", "&lt;")
    return re.sub(r"([\\|`*_\[\]])", r"\\\1", flat)


def _advisory_cell(finding: Finding) -> str:
    advisory = finding.advisory
    link = advisory.link if _LINK.fullmatch(advisory.link) else ""
    name = f"[{_cell(advisory.id)}]({link})" if link else _cell(advisory.id)
    aliases = ", ".join(_cell(a) for a in advisory.aliases)
    return f"{name} ({aliases})" if aliases else name


def audit_markdown(env: str, audits: Sequence[PlatformAudit]) -> list[str]:
    """A table of the findings for a pull request, then the ignored ones with their reasons."""
    lines = [f"### envgen audit {_cell(env)}", ""]
    groups = merged(audits)
    if groups:
        lines += [
            "| package | version | advisory | fixed in | platforms | brought in by |",
            "|---|---|---|---|---|---|",
        ]
        for group in groups:
            f = group[0]
            cells = (
                _cell(f.name),
                _cell(f.version),
                _advisory_cell(f),
                _cell(f.fixed) if f.fixed else "no fixed release",
                ", ".join(_cell(g.platform) for g in group),
                _cell(f.path),
            )
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    ignored = merged(audits, ignored=True)
    if ignored:
        lines += ["| ignored | package | version | reason |", "|---|---|---|---|"]
        for group in ignored:
            f = group[0]
            row = (_advisory_cell(f), _cell(f.name), _cell(f.version), _cell(f.ignored or ""))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines.append(_cell(_count(audits)))
    return lines


def _finding_document(finding: Finding) -> dict[str, Any]:
    advisory = finding.advisory
    document = {
        "name": finding.name,
        "version": finding.version,
        "id": advisory.id,
        "aliases": list(advisory.aliases),
        "fixed_in": list(advisory.fixed_in),
        "fixed": finding.fixed,
        "summary": advisory.summary,
        "link": advisory.link,
        "path": finding.path,
    }
    if finding.ignored is not None:
        document |= {"ignored_as": finding.ignored_as, "reason": finding.ignored}
    return document


def audit_document(audit: PlatformAudit) -> dict[str, Any]:
    """One platform's result of `envgen audit --json`."""
    return {
        "env": audit.env,
        "platform": audit.platform,
        "asked": audit.asked,
        "findings": [_finding_document(f) for f in audit.findings],
        "ignored": [_finding_document(f) for f in audit.ignored],
        "unknown": list(audit.unknown),
    }
