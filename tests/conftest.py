"""Session-wide test setup: no machine pip/uv configuration leaks into a test; bytecode is compiled
once."""

from __future__ import annotations

import compileall
import gc
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support import budget, venvs
from tests.support.shared import session_root

# Every property's example count is fixed (tests/support/budget.py); `make fuzz` scales it.
settings.load_profile(budget.PROFILE)

PACKAGE = Path(__file__).resolve().parents[1] / "generator" / "envgen"


def pytest_configure(config: pytest.Config) -> None:
    """envgen's bytecode, written beside its sources (git-ignores __pycache__) before any test runs.

    Where PYTHONDONTWRITEBYTECODE is set (many container images, this project's dev machines) no
    Python writes it, so each of the suite's few hundred child processes running envgen compiled
    every module it imports anew: about 0.1 s of CPU per `envgen show`, 0.2 s per `envgen check`.
    Python reads bytecode whatever that variable says. Once per run: under xdist the controller does
    it before the workers start."""
    if not hasattr(config, "workerinput"):
        # a checkout it cannot write to: no bytecode, as before
        compileall.compile_dir(PACKAGE, quiet=2)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    """pytest keeps each test module's assertion-rewritten bytecode in __pycache__ unless
    PYTHONDONTWRITEBYTECODE is set; then every worker of every run rewrote and compiled all of them
    again (about 2 s of CPU each). The variable stays as it was for everything else, child processes
    included."""
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved


def pytest_collection_finish(session: pytest.Session) -> None:
    """The collector's cycles less often in the suite's own processes: a worker keeps the
    collected modules, Hypothesis and every library imported for the whole run, and the tests
    build lock graphs of 100,000 nodes and thousands of records in process; with Python's default
    threshold (a collection every 700 allocations, a full one every 100 of those) a quarter of a
    unit-test worker's CPU went to the collector, a tenth of an integration worker's. What exists
    once the tests are collected is never scanned again (`gc.freeze`). The child processes a test
    starts (envgen, pip, uv's and build's hooks) keep the interpreter's defaults."""
    del session
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked `long` run first, the rest in their order: under xdist each worker starts
    from its own contiguous share of this list and the others take work from its end, so a test
    of 15-25 s started last would be the whole run's tail (the demo's end-to-end run started at
    100 s of a 130 s run, alone for its last 25 s). A `long` test uses no module-scoped fixture,
    so moving it sets nothing up twice."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def _clean(monkeypatch: pytest.MonkeyPatch, factory: pytest.TempPathFactory) -> None:
    """Clear PIP_* / UV_* / CONDA_* and point envgen's cache at a per-session temporary
    directory."""
    for name in list(os.environ):
        if name.startswith(("PIP_", "UV_", "CONDA_", "ENVGEN_", "GIT_CONFIG")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(_session_cache(factory)))


@pytest.fixture(scope="session", autouse=True)
def _clean_tool_env_for_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The same for the whole session, first: module and session fixtures (a module's lock, a
    bundle) start before any test's own fixtures, and must not read the machine's configuration
    or write its cache either."""
    with pytest.MonkeyPatch.context() as patch:
        _clean(patch, tmp_path_factory)
        yield


@pytest.fixture(autouse=True)
def _clean_tool_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Again for each test: a test that set one of them in os.environ leaves it to no other."""
    _clean(monkeypatch, tmp_path_factory)


@pytest.fixture(autouse=True)
def _envgen_logger_as_python_leaves_it() -> Iterator[None]:
    """An in-process CLI call points the envgen logger at its own handler and stops propagation; the
    next test in the same worker (caplog reads the root logger) must not inherit that."""
    yield
    logger = logging.getLogger("envgen")
    logger.handlers.clear()
    logger.propagate = True
    logger.setLevel(logging.NOTSET)


_cache: dict[str, Path] = {}


def _session_cache(factory: pytest.TempPathFactory) -> Path:
    """One envgen cache for the whole run, every worker's: what one fetched, built or compiled the
    others find, as concurrent envgen processes on one machine share theirs."""
    if "dir" not in _cache:
        _cache["dir"] = session_root(factory) / "envgen-cache"
        _cache["dir"].mkdir(exist_ok=True)
    return _cache["dir"]


@pytest.fixture(scope="session")
def pip_site_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a fresh venv (tests/support/venvs.py) copies pip from; made once per session."""
    return venvs.pip_site_packages(tmp_path_factory)
