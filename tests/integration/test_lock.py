"""`envgen lock` end to end on the bundled example: loopback conda channel and indexes, local git
repos."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from envgen.example.http import LoopbackServer
from envgen.example.project import Example, advance_branch, bump_version
from envgen.lockio.conda_lock_yml import parse_lock_yml
from envgen.lockio.store import read_lock
from envgen.project import Project

from tests.support.closed import closed_url
from tests.support.example import restored_example, run_envgen
from tests.support.lk_locked import lock_once, locked_example
from tests.support.preflight import verdict

GOLDEN = Path(__file__).parent.parent / "data" / "golden" / "demo.yml"
ENV = "demo"


@pytest.fixture
def example(served: Example, monkeypatch: pytest.MonkeyPatch) -> Iterator[Example]:
    """The served example with its git mirror config active and no lock yet."""
    with restored_example(served, ENV, monkeypatch) as example:
        yield example


@pytest.fixture(scope="module")
def first_lock(served: Example) -> dict[str, bytes]:
    """The module's served example locked once; the tests that start from a lock get its files."""
    return lock_once(served, ENV)


@pytest.fixture
def locked(
    served: Example, first_lock: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Example]:
    """The served example with its git mirror config active, locked."""
    with locked_example(served, ENV, first_lock, monkeypatch) as example:
        yield example


envgen = run_envgen


def lock_files(example: Example) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((example.root / "locks").glob(f"{ENV}.*"))}


def normalised(text: str, example: Example) -> str:
    """The lock with the servers' ports (and the input hash, which covers them) replaced by names,
    and what the host makes of the example's python and pip (their hashes; pip's version and python
    requirement, its wheel's) replaced by names too."""
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    text = text.replace(lock.input_hash, "INPUT-HASH")
    for name, url in (
        ("CHANNEL", example.channel_url),
        ("PYPI", example.pypi_url),
        ("EXTRA", example.extra_url),
    ):
        text = text.replace(url, f"http://{name}")
    for entry in (e for e in lock.conda if e.name in ("python", "pip")):
        # pip is noarch: one file for both platforms
        kind = "PIP" if entry.name == "pip" else f"PYTHON-{entry.platform.upper()}"
        text = text.replace(entry.md5, f"{kind}-MD5").replace(entry.sha256, f"{kind}-SHA256")
        if entry.name == "pip":  # no other package of the example has its version, nor needs python
            (requires,) = (spec for name, spec in entry.depends if name == "python")
            version = yaml.safe_dump(entry.version).splitlines()[0]
            text = text.replace(f"version: {version}\n", "version: PIP\n")
            text = text.replace(f"/pip-{entry.version}-", "/pip-PIP-")
            text = text.replace(f"python: '{requires}'", "python: PIP")
    return text


def test_lock_writes_the_golden_conda_lock_file_and_is_a_no_op_the_second_time(
    example: Example,
) -> None:
    code, _, err = envgen(example, "lock", ENV)
    assert code == 0, err
    written = (example.root / "locks" / f"{ENV}.yml").read_text()
    if os.environ.get("REGEN_GOLDEN") == "1":
        GOLDEN.write_text(normalised(written, example))
    assert normalised(written, example) == GOLDEN.read_text()

    before = lock_files(example)
    code, out, err = envgen(example, "lock", ENV, "--json")
    assert code == 0, err
    assert '"status": "up-to-date"' in out
    assert lock_files(example) == before
    # Before: the no-op said so twice (a log line and the summary), and -q did not silence it.
    code, _, err = envgen(example, "lock", ENV)
    assert (code, err) == (
        0,
        f"{ENV}: up to date (input hash {json.loads(out)['results'][0]['input_hash'][:12]})\n",
    )
    assert envgen(example, "lock", ENV, "-q") == (0, "", "")


