"""Declared dependencies of git sources: static PEP 621, a real setuptools build, fallbacks, the
cache, the lock."""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from envgen import interrupts
from envgen.example.gitrepos import GitRepo
from envgen.example.http import serve_directory
from envgen.example.srcprojects import backend_project
from envgen.example.wheels import FixtureDist, build_dists, build_index, write_index
from envgen.model import FILES, Index, LockedSource, Matrix, PipPackage, Source
from envgen.platforms import host_platform
from envgen.resolve.sources.pins import resolve_sources
from pyproject_hooks import BuildBackendWarning

from tests.support.builders import at, lock_pip, make_matrix
from tests.support.example import empty_git_config
from tests.support.local_wheels import wheels_of

SETUPTOOLS_BUILD = (
    '[build-system]\nrequires = ["setuptools>=70"]\nbuild-backend = "setuptools.build_meta"\n'
)
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
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uv cache for the module's builds: each build's isolated env installs setuptools (and
    what else its build asks) with uv, and from a cache of the test's own uv unpacked and
    installed it again every time."""
    return tmp_path_factory.mktemp("uv-cache")


@pytest.fixture(autouse=True)
def shared_uv_cache(tmp_path: Path, uv_cache: Path) -> None:
    """`tmp_path / "cache"`, every test's envgen cache, with its uv/ the module's. Only uv's own
    cache is shared: what envgen keeps (source-metadata/, the git mirrors) stays the test's, as
    its assertions about rebuilds need."""
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "uv").symlink_to(uv_cache, target_is_directory=True)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A loopback index with the real setuptools wheel (the one virtualenv ships) and two releases
    of `base`."""
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
    fields: dict[str, object] = {"ref": "main", **kw}
    return Source(name=name, url=repo.url, distribution=name, **fields)  # type: ignore[arg-type]


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
    # The file counts on its own, and again through the metadata build; the file's origin comes
    # first.
    assert found == {
        "base<2": "source dyn: requirements.txt:1",
        "six": "source dyn: requirements.txt:2",
    }
    bare = index_matrix(index, source("dyn", repo))
    (locked,) = resolve_sources(bare, at(tmp_path / "cache"))
    assert origins(locked) == {
        "base<2": "source dyn: setup.py install_requires",
        "six": "source dyn: setup.py install_requires",
    }

    caplog.set_level(logging.INFO, logger="envgen")
    # Only the re-lock's records: an earlier test's CLI run may have left the envgen logger at INFO
    # already.
    caplog.clear()
    resolve_sources(bare, at(tmp_path / "cache"))
    assert "declared dependencies from the build backend" not in caplog.text, (
        "a re-lock must not rebuild"
    )
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
    repo = backend_project(
        tmp_path / "needy", "needy", require_env={"NEEDY_DEVICE": "npu"}, dependencies=("six",)
    )
    repo.commit({"requirements.txt": "base\n"}, "requirements")
    matrix = index_matrix(index, source("needy", repo, requirements=("requirements.txt",)))
    (locked,) = resolve_sources(matrix, at(tmp_path / "cache"))
    assert locked.metadata_fallback is not None
    assert "refuses to build: set NEEDY_DEVICE=npu" in locked.metadata_fallback
    assert origins(locked) == {"base": "source needy: requirements.txt:1"}
    warning = next(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert warning.startswith(
        "source needy: its declared dependencies cannot be read (the metadata build failed"
    )
    assert warning.endswith("only its requirement files count (requirements.txt)")
    # With its build variable the same source declares `six`.
    fixed = index_matrix(
        index,
        source("needy", repo, requirements=("requirements.txt",), env=(("NEEDY_DEVICE", "npu"),)),
    )
    (locked,) = resolve_sources(fixed, at(tmp_path / "cache"))
    assert (locked.metadata_fallback, set(origins(locked))) == (None, {"base", "six"})
    # "files" counts only the files: no build is attempted.
    files_only = index_matrix(
        index, source("needy", repo, requirements=("requirements.txt",), dependencies=FILES)
    )
    (locked,) = resolve_sources(files_only, at(tmp_path / "cache"))
    assert (locked.metadata_fallback, set(origins(locked))) == (None, {"base"})


def test_a_vcs_discovered_source_has_its_declared_dependencies_honoured(
    tmp_path: Path, index: str
) -> None:
    queue = backend_project(tmp_path / "queue", "queue", dependencies=("base<2",))
    parent = backend_project(tmp_path / "parent", "parent")
    parent.commit({"requirements.txt": f"queue @ git+{queue.url}@main\n"}, "requirements")
    matrix = index_matrix(
        index,
        source("parent", parent, requirements=("requirements.txt",)),
        packages=(PipPackage("base"),),
    )
    sources = resolve_sources(matrix, at(tmp_path / "cache"))
    assert [s.source.name for s in sources] == ["parent", "queue"]
    assert origins(sources[1]) == {
        "base<2": "source queue: pyproject.toml (build backend metadata)"
    }
    locked = lock_pip(matrix, "linux-64", "3.11", sources, at(tmp_path / "cache"))
    entries = {e.name: e.version for e in locked.entries}
    # base 2.1 is the newest release, but queue's metadata excludes it.
    assert entries == {"base": "1.5"}
    without = msgspec.structs.replace(sources[1], requirements=())
    unchecked = lock_pip(matrix, "linux-64", "3.11", (sources[0], without), at(tmp_path / "cache"))
    assert {e.name: e.version for e in unchecked.entries} == {"base": "2.1"}


@pytest.fixture(scope="module")
def scm_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A loopback index with setuptools-scm and what it needs (setuptools too), as installed."""
    root = tmp_path_factory.mktemp("scm-index")
    write_index(root, wheels_of(["setuptools-scm"], root / "wheels"))
    with serve_directory(root) as url:
        yield f"{url}/simple"


SCM_PYPROJECT = """\
[build-system]
requires = ["setuptools>=70", "setuptools-scm>=8"]
build-backend = "setuptools.build_meta"

[project]
name = "scm-demo"
dynamic = ["version", "dependencies"]

[tool.setuptools_scm]
"""
# As vLLM's setup.py: the version asked of setuptools-scm itself, which then knows no dist name.
SCM_SETUP_PY = """\
from setuptools import setup
from setuptools_scm import get_version

version = get_version()
setup(version=version, packages=[], install_requires=["base<2", f"tagged=={version}"])
"""


def test_a_setuptools_scm_source_builds_its_metadata_with_the_version_its_ref_states(
    tmp_path: Path, scm_index: str
) -> None:
    # `git archive` leaves no .git for setuptools-scm to read a version from: the ref's stands in.
    files = {"pyproject.toml": SCM_PYPROJECT, "setup.py": SCM_SETUP_PY}
    repo = GitRepo.create(tmp_path / "scm", files)
    repo.tag("v1.2.3")
    cache = tmp_path / "cache"
    tagged = Source(name="scm-demo", url=repo.url, ref="v1.2.3", distribution="scm-demo")
    (locked,) = resolve_sources(index_matrix(scm_index, tagged), at(cache))
    assert locked.metadata_fallback is None
    assert set(origins(locked)) == {"base<2", "tagged==1.2.3"}
    # A branch states no version: the locked commit does, as a local version.
    (locked,) = resolve_sources(index_matrix(scm_index, source("scm-demo", repo)), at(cache))
    assert locked.metadata_fallback is None
    assert set(origins(locked)) == {"base<2", f"tagged==0+g{repo.rev()[:12]}"}


def test_a_failed_metadata_build_is_told_by_its_exception_not_the_last_line_it_printed(
    tmp_path: Path, index: str
) -> None:
    setup_py = 'raise LookupError("no version here\\n\\nfootnote: see the documentation")\n'
    files = {"pyproject.toml": SETUPTOOLS_BUILD, "setup.py": setup_py}
    repo = GitRepo.create(tmp_path / "broken", files)
    broken = index_matrix(index, source("broken", repo))
    (locked,) = resolve_sources(broken, at(tmp_path / "cache"))
    assert locked.metadata_fallback == "the metadata build failed: LookupError: no version here"


HELPER_SETUP_PY = """\
import helper
from setuptools import setup

setup(name="needs-helper", version="1", install_requires=[f"base=={helper.__version__}"])
"""


def test_a_build_requirement_the_matrix_takes_from_an_index_on_this_platform_comes_from_there(
    tmp_path: Path,
) -> None:
    """As torch from the CPU index on x86_64 hosts: the build of a source needing `helper` takes
    the one the matrix pins to the explicit index, not the default index's newer one (for vLLM, a
    torch with the CUDA stack)."""
    from virtualenv.seed.wheels.embed import get_embed_wheel

    setuptools = get_embed_wheel("setuptools", "3.11")
    assert setuptools is not None
    decoy = build_dists((FixtureDist("helper", "9.9"),), tmp_path / "pypi-dists")
    write_index(tmp_path / "pypi", [setuptools.path, *decoy])
    build_index(tmp_path / "extra", (FixtureDist("helper", "1.0"),))
    build = SETUPTOOLS_BUILD.replace('"setuptools>=70"', '"setuptools>=70", "helper"')
    files = {"pyproject.toml": build, "setup.py": HELPER_SETUP_PY}
    repo = GitRepo.create(tmp_path / "needs", files)
    helper = PipPackage("helper", index=((host_platform(), "extra"),))
    with serve_directory(tmp_path / "pypi") as pypi, serve_directory(tmp_path / "extra") as extra:
        pinned_index = Index("extra", f"{extra}/simple", explicit=True)
        indexes = (Index("pypi", f"{pypi}/simple"), pinned_index)
        free = make_matrix("t", indexes=indexes, sources=(source("needs", repo),))
        (locked,) = resolve_sources(free, at(tmp_path / "cache"))
        assert set(origins(locked)) == {"base==9.9"}
        pinned = msgspec.structs.replace(free, packages=(helper,))
        (locked,) = resolve_sources(pinned, at(tmp_path / "cache"))
        assert set(origins(locked)) == {"base==1.0"}
        # The pinned index has no release the build asks for: the reason says so, on one line.
        newer = repo.commit({"pyproject.toml": build.replace('"helper"', '"helper>=2"')}, "newer")
        moved = msgspec.structs.replace(pinned, sources=(source("needs", repo, ref=newer),))
        (locked,) = resolve_sources(moved, at(tmp_path / "cache"))
    assert locked.metadata_fallback is not None
    assert locked.metadata_fallback.startswith(
        "the metadata build failed: installing its build requirements (helper>=2, setuptools>=70) "
        "(helper from extra, as the matrix takes it on this platform) failed: "
    )
    assert "needs's build depends on helper>=2" in locked.metadata_fallback
    assert "\n" not in locked.metadata_fallback and "envgen-inputs" not in locked.metadata_fallback


def test_a_build_backends_warnings_are_logged_at_debug_not_printed(
    tmp_path: Path, index: str, caplog: pytest.LogCaptureFixture
) -> None:
    # setuptools warns of an option it does not know (as MindSpeed's setup.py makes it do).
    setup_py = 'from setuptools import setup\n\nsetup(name="warns", version="1", bug_data=1)\n'
    files = {"pyproject.toml": SETUPTOOLS_BUILD, "setup.py": setup_py}
    matrix = index_matrix(index, source("warns", GitRepo.create(tmp_path / "warns", files)))
    caplog.set_level(logging.DEBUG, logger="envgen")
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        shown = warnings.showwarning
        (locked,) = resolve_sources(matrix, at(tmp_path / "cache"))
        # Python's own display is back once no build runs.
        assert warnings.showwarning is shown
    assert locked.metadata_fallback is None
    assert [str(w.message) for w in escaped if issubclass(w.category, BuildBackendWarning)] == []
    told = [r for r in caplog.records if "its build backend warns" in r.getMessage()]
    assert told and {r.levelno for r in told} == {logging.DEBUG}
    unknown = "source warns: its build backend warns: Unknown distribution option: 'bug_data'"
    assert unknown in {r.getMessage() for r in told}


DYNAMIC = SETUPTOOLS_BUILD + '\n[project]\nname = "{name}"\nversion = "1"\n'
DYNAMIC += 'dynamic = ["dependencies"]\n'


def test_declared_dependencies_are_labelled_by_the_file_that_declares_them(
    tmp_path: Path,
    index: str,
) -> None:
    # As verl: dependencies dynamic in pyproject.toml, the list in setup.py's install_requires.
    setup_py = 'from setuptools import setup\n\nsetup(install_requires=["base<2"])\n'
    files = {"pyproject.toml": DYNAMIC.format(name="likeverl"), "setup.py": setup_py}
    likeverl = source("likeverl", GitRepo.create(tmp_path / "likeverl", files))
    # As TransferQueue: dynamic dependencies read from the file [tool.setuptools.dynamic] names.
    pyproject = DYNAMIC.format(name="liketq") + "\n[tool.setuptools.dynamic]\n"
    pyproject += 'dependencies = { file = ["requirements.txt"] }\n'
    files = {"pyproject.toml": pyproject, "requirements.txt": "six\n# the floor\nbase<2\n"}
    liketq = source("liketq", GitRepo.create(tmp_path / "liketq", files))
    found = resolve_sources(index_matrix(index, likeverl, liketq), at(tmp_path / "cache"))
    assert [s.metadata_fallback for s in found] == [None, None]
    assert origins(found[0]) == {"base<2": "source likeverl: setup.py install_requires"}
    assert origins(found[1]) == {
        "six": "source liketq: requirements.txt:1 (dynamic)",
        "base<2": "source liketq: requirements.txt:3 (dynamic)",
    }


def test_an_interrupted_metadata_build_is_no_failure_of_the_tree_and_nothing_is_cached(
    tmp_path: Path, index: str
) -> None:
    """Ctrl-C while the backend reads its dynamic dependencies: the lock stops as interrupted, and
    the cache records nothing for the tree. Recorded as a failed build, it would leave every later
    lock without the source's declared dependencies."""
    held = tmp_path / "deps"  # a FIFO: the backend's read waits for a writer
    os.mkfifo(held)
    repo = backend_project(tmp_path / "slow", "slow", dependencies_file=str(held))
    matrix = index_matrix(index, source("slow", repo))

    def interrupt_once_read() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                writer = os.open(held, os.O_WRONLY | os.O_NONBLOCK)  # fails until a reader waits
            except OSError:
                time.sleep(0.02)
                continue
            interrupts.interrupt()
            os.close(writer)
            return

    threading.Thread(target=interrupt_once_read, daemon=True).start()
    try:
        with pytest.raises(interrupts.Interrupted):
            resolve_sources(matrix, at(tmp_path / "cache"))
    finally:
        interrupts.reset()
    assert not list((tmp_path / "cache").glob("source-metadata/*.json"))


def test_a_hook_that_hangs_past_its_timeout_is_no_failure_of_the_tree_and_nothing_is_cached(
    tmp_path: Path, index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backend's read never ends (a FIFO nobody writes): its hook is stopped at the timeout, the
    lock goes on with the source's files and says the build did not complete, and the cache
    records nothing, so the next lock builds again."""
    from envgen.resolve.sources import metadata

    never = tmp_path / "deps"
    os.mkfifo(never)
    repo = backend_project(tmp_path / "stuck", "stuck", dependencies_file=str(never))
    monkeypatch.setattr(metadata, "HOOK_TIMEOUT", 1.0)
    (locked,) = resolve_sources(index_matrix(index, source("stuck", repo)), at(tmp_path / "cache"))
    assert locked.metadata_fallback is not None
    assert locked.metadata_fallback.startswith("the metadata build did not complete"), (
        locked.metadata_fallback
    )
    assert not list((tmp_path / "cache").glob("source-metadata/*.json"))
