"""envgen's cache directory: tagged when envgen creates it, and `envgen cache clean` only where it
is tagged, whatever the names a directory holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.commands.cache import TAG, TAG_TEXT, claimed_cache

# What uv writes into its own cache: the specification's signature alone.
UV_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n"


def clean(cache: Path) -> tuple[int, str]:
    """`envgen cache clean --json` on `cache`: exit code, and stdout (the JSON) when it is 0, else
    stderr (the error)."""
    result = CliRunner().invoke(
        cli, ["cache", "clean", "--json"], env={"ENVGEN_CACHE_DIR": str(cache)}
    )
    return result.exit_code, result.stdout if result.exit_code == 0 else result.stderr


def filled(directory: Path, *names: str) -> Path:
    for name in names:
        (directory / name).mkdir(parents=True)
        (directory / name / "mine.txt").write_text("not envgen's\n")
    return directory


def test_a_home_cache_holding_entries_named_like_envgens_is_refused_and_kept(
    tmp_path: Path,
) -> None:
    """`ENVGEN_CACHE_DIR=~/.cache` holding only pip/ and uv/: the names are envgen's, the
    directory is not."""
    home_cache = filled(tmp_path / ".cache", "pip", "uv")
    code, out = clean(home_cache)
    assert code == 2, out
    assert f"{home_cache} is not a cache envgen created (it has no {TAG} of envgen's)" in out
    assert sorted(p.name for p in home_cache.iterdir()) == ["pip", "uv"]
    assert (home_cache / "pip" / "mine.txt").is_file()


def test_the_working_directory_is_refused_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ENVGEN_CACHE_DIR=.` in a directory holding git/mine.txt and pip/."""
    filled(tmp_path, "git", "pip")
    monkeypatch.chdir(tmp_path)
    code, out = clean(Path("."))
    assert code == 2, out
    assert (tmp_path / "git" / "mine.txt").is_file() and (tmp_path / "pip").is_dir()


@pytest.mark.parametrize(
    "tag",
    [UV_TAG, TAG_TEXT + "# and more\n", "link"],
    ids=["another-tools-tag", "edited-tag", "tag-through-a-link"],
)
def test_a_tag_not_envgens_own_is_refused(tmp_path: Path, tag: str) -> None:
    cache = filled(tmp_path / "cache", "pip")
    if tag == "link":
        (tmp_path / "real-tag").write_text(TAG_TEXT)
        (cache / TAG).symlink_to(tmp_path / "real-tag")
    else:
        (cache / TAG).write_text(tag)
    code, out = clean(cache)
    assert code == 2, out
    assert (cache / "pip" / "mine.txt").is_file()


def test_a_cache_envgen_creates_is_tagged_then_emptied_keeping_its_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "new" / "envgen"
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(cache))
    assert claimed_cache() == cache
    assert (cache / TAG).read_text() == TAG_TEXT
    filled(cache, "git", "uv")
    code, out = clean(cache)
    assert code == 0, out
    removed = json.loads(out)["results"][0]["removed"]
    assert [entry["name"] for entry in removed] == ["git", "uv"]
    assert [p.name for p in cache.iterdir()] == [TAG]
    # Still envgen's: the next run caches there again, and the next clean empties it again.
    filled(cache, "pip")
    assert clean(cache)[0] == 0 and [p.name for p in cache.iterdir()] == [TAG]


def test_an_existing_directory_is_tagged_only_when_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty, shared = tmp_path / "empty", filled(tmp_path / "shared", "uv")
    empty.mkdir()
    for directory in (empty, shared):
        monkeypatch.setenv("ENVGEN_CACHE_DIR", str(directory))
        claimed_cache()
    assert (empty / TAG).read_text() == TAG_TEXT
    assert not (shared / TAG).exists()
    assert clean(shared)[0] == 2 and (shared / "uv" / "mine.txt").is_file()


@pytest.mark.parametrize("exists", [False, True], ids=["absent", "empty"])
def test_an_absent_or_empty_cache_removes_nothing_and_is_not_created(
    tmp_path: Path, exists: bool
) -> None:
    cache = tmp_path / "cache"
    if exists:
        cache.mkdir()
    code, out = clean(cache)
    assert code == 0, out
    assert json.loads(out)["results"][0]["removed"] == []
    assert cache.is_dir() == exists and (not exists or list(cache.iterdir()) == [])
