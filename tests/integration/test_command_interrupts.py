"""Ctrl-C (and SIGTERM) in `install`, `bundle` and `check`, through the real command line: each says
what it did or did not do (none of them writes a lock), and every temporary directory envgen or its
children (pip, uv, git) made is gone, though the children are killed mid-work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen import interrupts
from envgen.cli import cli

from tests.support.bundles import ENV, HOST, Bundled, go_offline
from tests.support.proc_bundled import bundled_copy
from tests.support.stalling import git_waiting

TRIALS = 3
MIRRORING = '*" fetch --quiet -- "*'  # git filling a mirror from a bundle's pack
PACKING = '*" bundle create "*'


@pytest.fixture
def offline(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Bundled:
    """The session's bundle with nothing served (tests/support/bundles.go_offline), from a copy of
    its project and cache: one lock and bundle per run, not one per worker, and a killed child's
    leftovers in the cache are this test's alone."""
    return go_offline(bundled_copy(tmp_path_factory, tmp_path / "bundled"), monkeypatch, tmp_path)


def interrupted_when(
    tmp_path: Path,
    args: Sequence[str],
    ready: Callable[[], bool],
    signum: int = signal.SIGINT,
    extra: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Run envgen with `args` (its temp dir tmp_path/tmp) and send `signum` once `ready()` holds;
    its exit code and stderr."""
    env = {**os.environ, "NO_COLOR": "1", "TMPDIR": str(tmp_path / "tmp"), **(extra or {})}
    cmd = [sys.executable, "-m", "envgen", *args]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, f"envgen ended before it was interrupted: {proc.communicate()}"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return proc.returncode, err


def found(directory: Path, prefix: str) -> Callable[[], bool]:
    """Whether a child made its temporary `prefix`* in the scratch directory envgen gives its
    children in `directory` (envgen.scratch.children_scratch: TMPDIR/envgen-install-*/): the two
    levels where the case's names appear, listed each poll. Walking the whole tree instead, every
    few milliseconds while pip unpacked into it, cost this process a second of CPU per trial."""

    def ready() -> bool:
        with os.scandir(directory) as scratches:
            dirs = [entry.path for entry in scratches if entry.is_dir(follow_symlinks=False)]
        for scratch in dirs:
            try:
                with os.scandir(scratch) as made:
                    if any(entry.name.startswith(prefix) for entry in made):
                        return True
            except FileNotFoundError:  # envgen removed it meanwhile
                pass
        return False

    return ready


@pytest.mark.parametrize("trial", range(TRIALS))
@pytest.mark.parametrize(
    ("what", "prefix"),
    [
        ("pip's build directories", "pip-ephem-wheel-cache"),
        ("uv's throwaway cache (seeding the venv)", ".tmp"),
    ],
)
def test_an_interrupted_install_leaves_nothing_in_the_temp_dir(
    offline: Bundled, tmp_path: Path, what: str, prefix: str, trial: int
) -> None:
    """Killed mid-work, a child cannot remove its own temporary files; whether it had is a matter
    of timing, so a few trials each (any one left behind fails), each a case of its own that a
    worker can take. Before: left in $TMPDIR."""
    env = tmp_path / "env"
    args = ["install", ENV, "--from-bundle", str(offline.bundle), "--prefix", str(env), "--venv"]
    args += ["--root", str(offline.root)]
    code, err = interrupted_when(tmp_path, args, found(tmp_path / "tmp", prefix))
    assert code == 130, err
    assert f"interrupted: the partly installed {env} was removed" in err, err
    assert not env.exists()
    assert list((tmp_path / "tmp").iterdir()) == [], what


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["sigint", "sigterm"]
)
def test_an_install_interrupted_while_verifying_says_nothing_was_installed(
    offline: Bundled, tmp_path: Path, signum: int, code: int
) -> None:
    """Before: "the partly installed ... was removed", of a prefix never made."""
    prefix = tmp_path / "env"
    args = ["install", ENV, "--from-bundle", str(offline.bundle), "--prefix", str(prefix), "--venv"]
    args += ["--root", str(offline.root)]
    git = git_waiting(tmp_path, MIRRORING)
    returned, err = interrupted_when(tmp_path, args, (tmp_path / "marker").exists, signum, git)
    assert returned == code, err
    assert err.strip().endswith(f"interrupted: nothing was installed into {prefix}"), err
    assert "lock files" not in err and not prefix.exists()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_check_interrupted_before_its_verdict_says_so(offline: Bundled, tmp_path: Path) -> None:
    """Before: the lock's "nothing was written (the previous lock files are unchanged)"."""
    args = ["check", ENV, "--from-bundle", str(offline.bundle), "--venv"]
    args += ["--root", str(offline.root)]
    git = git_waiting(tmp_path, MIRRORING)
    code, err = interrupted_when(tmp_path, args, (tmp_path / "marker").exists, extra=git)
    assert code == 130, err
    said = "interrupted: the check stopped before its verdict: nothing was installed or written"
    assert err.strip().endswith(said), err
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_bundle_interrupted_while_packing_a_source_says_no_bundle_was_written(
    offline: Bundled, tmp_path: Path
) -> None:
    out = tmp_path / "out" / "demo.tar.zst"
    args = ["bundle", ENV, "--platform", HOST, "-o", str(out), "--root", str(offline.root)]
    git = git_waiting(tmp_path, PACKING)
    code, err = interrupted_when(tmp_path, args, (tmp_path / "marker").exists, extra=git)
    assert code == 130, err
    assert f"interrupted: no bundle was written at {out} (nor a part file)" in err, err
    assert "lock files" not in err and not out.parent.exists()
    assert list((tmp_path / "tmp").iterdir()) == []


NOTHING_DONE = {
    "install": "interrupted: nothing was installed",
    "check": "interrupted: the check stopped before its verdict: nothing was installed or written",
    "bundle": "interrupted: no bundle was written",
}


@pytest.mark.parametrize("command", list(NOTHING_DONE))
def test_an_interrupt_before_the_work_says_what_the_command_did_not_do(
    offline: Bundled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """Ctrl-C while the command is still being set up (its modules imported, its options read):
    none of these writes a lock, so none may answer with the lock's "the previous lock files are
    unchanged" (before: each did)."""

    def interrupted() -> Path:
        raise KeyboardInterrupt

    # what each asks for just before its work
    monkeypatch.setattr("envgen.commands.cache.cache_dir", interrupted)
    extra = {
        "install": ("--prefix", str(tmp_path / "env"), "--venv"),
        "check": (),
        "bundle": ("-o", str(tmp_path / "b.tar")),
    }
    args = [command, ENV, *extra[command], "--root", str(offline.root)]
    try:
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        interrupts.reset()  # the interrupted command left it set, as its process would end here
    assert result.exit_code == 130 and result.stderr.strip() == NOTHING_DONE[command], result.output
