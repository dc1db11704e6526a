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
from envgen.commands.cache import TAG, TAG_TEXT
from envgen.example.project import Example, build_example, serve_built_example
from envgen.resolve.sources import metadata

from tests.support.shared import build_once
from tests.support.venvs import link_or_copy


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


def with_example_metadata(factory: pytest.TempPathFactory, cache: Path) -> Path:
    """`cache` made as envgen leaves its cache after a lock of the example on a machine: tagged, and
    holding what its sources' build backends said of their dependencies, built once per session by
    a lock of a copy of the example (envgen keys each answer by the source's tree, its build
    settings and the indexes' names, never by the servers' ports).

    For a test whose cache is its own for another reason (a killed lock's leftovers kept apart,
    "nothing cached", a cache that stands for a later day) and whose subject is not that build:
    each of its locks then skips the example's three isolated builds, about 0.4 s of CPU, as a
    re-lock on a machine does. The build itself is test_source_metadata's subject. The files are
    hard links: envgen writes each entry anew, never into one."""

    def build(path: Path) -> None:
        with (
            served_example(factory, path / "example") as example,
            pytest.MonkeyPatch.context() as patch,
        ):
            use_git_config(example.gitconfig, patch)
            patch.setenv("ENVGEN_CACHE_DIR", str(path / "cache"))
            code, _, err = run_envgen(example, "lock", "demo", "-q")
            assert code == 0, err

    store = build_once(factory, "example-metadata", build) / "cache" / metadata.ENTRY
    cache.mkdir(parents=True, exist_ok=True)
    (cache / TAG).write_text(TAG_TEXT)
    shutil.copytree(store, cache / metadata.ENTRY, copy_function=link_or_copy)
    return cache
