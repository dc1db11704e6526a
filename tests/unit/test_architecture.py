"""docs/architecture.md's rules, checked on the code: who may import whom, sizes, only the CLI layer prints or exits."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "generator" / "envgen"


# The CLI layer: the cli package (commands, options, output, exit codes); it may import anything.
def in_cli_layer(name: str) -> bool:
    return name == "cli" or name.startswith("cli.")


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
    "names",
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
    "project": ("errors", "model", "names"),
    "names": (),
    "outputs": ("errors", "project"),
    "inputs": (*FOUNDATION, "inputs"),
    "resolve": (*FOUNDATION, "inputs", "resolve"),
    "resolve.pipeline": (*FOUNDATION, "inputs", "resolve", "lockio", "recipe"),
    "resolve.head_start": (*FOUNDATION, "inputs", "resolve", "lockio.prediction", "lockio.store"),
    "lockio": (*FOUNDATION, "inputs.files", "inputs.toml_reader", "inputs.untrusted", "lockio"),
    "lockio.integrity": (*FOUNDATION, "inputs.files", "lockio", "recipe.render"),
    "recipe": (*FOUNDATION, "inputs.untrusted"),
    "installer": (
        *FOUNDATION,
        "inputs.files",
        "lockio.exports",
        "lockio.integrity",
        "lockio.store",
        "recipe",
        "resolve.archives",
        "resolve.conda_stage",
        "installer",
    ),
    "bundle": (
        *FOUNDATION,
        "inputs.files",
        "lockio.exports.requirements_txt",
        "inputs.untrusted",
        "resolve.index_client",
        "resolve.git_cache",
        "resolve.git_remote",
        "bundle",
    ),
    "lockdiff": (*FOUNDATION, "lockdiff.compare"),
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


@pytest.mark.parametrize(
    ("name", "tree"),
    [(n, t) for n, t, _ in _modules() if not in_cli_layer(n) and n not in ("__main__", "")],
)
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
            if not in_cli_layer(name) and isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id == "print":
                    problems.append(f"{name}:{node.lineno}: print()")
                if isinstance(func, ast.Attribute) and func.attr == "exit" and getattr(func.value, "id", "") == "sys":
                    problems.append(f"{name}:{node.lineno}: sys.exit()")
    assert problems == []


def _process_reads(tree: ast.Module) -> list[int]:
    """The lines of `tree` that read the process: `os.environ`, or `limits()` with no environment
    given (it reads os.environ then)."""
    return [node.lineno for node in ast.walk(tree) if _environ(node) or _process_limits(node)]


def _environ(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Attribute) and node.attr == "environ"):
        return False
    return getattr(node.value, "id", "") == "os"


def _process_limits(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    return node.func.attr == "limits" and not node.args and not node.keywords


def test_no_resolve_module_reads_the_process() -> None:
    """What resolving takes from the process comes in the Settings a command built once
    (resolve/settings.py, given the environment it reads)."""
    resolving = [(name, tree) for name, tree, _ in _modules() if name.startswith("resolve.")]
    found = [f"{name}:{line}" for name, tree in resolving for line in _process_reads(tree)]
    assert found == []
    main = ast.parse((PACKAGE / "commands" / "lock.py").read_text())
    assert _process_reads(main), "the rule sees what it looks for (the command reads os.environ)"
