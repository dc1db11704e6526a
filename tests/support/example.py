"""The bundled example for tests: its artifacts built once per session, each test or module serving a copy."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from envgen.example.project import Example, build_example, serve_built_example

from tests.support.shared import build_once


@contextmanager
def served_example(factory: pytest.TempPathFactory, workdir: Path) -> Iterator[Example]:
    """What `serve_example(workdir)` gives, from a copy of the session's artifacts: the copy is the test's own
    (its upstream repos may move, its indexes gain or lose files) and builds the same bytes a new build would."""
    shutil.copytree(build_once(factory, "example-artifacts", build_example), workdir, symlinks=True, dirs_exist_ok=True)
    with serve_built_example(workdir) as example:
        yield example
