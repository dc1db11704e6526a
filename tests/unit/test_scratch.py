"""The one temporary-directory helper: gone after success, failure and interrupt; kept only when
asked."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.scratch import scratch_dir


def test_removed_after_success_and_after_an_interrupt() -> None:
    with scratch_dir("envgen-test-") as path:
        (path / "file").write_text("x")
    assert not path.exists()
    seen: list[Path] = []
    with pytest.raises(KeyboardInterrupt), scratch_dir("envgen-test-") as path:
        seen.append(path)
        raise KeyboardInterrupt
    assert seen and not seen[0].exists()


def test_kept_when_asked(tmp_path: Path) -> None:
    with scratch_dir("envgen-test-", keep=True) as path:
        (path / "file").write_text("x")
    try:
        assert (path / "file").read_text() == "x" and path.name.startswith("envgen-test-")
    finally:
        (path / "file").unlink()
        path.rmdir()


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Python's own Ctrl-C (KeyboardInterrupt): an earlier test in this process may have left the
    CLI's handler."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.usefixtures("python_sigint")
def test_an_interrupt_as_the_directory_is_made_or_removed_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C right after the directory was made, and as its removal starts: before, the first
    left it (the interrupt came before the helper took charge of it), the second left it half
    removed."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real_mkdir, real_rmtree = os.mkdir, shutil.rmtree
    made: list[str] = []

    def mkdir(path: str, mode: int = 0o777) -> None:
        real_mkdir(path, mode)
        made.append(str(path))
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(os, "mkdir", mkdir)
    with pytest.raises(KeyboardInterrupt), scratch_dir("envgen-test-"):
        pass
    assert made and not os.path.exists(made[0])
    monkeypatch.setattr(os, "mkdir", real_mkdir)
    signals = [signal.SIGINT]

    def rmtree(path: str, ignore_errors: bool = False) -> None:
        if signals:
            os.kill(os.getpid(), signals.pop())
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    with pytest.raises(KeyboardInterrupt), scratch_dir("envgen-test-") as path:
        for n in range(200):
            (path / f"f{n}").write_text("x")
    assert not path.exists() and not signals
