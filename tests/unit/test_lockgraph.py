"""The walks of a lock's graph (lockgraph/) on hand-built Locks: the roots a lock records, paths
shortest first, a cycle, a chain 100,000 deep, more paths than anyone reads, an absent package."""

from __future__ import annotations

from envgen.lockgraph.graph import CONDA, PIP, ROOT, UNEXPLAINED, build
from envgen.lockgraph.render import path_text, row_text, tree_text, why_text
from envgen.lockgraph.walk import MAX_DEPTH, MAX_PATHS, nearest, tree, why
from envgen.lockio.exports.requirements_txt import matrix_keys, render_requirements
from envgen.model import (
    AppliedOverride,
    Index,
    LockedSource,
    Origin,
    Override,
    PipPackage,
    Source,
    TracedRequirement,
)

from tests.support.builders import conda_entry, make_lock, make_matrix, pip_entry

P = "linux-64"
MATRIX = "env-templates/demo.toml"


def pins(*names: str) -> dict[str, tuple[str, ...]]:
    return {n: (f"{MATRIX}: pip.packages.{n}",) for n in names}


def wheels(depends: dict[str, tuple[str, ...]], **index: str) -> tuple:
    """A pip entry per name, each depending on the names listed for it (`>=0` as its specifier)."""
    return tuple(
        pip_entry(
            name, "1.0", P, depends=tuple((d, ">=0") for d in deps), index=index.get(name, "pypi")
        )
        for name, deps in depends.items()
    )


def make(**fields: object):
    """A lock on P with the default index "pypi" (and an explicit "ta")."""
    indexes = (Index("pypi", "https://pypi.org/simple"), Index("ta", "https://t.example/s", True))
    return make_lock(**({"indexes": indexes} | fields))


def texts(graph, name: str) -> list[str]:
    return [path_text(p) for p in why(graph, (PIP, name)).paths]


def test_paths_come_shortest_first_with_the_requirement_at_each_hop() -> None:
    lock = make(pip=wheels({"a": ("b", "t"), "b": ("t",), "t": ()}))
    graph = build(lock, P, pins("a", "b"))
    assert texts(graph, "t") == [
        f"matrix ({MATRIX}: pip.packages.a) -> a -> t>=0",
        f"matrix ({MATRIX}: pip.packages.b) -> b -> t>=0",
        f"matrix ({MATRIX}: pip.packages.a) -> a -> b>=0 -> t>=0",
    ]
    lines = why_text(graph, why(graph, (PIP, "t")), limit=2)
    assert lines[0] == "t 1.0 on linux-64: 3 paths, shortest first"
    assert lines[-1] == "  and 1 more (--limit N shows more)"


def test_a_source_requirement_names_its_file_and_line_and_an_override_its_reason() -> None:
    rollout = Source("rollout", "https://github.com/x/rollout.git", "v1", "rollout")
    asked = TracedRequirement("tf>=5.0", Origin("requirements.txt", line=38, source="rollout"))
    limited = TracedRequirement("a<2", Origin("requirements.txt", line=2, source="rollout"), True)
    override = Override("tf", "tf==4.57", "the matrix validates 4.57")
    lock = make(
        pip=wheels({"tf": ("tok",), "tok": (), "a": ()}),
        sources=(LockedSource(rollout, "c" * 40, (asked, limited)),),
        overrides=(AppliedOverride(override, (asked,)),),
    )
    graph = build(lock, P)
    assert texts(graph, "tok") == [
        "override (reason: the matrix validates 4.57) -> tf==4.57 -> tok>=0",
        "rollout (requirements.txt:38) -> tf>=5.0 [overridden by tf==4.57] -> tok>=0",
    ]
    # A `-c` constraint requires nothing: `a` is there for no recorded reason.
    assert texts(graph, "a") == ["no recorded reason -> a"]
    assert texts(graph, "rollout") == ["rollout"]


def test_a_cycle_in_depends_is_walked_once() -> None:
    lock = make(pip=wheels({"a": ("b",), "b": ("c",), "c": ("a",), "x": ("y",), "y": ("x",)}))
    graph = build(lock, P, pins("a"))
    assert texts(graph, "c") == [f"matrix ({MATRIX}: pip.packages.a) -> a -> b>=0 -> c>=0"]
    # A cycle nothing pins hangs from a root of its own, at its first name.
    assert texts(graph, "y") == ["no recorded reason -> x -> y>=0"]
    rows = tree(graph)
    marked = [row_text(graph, r) for r in rows if r.cycle]
    assert marked == ["            └── a 1.0  [a>=0] (cycle)", "        └── x 1.0  [x>=0] (cycle)"]
    assert [r.key for r in rows if r.depth == 0] == [(ROOT, "matrix"), (ROOT, UNEXPLAINED)]