def test_lock_pins_every_artifact_and_keeps_the_extra_index_for_its_package_only(
    locked: Example,
) -> None:
    lock = read_lock(Project(locked.root), ENV)
    assert lock is not None
    assert set(lock.platforms) == {"linux-64", "linux-aarch64"}
    for entry in lock.pip:
        assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256)
        from_extra = entry.url.startswith(locked.extra_url)
        assert from_extra == (entry.name == "demo-triton"), entry
    triton = {e.platform: e.version for e in lock.pip if e.name == "demo-triton"}
    # the 9.9.9 decoy on "pypi" lost
    assert triton == {"linux-64": "3.2.2", "linux-aarch64": "3.2.2"}
    helper = {e.platform for e in lock.pip if e.name == "demo-x86-helper"}
    assert helper == {"linux-64"}  # an x86_64-only dependency stays out of the aarch64 lock
    for entry in lock.conda:
        assert re.fullmatch(r"[0-9a-f]{32}", entry.md5) and re.fullmatch(
            r"[0-9a-f]{64}", entry.sha256
        )
    assert {e.version for e in lock.conda if e.name == "libdemo"} == {"1.0"}  # 2.0 needs glibc 2.34
    commits = {s.source.name: s.commit for s in lock.sources}
    names = [s.source.name for s in lock.sources]
    assert names == ["rollout", "trainer", "post", "demo-queue", "serving"]
    assert commits["rollout"] == locked.repos["rollout"].rev("v0.23.0")
    assert all(re.fullmatch(r"[0-9a-f]{40}", c) for c in commits.values())
    assert all(s.source.url.startswith("https://github.com/envgen-demo/") for s in lock.sources)
    assert [p.name for p in lock.pending] == ["CANN", "demo-npu"]
    (override,) = lock.overrides
    # The matrix's own pin is replaced too (the override takes its place), recorded with rollout's.
    replaced = ["demo-transformers==4.57.6", "demo-transformers>=5.0"]
    assert [r.text for r in override.replaced] == replaced


def test_a_moved_branch_is_kept_until_updated(locked: Example) -> None:
    old = {s.source.name: s.commit for s in read_lock(Project(locked.root), ENV).sources}  # type: ignore[union-attr]
    moved = advance_branch(locked, "trainer", "core_r0.12.0")
    try:
        assert envgen(locked, "lock", ENV, "--force", "-q")[0] == 0
        kept = {s.source.name: s.commit for s in read_lock(Project(locked.root), ENV).sources}  # type: ignore[union-attr]
        assert kept == old

        assert envgen(locked, "lock", ENV, "--update", "trainer", "-q")[0] == 0
        updated = {s.source.name: s.commit for s in read_lock(Project(locked.root), ENV).sources}  # type: ignore[union-attr]
        assert updated == {**old, "trainer": moved}

        before = lock_files(locked)
        code, _, err = envgen(locked, "lock", ENV, "--update", "trainr")
        assert code == 2
        assert "--update trainr: no source of that name" in err and "did you mean 'trainer'" in err
        assert "demo-queue" in err  # a source found in a requirement file counts too
        assert lock_files(locked) == before
    finally:
        locked.repos["trainer"].git("reset", "--quiet", "--hard", "HEAD~1")


def test_a_version_bump_is_a_small_diff(locked: Example) -> None:
    before = (locked.root / "locks" / f"{ENV}.yml").read_text().splitlines()
    bump_version(locked, "demo-torch", "2.10.0", "2.10.1")
    assert envgen(locked, "lock", ENV, "-q")[0] == 0
    after = (locked.root / "locks" / f"{ENV}.yml").read_text().splitlines()
    changed = [line for line in after if line not in before]
    # Per platform: the version, the wheel URL and its sha256; plus the input hashes in the
    # metadata.
    assert sum("2.10.1" in line for line in changed) == 4
    assert len(changed) <= 12, changed


def test_a_failed_lock_leaves_the_previous_files_byte_identical(locked: Example) -> None:
    before = lock_files(locked)
    # no such release: resolution fails after git
    bump_version(locked, "demo-torch", "2.10.0", "9.0.0")
    code, _, err = envgen(locked, "lock", ENV)
    assert code == 3
    assert "demo-torch" in err and "linux-" in err
    assert lock_files(locked) == before
    assert not [
        p for p in (locked.root / "locks").iterdir() if ".tmp" in p.name or ".part" in p.name
    ]


