"""Hosts that stall or refuse: every network wait of envgen ends within its limits (network.py), in
exit 3 with one line naming the URL or host and the limit, and Ctrl-C ends it at once.

The real CLI runs in a child process (`python -m envgen`) against loopback servers that accept a
connection and never answer (or send headers and stall), with limits of a second or two set through
the ENVGEN_* variables: a request it gave up on may still be waiting when it is done, and only a
real process shows that this does not keep it from ending, as Ctrl-C does. Against servers that are
gone (every connection refused, nothing left waiting), and for a limit refused before any request,
the command line runs in process. Times are printed (`pytest -s`), never asserted beyond a
generous bound that only a hang would cross.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pytest
from click.testing import CliRunner
from envgen import network
from envgen.cli import cli
from envgen.errors import EnvgenError, NetworkError, Unreached
from envgen.example.condapkgs import demo_packages, write_channel
from envgen.example.http import serve_directory
from envgen.inputs.channels import IndexAccess
from envgen.resolve.git.remote import GitEnv, ls_remote
from envgen.resolve.pypi.index_client import IndexClient, fetch_filenames

from tests.support.closed import closed_url
from tests.support.proc_bundled import bundled_copy
from tests.support.stalling import MODES, stalling_server
from tests.support.venvs import seeded_cache

# Far above any limit the tests set: only a wait that ignores them reaches it.
HANG = 60.0
INTERRUPTED = "interrupted: nothing was written (the previous lock files are unchanged)"


def envgen(root: Path, *args: str, **limits: str) -> tuple[int, str, float]:
    """`envgen ARGS --root ROOT` in a child process with the given ENVGEN_* limits (or cache_dir):
    exit code, stderr, seconds."""
    env = {**os.environ, **{f"ENVGEN_{name.upper()}": value for name, value in limits.items()}}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "envgen", *args, "--root", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    elapsed = time.monotonic() - started
    print(f"envgen {' '.join(args)} {limits}: exit {proc.returncode} after {elapsed:.1f} s")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stderr, elapsed


class Hung(BaseException):
    """An in-process command still running after HANG seconds (what a child's timeout would end):
    not an Exception, so no handler of envgen's takes it for a failure of its own."""


def in_process(root: Path, *args: str, **limits: str) -> tuple[int, str, str]:
    """`envgen ARGS --root ROOT` in this process with the given ENVGEN_* limits (or cache_dir), as
    `envgen` runs it in a child: exit code, stdout, stderr. Still running after HANG seconds, it is
    stopped there (the child processes it waits on killed) and the test fails."""

    def hung(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"envgen {' '.join(args)} still running after {HANG:.0f} s")

    env = {f"ENVGEN_{name.upper()}": value for name, value in limits.items()}
    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, HANG)
    started = time.monotonic()
    try:
        result = CliRunner().invoke(
            cli, [*args, "--root", str(root)], env=env, catch_exceptions=False
        )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    elapsed = time.monotonic() - started
    print(f"envgen {' '.join(args)} {limits}: exit {result.exit_code} after {elapsed:.1f} s")
    assert "Traceback" not in result.stderr, result.stderr
    return result.exit_code, result.stdout, result.stderr


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """`envgen init`'s project: python from a conda channel, two pip packages from one index (URLs
    set per test)."""
    root = tmp_path / "project"
    # Made in process: the limits under test are those of the child processes each test starts.
    made = CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    assert made.exit_code == 0, made.output
    matrix = root / "env-templates" / "example.toml"
    # The loopback channel below serves python but no pip.
    matrix.write_text(
        matrix.read_text().replace('specs = ["python 3.11.*", "pip"]', 'specs = ["python 3.11.*"]')
    )
    return root


def point(root: Path, channel: str, url: str) -> None:
    path = root / "channels" / f"{channel}.toml"
    lines = [line for line in path.read_text().splitlines() if not line.startswith("url =")]
    path.write_text("\n".join([*lines, f'url = "{url}"']) + "\n")


