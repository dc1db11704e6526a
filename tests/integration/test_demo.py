"""`envgen demo` end to end: every step shown as expected, nothing left behind, also on failure and
Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.commands.demo import StepError, check_python, conda_tool, run_demo
from envgen.errors import InputError
from envgen.example.project import EXAMPLE_DIR
from envgen.platforms import host_platform

from tests.support.installed import clean_environment, install_wheel
from tests.support.shared import build_once
from tests.support.venvs import site_packages

# The researchers' path: conda-lock's install and the recipe where a conda front end is on PATH,
# else `envgen install`; then the prefix's own pip.
TOOL = conda_tool(os.environ.get("PATH"))
RESEARCHERS = (
    ["$ envgen install demo --prefix demo-env"]
    if TOOL is None
    else [
        f"$ conda-lock install --conda {TOOL} -p demo-env locks/demo.yml",
        "$ sh locks/demo.install.sh --prefix demo-env",
    ]
)
BANNERS = [
    "$ envgen lock demo",
    "$ envgen check demo",
    *RESEARCHERS,
    "$ demo-env/bin/pip list",
    "$ git --no-pager diff",
    "$ envgen lock demo",
    "$ envgen diff --git HEAD --format markdown",
    "$ envgen status demo",
    f"$ envgen bundle demo --platform {host_platform()} -o demo-{host_platform()}.tar.zst",
    f"$ envgen install demo --from-bundle demo-{host_platform()}.tar.zst --prefix offline-env",
]
MARKER = "DEMO_TEST_MARKER"  # a name the demo passes on to its steps


def demo_environment(
    tmp: Path, marker: str, base: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The test's environment for a demo run: its temp dir under `tmp`, and a marker its processes
    inherit."""
    tmp.mkdir(exist_ok=True)
    return {**base, "TMPDIR": str(tmp), MARKER: marker}


