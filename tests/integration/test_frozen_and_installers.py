"""Install modes on the served example through the real CLI: `install` and `check` refuse a stale
lock unless --frozen, a tampered one always; `--installer uv` installs from the pylock; no mutex
file stays in locks/; `conda-lock lock --lockfile` says to re-lock with `envgen lock`; a conda
python that is not its prefix's own gets a hint that is true."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from envgen.commands.install import command as install_command
from envgen.example.condapkgs import PackageFile, demo_packages
from envgen.example.project import Example, bump_version, republish
from envgen.installer.core import Destination, Installer, Request, Source
from envgen.platforms import host_platform

from tests.support.chk_venv import copied_install
from tests.support.example import run_envgen, use_git_config

ENV = "demo"
HOST = host_platform()
CONDA_LOCK = Path(sys.executable).parent / "conda-lock"


@pytest.fixture(scope="module")
def locked(read_only_served: Example, worker_first_lock: dict[str, bytes]) -> Iterator[Example]:
    """The worker's example, locked: the module's copy of its project with the worker's first lock
    (tests/integration/conftest.py). The tests that start from it edit only its project (the
    matrix, locks/: `project` puts them back); the one that changes what is served has an example
    of its own."""
    for name, data in worker_first_lock.items():
        (read_only_served.root / "locks" / name).write_bytes(data)
    patch = pytest.MonkeyPatch()
    use_git_config(read_only_served.gitconfig, patch)
    yield read_only_served
    patch.undo()


@pytest.fixture
def project(locked: Example, monkeypatch: pytest.MonkeyPatch) -> Iterator[Example]:
    """The locked example, its matrix and locks/ put back as they were after the test."""
    use_git_config(locked.gitconfig, monkeypatch)
    matrix = locked.matrix.read_text()
    locks = {p: p.read_bytes() for p in (locked.root / "locks").iterdir()}
    yield locked
    locked.matrix.write_text(matrix)
    for path in (locked.root / "locks").iterdir():
        path.unlink()
    for path, data in locks.items():
        path.write_bytes(data)


def install(example: Example, prefix: Path, *args: str) -> tuple[int, str]:
    code, out, err = run_envgen(example, "install", ENV, "--venv", "--prefix", str(prefix), *args)
    return code, out + err


def steps_of(out: str) -> dict[str, dict[str, object]]:
    return {s["name"]: s for s in json.loads(out)["results"][0]["steps"]}


def edit_description(example: Example) -> None:
    """A matrix edit that moves no pin: the lock is stale, and still what the matrix asks."""
    text = example.matrix.read_text()
    edited = text.replace('description = "A5-shaped demo', 'description = "A demo', 1)
    assert edited != text
    example.matrix.write_text(edited)


@pytest.mark.parametrize(
    ("installer", "derived"),
    [("pip", f"{ENV}.{HOST}.requirements.txt"), ("uv", f"pylock.{ENV}-{HOST}.toml")],
)
def test_install_refuses_a_stale_lock_and_frozen_installs_it_as_it_is_from_its_installers_file(
    project: Example,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    installer: str,
    derived: str,
) -> None:
    """Before: a stale lock installed silently while `status` said stale; `install --installer uv`
    installed from a temporary requirements.txt.

    uv's case installs for real; pip's hands the install core's inputs to a recorder (the subject
    being the file pip is given, the same core running both): pip's install into a venv is
    test_install's."""
    edit_description(project)
    code, out, _ = run_envgen(project, "status", ENV)
    assert code == 1 and f"matrix env-templates/{ENV}.toml changed" in out
    prefix = tmp_path / "env"
    code, out = install(project, prefix)
    assert code == 1, out
    assert "error: the lock of demo is stale: its inputs changed since it was written" in out
    assert f"matrix env-templates/{ENV}.toml changed" in out  # the reason status gives
    assert f"hint: run `envgen lock {ENV}`, or pass --frozen to install the lock as it is" in out
    assert not prefix.exists()
    if installer == "pip":
        given: list[tuple[str, Path, Path]] = []

        def recorded(request: Request, source: Source, env: Destination, tool: Installer) -> None:
            part = source.pip(request.lock, request.platform, tool)
            assert part is not None
            given.append((tool.name, part.requirements, env.path))

        monkeypatch.setattr(install_command, "install", recorded)
    code, out = install(project, prefix, "--frozen", "--installer", installer)
    assert code == 0, out
    if installer == "pip":
        assert given == [("pip", project.root / "locks" / derived, prefix)]
        return
    assert f"with {installer} from {project.root / 'locks' / derived} into" in out
    shown = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import demo_torch, rollout; print('ok')"],
        capture_output=True,
        text=True,
    )
    assert shown.stdout.strip() == "ok", shown.stderr