@pytest.fixture(scope="module")
def conda_channel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A loopback channel serving python, for the tests whose stalling host is the pip index; only
    read, so one per module."""
    root = tmp_path_factory.mktemp("conda")
    write_channel(root, demo_packages("3.11.9"))
    with serve_directory(root) as url:
        yield url


@pytest.mark.parametrize("mode", MODES)
def test_lock_against_a_stalling_conda_channel_exits_3_naming_the_channel_and_the_timeout(
    project: Path, mode: str
) -> None:
    """Before: `lock` waited on such a channel for good (over 15 minutes)."""
    with stalling_server(mode) as base:
        channel = f"{base}/conda-forge"
        point(project, "conda-forge", channel)
        point(project, "pypi", closed_url("/simple"))
        code, err, _ = envgen(
            project, "lock", "example", "--no-preflight", conda_timeout="1", retries="0"
        )
    assert code == 3, err
    assert errors(err) == [
        f"error: cannot fetch repodata for linux-64 from conda channel {channel}: no "
        "complete answer within 1 s"
    ]
    assert "raise ENVGEN_CONDA_TIMEOUT (now 1 s)" in err
    assert not list(project.glob("locks/example.*"))


def test_the_budget_ends_a_conda_solve_whose_requests_each_may_take_longer(project: Path) -> None:
    with stalling_server("silent") as base:
        point(project, "conda-forge", f"{base}/conda-forge")
        code, err, _ = envgen(
            project, "lock", "example", "--no-preflight", conda_timeout="50", network_budget="1.5"
        )
    assert code == 3, err
    assert errors(err) == [
        f"error: the conda solve for linux-64 (repodata from {base}/conda-forge) took "
        "more than 1.5 s"
    ]
    assert "raise ENVGEN_NETWORK_BUDGET (now 1.5 s)" in err


@pytest.mark.parametrize("mode", MODES)
def test_lock_against_a_stalling_pip_index_exits_3_naming_the_index_and_the_timeout(
    project: Path, conda_channel: str, mode: str
) -> None:
    """Before: uv's defaults (30 s a read, 3 retries) made such an index fail after minutes."""
    point(project, "conda-forge", conda_channel)
    with stalling_server(mode) as base:
        point(project, "pypi", f"{base}/simple")
        code, err, _ = envgen(
            project, "lock", "example", "--no-preflight", read_timeout="1", retries="0"
        )
    assert code == 3, err
    assert errors(err) == [
        f"error: cannot reach index pypi at {base}/simple while locking linux-64: no "
        "answer within 1 s"
    ]
    assert "raise ENVGEN_READ_TIMEOUT (now 1 s)" in err


def test_the_preflight_asks_stalling_hosts_within_the_read_limit(project: Path) -> None:
    with stalling_server("silent") as channel, stalling_server("silent") as index:
        point(project, "conda-forge", f"{channel}/conda-forge")
        point(project, "pypi", f"{index}/simple")
        code, err, _ = envgen(project, "lock", "example", read_timeout="1", retries="0")
    assert code == 3, err
    assert errors(err) == ["error: 2 hosts that the lock needs did not answer; nothing was locked:"]
    for base, kind, url in (
        (channel, "conda channel", "/conda-forge"),
        (index, "pip index", "/simple"),
    ):
        host = base.removeprefix("http://")
        assert f"\n  {host}: no answer within 1 s\n    {kind} {base}{url} (example)\n" in err


def test_a_malformed_limit_is_bad_input_before_any_work(project: Path) -> None:
    """Refused before any request is made: nothing is left waiting, so the command line runs in
    process."""
    code, _, err = in_process(project, "lock", "example", "--no-preflight", read_timeout="soon")
    assert code == 2, err
    assert errors(err) == ["error: ENVGEN_READ_TIMEOUT='soon' is not a number of seconds above 0"]