def processes_with(marker: str, *, but: int | None = None) -> list[str]:
    """The command lines of the live processes whose environment carries `marker` (except pid
    `but`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == but:
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            if f"{MARKER}={marker}".encode() in environ:
                found.append(
                    (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


def in_order(text: str, lines: list[str]) -> list[int]:
    """The positions of `lines`, each searched after the previous one (ValueError when one is
    missing)."""
    positions, start = [], 0
    for line in lines:
        start = text.index(f"\n{line}\n", start) + 1
        positions.append(start)
    return positions


def refuses(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory, pip_site_packages: Path) -> Path:
    """A fresh venv holding envgen installed from its wheel (tests/support/installed.py), built
    once."""

    def build(where: Path) -> None:
        install_wheel(where, pip_site_packages)

    return build_once(tmp_path_factory, "installed-envgen", build) / "venv"


@pytest.mark.long
def test_the_installed_demo_runs_every_step_keeps_only_its_directory_and_serves_it_again(
    installed: Path, tmp_path: Path
) -> None:
    """`pip install` of the wheel, then `envgen demo --keep` in a directory outside the checkout:
    every step as expected, nothing left but the directory it kept (no temp file, process or
    server). `demo --keep` says how to serve that directory again; `demo --serve DIR` does
    (a_kept_demo_is_served_again_as_a_playground). One run of the demo for both: it is the suite's
    longest test. The directory's removal when not kept is scratch_dir's
    (tests/unit/test_scratch.py), on success as on the failure and interrupt tests below."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    where = subprocess.run(
        [
            installed / "bin" / "python",
            "-c",
            "import envgen.example.project as p; print(p.EXAMPLE_DIR)",
        ],
        cwd=outside,
        env=clean_environment(),
        capture_output=True,
        text=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(site_packages(installed)), (
        where.stdout + where.stderr
    )

    marker = f"e2e-{os.getpid()}"
    env = demo_environment(tmp_path / "tmp", marker, clean_environment())
    proc = subprocess.run(
        [installed / "bin" / "envgen", "demo", "--keep"],
        cwd=outside,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    out = proc.stdout
    assert proc.returncode == 0, out
    positions = in_order(out, BANNERS)
    lock1, check, *researchers, pip_list, bump, lock2, diff, status, bundle, install = positions

    assert out.count("demo: locked (") == 2
    for name in (
        "demo.yml",
        "demo.linux-64.requirements.txt",
        "pylock.demo-linux-aarch64.toml",
        "demo.nix",
    ):
        assert re.search(rf"#   {re.escape(name)} +\d+ bytes\n", out[lock1:check]), name
    assert re.search(r"check demo \(linux-(64|aarch64)\): ok\n", out[check:bump])
    assert re.search(r"ok +import rollout: rollout 0\.23\.0\n", out[check : researchers[0]])
    assert "ok      env: install (conda prefix): 9 pip packages" in out[check : researchers[0]]
    # The prefix's own pip lists the locked packages and the editable sources, in the prefix.
    listed = out[pip_list:bump]
    assert re.search(r"\ndemo-torch +2\.10\.0\n", listed)
    assert re.search(r"\nrollout +0\.23\.0 +/\S+/demo-env/src/rollout\n", listed)
    assert (
        '-demo-torch = { version = "==2.10.0" }\n+demo-torch = { version = "==2.10.1" }'
        in out[bump:lock2]
    )

    markdown = out[diff:status]
    assert "### `demo`: `HEAD:locks/demo.yml` → `locks/demo.yml`" in markdown
    # both platforms
    assert markdown.count("| upgraded | pip | `demo-torch` | 2.10.0 | 2.10.1 |") == 2
    assert "demo-triton" not in markdown  # only what the bump touches

    moved = re.search(
        r"# upstream moves: a new commit ([0-9a-f]{12}) on trainer's branch core_r0.12.0", out
    )
    assert moved is not None and moved.start() < status
    assert re.search(
        rf"trainer core_r0\.12\.0: locked [0-9a-f]{{12}}, upstream now {moved.group(1)}\n",
        out[status:],
    )
    assert "rollout v0.23.0: up to date" in out[status:]
    assert "demo-npu: stands in for torch_npu" in out[status:]
    assert "# exit 1 is status reporting the drift" in out[status:]
    assert re.search(
        rf"demo: demo-{host_platform()}\.tar\.zst: \d+ files, \d+ bytes", out[bundle:install]
    )
    # The servers stopped before the install: it came from the bundle alone.
    assert out.index("# the servers are stopped", bundle) < install
    assert re.search(r"verified \d+ members of demo-linux-(64|aarch64)\.tar\.zst", out[install:])
    assert re.search(r"demo: installed into .*/offline-env\n", out[install:])
    assert f"# done: {len(BANNERS)} commands ran as expected" in out[install:]

    # The kept directory, on stdout's last line (then stderr's summary): all the demo's temp dir
    # holds.
    *_, last, summary = out.splitlines()
    kept = Path(last)
    assert summary.startswith(f"envgen demo: {len(BANNERS)} commands in "), out[-500:]
    assert kept.parent == tmp_path / "tmp" and (kept / "project" / "locks" / "demo.yml").is_file()
    assert f"# kept {kept}: `envgen demo --serve {kept}` serves it again" in out[install:]
    assert list((tmp_path / "tmp").iterdir()) == [kept]
    assert list((kept / "tmp").iterdir()) == []  # the steps' temp dir
    assert processes_with(marker) == []
    urls = re.findall(r"http://127\.0\.0\.1:\d+", out[:lock1])
    assert len(set(urls)) == 3 and all(refuses(url) for url in urls)

    a_kept_demo_is_served_again_as_a_playground(
        kept, env, [installed / "bin" / "envgen"], tmp_path, marker
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupt_during_a_step_stops_it_and_cleans_up(
    tmp_path: Path, sig: signal.Signals
) -> None:
    marker = f"int-{os.getpid()}-{sig.name}"
    demo = subprocess.Popen(
        [sys.executable, "-m", "envgen", "demo"],
        env=demo_environment(tmp_path / "tmp", marker),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert demo.stdout is not None
    seen = []
    try:
        for line in demo.stdout:
            seen.append(line)
            if line.startswith("$ envgen check demo"):
                break
        # Interrupt once the check is at work: its process (and whatever it started) is running.
        deadline = time.monotonic() + 60
        while not processes_with(marker, but=demo.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_with(marker, but=demo.pid), "".join(seen)
        demo.send_signal(sig)
        code = demo.wait(timeout=120)
        # Asked before reading the rest: a step left running would still hold the output pipe open.
        left = processes_with(marker)
        out = "".join(seen) + demo.stdout.read()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert left == []
    assert code == 130, out
    assert "interrupted: the demo stopped its servers and removed its directory" in out
    assert "$ envgen status demo" not in out
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.fixture
def broken_example(tmp_path: Path) -> Path:
    """The bundled example with a matrix `envgen lock` rejects (an unknown key)."""
    example = tmp_path / "broken"
    (example / "env-templates").mkdir(parents=True)
    matrix = (EXAMPLE_DIR / "env-templates" / "demo.toml").read_text()
    broken = matrix.replace("[env]\n", '[env]\ncolour = "blue"\n')
    (example / "env-templates" / "demo.toml").write_text(broken)
    return example


@pytest.mark.parametrize("keep", [False, True])
def test_a_failing_step_stops_the_demo_with_its_exit_code(
    broken_example: Path,
    tmp_path: Path,
    keep: bool,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    threads_before = set(threading.enumerate())
    said: list[str] = []

    with pytest.raises(StepError) as failed:
        run_demo(said.append, keep=keep, example_dir=broken_example)

    assert failed.value.exit_code == 2  # what `envgen lock` exits with on a bad matrix
    assert "`envgen lock demo` exited with code 2" in failed.value.message
    assert said[-1] == "$ envgen lock demo" and "$ envgen check demo" not in said
    assert "colour" in capfd.readouterr().err  # the step's own error, shown as it came
    assert not [t for t in set(threading.enumerate()) - threads_before if t.is_alive()]
    urls = [u for line in said for u in re.findall(r"http://127\.0\.0\.1:\d+", line)]
    assert len(set(urls)) == 3 and all(refuses(url) for url in urls)
    kept = list((tmp_path / "tmp").iterdir())
    if keep:
        (workdir,) = kept
        assert (workdir / "project" / "env-templates" / "demo.toml").is_file()
        assert str(workdir / "project") in str(failed.value.hint)
    else:
        assert kept == []


def test_another_python_than_the_example_is_made_for_is_refused_before_anything_is_built() -> None:
    check_python((3, 11, 4))
    with pytest.raises(InputError) as refused:
        check_python((3, 12, 1))
    assert "the demo needs python 3.11, and envgen runs on python 3.12.1" in refused.value.message
    assert "make clean demo PYTHON=python3.11" in str(refused.value.hint)


def test_a_missing_example_stops_before_any_step_and_says_how_to_get_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    said: list[str] = []
    with pytest.raises(InputError) as missing:
        run_demo(said.append, example_dir=tmp_path / "gone")
    assert f"the bundled example is missing: {tmp_path / 'gone'}" in missing.value.message
    assert "reinstall envgen" in str(missing.value.hint)
    assert not any(line.startswith("$ envgen") for line in said)
    assert list((tmp_path / "tmp").iterdir()) == []


def _serve(
    kept: Path, env: Mapping[str, str], envgen: list[Path]
) -> tuple[subprocess.Popen[str], list[str]]:
    """`envgen demo --serve KEPT` started; its lines up to the last command it suggests."""
    server = subprocess.Popen(
        [*envgen, "demo", "--serve", str(kept)],
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert server.stdout is not None
    lines = []
    for line in server.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("envgen bundle demo"):
            break
    return server, lines


def _stop(server: subprocess.Popen[str]) -> tuple[int, str]:
    server.send_signal(signal.SIGINT)
    code = server.wait(timeout=30)
    assert server.stdout is not None
    return code, server.stdout.read()


def a_kept_demo_is_served_again_as_a_playground(
    kept: Path, env: Mapping[str, str], server_envgen: list[Path], tmp_path: Path, marker: str
) -> None:
    """`demo --serve DIR` (run by `server_envgen`) serves the directory `demo --keep` kept (in
    `env`, its processes marked `marker`), on the ports its locks name, until Ctrl-C, with what to
    set: lock, status and bundle then work in the kept project."""
    channels = {p.name: p.read_text() for p in (kept / "project" / "channels").iterdir()}

    server, lines = _serve(kept, env, server_envgen)
    try:
        assert lines[0] == f"# serving the demo kept in {kept} on 127.0.0.1 until Ctrl-C:", lines
        # same ports
        assert {
            p.name: p.read_text() for p in (kept / "project" / "channels").iterdir()
        } == channels
        (exports,) = [line for line in lines if line.startswith("export ")]
        variables = dict(word.split("=", 1) for word in exports.removeprefix("export ").split())
        assert f"cd {kept / 'project'}" in lines
        # The other shell: this environment without its git and envgen settings, then the
        # exported ones. The commands run in process, in the kept project: their subject is that
        # the servers `demo --serve` runs (in a process of its own) serve what the locks name.
        shell: dict[str, str | None] = {
            k: None for k in os.environ if k.startswith(("GIT_", "ENVGEN_"))
        } | variables

        def envgen(*args: str) -> subprocess.CompletedProcess[str]:
            with contextlib.chdir(kept / "project"):
                result = CliRunner().invoke(cli, list(args), env=shell, catch_exceptions=False)
            return subprocess.CompletedProcess(args, result.exit_code, "", result.stderr)

        assert envgen("status", "demo").returncode == 1  # the branch the demo moved
        locked = envgen("lock", "demo", "--update", "trainer")
        assert locked.returncode == 0, locked.stderr
        assert "source trainer " in locked.stderr and ": --update trainer" in locked.stderr
        assert envgen("status", "demo").returncode == 0
        bundled = envgen("bundle", "demo", "-o", str(tmp_path / "demo.tar"))
        assert bundled.returncode == 0, bundled.stderr
    finally:
        code, rest = _stop(server)
    assert code == 0, rest
    assert rest.endswith("# stopped the servers; the directory is kept\n")
    urls = re.findall(r"http://127\.0\.0\.1:\d+", "\n".join(lines))
    assert len(set(urls)) == 3 and all(refuses(url) for url in urls)
    assert (kept / "project" / "locks" / "demo.yml").is_file()
    assert processes_with(marker) == []

    # A port taken meanwhile: another one, and the project's channel file follows it.
    taken = re.search(r"pip index 'pypi' +(http://127\.0\.0\.1:\d+)", "\n".join(lines))
    assert taken is not None
    with socket.socket() as sock:
        # past the last run's closed connections
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", int(taken.group(1).rsplit(":", 1)[1])))
        sock.listen()
        server, lines = _serve(kept, env, server_envgen)
        code, _ = _stop(server)
    assert code == 0
    moved = (kept / "project" / "channels" / "pypi.toml").read_text()
    assert taken.group(1) not in moved and re.search(
        r'url = "http://127\.0\.0\.1:\d+/simple"', moved
    )
    assert (kept / "project" / "channels" / "extra.toml").read_text() == channels["extra.toml"]


def test_serve_refuses_a_directory_the_demo_did_not_keep(tmp_path: Path) -> None:
    """In process: the subject is the message and the exit code envgen picks."""
    result = CliRunner().invoke(cli, ["demo", "--serve", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 2
    assert (
        f"error: {tmp_path} is not a directory `envgen demo --keep` kept: it has no pypi, extra"
        in result.stderr
    )
