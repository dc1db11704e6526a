"""`-o` of `envgen bundle` and `envgen export` (outputs.py): a regular file or a new path only,
never one of the project's lock files, a symlink, a device, FIFO or socket (exit 2, naming it,
nothing replaced); the mode the umask gives. Through the real CLI on the example's lock, with
nothing served (bundle takes the cache). Before, each was replaced (export: mode 0600)."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.bundles import ENV, HOST, Bundled, invoke

COMMANDS = {
    "bundle": ("bundle", ENV, "--platform", HOST),
    "export": ("export", ENV, "--format", "nix"),
}


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()


def _device(path: Path) -> None:
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a null device node of the test's own


def _symlink(path: Path) -> None:
    target = path.with_name("target")
    target.write_text("not envgen's\n")
    path.symlink_to(target)


def _dangling(path: Path) -> None:
    path.symlink_to(path.with_name("nowhere"))


def _directory(path: Path) -> None:
    path.mkdir()


PLANTED: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo,
    "socket": _socket,
    "device": _device,
    "symlink": _symlink,
    "dangling symlink": _dangling,
    "directory": _directory,
}


def snapshot(directory: Path) -> dict[str, tuple[int, bytes | None]]:
    """Each entry's file type and, for a regular file, its bytes."""
    found = {}
    for path in sorted(directory.rglob("*")):
        mode = path.lstat().st_mode
        data = path.read_bytes() if stat.S_ISREG(mode) else None
        found[str(path.relative_to(directory))] = (stat.S_IFMT(mode), data)
    return found


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    saved = os.umask(0o022)
    yield os.umask
    os.umask(saved)


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("planted", list(PLANTED))
def test_an_output_never_replaces_what_is_not_a_regular_file(
    offline: Bundled, tmp_path: Path, command: str, planted: str
) -> None:
    if planted == "device" and os.geteuid() != 0:
        pytest.skip("only root makes a device node")
    where = tmp_path / "out"
    where.mkdir()
    out = where / "file.tar"
    PLANTED[planted](out)
    before = snapshot(where)
    code, text = invoke(*COMMANDS[command], "-o", str(out), "--root", str(offline.root))
    # click itself refuses a directory (the option takes files only); envgen refuses the rest
    assert code == 2 and (f"error: {out} is " in text or f"'{out}' is a directory" in text), text
    assert snapshot(where) == before


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_output_never_replaces_a_lock_file(
    offline: Bundled, tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    locks = offline.root / "locks"
    before = snapshot(locks)
    names = (f"{ENV}.yml", f"{ENV}.sources.toml", f"{ENV}.nix", f"pylock.{ENV}-{HOST}.toml")
    names += ("new.tar",)
    for name in names:
        out = locks / name
        code, text = invoke(*COMMANDS[command], "-o", str(out), "--root", str(offline.root))
        assert code == 2 and f"{out} is in {locks}, which only `envgen lock` writes" in text, text
    # however it is named: relative, or through a directory that links to locks/
    monkeypatch.chdir(offline.root)
    (tmp_path / "alias").symlink_to(locks)
    for out in (Path("locks") / f"{ENV}.yml", tmp_path / "alias" / f"{ENV}.yml"):
        code, text = invoke(*COMMANDS[command], "-o", str(out), "--root", str(offline.root))
        assert code == 2 and "which only `envgen lock` writes" in text, text
    assert snapshot(locks) == before


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_output_has_the_mode_the_umask_gives(
    offline: Bundled, tmp_path: Path, command: str, umask: Callable[[int], None]
) -> None:
    for mask, mode in ((0o027, 0o640), (0o002, 0o664)):
        umask(mask)
        out = tmp_path / f"out-{mask:o}"
        out.write_bytes(b"a regular file: replaced\n")
        code, text = invoke(*COMMANDS[command], "-o", str(out), "--root", str(offline.root))
        assert code == 0, text
        assert stat.S_IMODE(out.stat().st_mode) == mode
        assert out.read_bytes() != b"a regular file: replaced\n"
    # and no part file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out-2", "out-27", "tmp"]