def interrupt_when(
    root: Path, line: str, env: dict[str, str] | None = None
) -> tuple[int, str, float]:
    """Start `envgen lock`, send SIGINT to its group once it logged `line` (and waits), the seconds
    until it ended."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "envgen", "lock", "example", "--no-preflight", "--root", str(root)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    said: list[str] = []
    try:
        while line not in "".join(said) and (text := proc.stderr.readline()):
            said.append(text)
        time.sleep(1.0)  # inside the wait now
        os.killpg(proc.pid, signal.SIGINT)
        sent = time.monotonic()
        rest = proc.communicate(timeout=HANG)[1]
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(
        f"SIGINT while waiting on `{line}`: exit {proc.returncode} {elapsed:.2f} s after the signal"
    )
    return proc.returncode, "".join(said) + rest, elapsed


def test_ctrl_c_ends_a_lock_waiting_on_a_stalling_conda_channel_at_once(project: Path) -> None:
    """Before: SIGINT could not stop it; SIGKILL was needed. Default limits: only the interrupt ends
    this wait."""
    with stalling_server("silent") as base:
        point(project, "conda-forge", f"{base}/conda-forge")
        code, err, elapsed = interrupt_when(project, "solving conda specs")
    assert (code, err.strip().splitlines()[-1]) == (130, INTERRUPTED), err
    assert elapsed < 10, f"{elapsed:.1f} s from SIGINT to exit"


def test_ctrl_c_ends_a_lock_waiting_on_a_stalling_pip_index_at_once(
    project: Path, conda_channel: str
) -> None:
    point(project, "conda-forge", conda_channel)
    with stalling_server("headers") as base:
        point(project, "pypi", f"{base}/simple")
        code, err, elapsed = interrupt_when(project, "resolving 2 PyPI requirements with uv")
    assert (code, err.strip().splitlines()[-1]) == (130, INTERRUPTED), err
    assert elapsed < 10, f"{elapsed:.1f} s from SIGINT to exit"


@dataclass(frozen=True)
class Gone:
    """The example locked and bundled while served, its servers stopped since: its indexes and
    channel refuse connections. `cache` is the cache it was locked and bundled with: it holds the
    release archive's wheels, as a bundle takes them out (the installs below then meet the indexes
    and the channel, not the archive's host)."""

    root: Path
    cache: Path
    pypi_url: str
    extra_url: str
    channel_url: str


