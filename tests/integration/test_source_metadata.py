"""Declared dependencies of git sources: static PEP 621, a real setuptools build, fallbacks, the cache, the lock."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.example.gitrepos import GitRepo
from envgen.example.http import serve_directory
from envgen.example.srcprojects import backend_project
from envgen.example.wheels import FixtureDist, build_dists, write_index
from envgen.model import FILES, Index, LockedSource, Matrix, PipPackage, Source
from envgen.resolve.git_sources import resolve_sources
from envgen.resolve.pip_stage import lock_pypi

from tests.support.builders import at, make_matrix
from tests.support.example import empty_git_config

SETUPTOOLS_BUILD = '[build-system]\nrequires = ["setuptools>=70"]\nbuild-backend = "setuptools.build_meta"\n'
SETUP_PY = """\
from pathlib import Path
from setuptools import setup

setup(
    name="dyn",
    version="1.0",
    packages=[],
    install_requires=Path("requirements.txt").read_text().split(),
)
"""


@pytest.fixture(autouse=True)
def git_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty_git_config(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A loopback index with the real setuptools wheel (the one virtualenv ships) and two releases of `base`."""
    from virtualenv.seed.wheels.embed import get_embed_wheel

    root = tmp_path_factory.mktemp("index")
    setuptools = get_embed_wheel("setuptools", "3.11")
    assert setuptools is not None
    dists = build_dists((FixtureDist("base", "1.5"), FixtureDist("base", "2.1")), root / "build")
    write_index(root, [setuptools.path, *dists])
    with serve_directory(root) as url:
        yield f"{url}/simple"


def index_matrix(index: str, *sources: Source, packages: tuple[PipPackage, ...] = ()) -> Matrix:
    return make_matrix("t", indexes=(Index("pypi", index),), packages=packages, sources=sources)


def source(name: str, repo: GitRepo, **kw: object) -> Source:
    return Source(name=name, url=repo.url, ref="main", distribution=name, **kw)  # type: ignore[arg-type]


def origins(locked: LockedSource) -> dict[str, str]:
    return {r.text: str(r.origin) for r in locked.requirements}


def test_setup_py_install_requires_read_by_real_setuptools_from_the_loopback_index(
    tmp_path: Path, index: str, caplog: pytest.LogCaptureFixture
) -> None:
    repo = GitRepo.create(
        tmp_path / "dyn",
        {
            "setup.py": SETUP_PY,
            "requirements.txt": "base<2\nsix\n",
            "pyproject.toml": SETUPTOOLS_BUILD,
        },
    )
    matrix = index_matrix(index, source("dyn", repo, requirements=("requirements.txt",)))
    (locked,) = resolve_sources(matrix, at(tmp_path / "cache"))
    assert locked.metadata_fallback is None
    found = origins(locked)
    # The file counts on its own, and again through the metadata build; the file's origin comes first.
    assert found == {"base<2": "source dyn: requirements.txt:1", "six": "source dyn: requirements.txt:2"}
    bare = index_matrix(index, source("dyn", repo))
    (locked,) = resolve_sources(bare, at(tmp_path / "cache"))
    assert origins(locked) == {
        "base<2": "source dyn: setup.py install_requires",
        "six": "source dyn: setup.py install_requires",
    }

    caplog.set_level(logging.INFO, logger="envgen")
    # Only the re-lock's records: an earlier test's CLI run may have left the envgen logger at INFO already.
    caplog.clear()
    resolve_sources(bare, at(tmp_path / "cache"))
    assert "declared dependencies from the build backend" not in caplog.text, "a re-lock must not rebuild"
    built = sorted((tmp_path / "cache" / "source-metadata").glob("*.json"))
    assert len(built) == 1
    # Other build variables are another build.
    other = index_matrix(index, source("dyn", repo, env=(("X", "1"),)))
    resolve_sources(other, at(tmp_path / "cache"))
    assert len(sorted((tmp_path / "cache" / "source-metadata").glob("*.json"))) == 2


