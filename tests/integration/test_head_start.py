"""A re-lock's head start: uv is started on what the previous lock predicts before the rest of the
re-lock runs, and its run is used only when the re-lock plans the very same run; otherwise uv runs
again and the head start's run is stopped. Either way the lock is the one a re-lock without a head
start writes."""

from __future__ import annotations

import re
import socket
import tempfile
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from envgen.commands.lock import command as lock_command
from envgen.errors import NetworkError, Unreached
from envgen.example.condapkgs import demo_packages
from envgen.example.project import Example, republish
from envgen.inputs.matrix import load_env
from envgen.lockio import store
from envgen.lockio.seal import seal
from envgen.lockio.store import read_lock
from envgen.project import Project
from envgen.resolve import pipeline
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.closed import closed_url
from tests.support.example import run_envgen
from tests.support.lk_locked import locked_example

ENV = "demo"
PLATFORMS = ("linux-64", "linux-aarch64")
UV_RUN = re.compile(r"ran `\S+/uv pip compile ")


@pytest.fixture(scope="module")
def served(read_only_served: Example) -> Example:
    """The worker's served example, a copy of its project for this module
    (tests/integration/conftest.py): the tests that start from it edit only its project (its
    matrix, channel files, locks/), each putting it back; the one that changes what is served has an
    example of its own."""
    return read_only_served


@pytest.fixture(scope="module")
def first_lock(worker_first_lock: dict[str, bytes]) -> dict[str, bytes]:
    """The worker's example locked once (tests/integration/conftest.py); each test starts from
    these files."""
    return worker_first_lock