def test_check_fails_a_stale_lock_naming_frozen_and_checks_it_as_it_is_with_it(
    project: Example, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What --frozen decides: the input hash step skipped and the env checked. The throwaway
    install is a copy of the session's venv of the lock (chk_venv.py): check's own install is
    test_check's (uv) and test_exports' (pip)."""
    requests = copied_install(tmp_path_factory, project, monkeypatch)
    edit_description(project)
    code, out, _ = run_envgen(project, "check", ENV, "--venv", "--no-solve", "--json")
    assert code == 4
    steps = steps_of(out)
    stale = steps["static: input hash"]
    assert stale["status"] == "failed"
    assert stale["problems"] == [
        f"matrix env-templates/{ENV}.toml changed: re-lock with `envgen lock {ENV}`, or check the "
        "lock as it is with --frozen"
    ]
    assert steps["env: install"]["status"] == "skipped"
    code, out, err = run_envgen(
        project, "check", ENV, "--venv", "--installer", "uv", "--no-solve", "--frozen", "--json"
    )
    assert code == 0, out + err
    steps = steps_of(out)
    assert steps["static: input hash"]["status"] == "skipped"
    assert steps["env: install (venv)"]["status"] == "ok"
    assert steps["env: installed set"]["status"] == "ok" and len(requests) == 1


def test_a_tampered_lock_is_refused_with_exit_4_with_or_without_frozen(
    project: Example,
    tmp_path: Path,
) -> None:
    yml = project.root / "locks" / f"{ENV}.yml"
    yml.write_text(yml.read_text() + "# edited\n")
    for frozen in ((), ("--frozen",)):
        code, out = install(project, tmp_path / "env", *frozen)
        assert code == 4 and "a file was edited after `envgen lock` wrote it" in out, out
        code, out, _ = run_envgen(project, "check", ENV, "--venv", "--no-solve", *frozen)
        assert code == 4 and "static: integrity" in out, out
    assert not (tmp_path / "env").exists()


def test_a_hand_edited_pylock_is_never_what_uv_installs(project: Example, tmp_path: Path) -> None:
    pylock = project.root / "locks" / f"pylock.{ENV}-{HOST}.toml"
    text = pylock.read_text()
    start = text.index('sha256 = "') + len('sha256 = "')
    pylock.write_text(text[:start] + "0" * 64 + text[start + 64 :])
    code, out = install(project, tmp_path / "env", "--installer", "uv")
    assert code == 1 and f"locks/{pylock.name} does not carry the yml's artifacts" in out, out
    assert f"`envgen lock {ENV} --force`" in out
    code, out = install(project, tmp_path / "env", "--installer", "uv", "--frozen")
    assert code == 4 and f"locks/{pylock.name} does not carry the yml's artifacts" in out, out
    assert f"sha256 {'0' * 12} here" in out and "LockedFile(" not in out
    assert not (tmp_path / "env").exists()


def test_no_mutex_file_stays_in_locks_after_a_lock_that_failed_or_succeeded(
    project: Example,
) -> None:
    """Before: `.demo.lock` stayed in locks/ after every `envgen lock`, failed or not."""
    locks = project.root / "locks"
    bump_version(project, "demo-torch", "2.10.0", "9.0.0")  # no such release: resolution fails
    code, _, err = run_envgen(project, "lock", ENV)
    assert code == 3, err
    assert sorted(p.name for p in locks.glob(".*")) == []
    bump_version(project, "demo-torch", "9.0.0", "2.10.1")
    code, _, err = run_envgen(project, "lock", ENV, "-q")
    assert code == 0, err
    assert sorted(p.name for p in locks.glob(".*")) == []


def test_conda_lock_relocking_the_lock_names_envgen_lock_and_writes_nothing(
    project: Example,
    tmp_path: Path,
) -> None:
    """conda-lock reads `metadata.sources` as environment files next to the lock: before, it was
    pointed at the TOML matrix (a YAML ScannerError, or another environment.yml)."""
    conda = tmp_path / "bin" / "conda"
    conda.parent.mkdir()
    conda.write_text("#!/bin/sh\necho 'conda 24.1.0'\n")  # a conda to find: nothing is solved
    conda.chmod(0o755)
    yml = project.root / "locks" / f"{ENV}.yml"
    before = yml.read_bytes()
    # Proxies on a closed port: conda-lock must not reach any host.
    env = {**os.environ, "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    proc = subprocess.run(
        [str(CONDA_LOCK), "lock", "--conda", str(conda), "--lockfile", f"locks/{ENV}.yml"],
        cwd=project.root,
        env={**env, "NO_PROXY": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"locks/{ENV}.yml was created from ['locks/../env-templates/{ENV}.toml")
    assert f"re-lock with `envgen lock {ENV}`, not conda-lock" in first
    assert "ScannerError" not in proc.stderr and proc.returncode != 0
    assert yml.read_bytes() == before
    # conda-lock's render of the same file still works.
    rendered = subprocess.run(
        [str(CONDA_LOCK), "render", "--kind", "explicit", "-p", HOST, str(yml)],
        cwd=tmp_path,
        env={**env, "NO_PROXY": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert "@EXPLICIT" in (tmp_path / f"conda-{HOST}.lock").read_text()


def test_a_conda_python_that_runs_another_python_is_refused_with_a_true_hint(
    example: Example,
    tmp_path: Path,
) -> None:
    """A channel whose python wraps another interpreter: the install stops before pip, and the
    hint says what to fix (before: a fixture channel's story and --venv only)."""
    shim = PackageFile("bin/python", b'#!/bin/sh\nexec python3 "$@"\n', 0o755)
    packages = [replace(p, files=(shim,)) if p.name == "python" else p for p in demo_packages()]
    republish(example, conda=packages)
    code, _, err = run_envgen(example, "lock", ENV, "-q")
    assert code == 0, err
    prefix = tmp_path / "env"
    code, out, err = run_envgen(example, "install", ENV, "--prefix", str(prefix))
    assert code == 4, out + err
    assert "pip packages installed through it would land elsewhere" in err
    assert "hint: the lock's conda python is not an interpreter of its own prefix" in err
    assert "fixture" not in err and "re-lock" in err