@pytest.fixture
def locked_then_gone(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Gone:
    """The session's one lock and bundles of the example (tests/support/proc_bundled.py, which
    test_command_interrupts shares), the project and its cache copied for the test: a lock and a
    bundle of its own would cost the same bytes again. The servers' URLs are those its channels/
    name (the lock's)."""
    bundled = bundled_copy(tmp_path_factory, tmp_path / "gone")

    def url(channel: str) -> str:
        with (bundled.root / "channels" / f"{channel}.toml").open("rb") as file:
            return str(tomllib.load(file)["url"]).removesuffix("/simple")

    return Gone(bundled.root, bundled.cache, url("pypi"), url("extra"), url("demo-forge"))


def lock_cache(example: Gone) -> Path:
    """The cache the example was locked and bundled with: it holds the release archive's wheels."""
    return example.cache


def hosts(example: Gone) -> set[str]:
    return {url.removeprefix("http://") for url in (example.pypi_url, example.extra_url)}


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_install_from_unreachable_indexes_exits_3_one_line_per_host(
    locked_then_gone: Gone, tmp_path: Path, installer: str
) -> None:
    """Before: pip's retries took minutes, then exit 5 with pip's raw retry lines."""
    args = [
        "install",
        "demo",
        "--venv",
        "--prefix",
        str(tmp_path / "env"),
        "--installer",
        installer,
    ]
    cache = str(lock_cache(locked_then_gone))
    code, _, err = in_process(
        locked_then_gone.root, *args, read_timeout="2", retries="0", cache_dir=cache
    )
    assert code == 3, err
    # -v shows what the installer said (its raw lines, in the debug log); envgen's error comes last.
    headline, *rest = err[err.rindex("\nerror: ") + 1 :].splitlines()
    assert headline.startswith(f"error: {installer} could not download the locked pip packages: ")
    named = [line for line in rest if not line.startswith("  hint:")]
    assert named and all(line.endswith(": connection refused") for line in named), err
    assert {line.strip().split(": ")[0] for line in named} <= hosts(locked_then_gone)
    assert "Retrying" not in err and "cause:" not in err


def test_check_with_unreachable_indexes_exits_3_one_line_per_host(
    locked_then_gone: Gone, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Before: ~25 s of retries, exit 4, and pip's and uv's raw retry lines pasted into the results
    table."""
    # Only the archives' wheels from the lock's cache: the indexes and the channel are asked again.
    cache = seeded_cache(tmp_path_factory, tmp_path / "cache")
    shutil.copytree(lock_cache(locked_then_gone) / "archives", cache / "archives")
    code, stdout, err = in_process(
        locked_then_gone.root,
        "check",
        "demo",
        "--venv",
        retries="0",
        cache_dir=str(cache),
    )
    assert code == 3, err
    table = [line.strip() for line in stdout.splitlines()]
    unreachable = "an index or channel could not be reached"
    solve = table.index(f"failed  solve: same pip set: {unreachable}")
    pypi = f"cannot reach index pypi at {locked_then_gone.pypi_url}/simple: connection refused"
    # Both platforms failed on the same host: one line says so.
    assert table[solve + 1] in (
        f"{pypi} (linux-aarch64, linux-64)",
        f"{pypi} (linux-64, linux-aarch64)",
    ), table
    conda = table.index(f"failed  solve: same conda set: {unreachable}")
    channel = (
        f"cannot fetch repodata from conda channel {locked_then_gone.channel_url}: "
        "connection refused"
    )
    assert table[conda + 1] in (
        f"{channel} (linux-aarch64, linux-64)",
        f"{channel} (linux-64, linux-aarch64)",
    )
    install = table.index(
        "failed  env: install (venv): pip could not download the locked pip packages: "
        "a host could not be reached"
    )
    assert table[install + 1] in {f"{host}: connection refused" for host in hosts(locked_then_gone)}
    assert table[install + 2].startswith("skipped env: pip check")
    assert "Retrying" not in stdout and "cause:" not in stdout and "WARNING" not in stdout


def test_install_from_an_unreachable_conda_channel_exits_3_naming_the_host(
    locked_then_gone: Gone, tmp_path: Path
) -> None:
    """Before: exit 4, as if the channel had served other bytes than were locked."""
    args = ["install", "demo", "--prefix", str(tmp_path / "env")]
    # A cache of its own: the session's may already hold these packages (every served example has
    # the same bytes, and other tests install them), and rattler rightly takes them from there
    # without asking the channel.
    cache = str(tmp_path / "cache")
    # The archives' wheels, checked before the prefix is touched, come from the lock's cache.
    locked_archives = lock_cache(locked_then_gone) / "archives"
    shutil.copytree(locked_archives, tmp_path / "cache" / "archives")
    code, _, err = in_process(
        locked_then_gone.root, *args, conda_timeout="2", retries="0", cache_dir=cache
    )
    assert code == 3, err
    channel = locked_then_gone.channel_url.removeprefix("http://")
    assert errors(err) == [
        "error: downloading the locked conda packages for linux-64: a host could not be reached"
    ]
    assert f"\n  {channel}: connection refused\n" in err


@pytest.mark.parametrize("mode", MODES)
def test_a_stalling_git_remote_ends_at_the_read_limit(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git's own default waits as long as the server holds the connection open."""
    monkeypatch.setenv("ENVGEN_READ_TIMEOUT", "1")
    with stalling_server(mode) as base:
        started = time.monotonic()
        with pytest.raises(NetworkError) as raised:
            ls_remote(f"{base}/org/repo.git", GitEnv.read(os.environ), source="lib")
        print(f"git ls-remote against a {mode} server: {time.monotonic() - started:.1f} s")
    message = raised.value.message
    assert message.startswith(
        f"source lib: cannot reach git remote {base}/org/repo.git: no data for 1 s (fatal: "
    )
    assert "\n" not in message
    assert "raise ENVGEN_READ_TIMEOUT (now 1 s)" in (raised.value.hint or "")


@pytest.mark.parametrize("mode", MODES)
def test_a_stalling_index_page_ends_at_the_read_limit_after_the_retries(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVGEN_READ_TIMEOUT", "0.5")
    monkeypatch.setenv("ENVGEN_RETRIES", "1")
    with stalling_server(mode) as base:
        index = IndexAccess("private", f"{base}/simple", explicit=False)
        with IndexClient([index], network.limits()) as client, pytest.raises(EnvgenError) as raised:
            # the body is read in full: a server that sent only headers stalls the read
            fetch_filenames(client, index, "demo-torch")
    assert raised.value.message == f"cannot reach {base}/simple/demo-torch/: no answer within 0.5 s"
    assert isinstance(raised.value, NetworkError) and raised.value.exit_code == 3
    assert raised.value.hosts == (
        Unreached(f"{base}/simple/demo-torch/", "no answer within 0.5 s"),
    )