@pytest.fixture
def locked(
    served: Example,
    first_lock: dict[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[Example]:
    """The served example, locked; scratch directories go to a TMPDIR of the test's own."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with locked_example(served, ENV, first_lock, monkeypatch) as example:
        yield example


def lock_files(example: Example) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((example.root / "locks").glob(f"{ENV}.*"))}


def relock(example: Example, *args: str) -> str:
    """`envgen -v lock demo --force ARGS`: its stderr (the debug lines say what the head start
    did)."""
    code, _, err = run_envgen(example, "-v", "lock", ENV, "--force", *args)
    assert code == 0, err
    return err


def resolved_requirement(example: Example) -> tuple[str, str]:
    """A source and a requirement it records that reaches uv as written (on a package no source
    provides and no override replaces)."""
    sources = tomllib.loads((example.root / "locks" / f"{ENV}.sources.toml").read_text())["sources"]
    overridden = {canonicalize_name(o.name) for o in load_env(Project(example.root), ENV).overrides}
    provided = {canonicalize_name(s["distribution"]) for s in sources} | overridden
    return next(
        (s["name"], r["text"])
        for s in sources
        for r in s.get("requirements", ())
        if canonicalize_name(Requirement(r["text"]).name) not in provided
    )


def no_scratch_left() -> bool:
    return not list(Path(tempfile.gettempdir()).glob("envgen-uv-*"))


def test_a_forced_relock_uses_the_run_started_ahead_and_writes_the_same_bytes(
    locked: Example,
) -> None:
    before = lock_files(locked)
    err = relock(locked)
    for platform in PLATFORMS:
        assert f"{platform}: uv started ahead, on python 3.11.9" in err, err
        assert f"{platform}: adopting the uv run started ahead" in err, err
    assert len(UV_RUN.findall(err)) == len(PLATFORMS), err  # uv ran once per platform, not twice
    pinned = re.findall(r"source (\S+): \S+ -> [0-9a-f]{40}$", err, re.MULTILINE)
    # the re-lock took the sources the head start pinned
    assert pinned and len(pinned) == len(set(pinned)), err
    assert lock_files(locked) == before
    assert no_scratch_left()


@contextmanager
def listening() -> Iterator[tuple[str, list[object]]]:
    """A loopback URL and the connections made to it (accepted, then closed)."""
    accepted: list[object] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.settimeout(0.2)
        stop = threading.Event()

        def accept() -> None:
            while not stop.is_set():
                with suppress(OSError):
                    conn, _ = listener.accept()
                    accepted.append(conn)
                    conn.close()

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
        finally:
            stop.set()
            thread.join(5)


def reseal(example: Example) -> None:
    """The content hash of the lock files computed again after an edit, as a tamperer who knows the
    scheme would."""
    locks = example.root / "locks"
    yml, sources, recipe = (
        locks / f"{ENV}{suffix}" for suffix in (".yml", ".sources.toml", ".install.sh")
    )
    sources.write_text(seal(yml.read_text(), sources.read_text(), recipe.read_text()))


@pytest.mark.parametrize(
    "edit", ["another requirement", "a URL requirement", "an option as distribution"]
)
def test_what_a_lock_records_of_its_sources_never_reaches_uv(locked: Example, edit: str) -> None:
    """A hand-edited sources.toml, sealed again (unsealed, the re-lock trusts nothing of it): a
    source requirement its tree does not declare (uv would resolve and build it), one on a URL (uv
    would fetch it), a distribution that is an option (a line of uv's excludes file). The head
    start pins the sources as the re-lock does, reading their trees: its uv run is the re-lock's
    own, the edit reaches no uv run, and the host in the URL is never asked."""
    before = lock_files(locked)
    sources = locked.root / "locks" / f"{ENV}.sources.toml"
    text = sources.read_text()
    _, recorded = resolved_requirement(locked)
    with listening() as (host, accepted):
        distribution = tomllib.loads(text)["sources"][0]["distribution"]
        old, new = {
            "another requirement": (f'text = "{recorded}"', 'text = "evil-build-me>=0"'),
            "a URL requirement": (
                f'text = "{recorded}"',
                f'text = "{Requirement(recorded).name} @ {host}/x.tar.gz"',
            ),
            "an option as distribution": (
                f'distribution = "{distribution}"',
                'distribution = "-r /etc/passwd"',
            ),
        }[edit]
        assert old in text
        sources.write_text(text.replace(old, new, 1))
        reseal(locked)
        err = relock(locked)
    for platform in PLATFORMS:
        assert f"{platform}: adopting the uv run started ahead" in err, err
    assert len(UV_RUN.findall(err)) == len(PLATFORMS), err
    assert not accepted
    assert lock_files(locked) == before  # the hand edit is gone: the sources.toml is written again
    assert no_scratch_left()


def test_a_run_started_on_another_python_is_not_used(
    example: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The matrix now asks for python 3.11.10, which the channel has gained: the lock predicts
    3.11.9, the conda solve chooses 3.11.10, the pip stage plans another run and resolves again; the
    head start's is stopped."""
    code, _, err = run_envgen(example, "lock", ENV, "-q")
    assert code == 0, err
    scratch = example.root.parent / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    newer = [p for p in demo_packages("3.11.10") if p.name == "python"]
    republish(example, conda=(*demo_packages(), *newer))
    example.matrix.write_text(
        example.matrix.read_text().replace('"python 3.11.*"', '"python ==3.11.10"')
    )
    code, _, err = run_envgen(example, "-v", "lock", ENV)
    assert code == 0, err
    for platform in PLATFORMS:
        assert f"{platform}: uv started ahead, on python 3.11.9" in err, err
        assert (
            f"{platform}: the uv run started ahead does not fit the inputs: resolving afresh" in err
        ), err
    assert "adopting" not in err
    assert len(UV_RUN.findall(err)) <= 2 * len(PLATFORMS), err
    locked = read_lock(Project(example.root), ENV)
    assert locked is not None and {locked.python_for(p) for p in PLATFORMS} == {"3.11.10"}
    assert {e.platform for e in locked.pip} == set(PLATFORMS)
    assert not list(scratch.glob("envgen-uv-*"))


def test_a_preflight_that_fails_stops_the_run_started_ahead(locked: Example) -> None:
    """The conda channel no longer answers: the preflight names it while uv already runs; the run is
    stopped, the lock is unchanged and no scratch directory is left."""
    before = lock_files(locked)
    channel = next(
        p
        for p in (locked.root / "channels").glob("*.toml")
        if tomllib.loads(p.read_text())["kind"] == "conda"
    )
    kept = channel.read_text()
    channel.write_text(kept.replace(tomllib.loads(kept)["url"], closed_url()))
    code, _, err = run_envgen(locked, "-v", "lock", ENV, "--force")
    channel.write_text(kept)
    assert code == 3, err
    assert "that the lock needs did not answer; nothing was locked" in err, err
    assert "uv started ahead" in err, err
    assert lock_files(locked) == before
    assert no_scratch_left()


def test_a_relock_ready_before_the_preflight_fails_writes_nothing(
    locked: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-lock has everything to write while the preflight still waits on a host, which then
    does not answer: the write waits for the preflight's verdict, so nothing is written."""
    ready, wrote = threading.Event(), threading.Event()
    relock, write_lock = pipeline.relock, store.write_lock

    def relocked(*args: object) -> object:
        done = relock(*args)  # type: ignore[arg-type]
        ready.set()
        return done

    def write(*args: object) -> None:
        wrote.set()
        write_lock(*args)

    def preflight(*args: object) -> None:
        assert ready.wait(120), "the re-lock never got ready to write"
        wrote.wait(3)  # a re-lock not held back writes meanwhile
        raise NetworkError.listing(
            "1 host that the lock needs did not answer; nothing was locked:",
            [Unreached("127.0.0.1:9", "connection refused")],
        )

    monkeypatch.setattr(pipeline, "relock", relocked)
    monkeypatch.setattr(store, "write_lock", write)
    monkeypatch.setattr(lock_command, "ask_hosts", preflight)
    code, _, err = run_envgen(locked, "lock", ENV, "--force")
    assert code == 3 and "did not answer; nothing was locked" in err, err
    assert not wrote.is_set()


def test_a_conda_spec_the_solver_refuses_stops_the_relock_after_its_head_start(
    locked: Example,
) -> None:
    """The conda specs are parsed once uv has started (they are not uv's): one rattler's solver
    refuses still ends the lock with exit 2 naming its key, the head start's run stopped and nothing
    written."""
    before = lock_files(locked)
    locked.matrix.write_text(
        locked.matrix.read_text().replace('"python 3.11.*"', '"python 3.11.9"')
    )
    code, _, err = run_envgen(locked, "-v", "lock", ENV)
    assert code == 2, err
    assert "uv started ahead" in err, err
    assert (
        "conda.specs[0]: 'python 3.11.9' is not a conda match spec: missing range specifier" in err
    ), err
    assert "Traceback" not in err
    assert lock_files(locked) == before
    assert no_scratch_left()