def test_an_unreadable_previous_lock_stops_the_lock_until_restored_or_upgraded(
    locked: Example,
) -> None:
    sources = locked.root / "locks" / f"{ENV}.sources.toml"
    sources.write_text(sources.read_text().replace("schema = 1", "schema = 99"))
    bump_version(locked, "demo-torch", "2.10.0", "2.10.1")
    before = lock_files(locked)
    code, _, err = envgen(locked, "lock", ENV)
    assert code == 2
    assert f"locks/{ENV}.sources.toml:2: schema" in err and f"envgen lock {ENV} --upgrade" in err
    assert lock_files(locked) == before
    code, _, err = envgen(locked, "lock", ENV, "--upgrade", "-q")
    assert code == 0, err
    assert read_lock(Project(locked.root), ENV) is not None


def test_the_lock_passes_conda_locks_own_parser_and_render(
    locked: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conda-lock's own `render` command, run in process (its command line, not its console
    script's start-up, reads the file)."""
    from conda_lock.conda_lock import main as conda_lock

    yml = locked.root / "locks" / f"{ENV}.yml"
    parsed = parse_lock_yml(yml.read_text(), str(yml))
    monkeypatch.chdir(tmp_path)
    for platform in ("linux-64", "linux-aarch64"):
        args = ["render", "--kind", "explicit", "-p", platform]
        args += ["--filename-template", str(tmp_path / "render-{platform}"), str(yml)]
        result = CliRunner().invoke(conda_lock, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        rendered = (tmp_path / f"render-{platform}").read_text()
        pip_lines = [line for line in rendered.splitlines() if line.startswith("# pip ")]
        assert len(pip_lines) == len([e for e in parsed.pip if e.platform == platform])
        assert all("#sha256=" in line for line in pip_lines)


class _GateHandler(SimpleHTTPRequestHandler):
    """Serves files, but holds every request until the test releases it (and says one arrived)."""

    arrived: threading.Event
    release: threading.Event

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.arrived.set()
        self.release.wait(30)
        super().do_GET()


def test_sigint_during_a_lock_leaves_the_previous_files_byte_identical(
    locked: Example, tmp_path: Path
) -> None:
    before = lock_files(locked)
    arrived, release = threading.Event(), threading.Event()
    handler = type("Gate", (_GateHandler,), {"arrived": arrived, "release": release})
    pypi_dir = Path(locked.root).parent / "pypi"
    server = LoopbackServer(("127.0.0.1", 0), partial(handler, directory=str(pypi_dir)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    channel = locked.root / "channels" / "pypi.toml"
    original = channel.read_text()
    channel.write_text(
        original.replace(locked.pypi_url, f"http://127.0.0.1:{server.server_address[1]}")
    )
    env = {**os.environ, "ENVGEN_CACHE_DIR": str(tmp_path / "cold-cache")}  # uv must ask the index
    proc = subprocess.Popen(
        [sys.executable, "-m", "envgen", "lock", ENV, "--root", str(locked.root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert arrived.wait(120), "the lock never reached the index"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        channel.write_text(original)
    assert proc.returncode != 0
    assert "Traceback" not in err
    assert lock_files(locked) == before


def test_a_reader_closing_the_pipe_early_is_not_an_error(locked: Example) -> None:
    """Before: `envgen lock --force 2>&1 | head -1` exited 1 (broken pipe) after writing the
    lock."""
    before = lock_files(locked)
    read, write = os.pipe()
    os.close(read)  # gone before the first byte: every log line and the summary meet EPIPE
    argv = [sys.executable, "-m", "envgen", "lock", ENV, "--force", "--root", str(locked.root)]
    proc = subprocess.run(argv, stdout=write, stderr=write, timeout=300, check=False)
    os.close(write)
    assert proc.returncode == 0
    assert lock_files(locked) == before


def test_a_forced_re_lock_writes_the_same_bytes(locked: Example) -> None:
    before = lock_files(locked)
    assert envgen(locked, "lock", ENV, "--force", "-q")[0] == 0
    assert lock_files(locked) == before


def test_the_preflight_asks_only_for_envs_to_re_lock(
    locked: Example, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A fresh lock asks nothing; a re-lock asks first every host it will need: a git remote only
    when it moves a source or lacks a commit (the commits kept are in the cache)."""
    before = lock_files(locked)
    down = closed_url("/")
    # The git remotes' mirror goes away; the matrix, and so the input hash, stays the same.
    (tmp_path / "gitconfig").write_text(f'[url "{down}"]\n\tinsteadOf = https://github.com/\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    assert envgen(locked, "lock", ENV) == (
        0,
        "",
        f"{ENV}: up to date (input hash {read_hash(locked)[:12]})\n",
    )
    # every kept commit is in the cache
    assert envgen(locked, "lock", ENV, "--force", "-q")[0] == 0
    assert lock_files(locked) == before
    code, _, err = envgen(locked, "lock", ENV, "--update-all")
    assert code == 3, err
    assert err.startswith(
        "error: 1 host that the lock needs did not answer; nothing was locked:\n  github.com: "
    ), err
    ((_, below),) = verdict(err).values()
    assert below[0] == "git remote https://github.com/envgen-demo/rollout.git (demo source rollout)"
    assert len(below) == 4 and below[-1] == "and 1 more", err
    assert lock_files(locked) == before
    code, _, err = envgen(locked, "lock", ENV, "--update-all", "--no-preflight")
    assert code == 3 and "cannot reach git remote https://github.com/envgen-demo/" in err, err
    assert lock_files(locked) == before


def read_hash(locked: Example) -> str:
    lock = read_lock(Project(locked.root), ENV)
    assert lock is not None
    return lock.input_hash


def test_lock_without_arguments_locks_every_env(example: Example) -> None:
    second = example.root / "env-templates" / "demo2.toml"
    second.write_text(example.matrix.read_text().replace('name = "demo"', 'name = "demo2"', 1))
    try:
        code, out, err = envgen(example, "lock", "--json")
        assert code == 0, err
        assert [item["env"] for item in json.loads(out)["results"]] == ["demo", "demo2"]
        assert (example.root / "locks" / "demo2.yml").is_file()
    finally:
        second.unlink()
        for path in (example.root / "locks").glob("demo2.*"):
            path.unlink()


def test_an_extending_env_locks_and_goes_stale_with_its_base(example: Example) -> None:
    derived = example.root / "env-templates" / "demo-npu.toml"
    derived.write_text(
        'schema = 1\nextends = "demo"\n\n[env]\nname = "demo-npu"\n\n'
        '[sources.rollout.env]\nROLLOUT_TARGET_DEVICE = "npu"\n'
    )
    try:
        code, out, err = envgen(example, "lock", ENV, "demo-npu", "--json")
        assert code == 0, err
        assert [item["status"] for item in json.loads(out)["results"]] == ["locked", "locked"]
        project = Project(example.root)
        base, npu = read_lock(project, ENV), read_lock(project, "demo-npu")
        assert base is not None and npu is not None
        # the derived lock is the base's but for the one variable, and it records the base's digest
        assert {s.source.name: dict(s.source.env) for s in npu.sources}["rollout"] == {
            "ROLLOUT_TARGET_DEVICE": "npu"
        }
        assert [(e.name, e.version, e.sha256) for e in npu.pip] == [
            (e.name, e.version, e.sha256) for e in base.pip
        ]
        assert "base:demo" in dict(npu.inputs) and "base:demo" not in dict(base.inputs)
        code, out, _ = envgen(example, "status", ENV, "demo-npu", "--json")
        assert [item["fresh"] for item in json.loads(out)["results"]] == [True, True]

        # the base changes, the derived file does not
        bump_version(example, "demo-torch", "2.10.0", "2.10.1")
        code, out, _ = envgen(example, "status", ENV, "demo-npu", "--json")
        reports = {item["env"]: item for item in json.loads(out)["results"]}
        assert code == 1
        assert not reports[ENV]["fresh"] and not reports["demo-npu"]["fresh"]
        assert reports["demo-npu"]["reasons"] == [
            "matrix demo (extended by env-templates/demo-npu.toml) changed"
        ]
        code, out, err = envgen(example, "lock", "demo-npu", "--json")
        assert code == 0, err
        assert json.loads(out)["results"][0]["status"] == "locked"
        relocked = read_lock(project, "demo-npu")
        assert relocked is not None
        assert {e.version for e in relocked.pip if e.name == "demo-torch"} == {"2.10.1"}
    finally:
        derived.unlink()
        for path in (example.root / "locks").glob("demo-npu.*"):
            path.unlink()
