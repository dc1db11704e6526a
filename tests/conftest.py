"""Session-wide test setup: no machine pip/uv configuration leaks into a test."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import venvs


@pytest.fixture(autouse=True)
def _clean_tool_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Clear PIP_* / UV_* / CONDA_* and point envgen's cache at a per-session temporary directory."""
    for name in list(os.environ):
        if name.startswith(("PIP_", "UV_", "CONDA_", "ENVGEN_", "GIT_CONFIG")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(_session_cache(tmp_path_factory)))


@pytest.fixture(autouse=True)
def _envgen_logger_as_python_leaves_it() -> Iterator[None]:
    """An in-process CLI call points the envgen logger at its own handler and stops propagation; the next test
    in the same worker (caplog reads the root logger) must not inherit that."""
    yield
    logger = logging.getLogger("envgen")
    logger.handlers.clear()
    logger.propagate = True
    logger.setLevel(logging.NOTSET)


_cache: dict[str, Path] = {}


def _session_cache(factory: pytest.TempPathFactory) -> Path:
    if "dir" not in _cache:
        _cache["dir"] = factory.mktemp("envgen-cache")
    return _cache["dir"]


@pytest.fixture(scope="session")
def pip_site_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a fresh venv (tests/support/venvs.py) copies pip from; made once per session."""
    return venvs.pip_site_packages(tmp_path_factory)
