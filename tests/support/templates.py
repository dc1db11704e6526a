"""The repository's env-templates as `envgen show --json` prints them, and facts held against them.

A fact is (component, path in the show document, expected value): a str starting with "~" means
"contains", a dict means "has these keys with these values". Paths are dict keys; "sources/<name>"
picks a source by name, "imports/<module>" an import check by module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from envgen.cli import cli

REPO = Path(__file__).resolve().parents[2]

Fact = tuple[str, str, object]
# Override name -> the origins its reason must name.
Origins = dict[str, list[str]]


def show_json(env: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["show", env, "--json", "--root", str(REPO)])
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)["results"][0]
    return document


def walk(document: dict[str, Any], path: str) -> object:
    node: Any = document
    parts = path.split("/")
    while parts:
        part = parts.pop(0)
        if part == "sources":
            name = parts.pop(0)
            node = next(s for s in node["sources"] if s["name"] == name)
        elif part == "imports":
            module = parts.pop(0)
            node = next(c for c in node["checks"]["imports"] if c["module"] == module)
        elif isinstance(node, list):
            node = node[int(part)]
        else:
            node = node[part]
    return node


def wrong_facts(document: dict[str, Any], facts: list[Fact]) -> list[str]:
    """The facts `document` does not hold, each naming its component, what was found, expected."""
    wrong = []
    for component, path, expected in facts:
        found = walk(document, path)
        if isinstance(expected, str) and expected.startswith("~"):
            holds = isinstance(found, str) and expected[1:] in found
        elif isinstance(expected, dict) and isinstance(found, dict):
            holds = {k: found.get(k) for k in expected} == expected
        else:
            holds = found == expected
        if not holds:
            wrong.append(f"{component}: {path} is {found!r}, expected {expected!r}")
    return wrong


def missing_origins(document: dict[str, Any], origins: Origins) -> list[tuple[str, str]]:
    """(override, origin) for each origin its reason does not name; each override has a list."""
    overrides = document["overrides"]
    assert set(overrides) == set(origins)
    wanted = [(name, origin) for name, found in origins.items() for origin in found]
    return [(name, origin) for name, origin in wanted if origin not in overrides[name]["reason"]]


def leaves(node: object, path: str = "") -> dict[str, object]:
    """Every scalar of a document by path; sources and import checks keyed by name, not position."""
    if isinstance(node, dict):
        items = [(str(key), value) for key, value in node.items()]
    elif not isinstance(node, list):
        return {path: node}
    elif node and all(isinstance(i, dict) and ("name" in i or "module" in i) for i in node):
        items = [(str(i.get("name") or i["module"]), i) for i in node]
    else:
        items = [(str(n), i) for n, i in enumerate(node)]
    return {k: v for key, value in items for k, v in leaves(value, f"{path}/{key}").items()}


def differing(first: str, second: str) -> set[str]:
    """The leaf paths where the show documents of two envs differ."""
    a, b = leaves(show_json(first)), leaves(show_json(second))
    return {path for path in set(a) | set(b) if a.get(path) != b.get(path)}
