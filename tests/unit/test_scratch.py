"""The one temporary-directory helper: gone after success, failure and interrupt; kept only when asked."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
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


def test_an_interrupt_while_the_directory_is_made_or_removed_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C right after mkdtemp made the directory, and as its removal starts: before, the first
    left it (the interrupt came before the helper took charge of it), the second half removed."""
    real_mkdtemp, real_rmtree = tempfile.mkdtemp, shutil.rmtree
    made: list[str] = []

    def mkdtemp(prefix: str) -> str:
        made.append(real_mkdtemp(prefix=prefix, dir=tmp_path))
        os.kill(os.getpid(), signal.SIGINT)
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    with pytest.raises(KeyboardInterrupt), scratch_dir("envgen-test-"):
        pass
    assert made and not os.path.exists(made[0])
    monkeypatch.undo()

    def rmtree(path: str, ignore_errors: bool = False) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    with pytest.raises(KeyboardInterrupt), scratch_dir("envgen-test-") as path:
        for n in range(200):
            (path / f"f{n}").write_text("x")
    assert not path.exists()
