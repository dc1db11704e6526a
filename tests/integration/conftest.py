"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from envgen.example.project import Example

from tests.support.example import served_example


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Example]:
    """The bundled example served for one test module (a module may define its own `served` instead)."""
    with served_example(tmp_path_factory, tmp_path_factory.mktemp("example")) as example:
        yield example
