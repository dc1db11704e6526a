"""`envgen why` and `envgen tree`: a lock explained from locks/ alone (nothing resolved, no git, no
network). The lock gives the graph (lockgraph/); the derived requirements file of each platform
gives the matrix keys that pin its packages, which the lock itself does not record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envgen.lockgraph.graph import Graph, build
from envgen.lockgraph.render import row_document, shown, tree_text, why_document, why_text
from envgen.lockgraph.walk import MAX_DEPTH, nearest, tree, why
from envgen.lockio.exports.names import recorded_hash, requirements_name
from envgen.lockio.exports.requirements_txt import matrix_keys
from envgen.lockio.store import read_derived, require_lock, require_platforms
from envgen.model import Lock
from envgen.names import package_key
from envgen.project import Project


@dataclass
class Explained:
    """What `why`, `tree` and `audit` print: one result per platform, the text (or markdown), notes
    for stderr, the exit code (1: the package asked about is on no platform of the lock; for
    `audit`, a finding no ignore covers). `why` and `tree` give the results for --json only, the
    text otherwise."""

    results: list[dict[str, Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    exit_code: int = 0

    @property
    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def graphs(project: Project, env: str, platform: str | None) -> list[Graph]:
    """The graph of each platform of the lock of `env` (only `platform` when given)."""
    lock = require_lock(project, env)
    require_platforms(
        lock,
        () if platform is None else (platform,),
        hint="name one of the lock's platforms, or leave out --platform for all of them",
    )
    chosen = (platform,) if platform else lock.platforms
    return [_graph(project, lock, p) for p in chosen]


def _graph(project: Project, lock: Lock, platform: str) -> Graph:
    name = requirements_name(lock.env, platform)
    text = read_derived(project.locks_dir, name)
    if text is None:
        why = f"locks/{name} is missing"
    elif recorded_hash(text) != lock.input_hash:
        why = f"locks/{name} is not of this lock (its input hash differs)"
    else:
        return build(lock, platform, matrix_keys(text))
    note = f"{why}: the matrix's pins are not shown (`envgen lock {lock.env} --force` writes it)"
    return build(lock, platform, {}, (note,))


def why_env(
    project: Project,
    env: str,
    package: str,
    *,
    platform: str | None = None,
    limit: int = 10,
    as_json: bool = False,
) -> Explained:
    """Every path from the roots of the lock of `env` down to `package`, per platform: the results
    with `as_json`, else the text."""
    out = Explained()
    missing = []
    held = False
    for graph in graphs(project, env, platform):
        out.notes += [f"{graph.platform}: {note}" for note in graph.notes]
        keys = graph.find(package)
        if not keys:
            missing.append(graph)
            continue
        held = True
        for key in keys:
            found = why(graph, key)
            if as_json:
                out.results.append(why_document(graph, found, limit))
            else:
                out.lines += ([""] if out.lines else []) + why_text(graph, found, limit)
    if missing and not held:
        out.exit_code = 1
    for graph in missing:
        if as_json:
            out.results.append(_absent(graph, package))
        out.notes.append(_absent_text(graph, package))
    return out


def _absent(graph: Graph, package: str) -> dict[str, Any]:
    return {
        "env": graph.env,
        "platform": graph.platform,
        "found": False,
        "package": {"name": package},
        "reason": graph.absent.get(package_key(package)),
        "nearest": nearest(graph, package),
    }


def _absent_text(graph: Graph, package: str) -> str:
    """`torch-npu: not in the lock of a5 on linux-64 (pending: ...)`, or the nearest names."""
    where = f"{shown(package)}: not in the lock of {graph.env} on {graph.platform}"
    reason = graph.absent.get(package_key(package))
    if reason:
        return f"{where} ({shown(reason)})"
    close = nearest(graph, package)
    return f"{where}; nearest: {', '.join(close)}" if close else where


def tree_env(
    project: Project,
    env: str,
    *,
    platform: str | None = None,
    depth: int = MAX_DEPTH,
    invert: str | None = None,
    as_json: bool = False,
) -> Explained:
    """The lock of `env` as a tree per platform, from its roots or up from `invert`: the results
    with `as_json`, else the text."""
    out = Explained()
    held = False
    for graph in graphs(project, env, platform):
        out.notes += [f"{graph.platform}: {note}" for note in graph.notes]
        starts = graph.find(invert)[:1] if invert is not None else [None]
        if not starts:
            if as_json:
                out.results.append(_absent(graph, invert or ""))
            out.notes.append(_absent_text(graph, invert or ""))
            continue
        held = True
        rows = tree(graph, depth, starts[0])
        if not as_json:
            out.lines += ([""] if out.lines else []) + tree_text(graph, rows)
            continue
        out.results.append(
            {
                "env": graph.env,
                "platform": graph.platform,
                "invert": invert,
                "depth": depth,
                "rows": [row_document(graph, row) for row in rows],
            }
        )
    if invert is not None and not held:
        out.exit_code = 1
    return out
