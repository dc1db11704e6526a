"""The walks of a lock's graph, each bounded whatever the lock holds (a cycle in `depends`, a chain
100,000 deep, a package required from everywhere): `why` (the paths from the roots down to one
package, shortest first), `tree` (the graph from its roots, or up from one package) and `nearest`
(the names a missing one is probably meant as)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

import msgspec

from envgen.lockgraph.graph import ROOT, SOURCES, Edge, Graph, Key

# Paths gathered before the walk stops counting, and the steps (nodes entered, edges of the paths
# kept) it may take in all: a package every other one depends on has more paths than anyone reads.
MAX_PATHS = 1000
MAX_WORK = 2_000_000
# The deepest level `tree` shows below a root (or above the inverted package).
MAX_DEPTH = 100


class Paths(msgspec.Struct, frozen=True):
    """The paths to `target`, each a tuple of edges from a root down to it, shortest first;
    `complete`: every path was found (else the walk stopped at its bounds, and more exist)."""

    target: Key
    paths: tuple[tuple[Edge, ...], ...]
    complete: bool


def distances(graph: Graph) -> dict[Key, int]:
    """Each node's number of edges from the nearest root (breadth first, each node once)."""
    found = dict.fromkeys(graph.roots, 0)
    queue = deque(graph.roots)
    while queue:
        key = queue.popleft()
        for edge in graph.children.get(key, ()):
            if edge.child not in found:
                found[edge.child] = found[key] + 1
                queue.append(edge.child)
    return found


def why(graph: Graph, target: Key) -> Paths:
    """Every path from a root down to `target` that visits no node twice, shortest first (ties in
    the graph's order); at most MAX_PATHS of them, found within MAX_WORK steps.

    The walk goes up from `target`, always to the parent nearest a root first, so the first path
    found is a shortest one even when the bounds stop the walk early.
    """
    depth = distances(graph)
    far = len(depth)
    # Each key's parents, nearest a root first: sorted once, however often the walk comes back.
    ordered: dict[Key, list[Edge]] = {}

    def ups(key: Key) -> Iterator[Edge]:
        edges = ordered.get(key)
        if edges is None:
            edges = sorted(graph.parents.get(key, ()), key=lambda e: depth.get(e.parent, far))
            ordered[key] = edges
        return iter(edges)

    found: list[tuple[Edge, ...]] = []
    trail: list[Edge] = []  # the edges walked up from `target`, nearest it first
    stack, on_trail, work = [ups(target)], {target}, 0
    while stack:
        edge = next(stack[-1], None)
        if edge is None:
            stack.pop()
            if trail:
                on_trail.discard(trail.pop().parent)
            continue
        work += 1
        if edge.parent in on_trail:
            continue
        if edge.parent[0] == ROOT:
            found.append((edge, *reversed(trail)))
            work += len(trail)
            if len(found) >= MAX_PATHS or work >= MAX_WORK:
                return Paths(target, _ordered(found), complete=False)
            continue
        if work >= MAX_WORK:
            return Paths(target, _ordered(found), complete=False)
        trail.append(edge)
        on_trail.add(edge.parent)
        stack.append(ups(edge.parent))
    return Paths(target, _ordered(found), complete=True)


def hops(path: tuple[Edge, ...]) -> int:
    """A path's length as it reads: a source is a root of its own (`rollout (requirements.txt:1)
    -> ...`), so the edge from the sources' root to it does not count."""
    return len(path) - (path[0].parent == (ROOT, SOURCES))


def _ordered(found: list[tuple[Edge, ...]]) -> tuple[tuple[Edge, ...], ...]:
    """Shortest first, then as found (the walk's order is the graph's: deterministic)."""
    return tuple(path for _, path in sorted(enumerate(found), key=lambda p: (hops(p[1]), p[0])))


def nearest(graph: Graph, name: str, count: int = 5) -> list[str]:
    """The names of the graph closest to `name` (difflib's ratio), closest first."""
    import difflib  # imported here: only a package the lock does not hold needs it

    names = graph.names()
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=count, cutoff=0.6)
    return [lowered[n] for n in close]


class Row(msgspec.Struct, frozen=True):
    """One line of a tree: its depth, the node, the edge it was reached by (None for where the
    tree starts), and whether its subtree is shown elsewhere (`seen`), closes a cycle (`cycle`) or
    lies past the depth asked (`cut`)."""

    depth: int
    key: Key
    edge: Edge | None
    last: tuple[bool, ...]  # per level down to this row: whether it is the last of its siblings
    seen: bool = False
    cycle: bool = False
    cut: bool = False


def tree(graph: Graph, depth: int = MAX_DEPTH, invert: Key | None = None) -> list[Row]:
    """The graph as rows, depth first: from each root down, or with `invert` from that node up to
    the roots. Each node's subtree is shown once (later rows of it are `seen`), so the rows are at
    most the nodes and edges of the graph, and none lies deeper than `depth` (at most MAX_DEPTH)."""
    depth = max(0, min(depth, MAX_DEPTH))
    starts = [invert] if invert is not None else list(graph.roots)
    rows: list[Row] = []
    expanded: set[Key] = set()
    for start in starts:
        _walk(graph, start, depth, invert is not None, rows, expanded)
    return rows


def _next(graph: Graph, key: Key, up: bool) -> tuple[tuple[Key, Edge], ...]:
    if up:
        return tuple((e.parent, e) for e in graph.parents.get(key, ()))
    return tuple((e.child, e) for e in graph.children.get(key, ()))


def _walk(
    graph: Graph, start: Key, depth: int, up: bool, rows: list[Row], expanded: set[Key]
) -> None:
    """Append the rows under `start` (iteratively: a chain of any depth takes no stack)."""
    below = _next(graph, start, up)
    rows.append(Row(0, start, None, (), cut=depth == 0 and bool(below)))
    if depth == 0:
        return
    expanded.add(start)
    path = [start]
    stack: list[tuple[Iterator[tuple[Key, Edge]], int, int, tuple[bool, ...]]] = [
        (iter(below), len(below), 0, ())
    ]
    while stack:
        items, total, done, last = stack[-1]
        step = next(items, None)
        if step is None:
            stack.pop()
            path.pop()
            continue
        stack[-1] = (items, total, done + 1, last)
        key, edge = step
        here = (*last, done + 1 == total)
        below = _next(graph, key, up)
        if key in expanded:
            rows.append(Row(len(here), key, edge, here, seen=bool(below), cycle=key in path))
            continue
        if len(here) >= depth:
            rows.append(Row(len(here), key, edge, here, cut=bool(below)))
            continue
        rows.append(Row(len(here), key, edge, here))
        expanded.add(key)
        path.append(key)
        stack.append((iter(below), len(below), 0, here))
