"""locks/<env>.nix evaluated and realised by a real Nix (Debian's nix-bin), and the dev shell
flake.nix builds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.example.project import Example
from envgen.lockio.store import read_lock
from envgen.model import Lock
from envgen.project import Project
from packaging.utils import canonicalize_name
from uv import find_uv_bin

ENV = "demo"
REPO = Path(__file__).resolve().parents[2]
HOST = "x86_64-linux" if os.uname().machine == "x86_64" else "aarch64-linux"
HOST_PLATFORM = "linux-64" if HOST == "x86_64-linux" else "linux-aarch64"


def _nix_problem() -> str | None:
    """Why Nix cannot run here (None when it can evaluate and write to its store)."""
    if shutil.which("nix-instantiate") is None:
        return "nix-instantiate is not installed (Debian: apt-get install nix-bin)"
    with tempfile.TemporaryDirectory(prefix="envgen-nix-probe-") as tmp:
        probe = Path(tmp) / "probe"
        probe.write_text("ok")
        expr = f'builtins.readFile (builtins.fetchurl "file://{probe}")'
        proc = subprocess.run(
            ["nix-instantiate", "--eval", "--expr", expr], capture_output=True, text=True
        )
    if proc.returncode != 0:
        return f"nix cannot write to its store here: {proc.stderr.strip()[-300:]}"
    return None


pytestmark = pytest.mark.skipif(_nix_problem() is not None, reason=str(_nix_problem()))


def nix(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    # Nix's own download cache is per test, so every fetch below really goes to the server.
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    return subprocess.run(["nix-instantiate", *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def example(read_only_served: Example, worker_first_lock: dict[str, bytes]) -> Iterator[Example]:
    """The worker's served example, locked: the module's copy of its project with the worker's
    first lock (tests/integration/conftest.py). What is served the module reads, but for one served
    wheel that a test alters and puts back before it ends (a worker runs one test at a time)."""
    for name, data in worker_first_lock.items():
        (read_only_served.root / "locks" / name).write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GIT_CONFIG_GLOBAL", str(read_only_served.gitconfig))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        yield read_only_served


def the_lock(example: Example) -> Lock:
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    return lock


def test_the_expression_evaluates_without_nixpkgs_to_exactly_the_lock(
    example: Example, tmp_path: Path
) -> None:
    proc = nix(
        "--eval", "--strict", "--json", str(example.root / "locks" / f"{ENV}.nix"), cache=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    value = json.loads(proc.stdout)
    lock = the_lock(example)
    assert value["inputHash"] == lock.input_hash
    for platform in lock.platforms:
        part = value["platforms"][platform]
        assert {
            (p["name"], p["version"], p["fetchurl"]["url"], p["fetchurl"]["sha256"])
            for p in part["pip"]
        } == {
            (canonicalize_name(e.name), e.version, e.url, e.sha256) for e in lock.pip_for(platform)
        }
        assert {
            (c["name"], c["fetchurl"]["url"], c["fetchurl"]["sha256"], c["md5"])
            for c in part["conda"]
        } == {(e.name, e.url, e.sha256, e.md5) for e in lock.conda_for(platform)}
    sources = {s["name"]: s for s in value["sources"]}
    assert value["order"] == [s.source.name for s in lock.sources]
    for locked in lock.sources:
        source = sources[locked.source.name]
        assert source["fetchGit"] == {
            "url": locked.source.url,
            "rev": locked.commit,
            "allRefs": True,
        }
        assert [p["rev"] for p in source["cherryPicks"]] == list(locked.source.cherry_picks)
    assert sources["post"]["cherryPicks"] and sources["rollout"]["env"] == {
        "ROLLOUT_TARGET_DEVICE": "empty"
    }
    assert value["activation"]["profiles"]["quiet"]["env"] == {"DEMO_VERBOSITY": "error"}


def _fetch_expr(lockfile: Path, platform: str, package: str, name: str) -> str:
    pick = (
        f'(builtins.head (builtins.filter (p: p.name == "{package}") '
        f'lock.platforms."{platform}".pip))'
    )
    return (
        f"let lock = import {lockfile}; in builtins.fetchurl ({pick}.fetchurl // {{ name = "
        f'"{name}"; }})'
    )


def test_fetchurl_realises_an_artifact_and_a_tampered_one_fails_its_hash(
    example: Example, tmp_path: Path
) -> None:
    lock = the_lock(example)
    lockfile = example.root / "locks" / f"{ENV}.nix"
    wheel = next(e for e in lock.pip_for("linux-64") if e.name == "demo-torch")
    served = example.root.parent / "pypi" / "files" / wheel.url.rsplit("/", 1)[1]
    # A store name of its own per run, so Nix downloads rather than reusing a store path of an
    # earlier run.
    name = f"envgen-test-{uuid.uuid4().hex}.whl"
    proc = nix(
        "--eval",
        "--json",
        "--expr",
        _fetch_expr(lockfile, "linux-64", "demo-torch", name),
        cache=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert Path(json.loads(proc.stdout)).read_bytes() == served.read_bytes()

    original = served.read_bytes()
    served.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    try:
        name = f"envgen-test-{uuid.uuid4().hex}.whl"
        expr = _fetch_expr(lockfile, "linux-64", "demo-torch", name)
        proc = nix("--eval", "--json", "--expr", expr, cache=tmp_path / "2")
    finally:
        served.write_bytes(original)
    assert proc.returncode != 0
    assert "hash mismatch" in proc.stderr and wheel.url in proc.stderr


def test_the_dev_shell_installs_the_locked_wheels_from_the_store_and_the_sources(
    example: Example, tmp_path: Path
) -> None:
    """nix/devshell.nix with a stand-in for the two nixpkgs attributes it uses (mkShell, a python):
    its hook, evaluated by Nix (which fetches every wheel), creates the env from the store paths and
    runs the recipe.

    The recipe it is given runs the env's recipe from the store with `--uv`: how the recipe installs
    a source with pip is test_recipe_run's subject; here uv installs the sources in a fraction of
    pip's time."""
    lock = the_lock(example)
    locks = example.root / "locks"
    python_prefix = Path(sys.executable).parent.parent
    # A path interpolated into the file is copied into the store too: the env's recipe runs from
    # there.
    run = f'exec sh ${{{locks / f"{ENV}.install.sh"}}} --uv {find_uv_bin()} \\"$@\\"\n'
    recipe = f'builtins.toFile "{ENV}.install.sh" "{run}"'
    expr = (
        f"(import {REPO / 'nix' / 'devshell.nix'} {{"
        f' pkgs = {{ mkShell = a: a; git = "/usr"; python311 = "{python_prefix}"; }};'
        f' lockFile = {locks / f"{ENV}.nix"}; recipe = {recipe}; system = "{HOST}"; }})'
        ".shellHook"
    )
    # Read-write mode: the recipe is copied into the store as `nix develop` would.
    proc = nix(
        "--eval",
        "--read-write-mode",
        "--strict",
        "--json",
        "--expr",
        expr,
        cache=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stderr
    hook = json.loads(proc.stdout)
    assert "/nix/store/" in hook and "--no-index --no-deps" in hook
    venv = tmp_path / "venv"
    script = (
        f"{hook}\nset -e\npython -c 'import demo_torch, rollout, post'\npython -m pip list "
        "--format json\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    env |= {
        "ENVGEN_VENV": str(venv),
        "GIT_CONFIG_GLOBAL": str(example.gitconfig),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    env["UV_CACHE_DIR"] = str(tmp_path / "uv-cache")
    shell = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert shell.returncode == 0, shell.stderr
    assert f"envgen: {ENV} ({HOST_PLATFORM}) installed into {venv}" in shell.stderr
    installed = {
        canonicalize_name(p["name"]): p["version"]
        for p in json.loads(shell.stdout.splitlines()[-1])
    }
    for entry in lock.pip_for(HOST_PLATFORM):
        assert installed[canonicalize_name(entry.name)] == entry.version
    assert {"rollout", "post", "demo-queue"} <= set(installed), shell.stderr[-3000:]


def test_the_flake_exposes_a_dev_shell_per_env_and_system(example: Example, tmp_path: Path) -> None:
    """flake.nix's outputs, called with a stand-in for nixpkgs, in a project holding the example's
    locks."""
    project = tmp_path / "project"
    shutil.copytree(example.root / "locks", project / "locks")
    shutil.copy(REPO / "flake.nix", project / "flake.nix")
    shutil.copytree(REPO / "nix", project / "nix")
    pkgs = '{ mkShell = a: a; git = "/usr"; python311 = "/python"; }'
    expr = (
        f"let out = (import {project / 'flake.nix'}).outputs {{ self = {{ }}; "
        f"nixpkgs.legacyPackages = {{ x86_64-linux = {pkgs}; aarch64-linux = {pkgs}; }}; }}; in "
        "builtins.mapAttrs (system: shells: builtins.mapAttrs (env: shell: shell.name) "
        "shells) out.devShells"
    )
    proc = nix("--eval", "--strict", "--json", "--expr", expr, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "x86_64-linux": {ENV: f"envgen-{ENV}"},
        "aarch64-linux": {ENV: f"envgen-{ENV}"},
    }
