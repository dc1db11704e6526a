"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.example.project import Example

from tests.support.bundles import Bundled, bundle_example, go_offline
from tests.support.example import served_example, use_git_config


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Example]:
    """The bundled example served for one test module (a module may define its own `served`
    instead)."""
    with served_example(tmp_path_factory, tmp_path_factory.mktemp("example")) as example:
        yield example


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
