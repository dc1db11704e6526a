"""What a lock predicts a head start starts uv on (lockio/prediction.py), and the runs it starts:
adopted only by an equal job, stopped (process and work directory gone) when nobody adopts them."""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from envgen import interrupts
from envgen.errors import InputError
from envgen.lockio.conda_lock_yml import render_lock_yml
from envgen.lockio.prediction import Predicted, Prediction, recorded_sources
from envgen.lockio.prediction import predict as predict_texts
from envgen.lockio.sources_toml import render_sources_toml
from envgen.lockio.store import LockTexts, read_files, write_lock
from envgen.model import Lock
from envgen.process import start
from envgen.project import Project
from envgen.resolve.head_start import HeadStart
from envgen.resolve.pypi.uv_compile import UvJob
from hypothesis import given, settings

from tests.support import budget
from tests.support.builders import sample_lock
from tests.support.lock_strategies import locks

# Seconds a run started here may take (they take well under one, or are stopped).
BUDGET = 120.0


def predict(project: Project, env: str) -> Prediction | None:
    """What the lock of `env` predicts, from its files as the re-lock reads them."""
    return predict_texts(read_files(project, env))


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = Project(tmp_path)
    write_lock(project, "a5", sample_lock(), "")
    return project


def test_the_prediction_is_the_python_and_the_pins_of_each_platform(project: Project) -> None:
    lock = sample_lock()
    predicted = predict(project, "a5")
    assert predicted is not None
    assert dict(predicted.python) == {p: "3.11.9" for p in lock.platforms}
    for platform in lock.platforms:
        expected = [Predicted(e.name, e.version, e.url, e.sha256) for e in lock.pip_for(platform)]
        assert sorted(predicted.pip[platform]) == sorted(expected)
    sources = recorded_sources(read_files(project, "a5"))
    assert sources is not None
    assert [s.source.name for s in sources] == [s.source.name for s in lock.sources]
    assert [s.requirements for s in sources] == [s.requirements for s in lock.sources]
    project.sources_toml("a5").write_text('schema = 1\nenv = "a5"\n')  # no input-hash
    assert recorded_sources(read_files(project, "a5")) is None


@pytest.mark.parametrize(
    ("edit", "what"),
    [
        (
            lambda yml: yml.replace("version: 3.11.9", "version: 3.11.9 --offline"),
            "an option after the python",
        ),
        (
            lambda yml: yml.replace("version: 3.11.9", "version: $(touch x)"),
            "a command as the python",
        ),
    ],
)
def test_a_python_that_is_not_a_version_predicts_no_python(
    project: Project, edit: object, what: str
) -> None:
    yml = project.lock_yml("a5")
    yml.write_text(edit(yml.read_text()))  # type: ignore[operator]
    predicted = predict(project, "a5")
    assert predicted is not None, what
    assert dict(predicted.python) == {}, what


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not: [valid",
        "package: 3\n",
        "version: 1\npackage:\n- name: x\n",
        "!!python/object:os.system {}\n",
        "[]",
    ],
)
def test_a_yml_that_does_not_read_as_expected_predicts_nothing(project: Project, text: str) -> None:
    project.lock_yml("a5").write_text(text)
    assert predict(project, "a5") is None


def test_no_lock_predicts_nothing(tmp_path: Path) -> None:
    assert predict(Project(tmp_path), "a5") is None


def test_an_artifact_with_a_malformed_sha256_is_not_predicted(project: Project) -> None:
    yml = project.lock_yml("a5")
    torch = sample_lock().pip_for("linux-aarch64")[0]
    yml.write_text(yml.read_text().replace(torch.sha256, "../../../etc/passwd", 1))
    predicted = predict(project, "a5")
    assert predicted is not None
    assert [p for p in predicted.pip["linux-aarch64"] if p.name == torch.name][0][2:] == ("", "")


# The sources file beside every yml below: the same for each example, so rendered once.
SOURCES_TOML = render_sources_toml(sample_lock())


@settings(max_examples=budget.examples(60), deadline=None)
@given(lock=locks(only_yml=True))
def test_a_written_yml_predicts_the_pins_it_holds(lock: Lock) -> None:
    """Whatever the strings of a lock, its yml as written predicts each platform's pip pins (an
    artifact only with a 64-hex sha256) and python (only one that is a version), or, when conda-lock
    refuses to write it, there is nothing to predict from."""
    try:
        yml = render_lock_yml(lock)
    except InputError:
        return
    predicted = predict_texts(LockTexts("a5", yml, SOURCES_TOML, "", ("y", "s", "r")))
    assert predicted is not None
    for platform in lock.platforms:
        pins = [_pinned(e.name, e.version, e.url, e.sha256) for e in lock.pip_for(platform)]
        assert sorted(predicted.pip.get(platform, ())) == sorted(pins)
    pythons = {e.platform: e.version for e in lock.conda if e.name == "python"}
    versions = {p: v for p, v in pythons.items() if re.fullmatch(r"[0-9.]+", v)}
    assert dict(predicted.python) == versions


def _pinned(name: str, version: str, url: str, sha256: str) -> Predicted:
    if re.fullmatch("[0-9a-f]{64}", sha256):
        return Predicted(name, version, url, sha256)
    return Predicted(name, version, "", "")


