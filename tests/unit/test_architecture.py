"""docs/architecture.md's rules, checked on the code: the import contracts of pyproject.toml,
sizes, only the CLI layer prints or exits, no resolve/ module reads the process."""

from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "generator" / "envgen"
Nodes = tuple[ast.AST, ...]


# The CLI layer: the cli package (commands, options, output, exit codes); it may import anything.
def in_cli_layer(name: str) -> bool:
    return name == "cli" or name.startswith("cli.")


def _lint_imports(root: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on `root`/generator, against the contracts of `root`/pyproject.toml."""
    environ = {**os.environ, "PYTHONPATH": str(root / "generator")}
    command = [Path(sys.executable).parent / "lint-imports", "--no-cache", "--no-logo", *options]
    return subprocess.run(command, cwd=root, env=environ, capture_output=True, text=True)


def test_every_import_contract_of_pyproject_is_kept() -> None:
    """The layer rules live in pyproject.toml's [tool.importlinter] alone; import-linter reads
    every import, direct or indirect, of the package against them."""
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ", 0 broken." in done.stdout


@pytest.mark.parametrize(
    "case",
    [
        ("errors.py", "layers", "envgen.cli.output"),  # the foundation up to the CLI
        ("names.py", "layers", "envgen.npu"),  # two modules of one independent layer
        ("installer/core.py", "installer", "envgen.resolve.pipeline"),
        ("model.py", "data", "envgen.process"),
    ],
)
def test_a_contract_breaks_on_what_it_forbids(tmp_path: Path, case: tuple[str, str, str]) -> None:
    """The contracts catch what they forbid: a copy of the package with one import added."""
    module, contract, imported = case
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    copy = tmp_path / "generator" / "envgen"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("data", "__pycache__"))
    with (copy / module).open("a") as code:
        code.write(f"\nimport {imported}  # noqa\n")
    done = _lint_imports(tmp_path, "--contract", contract)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "0 kept, 1 broken." in done.stdout
    importer = "envgen." + module.removesuffix(".py").replace("/", ".")
    assert f"{importer} -> {imported}" in done.stdout


@functools.cache
def _modules() -> tuple[tuple[str, Nodes, int], ...]:
    """Every module of envgen: its name, its nodes and its line count, parsed and walked once for
    all the rules below (a second of CPU each time)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        text = path.read_text()
        found.append((name, _nodes(text), text.count("\n")))
    return tuple(found)


def _nodes(text: str) -> Nodes:
    """Every node of the module `text`, in ast.walk's order."""
    return tuple(ast.walk(ast.parse(text)))


def test_sizes_and_that_only_the_cli_prints_or_exits() -> None:
    problems = []
    for name, nodes, lines in _modules():
        if lines > 450:
            problems.append(f"{name}: {lines} lines")
        for node in nodes:
            length = (node.end_lineno or 0) - node.lineno + 1 if isinstance(node, ast.stmt) else 0
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and length > 60:
                problems.append(f"{name}.{node.name}: {length} lines")
            if not in_cli_layer(name) and isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id == "print":
                    problems.append(f"{name}:{node.lineno}: print()")
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr == "exit"
                    and getattr(func.value, "id", "") == "sys"
                ):
                    problems.append(f"{name}:{node.lineno}: sys.exit()")
    assert problems == []


def _process_reads(nodes: Nodes) -> list[int]:
    """The lines of a module that read the process: `os.environ`, or `limits()` with no environment
    given (it reads os.environ then)."""
    return [node.lineno for node in nodes if _environ(node) or _process_limits(node)]


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
    resolving = [(name, nodes) for name, nodes, _ in _modules() if name.startswith("resolve.")]
    found = [f"{name}:{line}" for name, nodes in resolving for line in _process_reads(nodes)]
    assert found == []
    main = _nodes((PACKAGE / "commands" / "lock" / "command.py").read_text())
    assert _process_reads(main), "the rule sees what it looks for (the command reads os.environ)"


def _root_errors(nodes: Nodes) -> list[int]:
    """The lines of a module that make an `EnvgenError` itself (not one of its classes): raised,
    returned or kept, any call of the root counts."""
    found = []
    for node in nodes:
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name == "EnvgenError":
                found.append(node.lineno)
    return found


def test_no_module_makes_the_root_error() -> None:
    """Every error envgen reports is of a class saying what failed, with its exit code
    (errors.py): the bare root would be exit 1, the code of a stale lock."""
    found = [f"{name}:{line}" for name, nodes, _ in _modules() for line in _root_errors(nodes)]
    assert found == []
    made = _nodes(
        "from envgen import errors\nraise errors.EnvgenError('x')\nerror = EnvgenError('y')\n"
    )
    assert _root_errors(made) == [2, 3], "the rule sees what it looks for"


# What installs a signal handler or changes which thread takes a signal.
_HANDLING = {"signal", "pthread_sigmask", "set_wakeup_fd", "siginterrupt"}


def _handles_signals(nodes: Nodes) -> list[int]:
    """The lines of a module that call `signal.signal`, `signal.pthread_sigmask` and their kind
    (or the same of `_signal`, the C module behind `signal`)."""
    return [
        node.lineno
        for node in nodes
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _HANDLING
        and getattr(node.func.value, "id", "") in {"signal", "_signal"}
    ]


def test_only_interrupts_installs_signal_handlers() -> None:
    """interrupts.py installs, restores and blocks the handlers of SIGINT and SIGTERM; the command
    line and the demo call it (sending a signal to a child, os.killpg, is anyone's). __main__ sets
    the one handler of start-up, before anything (interrupts.py either) is imported."""
    allowed = {"interrupts", "__main__"}
    others = [(name, nodes) for name, nodes, _ in _modules() if name not in allowed]
    found = [f"{name}:{line}" for name, nodes in others for line in _handles_signals(nodes)]
    assert found == []
    made = _nodes(
        "import signal\nsignal.signal(signal.SIGINT, "
        "signal.SIG_IGN)\nsignal.pthread_sigmask(0, set())\n_signal.signal(2, f)\n"
    )
    assert _handles_signals(made) == [2, 3, 4], "the rule sees what it looks for"
    assert _handles_signals(_nodes((PACKAGE / "interrupts.py").read_text()))
    assert len(_handles_signals(_nodes((PACKAGE / "__main__.py").read_text()))) == 1


def test_every_module_the_map_names_exists() -> None:
    """docs/architecture.md stays true: each `path.py` it names is a file of the repository (a
    module moved or removed is caught here, not by a newcomer)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`([A-Za-z_][\w/]*\.py)`", text))
    tops = ("generator", "tests", "benchmarks", "ci")
    files = [p.relative_to(ROOT).as_posix() for top in tops for p in (ROOT / top).rglob("*.py")]
    missing = sorted(n for n in named if not any(f == n or f.endswith(f"/{n}") for f in files))
    assert len(named) > 50 and not missing, missing
