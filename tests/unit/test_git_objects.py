"""One `git cat-file --batch-command` answers a cache repository's questions about its objects."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from envgen.errors import ToolError
from envgen.resolve.git.objects import ObjectReader


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a"}
    env |= {"GIT_COMMITTER_EMAIL": "a@b"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return done.stdout.decode().strip()


def commit(repo: Path, files: dict[str, bytes]) -> str:
    for name, data in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(data)
    git(repo, "add", "--", *files)
    git(repo, "commit", "--quiet", "-m", "c")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "--quiet", "--initial-branch=main", "work")
    return tmp_path / "work"


def test_commits_files_and_blobs_are_found_and_what_is_not_is_none(repo: Path) -> None:
    head = commit(repo, {"a.txt": b"one\r\ntwo\n", "dir/b.txt": b"\xff"})
    reader = ObjectReader(repo, os.environ)
    try:
        found = reader.info(f"{head}^{{commit}}")
        assert found is not None and (found.sha, found.type) == (head, "commit")
        tree = reader.info(f"{head}:dir")
        assert tree is not None and tree.type == "tree"
        blob = reader.contents(f"{head}:a.txt")
        assert blob is not None and blob[0].type == "blob" and blob[1] == b"one\r\ntwo\n"
        assert blob[0].sha == git(repo, "rev-parse", f"{head}:a.txt")
        binary = reader.contents(f"{head}:dir/b.txt")
        assert binary is not None and binary[1] == b"\xff"
        assert reader.info(f"{head}:missing.txt") is None
        assert reader.info(f"{'0' * 40}^{{commit}}") is None
        # A name that would be two requests of git's protocol is no object.
        assert reader.info(f"{head}:a.txt\ninfo {head}") is None
        assert reader.contents(f"{head}:a.txt\0") is None
        # The next answer is still the next question's.
        again = reader.info(f"{head}:a.txt")
        assert again is not None and again.sha == blob[0].sha
    finally:
        reader.close()


def test_an_entry_is_what_ls_tree_says_of_its_path(repo: Path) -> None:
    """Mode and type of each kind of path, as `git ls-tree COMMIT -- PATH` gives them: a file, an
    executable, a directory, a symbolic link, a submodule; none for a path the tree lacks or one
    under a file."""
    commit(repo, {"a.txt": b"1", "run.sh": b"#!/bin/sh\n", "d/e/f.txt": b"2", "d/g.txt": b"3"})
    os.chmod(repo / "run.sh", 0o755)
    (repo / "d" / "link").symlink_to("/etc/passwd")
    git(repo, "add", "--", "run.sh", "d/link")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},d/sub")
    git(repo, "commit", "--quiet", "-m", "kinds")
    head = git(repo, "rev-parse", "HEAD")
    paths = ["a.txt", "run.sh", "d", "d/e", "d/e/f.txt", "d/link", "d/sub", "d/g.txt"]
    absent = ["missing", "d/missing", "a.txt/x", "d/sub/x", "d/link/x", "d/e/f.txt/y", "d/", ""]
    reader = ObjectReader(repo, os.environ)
    try:
        for path in [*paths, *absent]:
            listed = git(repo, "ls-tree", head, "--", path) if path else ""
            expected = tuple(listed.split()[:2]) if listed and path in paths else None
            assert reader.entry(head, path) == expected, path
        assert reader.entry(head, "d/link") == ("120000", "blob")
        assert reader.entry(head, "d/sub") == ("160000", "commit")
        assert reader.entry(head, "d/e") == ("040000", "tree")
        assert reader.entry("0" * 40, "a.txt") is None
    finally:
        reader.close()


def test_objects_that_arrive_later_are_found_by_the_same_reader(repo: Path) -> None:
    first = commit(repo, {"a.txt": b"1\n"})
    reader = ObjectReader(repo, os.environ)
    try:
        assert reader.info(f"{first}^{{commit}}") is not None
        second = commit(repo, {"a.txt": b"2\n"})
        git(repo, "gc", "--quiet")  # packed, as a fetch leaves them
        third = commit(repo, {"a.txt": b"3\n"})
        for sha in (second, third):
            assert reader.info(f"{sha}^{{commit}}") is not None
    finally:
        reader.close()
    reader.close()  # closing twice is harmless


def test_a_git_that_cannot_run_there_is_a_tool_error(tmp_path: Path) -> None:
    reader = ObjectReader(tmp_path / "gone", os.environ)
    with pytest.raises(ToolError, match="gone"):
        reader.info("HEAD")
    reader.close()


def test_a_git_that_ends_without_answering_answers_no_object_and_starts_again(
    tmp_path: Path,
) -> None:
    """Not a repository yet (another process still creating it): no object, as `git cat-file -e`
    failing said; once it is one, the next question is answered."""
    (tmp_path / "repo").mkdir()
    environ = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    reader = ObjectReader(tmp_path / "repo", environ)
    try:
        assert reader.info("HEAD") is None
        assert reader.contents("HEAD:a.txt") is None
        git(tmp_path, "init", "--quiet", "--initial-branch=main", "repo")
        head = commit(tmp_path / "repo", {"a.txt": b"1\n"})
        found = reader.info(f"{head}^{{commit}}")
        assert found is not None and found.sha == head
    finally:
        reader.close()


def test_a_commit_found_in_the_cache_is_not_looked_for_again(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock asks whether the cache holds a source's commits twice (its head start, then its
    preflight): the second time starts no `git cat-file`. A commit not found is looked for again
    (a fetch may bring it)."""
    from envgen.resolve.git import cache as git_cache
    from envgen.resolve.git.remote import GitEnv

    first = commit(repo, {"a": b"1"})
    url = "https://git.example.invalid/up.git"
    bare = git_cache.repo_path(tmp_path / "cache", url)
    bare.parent.mkdir(parents=True)
    git(tmp_path, "clone", "--quiet", "--bare", str(repo), str(bare))
    env = GitEnv.read({"PATH": os.environ["PATH"]})
    started: list[list[str]] = []
    real = subprocess.Popen

    def counting(args: list[str], *rest: object, **kw: object) -> subprocess.Popen[bytes]:
        started.append(list(args))
        return real(args, *rest, **kw)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(subprocess, "Popen", counting)
    absent = "0" * 40
    assert git_cache.has_commits(tmp_path / "cache", url, [first], env)
    assert not git_cache.has_commits(tmp_path / "cache", url, [first, absent], env)
    assert len(started) == 2
    assert git_cache.has_commits(tmp_path / "cache", url, [first], env)
    assert len(started) == 2
    assert not git_cache.has_commits(tmp_path / "cache", url, [absent], env)
    assert len(started) == 3
