"""Fixtures the integration tests share."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.example.project import ENV, Example

from tests.support.bundles import Bundled, bundle_example, go_offline
from tests.support.example import served_example, use_git_config
from tests.support.lk_locked import lock_once


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Example]:
    """The bundled example served for one test module (a module may define its own `served`
    instead)."""
    with served_example(tmp_path_factory, tmp_path_factory.mktemp("example")) as example:
        yield example


@pytest.fixture(scope="session")
def worker_example(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Example, dict[str, bytes]]]:
    """The example served for the whole of this worker's session, and the files of its first lock
    (`lock_once`: taken out of locks/ again), for the modules that only read what it serves
    (`read_only_served`).

    Once per worker, not once per session (`build_once`): a lock names the ports of the servers it
    was made against, and these servers are this worker's. Its project is never used itself: each
    module gets a copy of it.
    """
    work = tmp_path_factory.mktemp("worker-example")
    with served_example(tmp_path_factory, work) as example:
        yield example, lock_once(example, ENV)


@pytest.fixture(scope="module")
def worker_first_lock(worker_example: tuple[Example, dict[str, bytes]]) -> dict[str, bytes]:
    """What the first lock of the worker's example wrote (`lock_once`): valid in any copy of its
    project the worker's servers serve (`read_only_served`), as the bytes a lock there writes."""
    return worker_example[1]


@pytest.fixture(scope="module")
def read_only_served(worker_example: tuple[Example, dict[str, bytes]]) -> Example:
    """The module's own copy of the project of `worker_example` (no lock in it yet), served by the
    worker's servers: the copy is the module's to edit (its matrix, channel files, locks/), and it
    sits beside the original, so that the served index, channel and upstream repos are still its
    siblings (`example.root.parent / "pypi"`).

    Safe to share only with a module that changes neither the upstream repos (no commit, branch or
    tag moved) nor what the index and channel offer (no `republish`): those are the worker's, read
    by every module that uses it after this one. A module that changes them serves an example of
    its own (the `served` fixture above).
    """
    worker, _ = worker_example
    root = Path(tempfile.mkdtemp(prefix="project-", dir=worker.root.parent))
    shutil.copytree(worker.root, root, symlinks=True, dirs_exist_ok=True)
    return dataclasses.replace(worker, root=root)


@pytest.fixture(scope="module")
def read_only_locked(read_only_served: Example, worker_first_lock: dict[str, bytes]) -> Example:
    """`read_only_served` with the worker's first lock in its locks/ (the bytes a lock there
    writes): for a module whose tests start from the example, locked."""
    for name, data in worker_first_lock.items():
        (read_only_served.root / "locks" / name).write_bytes(data)
    return read_only_served


@pytest.fixture
def example(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Example]:
    """A freshly served example of the test's own (it may change what the index or channel offers,
    or move its upstream repos), git mirrors active, no lock yet."""
    with served_example(tmp_path_factory, tmp_path / "example") as served:
        use_git_config(served.gitconfig, monkeypatch)
        yield served


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bundled]:
    """The example locked and bundled for this host while served, for one test module."""
    yield from bundle_example(tmp_path_factory)


@pytest.fixture
def offline(bundled: Bundled, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Bundled:
    """The module's bundle with nothing served, git cut off and the test's own temp dir."""
    return go_offline(bundled, monkeypatch, tmp_path)
