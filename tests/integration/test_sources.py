"""Git sources against real local repositories: refs, pins, cherry-picks, requirements, mirrors,
errors."""

from __future__ import annotations

import logging
import subprocess
import sys
import zipfile
from pathlib import Path

import build
import msgspec
import pytest
from envgen.errors import InputError, ResolutionError
from envgen.example.gitrepos import GitRepo, python_project, side_commit
from envgen.model import PYPROJECT, LockedSource, Matrix, Source
from envgen.resolve.git.remote import ls_remote, upstream_commit
from envgen.resolve.movable import Movable
from envgen.resolve.sources.pins import resolve_sources

from tests.support.builders import at, current_git, make_matrix
from tests.support.example import empty_git_config


@pytest.fixture(autouse=True)
def git_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A test-only global git config (the machine's must not leak in); tests append mirrors to
    it."""
    return empty_git_config(tmp_path, monkeypatch)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def matrix(*sources: Source) -> Matrix:
    return make_matrix("t", sources=sources)


def source(name: str, repo: GitRepo | str, ref: str, **kw: object) -> Source:
    url = repo if isinstance(repo, str) else repo.url
    return Source(name=name, url=url, ref=ref, distribution=name, **kw)  # type: ignore[arg-type]


def git(config: Path, *args: str) -> None:
    subprocess.run(["git", "config", "--file", str(config), *args], check=True)


def test_tags_annotated_and_lightweight_and_head(tmp_path: Path, cache: Path) -> None:
    repo = GitRepo.create(tmp_path / "up", {"a.txt": "1\n"})
    light = repo.tag("v1")
    second = repo.commit({"a.txt": "2\n"}, "second")
    annotated = repo.tag("v2", message="release 2")
    assert repo.git("rev-parse", "v2") != annotated  # the tag object is not the commit
    tip = repo.commit({"a.txt": "3\n"}, "third")

    refs = ls_remote(repo.url, current_git())
    assert refs["refs/tags/v1"] == light and refs["refs/tags/v2"] == annotated == second
    assert refs["HEAD"] == refs["refs/heads/main"] == tip

    locked = resolve_sources(
        matrix(
            source("light", repo, "v1"),
            source("annotated", repo, "v2"),
            source("head", repo, "HEAD"),
        ),
        at(cache),
    )
    assert [(x.source.name, x.commit) for x in locked] == [
        ("light", light),
        ("annotated", second),
        ("head", tip),
    ]
    assert all(x.picked == () and len(x.tree) == 40 for x in locked)
    assert upstream_commit(source("annotated", repo, "v2"), current_git()) == second


def test_moving_branch_is_kept_until_updated(tmp_path: Path, cache: Path) -> None:
    repo = GitRepo.create(tmp_path / "up", {"a.txt": "1\n"})
    old = repo.commit({"a.txt": "2\n"}, "on release", branch="release/v1")
    m = matrix(source("lib", repo, "release/v1"))
    (first,) = resolve_sources(m, at(cache))
    assert first.commit == old

    new = repo.commit({"a.txt": "3\n"}, "moved", branch="release/v1")
    previous = {"lib": first}
    assert [x.commit for x in resolve_sources(m, at(cache), previous=previous)] == [old]
    assert upstream_commit(m.sources[0], current_git()) == new  # what a drift check sees

    def commits(update: Movable) -> list[str]:
        return [x.commit for x in resolve_sources(m, at(cache), previous=previous, update=update)]

    assert commits(Movable.sources(names=["lib"])) == [new]
    assert commits(Movable.sources(everything=True)) == [new]
    assert commits(Movable.sources(names=["other"])) == [old]
    # A changed ref is re-resolved even without update.
    changed = matrix(source("lib", repo, "main"))
    again = resolve_sources(changed, at(cache), previous=previous)
    assert [x.commit for x in again] == [repo.rev("main")]


def test_kept_commit_missing_from_a_fresh_cache_is_fetched(tmp_path: Path, cache: Path) -> None:
    repo = GitRepo.create(tmp_path / "up", {"a.txt": "1\n"})
    old = repo.rev()
    repo.commit({"a.txt": "2\n"}, "moved")
    m = matrix(source("lib", repo, "main"))
    previous = {"lib": LockedSource(m.sources[0], old)}
    (locked,) = resolve_sources(m, at(tmp_path / "fresh"), previous=previous)
    assert locked.commit == old

    ghost = "0" * 40
    with pytest.raises(ResolutionError, match=f"recorded commit {ghost} does not exist"):
        resolve_sources(m, at(cache), previous={"lib": LockedSource(m.sources[0], ghost)})


def test_full_sha_ref_and_a_nonexistent_commit(tmp_path: Path, cache: Path) -> None:
    repo = GitRepo.create(tmp_path / "up", {"requirements.txt": "alpha==1\n"})
    first = repo.rev()
    repo.commit({"requirements.txt": "alpha==2\n"}, "bump")
    at_first = source("lib", repo, first, requirements=("requirements.txt",))
    (locked,) = resolve_sources(matrix(at_first), at(cache))
    assert locked.commit == first and [r.text for r in locked.requirements] == ["alpha==1"]

    missing = "1234567890abcdef1234567890abcdef12345678"
    with pytest.raises(ResolutionError) as err:
        resolve_sources(matrix(source("lib", repo, missing)), at(cache))
    assert f"commit {missing} does not exist" in str(err.value) and "source lib" in str(err.value)
    assert err.value.exit_code == 3


def test_fetch_falls_back_when_the_server_refuses_a_sha(
    tmp_path: Path, cache: Path, git_config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # v0 upload-pack only serves advertised tips without allow*SHA1*
    git(git_config, "protocol.version", "0")
    repo = GitRepo.create(tmp_path / "up", {"a.txt": "1\n"}, allow_sha_wants=False)
    inner = repo.rev()
    repo.commit({"a.txt": "2\n"}, "tip")
    with caplog.at_level(logging.INFO, logger="envgen.resolve"):
        (locked,) = resolve_sources(matrix(source("lib", repo, inner)), at(cache))
    assert locked.commit == inner and "fetching all refs" in caplog.text


def test_ref_not_found_names_the_closest_refs(tmp_path: Path, cache: Path) -> None:
    repo = GitRepo.create(tmp_path / "up", {"a.txt": "1\n"})
    repo.branch("releases/v0.23.0")
    repo.tag("v0.23.0")
    with pytest.raises(ResolutionError) as err:
        resolve_sources(matrix(source("vllm", repo, "releases/v0.23")), at(cache))
    assert "ref 'releases/v0.23' not found" in err.value.message and repo.url in err.value.message
    assert err.value.hint and "releases/v0.23.0" in err.value.hint


def test_unreachable_remote_is_redacted_and_suggests_a_mirror(cache: Path) -> None:
    url = "http://user:s3cret@127.0.0.1:9/org/repo.git"
    with pytest.raises(ResolutionError) as err:
        resolve_sources(matrix(source("lib", url, "main")), at(cache))
    text = str(err.value)
    assert (
        "s3cret" not in text
        and "cannot reach git remote http://***@127.0.0.1:9/org/repo.git" in text
    )
    assert "insteadOf" in text and "source lib" in text


def test_unreachable_remote_of_a_full_sha_ref_is_named_without_a_fallback_fetch(
    cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = "http://127.0.0.1:9/org/repo.git"
    with (
        caplog.at_level(logging.INFO, logger="envgen.resolve"),
        pytest.raises(ResolutionError) as err,
    ):
        pinned = source("mindspeed", url, "0c6c0ceaa523a96032dee1539a52032155e6404e")
        resolve_sources(matrix(pinned), at(cache))
    assert f"source mindspeed: cannot reach git remote {url}" in str(err.value)
    assert "fetching all refs" not in caplog.text


def test_every_failed_source_is_named(tmp_path: Path, cache: Path) -> None:
    repo = GitRepo.create(tmp_path / "up", {"a.txt": "1\n"})
    sources = (
        source("vllm", "http://127.0.0.1:9/vllm.git", "v0.23.0"),
        source("fine", repo, "main"),
        source("verl", "http://127.0.0.1:9/verl.git", "HEAD"),
    )
    with pytest.raises(ResolutionError) as err:
        resolve_sources(matrix(*sources), at(cache))
    assert "source vllm: cannot reach git remote http://127.0.0.1:9/vllm.git" in err.value.message
    assert (
        "(sources verl failed too)" in err.value.message
        and err.value.hint
        and "insteadOf" in err.value.hint
    )


def test_a_cache_repository_left_half_made_is_completed(tmp_path: Path, cache: Path) -> None:
    repo = GitRepo.create(tmp_path / "up", {"a.txt": "1\n"})
    resolve_sources(matrix(source("lib", repo, "main")), at(cache))
    (cached,) = (cache / "git").glob("*.git")
    # as if interrupted in `git init` (HEAD is its last file)
    (cached / "HEAD").unlink()
    repo.commit({"a.txt": "2\n"}, "moved")
    (locked,) = resolve_sources(matrix(source("lib", repo, "main")), at(cache))
    assert locked.commit == repo.rev()


def test_cherry_pick_applies_deterministically(tmp_path: Path) -> None:
    repo = GitRepo.create(tmp_path / "up", {"requirements.txt": "alpha==1\n", "src.py": "x = 1\n"})
    base = repo.tag("v1")
    repo.commit({"src.py": "x = 2\n"}, "unrelated work on main")
    fix = side_commit(
        repo, "fix", {"requirements.txt": "alpha==1\nbeta>=2\n"}, "add beta", start=base
    )
    m = matrix(source("lib", repo, "v1", cherry_picks=(fix,), requirements=("requirements.txt",)))

    (one,) = resolve_sources(m, at(tmp_path / "c1"))
    (two,) = resolve_sources(m, at(tmp_path / "c2"))
    assert one.commit == base and len(one.picked) == 1 and one.picked[0] not in (base, fix)
    assert one.picked == two.picked and one.tree == two.tree  # fixed committer identity and date
    assert [r.text for r in one.requirements] == ["alpha==1", "beta>=2"]
    assert one.tree == repo.git("rev-parse", f"{fix}^{{tree}}")  # same content as the pick on v1


def test_cherry_pick_conflict_names_commits_and_files(tmp_path: Path, cache: Path) -> None:
    repo = GitRepo.create(tmp_path / "up", {"requirements.txt": "alpha==1\n", "setup.cfg": "[x]\n"})
    base = repo.rev()
    repo.commit({"requirements.txt": "alpha==2\n", "setup.cfg": "[y]\n"}, "main moves on")
    clash = side_commit(
        repo, "clash", {"requirements.txt": "alpha==3\n", "setup.cfg": "[z]\n"}, "x", start=base
    )
    with pytest.raises(ResolutionError) as err:
        resolve_sources(matrix(source("lib", repo, "main", cherry_picks=(clash,))), at(cache))
    message = err.value.message
    assert f"cherry-pick of {clash} onto {repo.rev('main')}" in message
    assert "conflicts in requirements.txt, setup.cfg" in message and "source lib" in message
    with pytest.raises(InputError, match="not a full 40-hex commit"):
        resolve_sources(matrix(source("lib", repo, "main", cherry_picks=(clash[:12],))), at(cache))


def test_requirements_includes_markers_indexes_and_git_lines(
    tmp_path: Path, cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tq = GitRepo.create(tmp_path / "transferqueue", {"requirements.txt": "never-read==1\n"})
    tq_main = tq.rev()
    tq.commit({"requirements.txt": "never-read==2\n"}, "dev", branch="dev")
    tq.checkout("main")
    shared = python_project(tmp_path / "shared", "shared-lib")
    parent = GitRepo.create(
        tmp_path / "verl",
        {
            "requirements-npu.txt": (
                "--extra-index-url https://triton-ascend.example/pypi/simple/\n"
                "-r requirements/base.txt\n"
                "triton-ascend==3.2.2 ; platform_machine == 'aarch64'\n"
                f"TransferQueue @ git+{tq.url}@main\n"
                f"shared-lib @ git+{shared.url}@main\n"
            ),
            "requirements/base.txt": "ray[default]  # comment\ntensordict \\\n  >=0.5\n",
        },
    )
    other = GitRepo.create(tmp_path / "other", {"r.txt": f"transferqueue @ git+{tq.url}@dev\n"})
    m = matrix(
        source("verl", parent, "HEAD", requirements=("requirements-npu.txt",)),
        source("shared-lib", shared, "main", editable=True),
        source("other", other, "main", requirements=("r.txt",)),
    )
    with caplog.at_level(logging.WARNING, logger="envgen.resolve"):
        locked = resolve_sources(m, at(cache))

    assert [x.source.name for x in locked] == ["verl", "transferqueue", "shared-lib", "other"]
    verl, tqs = locked[0], locked[1]
    assert [(r.text, r.origin.file, r.origin.line) for r in verl.requirements] == [
        ("ray[default]", "requirements/base.txt", 1),
        ("tensordict>=0.5", "requirements/base.txt", 2),
        ('triton-ascend==3.2.2; platform_machine == "aarch64"', "requirements-npu.txt", 3),
    ]
    assert all(r.origin.source == "verl" for r in verl.requirements)
    assert tqs.commit == tq_main and tqs.requirements == ()
    assert (
        tqs.source.url == tq.url
        and tqs.source.ref == "main"
        and tqs.source.distribution == "TransferQueue"
    )
    assert tqs.source.editable is False and tqs.source.origin == "verl:requirements-npu.txt:4"
    assert locked[2].source.editable is True  # the matrix's own entry wins over the git line
    assert "--extra-index-url" in caplog.text and "requirements-npu.txt:1" in caplog.text
    assert "keeping" in caplog.text  # `other` asked for TransferQueue at another ref
    assert verl.digest and verl.digest != locked[3].digest


def test_pyproject_dependencies_and_missing_files(tmp_path: Path, cache: Path) -> None:
    repo = python_project(
        tmp_path / "proj",
        "demo-proj",
        dependencies=("numpy>=1.26", "requests ; os_name == 'posix'"),
    )
    demo = source("demo", repo, "main", requirements=(PYPROJECT,))
    (locked,) = resolve_sources(matrix(demo), at(cache))
    assert [(r.text, r.origin.file) for r in locked.requirements] == [
        ("numpy>=1.26", "pyproject.toml"),
        ('requests; os_name == "posix"', "pyproject.toml"),
    ]

    with pytest.raises(ResolutionError) as err:
        npu = source("demo", repo, "main", requirements=("requirements-npu.txt",))
        resolve_sources(matrix(npu), at(cache))
    assert "source demo at commit " + repo.rev() in err.value.message
    assert "requirements-npu.txt" in err.value.message

    repo.commit(
        {"pyproject.toml": '[project]\nname = "d"\nversion = "1"\ndynamic = ["dependencies"]\n'},
        "dyn",
    )
    with pytest.raises(InputError, match="dynamic"):
        resolve_sources(matrix(source("demo", repo, "main", requirements=(PYPROJECT,))), at(cache))


def test_insteadof_mirror_is_honoured_and_the_lock_keeps_the_canonical_url(
    tmp_path: Path, cache: Path, git_config: Path
) -> None:
    mirror = tmp_path / "mirror"
    repo = GitRepo.create(mirror / "example" / "proj.git", {"requirements.txt": "alpha\n"})
    git(git_config, f"url.{mirror.as_uri()}/.insteadOf", "https://github.com/")
    canonical = "https://github.com/example/proj.git"
    (locked,) = resolve_sources(
        matrix(source("proj", canonical, "main", requirements=("requirements.txt",))), at(cache)
    )
    assert locked.source.url == canonical and locked.commit == repo.rev()
    assert [r.text for r in locked.requirements] == ["alpha"]
    assert upstream_commit(locked.source, current_git()) == repo.rev()


def test_a_url_with_credentials_keeps_its_recorded_commit(
    tmp_path: Path, cache: Path, git_config: Path
) -> None:
    mirror = tmp_path / "mirror"
    repo = GitRepo.create(mirror / "example" / "proj.git", {"a.txt": "1\n"})
    # git is given the URL without its credentials (they travel in its environment): a mirror rule
    # names that.
    git(git_config, f"url.{mirror.as_uri()}/.insteadOf", "https://git.example/")
    m = matrix(source("proj", "https://ci:t0ken@git.example/example/proj.git", "main"))
    (first,) = resolve_sources(m, at(cache))
    # What sources.toml gives back: the URL without its credentials.
    recorded = msgspec.structs.replace(
        first,
        source=msgspec.structs.replace(first.source, url="https://git.example/example/proj.git"),
    )
    repo.commit({"a.txt": "2\n"}, "moved")
    (kept,) = resolve_sources(m, at(cache), previous={"proj": recorded})
    assert kept.commit == first.commit != repo.rev()


def test_several_sources_in_one_call_keep_install_order(tmp_path: Path, cache: Path) -> None:
    repos = [
        GitRepo.create(tmp_path / f"r{i}", {"requirements.txt": f"pkg{i}\n"}) for i in range(6)
    ]
    # Two sources share one URL (and so one cache repository).
    sources = [
        source(f"s{i}", r, "main", requirements=("requirements.txt",)) for i, r in enumerate(repos)
    ]
    sources.append(source("s6", repos[0], "HEAD"))
    locked = resolve_sources(matrix(*reversed(sources)), at(cache), jobs=4)
    assert [x.source.name for x in locked] == [f"s{i}" for i in reversed(range(7))]
    assert [x.commit for x in locked] == [r.rev() for r in reversed([*repos, repos[0]])]
    assert [r.text for x in locked for r in x.requirements] == [
        f"pkg{i}" for i in reversed(range(6))
    ]


def test_fixture_repos_are_deterministic(tmp_path: Path) -> None:
    def build(path: Path) -> list[str]:
        repo = GitRepo.create(path, {"a.txt": "1\n"})
        repo.tag("v1", message="annotated")
        pick = side_commit(repo, "fix", {"b.txt": "b\n"}, "fix", start="v1")
        return [
            repo.rev(),
            repo.git("rev-parse", "v1"),
            pick,
            repo.commit({"a.txt": None}, "delete"),
        ]

    first, second = build(tmp_path / "one"), build(tmp_path / "two")
    assert first == second and len(set(first)) == 4


def test_python_project_builds_with_its_version(tmp_path: Path) -> None:
    """The fixture project's PEP 517 build, as `pip wheel --no-build-isolation` runs it: its
    setuptools backend in a child python of this environment (pip's own start-up, which added
    nothing to what is checked, is left out)."""
    repo = python_project(tmp_path / "proj", "demo-proj", "0.3.0", dependencies=("numpy>=1",))
    out = tmp_path / "wheels"
    build.ProjectBuilder(repo.path, python_executable=sys.executable).build("wheel", out)
    (wheel,) = out.glob("*.whl")
    assert wheel.name == "demo_proj-0.3.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("demo_proj/__init__.py").decode() == '__version__ = "0.3.0"\n'
        metadata = zf.read("demo_proj-0.3.0.dist-info/METADATA").decode()
    assert "Requires-Dist: numpy>=1" in metadata


def test_kept_commit_needs_no_remote_once_cached(tmp_path: Path, cache: Path) -> None:
    repo = GitRepo.create(tmp_path / "up", {"requirements.txt": "alpha\n"})
    m = matrix(source("lib", repo, "main", requirements=("requirements.txt",)))
    (first,) = resolve_sources(m, at(cache))
    repo.path.rename(tmp_path / "gone")
    (again,) = resolve_sources(m, at(cache), previous={"lib": first})
    assert again == first
    with pytest.raises(ResolutionError, match="cannot reach git remote"):
        update = Movable.sources(names=["lib"])
        resolve_sources(m, at(cache), previous={"lib": first}, update=update)
