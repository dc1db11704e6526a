"""SIGINT and SIGTERM during `envgen lock`: the message says whether the lock was written, and it is
true.

A real re-lock of the bundled example (a version bump, so the new files differ from the old) is
interrupted at many points: after each line it logs, and by timer. Whatever the point, locks/ then
holds either the old files or the complete new ones, byte for byte, no temp or backup file, and the
message says which.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.example.project import Example, bump_version

from tests.support.example import with_example_metadata
from tests.support.stalling import git_waiting

ENV = "demo"
WRITTEN = "interrupted: the new lock of demo was written"
NOT_WRITTEN = "interrupted: nothing was written (the previous lock files are unchanged)"


@pytest.fixture(scope="module")
def example(read_only_served: Example) -> Example:
    """The worker's served example, a copy of its project for this module
    (tests/integration/conftest.py): the module's locks are its own; upstream and what is served
    its locks only read (each interrupted one with a cache of its own)."""
    return read_only_served


def files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "locks").glob(f"{ENV}.*"))}


def leftovers(root: Path) -> list[str]:
    """Dot files in locks/: temp or backup files of a write, or the per-env mutex left behind."""
    return sorted(p.name for p in (root / "locks").glob(".*"))


def restore(root: Path, wanted: dict[str, bytes]) -> None:
    for path in (root / "locks").glob(f"{ENV}.*"):
        path.unlink()
    for name, data in wanted.items():
        (root / "locks" / name).write_bytes(data)


def interrupted_lock(
    factory: pytest.TempPathFactory,
    example: Example,
    sig: signal.Signals,
    *,
    line: int | None,
    delay: float,
    extra: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Run `envgen lock` in a child process (`extra` in its environment) and send `sig` after its
    `line`-th log line (or after `delay`)."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": str(example.gitconfig), "GIT_CONFIG_NOSYSTEM": "1"}
    env.update(extra or {})
    # A cache of its own: a kill can leave git's config.lock in a cached repository, which would
    # fail every later lock sharing the session's cache (tests/conftest.py). It holds what the
    # sources' build backends said, as a machine's cache does after its first lock.
    cache = tempfile.mkdtemp(prefix="interrupted-cache-", dir=example.root.parent)
    env["ENVGEN_CACHE_DIR"] = str(with_example_metadata(factory, Path(cache)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "envgen", "lock", ENV, "--root", str(example.root)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        if line is None:
            time.sleep(delay)
        else:
            while len(lines) < line and (text := proc.stderr.readline()):
                lines.append(text)
        # SIGINT as a terminal sends it, to the whole group; SIGTERM as a supervisor does, to envgen
        # alone.
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, "".join(lines) + rest


@pytest.fixture(scope="module")
def generations(
    example: Example, worker_first_lock: dict[str, bytes]
) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The old lock files (the worker's first lock) and the new ones a version bump gives, made once
    per module (in process: their making is not the subject); the matrix stays bumped, so each
    `envgen lock` below re-locks from the old files to the new ones."""
    runner = CliRunner()
    for name, data in worker_first_lock.items():
        (example.root / "locks" / name).write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GIT_CONFIG_GLOBAL", str(example.gitconfig))
        old = files(example.root)
        bump_version(example, "demo-torch", "2.10.0", "2.10.1")
        assert runner.invoke(cli, ["lock", ENV, "-q", "--root", str(example.root)]).exit_code == 0
    new = files(example.root)
    assert new != old and set(new) == set(old)
    return old, new


# A re-lock of the served example with a cache of its own logs 27 lines in under a second: the git
# sources and archives (lines 1-11), the solves and uv (to 19), the write (20), what moved (21-27).
POINTS = [
    *((sig, n, 0.0) for n in (1, 2, 4, 8, 14, 20, 24) for sig in (signal.SIGINT, signal.SIGTERM)),
    *((sig, None, t) for t in (0.15, 0.3, 0.45, 0.6) for sig in (signal.SIGINT, signal.SIGTERM)),
]


@pytest.mark.parametrize(
    ("sig", "line", "delay"),
    POINTS,
    ids=[f"{sig.name}-{f'line{line}' if line else f'{delay}s'}" for sig, line, delay in POINTS],
)
def test_every_interrupt_leaves_one_generation_and_says_which(
    example: Example,
    generations: tuple[dict[str, bytes], dict[str, bytes]],
    sig: signal.Signals,
    line: int | None,
    delay: float,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """One interrupt point per case (workers share them). The first two lines a lock logs come
    before it has fetched its git sources, so before it can write anything: there its git waits at
    its first fetch (a lock of the served example takes a fraction of a second, and a signal sent
    on a loaded machine could otherwise arrive after the commit), and an interrupt stops it before
    the commit point. The points span the run."""
    old, new = generations
    restore(example.root, old)
    early = line is not None and line <= 2
    held = git_waiting(tmp_path, '*" fetch "*') if early else None
    code, err = interrupted_lock(tmp_path_factory, example, sig, line=line, delay=delay, extra=held)
    where = f"{sig.name} after {'line ' + str(line) if line else f'{delay} s'}: exit {code}\n{err}"
    assert "Traceback" not in err, where
    assert leftovers(example.root) == [], where
    now = files(example.root)
    if code == 0:  # finished before the signal arrived
        outcome = "finished"
        assert now == new, where
    elif code == -sig and delay:
        # Killed before the interpreter reached envgen's first handler (a loaded machine can take
        # longer than the earliest point to start Python): nothing can have been written, nor
        # said.
        outcome = "not written"
        assert now == old and err == "", where
    else:
        assert code == (130 if sig == signal.SIGINT else 143), where
        outcome = "written" if WRITTEN in err else "not written"
        assert (WRITTEN in err) != (NOT_WRITTEN in err), where
        assert now == (new if outcome == "written" else old), where
    if early:
        assert outcome == "not written", where


def test_the_next_lock_removes_stale_temp_files_of_its_own_naming(example: Example) -> None:
    os.environ["GIT_CONFIG_GLOBAL"] = str(example.gitconfig)
    locks = example.root / "locks"
    locks.mkdir(exist_ok=True)
    stale = [
        locks / f".{ENV}.yml.abc123.tmp",
        locks / f".{ENV}.sources.toml.x.tmp",
        locks / f".{ENV}.yml.bak",
    ]
    stale.append(locks / f".{ENV}.install.sh.0123456789abcdef.part")
    foreign = locks / ".someone-else.tmp"
    for path in [*stale, foreign]:
        path.write_text("left by a killed run\n")
    result = CliRunner().invoke(cli, ["lock", ENV, "--force", "-q", "--root", str(example.root)])
    assert result.exit_code == 0, result.output
    assert not any(path.exists() for path in stale)
    assert foreign.exists()
    foreign.unlink()
