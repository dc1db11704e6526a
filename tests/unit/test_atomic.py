"""atomic.py: a file is replaced whole or not at all, and no part file outlives its block."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

import pytest
from envgen import atomic


def _refuse(target: Path) -> None:
    raise ValueError(f"{target} refused")


@pytest.mark.parametrize("error", [OSError("disk full"), KeyboardInterrupt()])
def test_an_error_mid_write_leaves_the_old_file_and_no_part_file(
    tmp_path: Path, error: BaseException
) -> None:
    target = tmp_path / "out.txt"
    target.write_bytes(b"old\n")
    with pytest.raises(type(error)), atomic.part_file(target) as part:
        part.handle.write(b"half of the new")
        part.handle.flush()
        # the part file exists meanwhile, beside it
        assert part.path.read_bytes() == b"half of the new"
        raise error
    assert target.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_block_that_never_places_its_part_leaves_nothing(tmp_path: Path) -> None:
    with atomic.part_file(tmp_path / "new.bin") as part:
        part.handle.write(b"unwanted")
    assert list(tmp_path.iterdir()) == []


def test_write_file_replaces_the_file_whole_with_the_mode_asked(tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    target.write_bytes(b"old\n")
    atomic.write_file(target, b"#!/bin/sh\n", mode=0o755)
    assert target.read_bytes() == b"#!/bin/sh\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert [p.name for p in tmp_path.iterdir()] == ["run.sh"]


def test_a_new_file_gets_the_umask_s_mode(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic.write_file(tmp_path / "new.txt", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640


def test_a_refused_target_is_not_replaced_and_no_part_file_is_left(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_bytes(b"old\n")
    with pytest.raises(ValueError, match="refused"):
        atomic.write_file(target, b"new\n", check=_refuse)
    assert target.read_bytes() == b"old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_part_name_that_is_taken_is_never_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(secrets, "token_hex", lambda _: "0" * 16)
    theirs = tmp_path / f".out.txt.{'0' * 16}.part"
    theirs.write_bytes(b"another's")
    with pytest.raises(FileExistsError), atomic.part_file(tmp_path / "out.txt"):
        pass
    assert theirs.read_bytes() == b"another's"


def test_place_all_puts_back_the_files_renamed_before_one_that_fails(tmp_path: Path) -> None:
    first, second, new = tmp_path / "a.yml", tmp_path / "b.toml", tmp_path / "c.sh"
    first.write_bytes(b"old a\n")
    second.write_bytes(b"old b\n")

    def refuse_second(target: Path) -> None:
        if target == second:
            raise OSError("b cannot be replaced")

    failed = pytest.raises(OSError, match="b cannot")
    with (
        failed,
        atomic.part_file(first) as a,
        atomic.part_file(new) as c,
        atomic.part_file(second) as b,
    ):
        for part, text in [(a, b"new a\n"), (c, b"new c\n"), (b, b"new b\n")]:
            part.handle.write(text)
        atomic.place_all([(a, first), (c, new), (b, second)], check=refuse_second, sync=True)
    assert (first.read_bytes(), second.read_bytes()) == (b"old a\n", b"old b\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yml", "b.toml"]


def test_place_all_replaces_every_file_and_keeps_no_backup(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yml", tmp_path / "b.toml"
    first.write_bytes(b"old a\n")
    with atomic.part_file(first) as a, atomic.part_file(second) as b:
        a.handle.write(b"new a\n")
        b.handle.write(b"new b\n")
        atomic.place_all([(a, first), (b, second)])
    assert (first.read_bytes(), second.read_bytes()) == (b"new a\n", b"new b\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yml", "b.toml"]


def test_leftovers_name_only_what_this_module_makes(tmp_path: Path) -> None:
    target = tmp_path / "x[1].yml"  # a glob character in the name matches only itself
    mine = [tmp_path / ".x[1].yml.0123456789abcdef.part", tmp_path / ".x[1].yml.bak"]
    others = [
        tmp_path / ".x1.yml.0123456789abcdef.part",
        tmp_path / ".y.yml.0123.part",
        tmp_path / "x[1].yml",
    ]
    for path in [*mine, *others]:
        path.write_bytes(b"")
    assert sorted(atomic.leftovers(target)) == sorted(mine)
