"""The bundled example for tests: its artifacts built once per session, each test or module serving
a copy."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.example.project import Example, build_example, serve_built_example

from tests.support.shared import build_once


@contextmanager
def served_example(factory: pytest.TempPathFactory, workdir: Path) -> Iterator[Example]:
    """What `serve_example(workdir)` gives, from a copy of the session's artifacts: the copy is the
    test's own (its upstream repos may move, its indexes gain or lose files) and builds the same
    bytes a new build would."""
    shutil.copytree(
        build_once(factory, "example-artifacts", build_example),
        workdir,
        symlinks=True,
        dirs_exist_ok=True,
    )
    with serve_built_example(workdir) as example:
        yield example


def use_git_config(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `config` the only git configuration git reads (the machine's must not leak into a
    test)."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def empty_git_config(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty global git config under `home`, which becomes HOME; tests may append mirrors to
    it."""
    config = home / "gitconfig"
    config.write_text("")
    monkeypatch.setenv("HOME", str(home))
    use_git_config(config, monkeypatch)
    return config


@contextmanager
def restored_example(
    example: Example, env: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Example]:
    """The served example with its git mirror config active; afterwards its matrix is as it was and
    `env` has no lock files."""
    use_git_config(example.gitconfig, monkeypatch)
    matrix = example.matrix.read_text()
    yield example
    example.matrix.write_text(matrix)
    for path in (example.root / "locks").glob(f"{env}.*"):
        path.unlink()


def run_envgen(example: Example, *args: str) -> tuple[int, str, str]:
    """`envgen ARGS --root <example>` in process: exit code, stdout, stderr."""
    result = CliRunner().invoke(cli, [*args, "--root", str(example.root)], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@contextmanager
def locked_variant(
    factory: pytest.TempPathFactory, env: str, edit: Callable[[Example], None]
) -> Iterator[Example]:
    """A served copy of the example with `edit` made to it, locked (`envgen lock ENV`): a module's
    variant of the example (without CANN, without conda)."""
    with served_example(factory, factory.mktemp("example")) as example:
        edit(example)
        with pytest.MonkeyPatch.context() as patch:
            use_git_config(example.gitconfig, patch)
            patch.setenv("PIP_CONFIG_FILE", os.devnull)
            code, _, err = run_envgen(example, "lock", env, "-q")
        assert code == 0, err
        yield example
