"""`why`'s paths and `tree`'s rows as text and as JSON-ready data (pure). Every name and
requirement is shown on one line, control characters escaped: a lock's text is not trusted to
shape the output."""

from __future__ import annotations

from typing import Any

from envgen.lockgraph.graph import CONDA, ROOT, ROOT_LABELS, SOURCES, Edge, Graph, Key
from envgen.lockgraph.walk import Paths, Row


def shown(text: str) -> str:
    """`text` on one line, every character that is not printable escaped (`\\x1b`)."""
    flat = " ".join(text.split())
    if flat.isprintable():  # almost every name: no character to look at one by one
        return flat
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in flat)


def node_text(graph: Graph, key: Key) -> str:
    """A node as a line names it: name and version, and what it is or where it comes from when
    that is not the default index."""
    if key[0] == ROOT:
        return ROOT_LABELS[key[1]]
    node = graph.nodes[key]
    text = f"{node.name} {node.version}"
    if node.kind == "source":
        text += f" (git {node.detail[:12]})"
    elif node.kind == "archive":
        text += f" (archive {node.detail})"
    elif node.part != CONDA and node.index is None:
        text += " (by URL)"
    elif node.part != CONDA and node.index != graph.default_index:
        text += f" (index {node.index})"
    return shown(text)


def node_document(graph: Graph, key: Key) -> dict[str, Any]:
    if key[0] == ROOT:
        return {"root": key[1]}
    node = graph.nodes[key]
    document = {"part": node.part, "name": node.name, "version": node.version, "kind": node.kind}
    if node.part == CONDA:
        return document | {"build": node.detail}
    if node.kind == "source":
        return document | {"commit": node.detail}
    if node.kind == "archive":
        return document | {"archive": node.detail}
    return document | {"index": node.index}


def _edge_document(edge: Edge) -> dict[str, Any]:
    return {"requirement": edge.requirement, "via": edge.via, "overridden": edge.overridden or None}


def _requirement(edge: Edge) -> str:
    over = f" [overridden by {edge.overridden}]" if edge.overridden else ""
    return shown(edge.requirement + over)


def path_text(path: tuple[Edge, ...]) -> str:
    """`rollout (requirements.txt:1) -> demo-transformers>=5.0 -> demo-tokenizers>=0.21`: the root,
    then the requirement at each hop, each followed by where the next requirement is stated."""
    first = path[0]
    vias = [e.via for e in path[1:]] + [""]
    elements = [(_requirement(e), via) for e, via in zip(path, vias, strict=True)]
    if not (first.parent == (ROOT, SOURCES) and not first.via):  # a source needs no "sources ->"
        elements.insert(0, (ROOT_LABELS[first.parent[1]], first.via))
    return " -> ".join(f"{text} ({shown(via)})" if via else text for text, via in elements)


def why_document(graph: Graph, found: Paths, limit: int) -> dict[str, Any]:
    """One platform's answer: the package, the paths shown (`limit` at most) and how many more."""
    paths = [
        {
            "root": path[0].parent[1],
            "text": path_text(path),
            "hops": [node_document(graph, e.child) | _edge_document(e) for e in path],
        }
        for path in found.paths[:limit]
    ]
    return {
        "env": graph.env,
        "platform": graph.platform,
        "found": True,
        "package": node_document(graph, found.target),
        "paths": paths,
        "more": _more(found, limit),
        "complete": found.complete,
    }


def why_text(graph: Graph, found: Paths, limit: int) -> list[str]:
    """`why_document`'s answer as lines: the package, each path shown, how many more."""
    count = len(found.paths)
    more = _more(found, limit)
    lines = [f"{node_text(graph, found.target)} on {graph.platform}: {_count(count, found)}"]
    lines += [f"  {path_text(path)}" for path in found.paths[:limit]]
    if more or not found.complete:
        at_least = "" if found.complete else "at least "
        lines.append(f"  and {at_least}{more} more (--limit N shows more)")
    return lines


def _more(found: Paths, limit: int) -> int:
    """How many of the paths found are not shown."""
    return max(0, len(found.paths) - limit)


def _count(count: int, found: Paths) -> str:
    plural = "path" if count == 1 else "paths"
    return f"{count} {plural}, shortest first" if found.complete else f"over {count} {plural}"


def _marks(row: Row) -> str:
    return (
        " (*)"
        if row.seen and not row.cycle
        else " (cycle)"
        if row.cycle
        else " ..."
        if row.cut
        else ""
    )


def row_text(graph: Graph, row: Row) -> str:
    """A row of the tree drawn with its branches (`├── `, `└── `, `│   `)."""
    branches = "".join("    " if last else "│   " for last in row.last[:-1])
    if row.last:
        branches += "└── " if row.last[-1] else "├── "
    text = node_text(graph, row.key)
    edge = row.edge
    if edge is not None:
        name = graph.nodes[edge.child].name if edge.child in graph.nodes else ""
        asked = _requirement(edge) if edge.requirement != name or edge.overridden else ""
        detail = ", ".join(part for part in (asked, shown(edge.via)) if part)
        text += f"  [{detail}]" if detail else ""
    return branches + text + _marks(row)


def row_document(graph: Graph, row: Row) -> dict[str, Any]:
    document = {"depth": row.depth, **node_document(graph, row.key)}
    if row.edge is not None:
        document |= _edge_document(row.edge)
    return document | {"seen": row.seen, "cycle": row.cycle, "cut": row.cut}


def tree_text(graph: Graph, rows: list[Row]) -> list[str]:
    lines = [f"{graph.env} on {graph.platform}"]
    lines += [row_text(graph, row) for row in rows]
    if any(row.seen for row in rows) or any(row.cut for row in rows):
        lines.append("(*): shown above; (cycle): a requirement back up the branch; ...: deeper")
    return lines