def job(platform: str, script: str) -> UvJob:
    """A job whose "uv" is a shell script run in the work directory (where `input.txt` holds
    `platform`)."""
    return UvJob(
        platform,
        (("input.txt", platform),),
        ("sh", "-c", script),
        (("PATH", os.environ["PATH"]),),
        (),
    )


def descendants() -> set[str]:
    """The command lines of this process's live descendants (a job's children are in its process
    group)."""
    parents: dict[int, int] = {}
    lines: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            pid = int(stat.parent.name)
            parents[pid], lines[pid] = (
                int(fields[1]),
                cmdline.replace(b"\0", b" ").decode(errors="replace"),
            )

    def ours(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    return {line for pid, line in lines.items() if ours(pid)}


def running(command: str) -> bool:
    """Whether a child `command` runs; waits for it to start (a few seconds at most) when it does
    not yet."""
    for _ in range(100):
        if any(c.startswith(command) for c in descendants()):
            return True
        time.sleep(0.05)
    return False


def running_now(command: str) -> bool:
    return any(c.startswith(command) for c in descendants())


def gone(command: str) -> bool:
    """Whether no child `command` runs, once a SIGKILL sent to it has had a few seconds at most to
    land (on a loaded machine, a killed process may take a moment to be scheduled and die)."""
    for _ in range(100):
        if not running_now(command):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_an_equal_job_adopts_the_run_and_gets_its_output(scratch: Path) -> None:
    started = HeadStart(BUDGET)
    script = "cp input.txt pylock.toml"
    started.start(job("linux-64", script))
    outcome = started.adopt(job("linux-64", script))
    started.close()
    assert outcome is not None and outcome.returncode == 0 and outcome.pylock == "linux-64"
    assert not list(scratch.glob("envgen-uv-*"))


def test_another_job_of_the_platform_stops_the_run_and_gets_none(scratch: Path) -> None:
    started = HeadStart(BUDGET)
    started.start(job("linux-64", "sleep 301"))
    started.start(job("linux-aarch64", "cp input.txt pylock.toml"))
    assert running("sleep 301")
    assert started.adopt(job("linux-64", "sleep 302")) is None
    assert gone("sleep 301")  # stopped, not left to run
    # the other platform's is kept
    outcome = started.adopt(job("linux-aarch64", "cp input.txt pylock.toml"))
    assert outcome is not None and outcome.pylock == "linux-aarch64"
    started.close()
    assert not list(scratch.glob("envgen-uv-*"))


def test_close_stops_every_run_nobody_adopted(scratch: Path) -> None:
    started = HeadStart(BUDGET)
    for platform, seconds in (("linux-64", 303), ("linux-aarch64", 304)):
        started.start(job(platform, f"sleep {seconds}"))
    assert running("sleep 303") and running("sleep 304")
    started.close()
    assert not running_now("sleep 303") and not running_now("sleep 304")
    assert not list(scratch.glob("envgen-uv-*"))


def test_close_stops_a_run_its_adopter_still_waits_for(
    scratch: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Ctrl-C while the pip stage waits on the run it adopted: `lock_envs` closes the head starts on
    its way out, before the interrupt kills the children; the close must stop that run, not wait for
    uv to finish."""
    caplog.set_level(logging.DEBUG, logger="envgen.resolve.head_start")
    started = HeadStart(BUDGET)
    started.start(job("linux-64", "sleep 60"))
    assert running("sleep 60")
    with ThreadPoolExecutor(1) as pool:
        adopted = pool.submit(started.adopt, job("linux-64", "sleep 60"))
        for _ in range(200):  # until the adopter has taken the run (and waits for it)
            if "adopting the uv run started ahead" in caplog.text:
                break
            time.sleep(0.05)
        closing = threading.Thread(target=started.close, daemon=True)
        closing.start()
        closing.join(30)
        assert not closing.is_alive(), "close waited for the adopted run to finish"
        outcome = adopted.result(timeout=30)
    # killed: the pip stage reports a failure
    assert outcome is not None and outcome.returncode != 0
    assert not running_now("sleep 60")
    assert not list(scratch.glob("envgen-uv-*"))


def test_stopping_a_run_that_ended_kills_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run is stopped after it ended (another job of its platform adopted, or a close): its pid,
    hence its process group id, is free once reaped, and may be another process's by then."""
    running = start(["true"])
    running.wait()
    killed: list[int] = []
    monkeypatch.setattr(interrupts, "kill_group", lambda proc: killed.append(proc.pid))
    running.stop()
    assert killed == []


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread priorities are Linux's")
def test_the_warm_up_yields_the_cpu_and_uv_keeps_its_priority(scratch: Path) -> None:
    """uv runs at envgen's own priority; what only fills the time it takes (the warm-up) runs at a
    higher nice value, so on a busy machine uv is not slowed by it."""
    own = os.getpriority(os.PRIO_PROCESS, 0)
    started = HeadStart(BUDGET)
    # The job's "uv" writes its own nice value (the 19th field of /proc/self/stat) as its output.
    started.start(job("linux-64", "cut -d' ' -f19 /proc/$$/stat > pylock.toml"))
    seen: list[int] = []
    done = threading.Event()

    def warm_up() -> None:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        done.set()

    started.meanwhile(warm_up)
    outcome = started.adopt(job("linux-64", "cut -d' ' -f19 /proc/$$/stat > pylock.toml"))
    assert done.wait(BUDGET)
    started.close()
    assert outcome is not None and int(outcome.pylock) == own
    assert seen == [min(19, own + interrupts.BACKGROUND_NICE)]
