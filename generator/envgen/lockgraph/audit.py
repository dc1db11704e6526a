"""`envgen audit`'s logic (pure: no file, no network): the PyPI JSON API's `vulnerabilities` of a
release read as advisories, the smallest fixed version above the locked one, the matrix's
`[audit.ignore]` applied, and each finding with the shortest path that brought its package in
(`why`'s first path).

An answer is hostile input: its shape is checked, its counts and strings bounded; what is printed
of it is escaped where it is rendered (`audit_render.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from packaging.version import InvalidVersion, Version

from envgen.lockgraph.graph import PIP, Graph, Key
from envgen.lockgraph.render import path_text
from envgen.lockgraph.walk import why

# The advisories one release may have, the names (aliases, fixed versions) one may list, and the
# characters of one string kept: beyond them an answer is not PyPI's.
MAX_ADVISORIES = 1000
MAX_NAMES = 200
MAX_TEXT = 2000
# The kinds of pip nodes asked about: a source is a git commit, which PyPI knows nothing of.
AUDITED_KINDS = ("pip", "archive")


class Malformed(ValueError):
    """An answer that is not what PyPI's JSON API gives: the message says where it differs."""


@dataclass(frozen=True)
class Advisory:
    """One record of `vulnerabilities`: its id, aliases (CVE ids), the versions that fix it, a
    summary, a link and whether it was withdrawn."""

    id: str
    aliases: tuple[str, ...] = ()
    fixed_in: tuple[str, ...] = ()
    summary: str = ""
    link: str = ""
    withdrawn: bool = False

    def ids(self) -> tuple[str, ...]:
        return (self.id, *self.aliases)


def parse_answer(document: object) -> tuple[Advisory, ...]:
    """The advisories of one answer of `GET /pypi/NAME/VERSION/json` (its `vulnerabilities`)."""
    if not isinstance(document, dict):
        raise Malformed(f"the answer is {_kind(document)}, not a JSON object")
    records = document.get("vulnerabilities")
    if not isinstance(records, list):
        raise Malformed(f"'vulnerabilities' is {_kind(records)}, not a list")
    if len(records) > MAX_ADVISORIES:
        raise Malformed(
            f"'vulnerabilities' lists {len(records)} records (at most {MAX_ADVISORIES})"
        )
    return tuple(_advisory(position, record) for position, record in enumerate(records))


def _kind(value: object) -> str:
    """What a JSON value is, as a message says it: `an object`, `a list`, `null`..."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    return "null" if value is None else names.get(type(value), "a number")


def _advisory(position: int, record: object) -> Advisory:
    where = f"vulnerabilities[{position}]"
    if not isinstance(record, dict):
        raise Malformed(f"{where} is {_kind(record)}, not an object")
    identifier = _text(record, "id", where, required=True)
    withdrawn = record.get("withdrawn")
    if withdrawn is not None and not isinstance(withdrawn, str):
        raise Malformed(f"{where}.withdrawn is {_kind(withdrawn)}, not a date or null")
    return Advisory(
        id=identifier,
        aliases=_names(record, "aliases", where),
        fixed_in=_names(record, "fixed_in", where),
        summary=_text(record, "summary", where),
        link=_text(record, "link", where),
        withdrawn=bool(withdrawn),
    )


def _text(record: dict[str, object], key: str, where: str, *, required: bool = False) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise Malformed(f"{where}.{key} is {_kind(value)}, not a{' non-empty' * required} string")
    return value[:MAX_TEXT]


def _names(record: dict[str, object], key: str, where: str) -> tuple[str, ...]:
    value = record.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise Malformed(f"{where}.{key} is not a list of non-empty strings")
    if len(value) > MAX_NAMES:
        raise Malformed(f"{where}.{key} lists {len(value)} names (at most {MAX_NAMES})")
    return tuple(v[:MAX_TEXT] for v in value)


def smallest_fixed(locked: str, fixed_in: Iterable[str]) -> str | None:
    """The lowest of `fixed_in` above the `locked` version, as written (None: none is, or the
    locked version is not one `packaging` reads); versions it cannot read are skipped."""
    try:
        current = Version(locked)
    except InvalidVersion:
        return None
    above: list[tuple[Version, str]] = []
    for text in fixed_in:
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if version > current:
            above.append((version, text))
    return min(above)[1] if above else None


@dataclass(frozen=True)
class Finding:
    """An advisory of a locked package on one platform: the smallest fixed version above the
    locked one (None: no release fixes it yet), the shortest path that brought the package in, and
    the reason it is ignored when the matrix ignores it (`ignored_as`: the id the matrix names)."""

    platform: str
    name: str
    version: str
    advisory: Advisory
    fixed: str | None
    path: str
    ignored: str | None = None
    ignored_as: str = ""


@dataclass(frozen=True)
class PlatformAudit:
    """One platform's audit: the releases asked about, the findings counted, the ignored ones, and
    the releases the service does not know (`unknown`: `name==version`)."""

    env: str
    platform: str
    asked: int
    findings: tuple[Finding, ...]
    ignored: tuple[Finding, ...]
    unknown: tuple[str, ...]


def audited(graph: Graph) -> list[tuple[Key, str, str]]:
    """The pinned pip packages of a platform to ask about: (key, name, version), by name."""
    nodes = (graph.nodes[k] for k in sorted(graph.nodes) if k[0] == PIP)
    return [((PIP, n.name), n.name, n.version) for n in nodes if n.kind in AUDITED_KINDS]


def audit_graph(
    graph: Graph,
    answers: Mapping[tuple[str, str], tuple[Advisory, ...] | None],
    ignores: Mapping[str, str],
) -> PlatformAudit:
    """The findings of one platform from the `answers` by (name, version) (None: the service does
    not know the release), the matrix's `ignores` (id -> reason) applied to an advisory's id and
    its aliases alike; a withdrawn advisory is no finding."""
    by_id = {advisory.upper(): (advisory, reason) for advisory, reason in ignores.items()}
    found: list[Finding] = []
    ignored: list[Finding] = []
    unknown: list[str] = []
    releases = audited(graph)
    for key, name, version in releases:
        advisories = answers.get((name, version))
        if advisories is None:
            unknown.append(f"{name}=={version}")
            continue
        for advisory in sorted(advisories, key=lambda a: a.id):
            if advisory.withdrawn:
                continue
            fixed = smallest_fixed(version, advisory.fixed_in)
            finding = Finding(graph.platform, name, version, advisory, fixed, _path(graph, key))
            match = next((by_id[i.upper()] for i in advisory.ids() if i.upper() in by_id), None)
            if match is None:
                found.append(finding)
            else:
                ignored.append(_ignored(finding, *match))
    return PlatformAudit(
        graph.env, graph.platform, len(releases), tuple(found), tuple(ignored), tuple(unknown)
    )


def _ignored(finding: Finding, advisory: str, reason: str) -> Finding:
    return replace(finding, ignored=reason, ignored_as=advisory)


def _path(graph: Graph, key: Key) -> str:
    """The shortest path from a root down to `key`, as `envgen why` shows it first."""
    paths = why(graph, key).paths
    return path_text(paths[0]) if paths else ""


def unused_ignores(audits: Iterable[PlatformAudit], ignores: Mapping[str, str]) -> list[str]:
    """The ids of `ignores` that matched no finding on any platform (stale decisions)."""
    used = {f.ignored_as.upper() for a in audits for f in a.ignored}
    return [advisory for advisory in ignores if advisory.upper() not in used]
