"""The root that brought each pip package into one side of `envgen diff`: the first (shortest) of
the paths `envgen why` gives, named by its root alone (`vllm-ascend requirements.txt:38`, `matrix
pip.packages.transformers`, `override: reason`). lockdiff/ knows no lock graph: it is given these
as a function (lockdiff.revisions.Explain)."""

from __future__ import annotations

from envgen.lockdiff.changes import Via
from envgen.lockdiff.revisions import Derived
from envgen.lockgraph.graph import (
    ARCHIVES,
    MATRIX,
    OVERRIDES,
    PIP,
    ROOT,
    SOURCES,
    Edge,
    Graph,
    build,
)
from envgen.lockgraph.render import shown
from envgen.lockgraph.walk import why
from envgen.lockio.exports.names import recorded_hash, requirements_name
from envgen.lockio.exports.requirements_txt import matrix_keys
from envgen.model import Lock


def explain(lock: Lock, derived: Derived) -> Via:
    """The roots of `lock`'s pip packages; each platform's graph is built when first asked about,
    with the matrix keys its derived requirements file records (none when that file is missing or
    of another lock)."""
    graphs: dict[str, Graph] = {}

    def via(platform: str, name: str) -> str | None:
        if platform not in lock.platforms:
            return None
        if platform not in graphs:
            graphs[platform] = build(lock, platform, _matrix_pins(lock, platform, derived))
        graph = graphs[platform]
        key = (PIP, name)
        if key not in graph.nodes:
            return None
        paths = why(graph, key).paths
        return root_text(paths[0]) if paths else None

    return via


def _matrix_pins(lock: Lock, platform: str, derived: Derived) -> dict[str, tuple[str, ...]]:
    name = requirements_name(lock.env, platform)
    if "/" in name or "\\" in name or name.startswith("."):  # a platform naming another file
        return {}
    text = derived(name)
    if text is None or recorded_hash(text) != lock.input_hash:
        return {}
    return matrix_keys(text)


def root_text(path: tuple[Edge, ...]) -> str | None:
    """The root of a `why` path, compactly, on one line; None for a package no root explains."""
    first = path[0]
    kind = first.parent[1] if first.parent[0] == ROOT else ""
    if kind == SOURCES:
        # The source, and where it states the requirement the path follows down from it.
        where = path[1].via if len(path) > 1 else ""
        text = f"{first.requirement} {where}".strip()
    elif kind == MATRIX:
        # `env-templates/a5.toml: pip.packages.torch`: the key says it; the file is the matrix.
        text = f"matrix {first.via.rpartition(': ')[2]}"
    elif kind == OVERRIDES:
        text = f"override: {first.via.removeprefix('reason: ')}"
    elif kind == ARCHIVES:
        text = f"archive {first.via}"
    else:
        return None
    return shown(text)
