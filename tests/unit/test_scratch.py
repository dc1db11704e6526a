"""The one temporary-directory helper: gone after success, failure and interrupt; kept only when asked."""

from __future__ import annotations

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
