"""The graph of one platform of a Lock: its nodes (conda entries, pip artifacts, git sources, the
wheels of release archives), the requirements between them, and the roots they hang from.

The roots are what the lock records as the reasons a package is there: the matrix's pins (the keys
the derived requirements file names, given as `matrix_pins`), the sources' declared requirements
with their file and line, the overrides with their reason, the release archives, and in the conda
part the entries no other entry depends on (the lock records the solved entries, not the specs
that asked for them). A pip entry none of them reaches hangs from a root of its own, so every node
has a path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence

import msgspec
from packaging.requirements import InvalidRequirement, Requirement

from envgen.model import AppliedOverride, Lock, LockedSource, Origin
from envgen.names import package_key

CONDA, PIP, ROOT = "conda", "pip", "root"

# The roots, in the order `tree` shows them; (ROOT, kind) is each one's key.
MATRIX, SOURCES, OVERRIDES, ARCHIVES, UNEXPLAINED = (
    "matrix",
    "sources",
    "overrides",
    "archives",
    "unexplained",
)
ROOT_KINDS = (CONDA, MATRIX, SOURCES, OVERRIDES, ARCHIVES, UNEXPLAINED)
ROOT_LABELS = {
    CONDA: "conda",
    MATRIX: "matrix",
    SOURCES: "sources",
    OVERRIDES: "override",
    ARCHIVES: "archive",
    UNEXPLAINED: "no recorded reason",
}

Key = tuple[str, str]  # (part, name): CONDA, PIP or ROOT, and the name (canonical for pip)


class Node(msgspec.Struct, frozen=True):
    """A package of the platform: its part, name, version and what it is (`kind`: conda, pip,
    source or archive), the index it came from (pip; None for a wheel named by URL), and `detail`
    (a conda build, a source's commit, an archive's name)."""

    part: str
    name: str
    version: str
    kind: str
    index: str | None = None
    detail: str = ""


class Edge(msgspec.Struct, frozen=True):
    """A requirement of `parent` on `child`: its text as the parent states it, where it is stated
    (a source's file and line, a matrix key, an override's reason), and the override that replaces
    it ("" when none does)."""

    parent: Key
    child: Key
    requirement: str
    via: str = ""
    overridden: str = ""


class Graph(msgspec.Struct, frozen=True):
    """One platform of a lock: nodes by key, each key's edges down (`children`) and up
    (`parents`), both in a fixed order, and what the walk could not use (`notes`)."""

    env: str
    platform: str
    default_index: str | None
    nodes: Mapping[Key, Node]
    children: Mapping[Key, tuple[Edge, ...]]
    parents: Mapping[Key, tuple[Edge, ...]]
    notes: tuple[str, ...] = ()
    # Why the lock holds no entry of a name it knows: pending, or left out on purpose here.
    absent: Mapping[str, str] = msgspec.field(default_factory=dict)

    @property
    def roots(self) -> tuple[Key, ...]:
        """The roots that hold anything, in ROOT_KINDS order."""
        return tuple((ROOT, k) for k in ROOT_KINDS if self.children.get((ROOT, k)))

    def find(self, name: str) -> tuple[Key, ...]:
        """The nodes called `name` (a pip name compared canonical, a conda name lowercase), pip
        first."""
        keys = ((PIP, package_key(name)), (CONDA, name.lower()))
        return tuple(k for k in keys if k in self.nodes)

    def names(self) -> tuple[str, ...]:
        return tuple(sorted({name for part, name in self.nodes if part != ROOT}))


class _Builder(msgspec.Struct):
    nodes: dict[Key, Node] = msgspec.field(default_factory=dict)
    edges: dict[tuple[Key, Key, str, str], Edge] = msgspec.field(default_factory=dict)

    def add(self, edge: Edge) -> None:
        if edge.child in self.nodes and edge.parent != edge.child:
            self.edges.setdefault((edge.parent, edge.child, edge.requirement, edge.via), edge)


def build(
    lock: Lock,
    platform: str,
    matrix_pins: Mapping[str, Sequence[str]] | None = None,
    notes: Sequence[str] = (),
) -> Graph:
    """The graph of `platform` of `lock`; `matrix_pins`: canonical pip name -> the matrix keys that
    pin it ("env-templates/a5.toml: pip.packages.torch")."""
    b = _Builder()
    overrides: dict[str, AppliedOverride] = {
        package_key(o.override.name): o for o in lock.overrides
    }
    _conda(b, lock, platform)
    _pip(b, lock, platform, overrides)
    _sources(b, lock, overrides)
    _archives(b, lock, platform)
    _matrix(b, matrix_pins or {}, overrides)
    for name, applied in sorted(overrides.items()):
        reason = f"reason: {applied.override.reason}"
        b.add(Edge((ROOT, OVERRIDES), (PIP, name), applied.override.requirement, reason))
    _hang_the_rest(b, CONDA, CONDA)
    _hang_the_rest(b, PIP, UNEXPLAINED)
    absent: dict[str, str] = {package_key(p.name): f"pending: {p.note}" for p in lock.pending}
    for e in (e for e in lock.exclusions if e.applies(platform)):
        absent[package_key(e.name)] = f"left out on purpose: {e.reason}"
    default = next((i.name for i in lock.indexes if not i.explicit), None)
    return msgspec.structs.replace(
        _graph(b, lock.env, platform, default, tuple(notes)), absent=absent
    )


def _matrix(
    b: _Builder, pins: Mapping[str, Sequence[str]], overrides: Mapping[str, AppliedOverride]
) -> None:
    for name, keys in sorted(pins.items()):
        child = (PIP, package_key(name))
        applied = overrides.get(child[1])
        over = _overridden(applied, direct=True)
        for key in sorted(keys):
            b.add(Edge((ROOT, MATRIX), child, _pinned(applied, key, child[1]), key, over))


def _graph(
    b: _Builder, env: str, platform: str, default: str | None, notes: tuple[str, ...]
) -> Graph:
    order = sorted(b.edges.values(), key=lambda e: (e.child, e.parent, e.via, e.requirement))
    children: dict[Key, list[Edge]] = {}
    parents: dict[Key, list[Edge]] = {}
    for edge in order:
        children.setdefault(edge.parent, []).append(edge)
        parents.setdefault(edge.child, []).append(edge)
    return Graph(
        env,
        platform,
        default,
        b.nodes,
        {k: tuple(v) for k, v in children.items()},
        {k: tuple(v if len(v) == 1 else sorted(v, key=_by_parent)) for k, v in parents.items()},
        notes,
    )


def _by_parent(edge: Edge) -> tuple[Key, str, str]:
    return (edge.parent, edge.via, edge.requirement)


def _overridden(applied: AppliedOverride | None, *, direct: bool) -> str:
    """The override replacing a requirement on its package: every direct-layer one (the matrix's,
    the sources'), a third party's only when the override is transitive."""
    if applied is None or not (direct or applied.override.transitive):
        return ""
    return applied.override.requirement


def _pinned(applied: AppliedOverride | None, key: str, name: str) -> str:
    """The requirement a matrix key states: the lock records it only where an override replaced
    it; elsewhere the package's name stands for it."""
    replaced = applied.replaced if applied else ()
    return next((r.text for r in replaced if f"{r.origin}.".startswith(f"{key}.")), name)


def _conda(b: _Builder, lock: Lock, platform: str) -> None:
    entries = lock.conda_for(platform)
    for e in entries:
        b.nodes[(CONDA, e.name.lower())] = Node(
            CONDA, e.name.lower(), e.version, CONDA, None, e.build
        )
    for e in entries:
        for name, spec in e.depends:
            text = f"{name} {spec}".strip()
            b.add(Edge((CONDA, e.name.lower()), (CONDA, name.lower()), text))


def _pip(b: _Builder, lock: Lock, platform: str, overrides: Mapping[str, AppliedOverride]) -> None:
    entries = [(package_key(e.name), e) for e in lock.pip_for(platform)]
    for name, e in entries:
        b.nodes[(PIP, name)] = Node(PIP, name, e.version, PIP, e.index)
    for name, e in entries:
        for dependency, spec in e.depends:
            child = package_key(dependency)
            over = _overridden(overrides.get(child), direct=False)
            b.add(Edge((PIP, name), (PIP, child), f"{child}{spec}", "", over))


def _sources(b: _Builder, lock: Lock, overrides: Mapping[str, AppliedOverride]) -> None:
    """Each source a node (by its distribution's name), hung from the source whose requirement file
    named it, else from the sources' root; its declared requirements its edges."""
    keys = {s.source.name: (PIP, package_key(s.source.distribution)) for s in lock.sources}
    for locked in lock.sources:
        source = locked.source
        b.nodes.setdefault(
            keys[source.name],
            Node(PIP, keys[source.name][1], source.ref, "source", None, locked.commit),
        )
    for locked in lock.sources:
        _source_edges(b, locked, keys, overrides)


def _source_edges(
    b: _Builder,
    locked: LockedSource,
    keys: Mapping[str, Key],
    overrides: Mapping[str, AppliedOverride],
) -> None:
    source = locked.source
    key = keys[source.name]
    parent, where = (ROOT, SOURCES), ""
    if source.origin:
        named, _, where = source.origin.partition(":")
        parent = keys.get(named, parent)
        where = where if parent != (ROOT, SOURCES) else f"named by {source.origin}"
    b.add(
        Edge(
            parent, key, source.name if parent == (ROOT, SOURCES) else f"{source.name} (git)", where
        )
    )
    for traced in locked.requirements:
        name = _name(traced.text)
        if name is None or traced.constraint:
            continue
        over = _overridden(overrides.get(name), direct=True)
        b.add(Edge(key, (PIP, name), traced.text, _where(traced.origin), over))


def _archives(b: _Builder, lock: Lock, platform: str) -> None:
    for archive in lock.archives_for(platform):
        for member in archive.members:
            key = (PIP, package_key(member.name))
            b.nodes.setdefault(
                key, Node(PIP, key[1], member.version, "archive", None, archive.name)
            )
            b.add(Edge((ROOT, ARCHIVES), key, f"{key[1]}=={member.version}", archive.name))
            for text in member.requires:
                name = _name(text)
                if name is not None:
                    b.add(Edge(key, (PIP, name), text))


def _hang_the_rest(b: _Builder, part: str, root: str) -> None:
    """Hang from `root` each node of `part` that no root reaches: first those no edge enters, then,
    for what is left (cycles), the first by name of each."""
    down: dict[Key, list[Key]] = {}
    for parent, child, _, _ in b.edges:
        down.setdefault(parent, []).append(child)
    reached: set[Key] = set()
    _reach(down, [(ROOT, k) for k in ROOT_KINDS], reached)
    entered = {child for (_, child, _, _) in b.edges}
    left = sorted(k for k in b.nodes if k[0] == part and k not in reached)
    for key in [k for k in left if k not in entered] + [k for k in left if k in entered]:
        if key not in reached:
            b.add(Edge((ROOT, root), key, key[1]))
            _reach(down, [key], reached)


def _reach(down: Mapping[Key, list[Key]], starts: Iterable[Key], seen: set[Key]) -> None:
    """Add to `seen` every key reached from `starts` (breadth first, each key once: a cycle ends
    the walk, and a key already seen is not walked again)."""
    queue = deque(k for k in starts if k not in seen)
    seen.update(queue)
    while queue:
        for child in down.get(queue.popleft(), ()):
            if child not in seen:
                seen.add(child)
                queue.append(child)


def _name(text: str) -> str | None:
    try:
        return package_key(Requirement(text).name)
    except InvalidRequirement:
        return None


def _where(origin: Origin) -> str:
    """A source's requirement as `file:line` (or the file and key of a pyproject's)."""
    if origin.line:
        return f"{origin.file}:{origin.line}"
    return f"{origin.file}: {origin.key}" if origin.key else origin.file