def test_a_chain_100000_deep_is_a_bounded_walk() -> None:
    deep = 100_000
    names = [f"p{i}" for i in range(deep)]
    chain = {n: (names[i + 1],) if i + 1 < deep else () for i, n in enumerate(names)}
    lock = make(pip=wheels(chain))
    graph = build(lock, P, pins("p0"))
    (path,) = why(graph, (PIP, names[-1])).paths
    assert len(path) == deep and path[-1].child == (PIP, names[-1])
    rows = tree(graph)
    assert len(rows) == MAX_DEPTH + 1 and rows[-1].cut
    assert tree_text(graph, rows)[-1].endswith("...: deeper")
    assert len(tree(graph, 3, invert=(PIP, names[-1]))) == 4


def test_more_paths_than_anyone_reads_stop_the_walk_with_a_shortest_one_first() -> None:
    layers = [[f"l{i}n{j}" for j in range(12)] for i in range(4)]
    depends = {
        n: tuple(layers[i + 1]) if i + 1 < len(layers) else ("t",)
        for i, layer in enumerate(layers)
        for n in layer
    }
    lock = make(pip=wheels(depends | {"t": (), "top": ("t",)}))
    graph = build(lock, P, pins(*layers[0], "top"))
    found = why(graph, (PIP, "t"))
    assert not found.complete and len(found.paths) == MAX_PATHS
    assert path_text(found.paths[0]) == f"matrix ({MATRIX}: pip.packages.top) -> top -> t>=0"
    assert (
        why_text(graph, found, 1)[-1]
        == f"  and at least {MAX_PATHS - 1} more (--limit N shows more)"
    )


def test_the_conda_part_hangs_from_its_top_entries() -> None:
    conda = (
        conda_entry("python", "3.11.9", P, depends=(("__glibc", ">=2.17"),)),
        conda_entry("pip", "24.0", P, depends=(("python", ">=3.8"),)),
        conda_entry("libdemo", "1.0", P, depends=(("libz", ""),)),
        conda_entry("libz", "1.3", P, depends=(("libdemo", ""),)),
    )
    graph = build(make(conda=conda), P)
    assert texts_of(graph, (CONDA, "python")) == ["conda -> pip -> python >=3.8"]
    assert texts_of(graph, (CONDA, "libz")) == ["conda -> libdemo -> libz"]


def texts_of(graph, key) -> list[str]:
    return [path_text(p) for p in why(graph, key).paths]


def test_an_absent_package_has_the_nearest_names() -> None:
    graph = build(make(pip=wheels({"transformers": (), "tokenizers": (), "torch": ()})), P)
    assert graph.find("Transformer") == ()
    assert nearest(graph, "Transformer")[0] == "transformers"
    assert nearest(graph, "zzz") == []


def test_the_index_shows_when_not_the_default_and_hostile_text_is_escaped() -> None:
    rollout = Source("rollout", "https://github.com/x/rollout.git", "v1", "rollout")
    hostile = TracedRequirement("torch ; os_name == '\x1b[31m'", Origin("req\x1b.txt", line=1))
    lock = make(
        pip=wheels({"torch": (), "triton": ()}, torch="pypi", triton="ta"),
        sources=(LockedSource(rollout, "c" * 40, (hostile,)),),
    )
    graph = build(lock, P, pins("triton"))
    lines = tree_text(graph, tree(graph))
    assert lines[2] == "└── triton 1.0 (index ta)  [env-templates/demo.toml: pip.packages.triton]"
    assert "\x1b" not in "".join(lines) and "req\\x1b.txt:1" in "".join(lines)


def test_the_matrix_keys_are_read_back_from_the_via_lines_the_export_writes() -> None:
    lock = make(
        pip=wheels({"torch": ("numpy",), "numpy": ()}),
    )
    matrix = make_matrix(packages=(PipPackage("torch", "==1.0"),))
    text = render_requirements(lock, P, matrix)
    assert matrix_keys(text) == {"torch": (f"{MATRIX}: pip.packages.torch",)}
    graph = build(lock, P, matrix_keys(text))
    assert texts(graph, "numpy") == [f"matrix ({MATRIX}: pip.packages.torch) -> torch -> numpy>=0"]
