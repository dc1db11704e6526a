"""A lock killed inside git leaves git's lock files in the cache repository; the next lock removes
them and works."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.example.project import Example, advance_branch
from envgen.lockio.store import read_lock
from envgen.project import Project
from envgen.resolve.git.cache import remove_stale_git_locks

from tests.support.example import restored_example, run_envgen, with_example_metadata

ENV = "demo"
# What a SIGKILL during `git config`, a shallow fetch, a ref update or a pack can leave behind.
STALE = (
    "config.lock",
    "shallow.lock",
    "index.lock",
    "packed-refs.lock",
    "refs/heads/core_r0.12.0.lock",
)


@pytest.fixture
def example(
    served: Example,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Example]:
    # planted locks must not reach other tests
    cache = with_example_metadata(tmp_path_factory, tmp_path / "cache")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(cache))
    with restored_example(served, ENV, monkeypatch) as example:
        yield example


def plant(repo: Path) -> list[Path]:
    planted = []
    an_hour_ago = time.time() - 3600
    for name in STALE:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("left by a killed git\n")
        os.utime(path, (an_hour_ago, an_hour_ago))
        planted.append(path)
    return planted


def test_the_next_lock_removes_git_lock_files_a_killed_run_left_in_the_cache(
    example: Example, tmp_path: Path
) -> None:
    assert run_envgen(example, "lock", ENV, "-q")[0] == 0
    repos = sorted((tmp_path / "cache" / "git").glob("*.git"))
    assert repos, "the lock fetched its sources into the cache"
    planted = [lock for repo in repos for lock in plant(repo)]
    moved = advance_branch(example, "trainer", "core_r0.12.0")

    # Every repository runs `git config` and the moved one a shallow fetch: each would fail on its
    # lock file.
    code, _, err = run_envgen(example, "lock", ENV, "--update-all")

    assert code == 0, err
    assert not [p for p in planted if p.exists()]
    assert (
        "removed lock files a killed run left behind: config.lock, index.lock, packed-refs.lock"
        in err
    )
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    assert {s.source.name: s.commit for s in lock.sources}["trainer"] == moved


def test_lock_files_younger_than_the_mutex_and_objects_are_left_alone(tmp_path: Path) -> None:
    repo = tmp_path / "r.git"
    (repo / "objects" / "pack").mkdir(parents=True)
    (repo / "objects" / "info").mkdir()
    old, young = time.time() - 60, time.time() + 60
    for name, when in (
        ("config.lock", old),
        ("HEAD.lock", young),
        ("objects/info/commit-graphs.lock", old),
    ):
        (repo / name).write_text("")
        os.utime(repo / name, (when, when))
    # not walked: objects/ is git's store
    (repo / "objects" / "pack" / "pack-1.lock").write_text("")

    removed = remove_stale_git_locks(repo, before=time.time())

    assert sorted(p.relative_to(repo).as_posix() for p in removed) == [
        "config.lock",
        "objects/info/commit-graphs.lock",
    ]
    assert (repo / "HEAD.lock").exists() and (repo / "objects" / "pack" / "pack-1.lock").exists()
    assert remove_stale_git_locks(tmp_path / "absent.git", before=time.time()) == []
