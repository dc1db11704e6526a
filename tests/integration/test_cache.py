"""`envgen cache dir` and `envgen cache clean`: the directory ENVGEN_CACHE_DIR names (or the user
cache directory), emptied of what envgen put there, and of nothing else, never through a link."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.commands.cache import TAG, TAG_TEXT
from envgen.project import CACHE_ENTRIES

from tests.support.proc_bundled import shared_bundle


def cache_command(
    *args: str,
    cache: Path | None,
    env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    """`envgen cache ARGS` run in process, ENVGEN_CACHE_DIR set to `cache` (None: unset): the
    subject is what envgen decides to remove and says, not the process boundary (about 0.3 s of CPU
    less than a child process each)."""
    variables: dict[str, str | None] = {"ENVGEN_CACHE_DIR": None if cache is None else str(cache)}
    result = CliRunner().invoke(
        cli, ["cache", *args], env=variables | (env or {}), catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


def test_dir_is_the_variable_else_the_user_cache_directory(tmp_path: Path) -> None:
    assert cache_command("dir", cache=tmp_path / "mine") == (0, f"{tmp_path / 'mine'}\n", "")
    code, out, _ = cache_command("dir", cache=None, env={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert (code, out) == (0, f"{tmp_path / 'xdg' / 'envgen'}\n")
    code, out, _ = cache_command("dir", "--json", cache=tmp_path / "mine")
    assert json.loads(out)["results"] == [{"path": str(tmp_path / "mine"), "exists": False}]


def test_clean_removes_everything_a_lock_and_a_bundle_cached(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """What envgen writes into its cache is all in CACHE_ENTRIES (else clean would refuse it), in
    the directory the first of them created and tagged: a copy of the cache the session's one
    real lock and two bundles of the example filled (tests/support/proc_bundled.py), rather than
    a lock, a check and a bundle of this test's own. That what a check's and an install's real
    installs cache is in CACHE_ENTRIES too is asserted in test_secrets, where they run (a check by
    pip, an install by uv, a conda prefix)."""
    cache = tmp_path / "cache"
    shutil.copytree(shared_bundle(tmp_path_factory) / "cache", cache, symlinks=True)
    assert (cache / TAG).read_text() == TAG_TEXT
    cached = sorted(p.name for p in cache.iterdir() if p.name != TAG)
    assert {"git", "conda", "uv", "pypi-metadata", "artifacts"} <= set(cached)

    code, out, err = cache_command("clean", "--json", cache=cache)
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    assert [e["name"] for e in result["removed"]] == cached
    assert result["bytes"] == sum(e["bytes"] for e in result["removed"]) > 1_000_000
    assert cache.is_dir() and [p.name for p in cache.iterdir()] == [TAG]
    code, _, err = cache_command("clean", cache=cache)
    assert (code, err) == (0, f"envgen cache: nothing to remove in {cache}\n")


def test_clean_says_what_it_removed_and_removes_a_link_inside_as_a_link(tmp_path: Path) -> None:
    cache, outside = tmp_path / "cache", tmp_path / "precious"
    (cache / "git" / "repo.git").mkdir(parents=True)
    (cache / TAG).write_text(TAG_TEXT)
    (cache / "git" / "repo.git" / "HEAD").write_text("ref: refs/heads/main\n")
    outside.mkdir()
    (outside / "keep.txt").write_text("not envgen's\n")
    (cache / "uv").symlink_to(outside)  # a link where envgen keeps a directory
    (cache / "git" / "elsewhere").symlink_to(outside)  # and one inside an entry

    code, _, err = cache_command("clean", cache=cache)
    assert code == 0, err
    assert err.splitlines() == [
        f"removed {cache / 'git'} (21 bytes)",
        f"removed {cache / 'uv'} ({len(str(outside))} bytes)",
        f"envgen cache: removed {21 + len(str(outside))} bytes from {cache}",
    ]
    assert [p.name for p in cache.iterdir()] == [TAG]
    assert (outside / "keep.txt").read_text() == "not envgen's\n"


def test_clean_refuses_a_directory_holding_what_envgen_does_not_put_there(tmp_path: Path) -> None:
    """ENVGEN_CACHE_DIR pointing at a home that carries envgen's tag (copied there, say): nothing
    at all is removed, not even envgen's `git/` (tests/unit/test_cache_claim.py: an untagged one
    is refused whatever it holds)."""
    home = tmp_path / "home"
    (home / "git").mkdir(parents=True)
    (home / TAG).write_text(TAG_TEXT)
    (home / ".bashrc").write_text("export PATH\n")
    (home / "notes.txt").write_text("mine\n")
    code, out, err = cache_command("clean", cache=home)
    assert code == 2 and out == ""
    assert f"error: {home} holds .bashrc, notes.txt, which envgen does not put in its cache" in err
    assert "nothing was removed" in err and ", ".join(CACHE_ENTRIES) in err
    assert sorted(p.name for p in home.iterdir()) == [".bashrc", TAG, "git", "notes.txt"]


def test_clean_never_goes_through_a_link_to_the_cache(tmp_path: Path) -> None:
    real = tmp_path / "real-cache"
    (real / "git").mkdir(parents=True)
    link = tmp_path / "cache"
    link.symlink_to(real)
    code, _, err = cache_command("clean", cache=link)
    assert code == 2
    refused = f"error: the cache {link} is a symbolic link: envgen removes its cache only where"
    assert refused in err
    assert (real / "git").is_dir()
    (tmp_path / "file").write_text("x")
    code, _, err = cache_command("clean", cache=tmp_path / "file")
    assert code == 2 and "is not a directory" in err
    assert cache_command("clean", cache=tmp_path / "absent") == (
        0,
        "",
        f"envgen cache: nothing to remove in {tmp_path / 'absent'}\n",
    )


def test_an_interrupted_clean_says_what_it_removed_and_what_is_left(tmp_path: Path) -> None:
    """A real `envgen cache clean` interrupted once its first entry went, while it removes the
    second (thousands of files): it says what is gone and what is left, as the disk then is.
    Before: "nothing was written (the previous lock files are unchanged)"."""
    cache = tmp_path / "cache"
    (cache / "archives").mkdir(parents=True)
    (cache / TAG).write_text(TAG_TEXT)
    (cache / "archives" / "one.zip").write_bytes(b"x")
    for part in range(50):
        (cache / "artifacts" / f"{part:02}").mkdir(parents=True)
        for name in range(100):
            (cache / "artifacts" / f"{part:02}" / f"{name}.whl").write_bytes(b"y")
    (cache / "git" / "repo.git").mkdir(parents=True)
    script = Path(sys.executable).parent / "envgen"
    environ = {**os.environ, "ENVGEN_CACHE_DIR": str(cache)}
    child = subprocess.Popen(
        [script, "cache", "clean"], env=environ, stderr=subprocess.PIPE, text=True
    )
    try:
        while (cache / "archives").exists() and child.poll() is None:
            time.sleep(0.001)
        assert child.poll() is None, (
            f"the clean ended before it was interrupted: {child.communicate()}"
        )
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
    names = ["archives", "artifacts", "git"]
    gone = [name for name in names if not os.path.lexists(cache / name)]
    left = [name for name in names if name not in gone]
    assert child.returncode == 130, err
    assert "archives" in gone and "git" in left, err
    assert err.splitlines()[-1] == (
        f"interrupted: removed {', '.join(gone)} from the cache {cache}; {', '.join(left)} left "
        "(the first perhaps in part): `envgen cache clean` removes the rest"
    )