def test_static_pep621_dependencies_are_read_without_a_build(tmp_path: Path, index: str) -> None:
    pyproject = (
        '[build-system]\nrequires = ["nothing-on-any-index"]\nbuild-backend = "nowhere"\n\n'
        '[project]\nname = "stat"\nversion = "1"\n'
        'dependencies = [\n  "base>=2",\n  "docs-tool ; extra == \'doc\'",\n]\n'
    )
    repo = GitRepo.create(tmp_path / "stat", {"pyproject.toml": pyproject})
    (locked,) = resolve_sources(index_matrix(index, source("stat", repo)), at(tmp_path / "cache"))
    assert locked.metadata_fallback is None
    # An extra's requirement never applies to `pip install -e .`.
    assert origins(locked) == {"base>=2": "source stat: pyproject.toml:9"}
    assert not (tmp_path / "cache" / "source-metadata").exists()


def test_a_failing_metadata_build_falls_back_to_the_files_warns_and_is_recorded(
    tmp_path: Path, index: str, caplog: pytest.LogCaptureFixture
) -> None:
    repo = backend_project(tmp_path / "needy", "needy", require_env={"NEEDY_DEVICE": "npu"}, dependencies=("six",))
    repo.commit({"requirements.txt": "base\n"}, "requirements")
    matrix = index_matrix(index, source("needy", repo, requirements=("requirements.txt",)))
    (locked,) = resolve_sources(matrix, at(tmp_path / "cache"))
    assert locked.metadata_fallback is not None
    assert "refuses to build: set NEEDY_DEVICE=npu" in locked.metadata_fallback
    assert origins(locked) == {"base": "source needy: requirements.txt:1"}
    warning = next(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert warning.startswith("source needy: its declared dependencies cannot be read (the metadata build failed")
    assert warning.endswith("only its requirement files count (requirements.txt)")
    # With its build variable the same source declares `six`.
    fixed = index_matrix(
        index, source("needy", repo, requirements=("requirements.txt",), env=(("NEEDY_DEVICE", "npu"),))
    )
    (locked,) = resolve_sources(fixed, at(tmp_path / "cache"))
    assert (locked.metadata_fallback, set(origins(locked))) == (None, {"base", "six"})
    # "files" counts only the files: no build is attempted.
    files_only = index_matrix(index, source("needy", repo, requirements=("requirements.txt",), dependencies=FILES))
    (locked,) = resolve_sources(files_only, at(tmp_path / "cache"))
    assert (locked.metadata_fallback, set(origins(locked))) == (None, {"base"})


def test_a_vcs_discovered_source_has_its_declared_dependencies_honoured(tmp_path: Path, index: str) -> None:
    queue = backend_project(tmp_path / "queue", "queue", dependencies=("base<2",))
    parent = backend_project(tmp_path / "parent", "parent")
    parent.commit({"requirements.txt": f"queue @ git+{queue.url}@main\n"}, "requirements")
    matrix = index_matrix(
        index, source("parent", parent, requirements=("requirements.txt",)), packages=(PipPackage("base"),)
    )
    sources = resolve_sources(matrix, at(tmp_path / "cache"))
    assert [s.source.name for s in sources] == ["parent", "queue"]
    assert origins(sources[1]) == {"base<2": "source queue: pyproject.toml (build backend metadata)"}
    locked = lock_pypi(matrix, "linux-64", "3.11", sources, at(tmp_path / "cache"))
    entries = {e.name: e.version for e in locked.entries}
    # base 2.1 is the newest release, but queue's metadata excludes it.
    assert entries == {"base": "1.5"}
    without = dataclasses.replace(sources[1], requirements=())
    unchecked = lock_pypi(matrix, "linux-64", "3.11", (sources[0], without), at(tmp_path / "cache"))
    assert {e.name: e.version for e in unchecked.entries} == {"base": "2.1"}
