"""docs/architecture.md's rules, checked on the code: who may import whom, sizes, only the CLI layer prints or exits."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "generator" / "envgen"
# The CLI layer: the commands (cli) and what they share (console: flags, exit codes, output); it may import anything.
CLI_LAYER = ("cli", "console")

FOUNDATION = (
    "errors",
    "redact",
    "credentials",
    "npu",
    "model",
    "model_steps",
    "commits",
    "cherry_picks",
    "platforms",
    "process",
    "interrupts",
    "network",
    "logs",
    "scratch",
    "project",
    "outputs",
)
# What each module (by dotted name below envgen, matched by prefix, the longest first) may import from envgen.
ALLOWED: dict[str, tuple[str, ...]] = {
    "errors": (),
    "redact": (),
    "credentials": ("redact",),
    "npu": (),
    "commits": (),
    "cherry_picks": (),
    "scratch": (),
    "model": ("npu", "model_steps"),
    "model_steps": (),
    "platforms": ("errors", "model"),
    "interrupts": ("errors",),
    "network": ("errors", "interrupts"),
    "logs": (),
    "process": ("errors", "redact", "interrupts"),
    "project": ("errors", "model", "inputs.untrusted"),
    "outputs": ("errors", "project"),
    "inputs": (*FOUNDATION, "inputs"),
    "resolve": (*FOUNDATION, "inputs", "resolve"),
    "resolve.pipeline": (*FOUNDATION, "inputs", "resolve", "lockio", "lockdiff.moves", "recipe"),
    "resolve.head_start": (*FOUNDATION, "inputs", "resolve", "lockio.prediction", "lockio.store"),
    "lockio": (*FOUNDATION, "inputs.files", "inputs.toml_reader", "inputs.untrusted", "lockio"),
    "lockio.consistency": (*FOUNDATION, "lockio", "resolve.uv_pylock"),
    "lockio.integrity": (*FOUNDATION, "inputs.files", "lockio", "recipe.render"),
    "recipe": (*FOUNDATION, "inputs.untrusted"),
    "installer": (
        *FOUNDATION,
        "lockio.exports",
        "lockio.integrity",
        "recipe",
        "resolve.conda_stage",
        "resolve.archives",
    ),
    "bundle": (
        *FOUNDATION,
        "inputs.files",
        "inputs.untrusted",
        "resolve.index_client",
        "resolve.git_cache",
        "resolve.git_remote",
        "bundle",
    ),
    "lockdiff": (*FOUNDATION, "lockdiff.compare"),
    "lockdiff.moves": (*FOUNDATION, "resolve.upgrade"),
    "lockdiff.revisions": (*FOUNDATION, "inputs.files", "inputs.untrusted", "lockdiff", "lockio"),
    "commands": (
        *FOUNDATION,
        "inputs",
        "resolve",
        "lockio",
        "recipe",
        "installer",
        "lockdiff",
        "bundle",
        "commands",
        "example",
    ),
    "example": (*FOUNDATION, "example"),
}


def _modules() -> list[tuple[str, ast.Module, int]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        text = path.read_text()
        found.append((name, ast.parse(text), text.count("\n")))
    return found


def _rule(name: str) -> tuple[str, ...] | None:
    keys = sorted((k for k in ALLOWED if name == k or name.startswith(k + ".")), key=len, reverse=True)
    return ALLOWED[keys[0]] if keys else None


def _imports(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("envgen."):
            names.add(node.module.removeprefix("envgen."))
        elif isinstance(node, ast.ImportFrom) and node.module == "envgen":
            names.update(alias.name for alias in node.names)
    return names


def _within(imported: str, allowed: tuple[str, ...]) -> bool:
    return any(imported == a or imported.startswith(a + ".") for a in allowed)


@pytest.mark.parametrize(("name", "tree"), [(n, t) for n, t, _ in _modules() if n not in (*CLI_LAYER, "__main__", "")])
def test_each_module_imports_only_what_its_layer_may(name: str, tree: ast.Module) -> None:
    allowed = _rule(name)
    assert allowed is not None, f"{name} has no rule in docs/architecture.md (and ALLOWED here)"
    wrong = sorted(i for i in _imports(tree) if not _within(i, allowed) and i != "__version__")
    assert not wrong, f"{name} imports {wrong}, which its layer may not"


def test_sizes_and_that_only_the_cli_prints_or_exits() -> None:
    problems = []
    for name, tree, lines in _modules():
        if lines > 450:
            problems.append(f"{name}: {lines} lines")
        for node in ast.walk(tree):
            length = (node.end_lineno or 0) - node.lineno + 1 if isinstance(node, ast.stmt) else 0
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and length > 60:
                problems.append(f"{name}.{node.name}: {length} lines")
            if name not in CLI_LAYER and isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id == "print":
                    problems.append(f"{name}:{node.lineno}: print()")
                if isinstance(func, ast.Attribute) and func.attr == "exit" and getattr(func.value, "id", "") == "sys":
                    problems.append(f"{name}:{node.lineno}: sys.exit()")
    assert problems == []
