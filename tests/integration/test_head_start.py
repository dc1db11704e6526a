"""A re-lock's head start: uv is started on what the previous lock predicts before the rest of the re-lock runs,
and its run is used only when the re-lock plans the very same run; otherwise uv runs again and the head start's
run is stopped. Either way the lock is the one a re-lock without a head start writes."""

from __future__ import annotations

import re
import tempfile
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.commands import lock as lock_command
from envgen.errors import NetworkError
from envgen.example.project import Example
from envgen.inputs.matrix import load_env
from envgen.project import Project
from envgen.resolve import pipeline
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.example import restored_example, run_envgen
from tests.support.stalling import closed_url, stalling_server

ENV = "demo"
PLATFORMS = ("linux-64", "linux-aarch64")
UV_RUN = re.compile(r"ran `\S+/uv pip compile ")


@pytest.fixture
def locked(served: Example, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Example]:
    """The served example, locked; scratch directories go to a TMPDIR of the test's own."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with restored_example(served, ENV, monkeypatch) as example:
        code, _, err = run_envgen(example, "lock", ENV, "-q")
        assert code == 0, err
        yield example


def lock_files(example: Example) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((example.root / "locks").glob(f"{ENV}.*"))}


def relock(example: Example, *args: str) -> str:
    """`envgen -v lock demo --force ARGS`: its stderr (the debug lines say what the head start did)."""
    code, _, err = run_envgen(example, "-v", "lock", ENV, "--force", *args)
    assert code == 0, err
    return err


def resolved_requirement(example: Example) -> tuple[str, str]:
    """A source and a requirement it records that reaches uv as written (on a package no source provides and no
    override replaces)."""
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


def test_a_forced_relock_uses_the_run_started_ahead_and_writes_the_same_bytes(locked: Example) -> None:
    before = lock_files(locked)
    err = relock(locked)
    for platform in PLATFORMS:
        assert f"{platform}: uv started ahead, on python 3.11.9" in err, err
        assert f"{platform}: adopting the uv run started ahead" in err, err
    assert len(UV_RUN.findall(err)) == len(PLATFORMS), err  # uv ran once per platform, not twice
    assert lock_files(locked) == before
    assert no_scratch_left()


def test_a_prediction_the_relock_does_not_confirm_is_not_used(locked: Example) -> None:
    """The lock records a requirement of a source that its tree does not declare: the head start resolves it,
    the re-lock reads the tree, plans another run and resolves again; the head start's run is not used."""
    before = lock_files(locked)
    sources = locked.root / "locks" / f"{ENV}.sources.toml"
    text = sources.read_text()
    _, recorded = resolved_requirement(locked)
    edited = Requirement(recorded)
    edited.specifier &= "!=0.0.0.1"
    sources.write_text(text.replace(f'text = "{recorded}"', f'text = "{edited}"', 1))
    err = relock(locked)
    for platform in PLATFORMS:
        assert f"{platform}: uv started ahead" in err, err
        assert f"{platform}: the uv run started ahead does not fit the inputs: resolving afresh" in err, err
    assert "adopting" not in err
    assert lock_files(locked) == before  # the tree's requirements, as locked before
    assert no_scratch_left()


def test_a_lock_recording_a_url_requirement_gets_no_head_start(locked: Example) -> None:
    """A hand-edited lock cannot make the head start fetch from a host the matrix does not name: the host below
    would be asked for the requirement's file if uv were started on it."""
    before = lock_files(locked)
    sources = locked.root / "locks" / f"{ENV}.sources.toml"
    text = sources.read_text()
    source, recorded = resolved_requirement(locked)
    with stalling_server("silent") as host:
        hostile = f"{Requirement(recorded).name} @ {host}/evil-1.0.tar.gz"
        sources.write_text(text.replace(f'text = "{recorded}"', f'text = "{hostile}"', 1))
        err = relock(locked)
    assert f"no head start: {source} requires {hostile}" in err, err
    assert "started ahead" not in err
    assert lock_files(locked) == before


def test_a_lock_recording_a_distribution_that_is_not_a_name_gets_no_head_start(locked: Example) -> None:
    """A source's distribution becomes a line of uv's excludes file: a hand-edited one must not put an option
    there (`-r FILE` would have uv read any file of the machine)."""
    before = lock_files(locked)
    sources = locked.root / "locks" / f"{ENV}.sources.toml"
    text = sources.read_text()
    distribution = tomllib.loads(text)["sources"][0]["distribution"]
    sources.write_text(text.replace(f'distribution = "{distribution}"', 'distribution = "-r /etc/passwd"', 1))
    err = relock(locked)
    assert "no head start: " in err and "records the distribution '-r /etc/passwd'" in err, err
    assert "started ahead" not in err
    assert lock_files(locked) == before


def test_a_preflight_that_fails_stops_the_run_started_ahead(locked: Example) -> None:
    """The conda channel no longer answers: the preflight names it while uv already runs; the run is stopped,
    the lock is unchanged and no scratch directory is left."""
    before = lock_files(locked)
    channel = next(
        p for p in (locked.root / "channels").glob("*.toml") if tomllib.loads(p.read_text())["kind"] == "conda"
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
    """The re-lock has everything to write while the preflight still waits on a host, which then does not
    answer: the write waits for the preflight's verdict, so nothing is written."""
    ready, wrote = threading.Event(), threading.Event()
    derived_files, write_lock = pipeline.derived_files, pipeline.write_lock

    def derived(*args: object) -> object:
        files = derived_files(*args)
        ready.set()
        return files

    def write(*args: object) -> None:
        wrote.set()
        write_lock(*args)

    def preflight(*args: object) -> None:
        assert ready.wait(120), "the re-lock never got ready to write"
        wrote.wait(3)  # a re-lock not held back writes meanwhile
        raise NetworkError("1 host that the lock needs did not answer; nothing was locked")

    monkeypatch.setattr(pipeline, "derived_files", derived)
    monkeypatch.setattr(pipeline, "write_lock", write)
    monkeypatch.setattr(lock_command, "ask_hosts", preflight)
    code, _, err = run_envgen(locked, "lock", ENV, "--force")
    assert code == 3 and "did not answer; nothing was locked" in err, err
    assert not wrote.is_set()
