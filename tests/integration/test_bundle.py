"""`envgen bundle` and `envgen install --from-bundle` on the bundled example: made while the servers
run, then installed with every server stopped and git pointed at nothing; altered members and
interrupts."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from envgen import interrupts
from envgen.bundle import archive
from envgen.bundle.downloads import LogDisplay
from envgen.bundle.manifest import MANIFEST, Wanted, parse_manifest
from envgen.commands.check.throwaway import Hardware, import_steps
from envgen.commands.install.bundle import bundle_env
from envgen.commands.install.from_bundle import install_from_bundle
from envgen.commands.install.options import InstallOptions
from envgen.errors import ToolError
from envgen.example.gitrepos import GitRepo
from envgen.example.http import serve_directory
from envgen.installer.destinations import Venv
from envgen.installer.tools import Uv
from envgen.lockio.seal import recorded
from envgen.lockio.store import read_lock, write_lock
from envgen.project import Project
from envgen.recipe.render import render_recipe

from tests.support.builders import conda_entry, make_lock, tools_at
from tests.support.bundles import (
    ENV,
    HOST,
    OTHER,
    Bundled,
    invoke,
    members,
    relisted,
    rewritten,
    written_tar,
)
from tests.support.example import served_example
from tests.support.proc_bundled import bundled_copy
from tests.support.submodules import locked_parent, nested_submodules
from tests.support.venvs import fresh_venv, seeded_cache, site_packages


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Bundled:
    """The session's one lock and bundles of the example (tests/support/proc_bundled.py, which
    test_command_interrupts and test_bundle_trust read too), its project and cache copied for
    this module: the module's tests alter the project's lock for a while and fill the cache."""
    return bundled_copy(tmp_path_factory, tmp_path_factory.mktemp("bundled"))


def test_the_bundle_holds_every_artifact_source_and_lock_file_of_the_platform(
    bundled: Bundled,
) -> None:
    files = members(bundled.bundle)
    manifest = parse_manifest(files[MANIFEST].decode(), "bundle.json")
    lock = read_lock(Project(bundled.root), ENV)
    assert lock is not None
    assert manifest.platforms == (HOST,) and manifest.input_hash == lock.input_hash
    shas = {m.sha256 for m in manifest.members}
    assert {e.sha256 for e in (*lock.conda_for(HOST), *lock.pip_for(HOST))} <= shas
    # The archive's wheels, each under its own name and sha256 (the archive itself is not carried).
    (archive,) = lock.archives_for(HOST)
    assert {f"archives/{m.filename}": m.sha256 for m in archive.members}.items() <= {
        m.path: m.sha256 for m in manifest.members
    }.items()
    assert archive.sha256 not in shas
    assert (
        not {e.sha256 for e in lock.pip_for(OTHER)} - {e.sha256 for e in lock.pip_for(HOST)} & shas
    )
    assert {f"git/{s.source.name}.bundle" for s in lock.sources} | {f"locks/{ENV}.yml"} <= set(
        files
    )
    assert set(files) == {m.path for m in manifest.members} | {MANIFEST}
    post = next(g for g in manifest.git if g.source == "post")
    assert len(post.commits) == 2  # the locked commit and its cherry-pick
    assert f"{len(files)} files" in bundled.output


def test_install_from_the_bundle_with_nothing_served(offline: Bundled, tmp_path: Path) -> None:
    """The pip part by uv from the bundle's wheels (pip's way: the recipe's, without envgen, below;
    envgen's into a conda prefix, test_demo's `envgen install --from-bundle`)."""
    prefix = tmp_path / "env"
    args = ("--prefix", str(prefix), "--venv", "--installer", "uv", "--root", str(offline.root))
    code, out = invoke("install", ENV, "--from-bundle", str(offline.bundle), *args)
    assert code == 0, out
    lock = read_lock(Project(offline.root), ENV)
    assert lock is not None
    no_npu = Hardware("", cann=False, npu=False)
    tools = tools_at(tmp_path / "cache")
    env = Venv(prefix, tools)
    steps = import_steps(
        lock, env, HOST, settings=tools, hardware=no_npu, require_npu=False, skipped=set()
    )
    ran = {s.name: s.status for s in steps}
    assert ran["import rollout"] == ran["import post"] == ran["import demo_queue"] == "ok", steps
    assert ran["import demo_torch"] == ran["import trainer"] == "ok", steps
    # The archive's wheels come from the bundle, the link made in the env.
    assert ran["import demo_ep"] == ran["import demo_serving"] == "ok", steps
    assert [p.is_symlink() for p in site_packages(prefix).glob("demo_ep_cpp*.so")] == [True]
    # the unpacked bundle and the git mirrors are gone
    assert not list((tmp_path / "tmp").iterdir())


def test_a_second_bundle_with_nothing_served_comes_from_the_cache(
    offline: Bundled, tmp_path: Path
) -> None:
    again = tmp_path / "again.tar"
    code, out = invoke(
        "bundle", ENV, "--platform", HOST, "-o", str(again), "--root", str(offline.root)
    )
    assert code == 0, out
    assert re.search(r"\(\d+ artifacts, all from the cache\)", out), out
    first, second = members(offline.bundle), members(again)
    assert first[MANIFEST] == second[MANIFEST]


@pytest.mark.parametrize("member", ["pip", "conda", "git", "archives"])
def test_an_altered_member_fails_before_anything_is_installed(
    offline: Bundled, tmp_path: Path, member: str
) -> None:
    names = [n for n in members(offline.bundle) if n.startswith(f"{member}/")]
    name = names[0]
    bad = rewritten(offline.bundle, tmp_path / "bad.tar", name)
    prefix = tmp_path / "env"
    args = ("--prefix", str(prefix), "--venv", "--root", str(offline.root))
    code, out = invoke("install", ENV, "--from-bundle", str(bad), *args)
    assert code == 4, out
    assert f"member {name} has sha256 {hashlib.sha256(members(bad)[name]).hexdigest()}" in out, out
    assert "nothing was installed" in out
    assert not prefix.exists() and not list((tmp_path / "tmp").iterdir())


def test_a_missing_member_is_named(offline: Bundled, tmp_path: Path) -> None:
    files = members(offline.bundle)
    name = next(n for n in files if n.startswith("conda/"))
    written_tar(
        tmp_path / "short.tar",
        {member: content for member, content in files.items() if member != name},
    )
    args = ("--prefix", str(tmp_path / "e"), "--root", str(offline.root))
    code, out = invoke("install", ENV, "--from-bundle", str(tmp_path / "short.tar"), *args)
    assert code == 4 and f"member {name} is missing" in out, out
    manifest = json.loads(files.pop(name) and files[MANIFEST])
    manifest["members"] = [m for m in manifest["members"] if m["path"] != name]
    written_tar(tmp_path / "short.tar", {**files, MANIFEST: json.dumps(manifest).encode()})
    code, out = invoke("install", ENV, "--from-bundle", str(tmp_path / "short.tar"), *args)
    assert code == 4 and f"{name}: missing from bundle.json" in out, out


def test_a_bundle_of_another_platform_or_lock_is_refused(offline: Bundled, tmp_path: Path) -> None:
    args = ("--prefix", str(tmp_path / "env"), "--venv", "--root", str(offline.root))
    code, out = invoke("install", ENV, "--from-bundle", str(offline.other), *args)
    assert code == 2 and f"the bundle carries {OTHER}, this host is {HOST}" in out, out
    # The project's lock moved on (another input hash, written as `envgen lock` writes): its
    # bundle no longer fits.
    project = Project(offline.root)
    lock = read_lock(project, ENV)
    assert lock is not None
    saved = {path: path.read_bytes() for path in project.locks_dir.glob(f"{ENV}.*")}
    moved = msgspec.structs.replace(lock, input_hash="f" * 64)
    write_lock(project, ENV, moved, render_recipe(moved))
    try:
        code, out = invoke("install", ENV, "--from-bundle", str(offline.bundle), *args)
    finally:
        for path, data in saved.items():
            path.write_bytes(data)
    assert code == 2 and "the bundle carries another lock than the project's" in out, out
    assert f"{offline.bundle}:locks/{ENV}.yml differs from locks/{ENV}.yml at line" in out, out
    assert lock.input_hash in out and moved.input_hash in out, out
    assert not (tmp_path / "env").exists() and not list((tmp_path / "tmp").iterdir())


def test_an_unreachable_index_exits_3_naming_it_and_writes_nothing(
    offline: Bundled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cold-cache"))
    out_file = tmp_path / "cold.tar.zst"
    code, out = invoke(
        "bundle", ENV, "--platform", HOST, "-o", str(out_file), "--root", str(offline.root)
    )
    assert code == 3, out
    assert "cannot download http://127.0.0.1:" in out
    assert not out_file.exists() and list(tmp_path.glob("*.part")) == []


def test_an_interrupt_while_writing_leaves_no_bundle_and_the_cache_intact(
    offline: Bundled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = [0]
    real = archive._Hashing.readinto

    def interrupted(self: archive._Hashing, buffer: bytearray | memoryview) -> int:
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt
        return real(self, buffer)

    monkeypatch.setattr(archive._Hashing, "readinto", interrupted)
    out_file = tmp_path / "out" / "demo.tar.zst"
    code, out = invoke(
        "bundle", ENV, "--platform", HOST, "-o", str(out_file), "--root", str(offline.root)
    )
    assert (
        code == 130 and f"interrupted: no bundle was written at {out_file} (nor a part file)" in out
    ), out
    assert calls[0] == 3 and list((tmp_path / "out").iterdir()) == []
    interrupts.reset()  # the interrupted command left it set, as its process would have ended here
    monkeypatch.undo()
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    summary = bundle_env(
        Project(offline.root), ENV, out_file, platforms=(HOST,), cache=offline.cache
    )
    assert summary.downloaded == 0 and out_file.is_file()


def test_the_recipe_cannot_reach_any_remote_but_the_mirrors(
    offline: Bundled, tmp_path: Path
) -> None:
    """The install's git really is cut off: the canonical URL, fetched as the recipe does, fails."""
    from envgen.bundle.gitpacks import mirror_git_environment

    env = mirror_git_environment([], os.environ)
    shutil.rmtree(tmp_path / "tmp")
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    proc = subprocess.run(
        ["git", "-C", str(repo), "fetch", "https://github.com/envgen-demo/post.git", "HEAD"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "not allowed" in proc.stderr


def test_submodules_travel_in_the_bundle_at_the_commits_the_locked_tree_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pip_site_packages: Path
) -> None:
    """A source with nested submodules: bundled from local upstreams, which are then deleted; the
    install checks out every submodule from the bundle at its gitlink, not at where its branch moved
    since."""
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    up = tmp_path / "upstream"
    repos = nested_submodules(up)
    child_locked, grand_locked = repos.child_locked, repos.grand_locked
    parent = locked_parent(repos, tmp_path / "cache")
    commit = parent.commit
    # A venv install reads only the python version of the conda part; its file is bundled all the
    # same.
    python = conda_entry("python", ".".join(map(str, sys.version_info[:3])), HOST)
    served = tmp_path / "channel" / HOST / "python.conda"
    served.parent.mkdir(parents=True)
    served.write_bytes(b"a stand-in package")
    project = Project(tmp_path / "project")
    (project.root / "locks").mkdir(parents=True)
    out = tmp_path / "sub.tar"
    with serve_directory(tmp_path / "channel") as base:
        python = msgspec.structs.replace(
            python,
            url=f"{base}/{HOST}/python.conda",
            sha256=hashlib.sha256(served.read_bytes()).hexdigest(),
        )
        lock = make_lock(ENV, platforms=(HOST,), conda=(python,), sources=(parent,))
        write_lock(project, ENV, lock, render_recipe(lock))
        bundle_env(project, ENV, out, platforms=(HOST,), cache=tmp_path / "cache")
    manifest = parse_manifest(members(out)[MANIFEST].decode(), "bundle.json")
    assert {(g.source, g.commits) for g in manifest.git} == {
        ("parentpkg", (commit,)),
        ("parentpkg/csrc/kernels", (child_locked,)),
        ("parentpkg/csrc/kernels/third_party/grand", (grand_locked,)),
    }
    shutil.rmtree(up)
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    install_from_bundle(
        project,
        ENV,
        out,
        # The subject is git's part: uv installs the source. Frozen: the project has this lock,
        # not its matrix.
        InstallOptions(prefix, tmp_path / "cache", venv=True, installer="uv", frozen=True),
        tools_at(tmp_path / "cache"),
    )
    checkout = prefix / "src" / "parentpkg" / "csrc" / "kernels"
    assert (checkout / "kernel.txt").read_text() == "locked\n"
    assert (checkout / "third_party" / "grand" / "grand.txt").read_text() == "locked\n"
    # the recipe alone, without envgen, checks them out from the same bundle (relative URLs to
    # mirrors too)
    (tmp_path / "tmp").mkdir()
    alone = fresh_venv(tmp_path / "alone", pip_site_packages)
    proc = run_recipe_with_bundle(project.root, alone, out, tmp_path / "tmp", uv=True)
    assert proc.returncode == 0, proc.stderr
    kernels = alone / "src" / "parentpkg" / "csrc" / "kernels"
    assert [GitRepo(kernels).rev(), GitRepo(kernels / "third_party" / "grand").rev()] == [
        child_locked,
        grand_locked,
    ]


def test_check_from_the_bundle_with_nothing_served_and_no_project(
    offline: Bundled, tmp_path: Path
) -> None:
    """The bundle brings the lock files: a directory that is no envgen project will do, given the
    hash of the lock to trust (`envgen bundle` printed it); without one, nothing tells the bundle's
    lock from another."""
    (tmp_path / "no-project").mkdir()
    args = ("check", ENV, "--from-bundle", str(offline.bundle), "--venv", "--installer", "uv")
    args += ("--root", str(tmp_path / "no-project"))
    code, out = invoke(*args)
    assert code == 2 and "give --lock-sha256" in out, out
    assert not list((tmp_path / "tmp").iterdir())
    code, out = invoke(*args, "--json", "--lock-sha256", offline.lock_sha256)
    assert code == 0, out
    steps = {
        s["name"]: s["status"] for s in json.loads(out[out.index("{") :])["results"][0]["steps"]
    }
    assert steps["bundle: members"] == steps["env: pip check"] == steps["import post"] == "ok", (
        steps
    )
    assert steps["env: installed set"] == "ok", steps
    bad = rewritten(
        offline.bundle,
        tmp_path / "bad.tar",
        next(n for n in members(offline.bundle) if n.startswith("pip/")),
    )
    code, out = invoke(
        "check", ENV, "--from-bundle", str(bad), "--venv", "--root", str(offline.root)
    )
    assert code == 4 and "has sha256" in out, out


def test_the_conda_part_installs_from_the_bundle_with_nothing_served(
    offline: Bundled, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """rattler links the bundle's packages with no channel, then uv installs the pip part into the
    prefix's own python from the bundle's wheels and the recipe its sources (uv: the subject is the
    conda part; pip's install from a bundle is the recipe's below and test_demo's into a conda
    prefix)."""
    prefix = tmp_path / "prefix"
    # rattler's package cache too: nothing of the example in it
    cache = seeded_cache(tmp_path_factory, tmp_path / "cold-cache")
    code, out = invoke(
        "install",
        ENV,
        "--from-bundle",
        str(offline.bundle),
        "--prefix",
        str(prefix),
        "--installer",
        "uv",
        "--root",
        str(offline.root),
        env={"ENVGEN_CACHE_DIR": str(cache)},
    )
    assert code == 0, out
    assert (prefix / "lib" / "libdemo.txt").read_text() == f"libdemo 1.0 for {HOST}\n"
    assert list((prefix / "conda-meta").glob("libdemo-1.0-*.json"))
    assert (prefix / "lib" / "python3.11" / "site-packages" / "demo_torch").is_dir()
    assert (prefix / "src" / "rollout" / ".git").is_dir()


def test_a_conda_install_that_fails_after_the_prefix_is_touched_removes_only_a_new_prefix(
    offline: Bundled,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The recipe fails once the conda and pip parts are in place: a new prefix is then removed
    (half an env would look installed); one that held an env before is left as far as the install
    got, and says so."""

    def failing_recipe(*args: Any, **kwargs: Any) -> None:
        raise ToolError("the recipe failed: a source did not build")

    monkeypatch.setattr("envgen.installer.core.run_recipe", failing_recipe)
    prefix = tmp_path / "prefix"
    cache = seeded_cache(tmp_path_factory, tmp_path / "cold-cache")
    args = (
        "install",
        ENV,
        "--from-bundle",
        str(offline.bundle),
        "--installer",
        "uv",
        "--root",
        str(offline.root),
    )
    args += ("--prefix",)
    code, out = invoke(*args, str(prefix), env={"ENVGEN_CACHE_DIR": str(cache)})
    assert code == 5 and "a source did not build" in out, out
    assert f"the partly installed {prefix} was removed" in out, out
    assert not prefix.exists()
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "history").write_text("an env was here\n")
    code, out = invoke(*args, str(prefix), env={"ENVGEN_CACHE_DIR": str(cache)})
    assert code == 5, out
    assert f"{prefix} held an env before and is left as far as the install got" in out, out
    assert (prefix / "lib" / "libdemo.txt").read_text() == f"libdemo 1.0 for {HOST}\n"
    assert (prefix / "lib" / "python3.11" / "site-packages" / "demo_torch").is_dir()
    assert (prefix / "conda-meta" / "history").read_text() == "an env was here\n"


def test_an_interrupt_while_downloading_keeps_what_was_verified_and_the_next_run_resumes(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envgen.commands.install import bundle as bundle_command

    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(cache))
    real_fetch = bundle_command.fetch_all

    class Interrupting(LogDisplay):
        def finished(self, wanted: Wanted, size: int) -> None:
            raise KeyboardInterrupt  # as Ctrl-C would, once the first artifact is in

    def fetch_then_interrupt(*args: Any, **kwargs: Any) -> Any:
        return real_fetch(*args, **{**kwargs, "display": Interrupting()})

    with served_example(tmp_path_factory, tmp_path / "example") as example:
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(example.gitconfig))
        assert invoke("lock", ENV, "-q", "--root", str(example.root))[0] == 0
        project, out = Project(example.root), tmp_path / "out" / "demo.tar"
        monkeypatch.setattr(bundle_command, "fetch_all", fetch_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            bundle_env(project, ENV, out, platforms=(HOST,), cache=cache)
        assert not out.parent.exists() or list(out.parent.iterdir()) == []
        artifacts = [p for p in (cache / "artifacts").rglob("*") if p.is_file()]
        assert artifacts and not [p for p in artifacts if ".part" in p.name]
        monkeypatch.setattr(bundle_command, "fetch_all", real_fetch)
        summary = bundle_env(project, ENV, out, platforms=(HOST,), cache=cache)
    lock = read_lock(project, ENV)
    assert lock is not None
    wanted = {e.sha256 for e in (*lock.conda_for(HOST), *lock.pip_for(HOST))}
    assert summary.downloaded == len(wanted) - len(artifacts) and out.is_file()
    cached = len(artifacts)
    said = f"({len(wanted)} artifacts: {len(wanted) - cached} downloaded, {cached} from the cache)"
    assert said in summary.describe(ENV)


def test_a_manifest_naming_another_lock_than_the_bundled_one_is_refused(
    offline: Bundled, tmp_path: Path
) -> None:
    files = members(offline.bundle)
    manifest = json.loads(files[MANIFEST])
    real, manifest["input_hash"] = manifest["input_hash"], "f" * 64
    files[MANIFEST] = json.dumps(manifest).encode()
    written_tar(tmp_path / "swapped.tar", files)
    # No project lock under --root to compare with: the bundle must still agree with itself.
    (tmp_path / "empty").mkdir()
    args = ("--prefix", str(tmp_path / "env"), "--venv", "--root", str(tmp_path / "empty"))
    args += ("--lock-sha256", offline.lock_sha256)
    code, out = invoke("install", ENV, "--from-bundle", str(tmp_path / "swapped.tar"), *args)
    assert (
        code == 4 and f"its lock has input hash {real}, its bundle.json says {'f' * 64}" in out
    ), out
    assert not (tmp_path / "env").exists()


def interrupted_while_fetching(
    tmp_path: Path, args: list[str], signum: int, ready: Path
) -> tuple[int, str]:
    """Run envgen with `args` and send `signum` while its recipe fetches the first source (a git
    that waits there), once `ready` exists; its exit code and stderr."""
    shims, marker = tmp_path / "shims", tmp_path / "fetching"
    shims.mkdir()
    real_git = shutil.which("git")
    (shims / "git").write_text(
        f'#!/bin/sh\ncase " $* " in *" fetch -q --depth "*) : >{marker}; exec sleep '
        f'120 ;; esac\nexec {real_git} "$@"\n'
    )
    (shims / "git").chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}", "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "envgen", *args],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), (
            proc.stderr.read() if proc.poll() is not None else "the recipe never fetched"
        )
        assert ready.exists()  # the install had got this far
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return proc.returncode, err


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_install_into_a_new_prefix_removes_it(
    offline: Bundled, tmp_path: Path, signum: int, code: int
) -> None:
    """The signal arrives after the venv and the pip part are in the prefix: the prefix goes, the
    message says so."""
    prefix = tmp_path / "env"
    args = ["install", ENV, "--from-bundle", str(offline.bundle), "--prefix", str(prefix), "--venv"]
    args += ["--installer", "uv", "--root", str(offline.root)]
    returncode, err = interrupted_while_fetching(tmp_path, args, signum, prefix / "pyvenv.cfg")
    assert returncode == code, err
    assert f"interrupted: the partly installed {prefix} was removed" in err, err
    assert not prefix.exists()
    assert not list((tmp_path / "tmp").iterdir())  # the unpacked bundle too


def test_an_interrupted_check_from_a_bundle_removes_its_throwaway_env(
    offline: Bundled, tmp_path: Path
) -> None:
    args = ["check", ENV, "--from-bundle", str(offline.bundle), "--venv", "--installer", "uv"]
    args += ["--root", str(offline.root)]
    # holds the throwaway env by then (the marker proves its recipe was running)
    ready = tmp_path / "tmp"
    returncode, err = interrupted_while_fetching(tmp_path, args, signal.SIGINT, ready)
    assert returncode == 130, err
    assert re.search(r"interrupted: the throwaway env \S+envgen-check-demo-\S+ was removed", err), (
        err
    )
    assert not list((tmp_path / "tmp").iterdir())


def run_recipe_with_bundle(
    root: Path, prefix: Path, bundle: Path, tmp: Path, *, uv: bool = False
) -> subprocess.CompletedProcess[str]:
    """The recipe as a cluster without envgen runs it: sh, with PATH holding the system's tools only
    (no envgen), git seeing no config that could reach the example's repositories, and nothing
    served; with `uv`, given `--uv` as `envgen install --installer uv` passes it (its cache beside
    the env), for a test whose subject is not pip's install from the bundle."""
    path = os.pathsep.join(d for d in ("/usr/local/bin", "/usr/bin", "/bin") if Path(d).is_dir())
    assert shutil.which("envgen", path=path) is None
    (tmp.parent / "home").mkdir(exist_ok=True)
    env = {
        "PATH": path,
        "HOME": str(tmp.parent / "home"),
        "TMPDIR": str(tmp),
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    recipe = root / "locks" / f"{ENV}.install.sh"
    cmd = ["sh", str(recipe), "--prefix", str(prefix), "--bundle", str(bundle)]
    if uv:
        options = Uv(tools_at(prefix.parent / "cache")).recipe_options()
        cmd += options.args
        env = options.environment(env)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_the_recipe_installs_the_pip_part_and_sources_from_the_bundle_without_envgen(
    offline: Bundled, tmp_path: Path, pip_site_packages: Path
) -> None:
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    proc = run_recipe_with_bundle(offline.root, prefix, offline.bundle, tmp_path / "tmp")
    assert proc.returncode == 0, proc.stderr
    assert f"verified every member of {offline.bundle}" in proc.stderr
    lock = read_lock(Project(offline.root), ENV)
    assert lock is not None
    no_npu = Hardware("", cann=False, npu=False)
    tools = tools_at(tmp_path / "cache")
    env = Venv(prefix, tools)
    steps = import_steps(
        lock, env, HOST, settings=tools, hardware=no_npu, require_npu=False, skipped=set()
    )
    ran = {s.name: s.status for s in steps}
    assert ran["import rollout"] == ran["import post"] == ran["import demo_queue"] == "ok", steps
    assert ran["import demo_torch"] == ran["import trainer"] == "ok", steps
    assert all(s.status == "ok" or "needs CANN" in s.detail for s in steps), steps
    assert not list((tmp_path / "tmp").iterdir())  # the unpacked bundle and its mirrors are gone


ALTERED = ["pip/", "conda/", "git/", "requirements/", "archives/", "missing"]


@pytest.mark.parametrize("member", ALTERED)
def test_the_recipe_refuses_an_altered_or_missing_member_before_installing(
    offline: Bundled, tmp_path: Path, pip_site_packages: Path, member: str
) -> None:
    files = members(offline.bundle)
    if member == "missing":
        name = next(n for n in files if n.startswith("pip/"))
        written_tar(
            tmp_path / "bad.tar", {path: content for path, content in files.items() if path != name}
        )
        expected = f"member {name} is missing"
    else:
        name = next(n for n in files if n.startswith(member))
        rewritten(offline.bundle, tmp_path / "bad.tar", name)
        expected = (
            f"member {name} has sha256 "
            f"{hashlib.sha256(members(tmp_path / 'bad.tar')[name]).hexdigest()}"
        )
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    before = sorted(p.name for p in site_packages(prefix).iterdir())
    (tmp_path / "tmp").mkdir(exist_ok=True)
    proc = run_recipe_with_bundle(offline.root, prefix, tmp_path / "bad.tar", tmp_path / "tmp")
    assert proc.returncode != 0
    assert expected in proc.stderr and "nothing was installed" in proc.stderr, proc.stderr
    assert sorted(p.name for p in site_packages(prefix).iterdir()) == before
    assert not list((prefix / "src").iterdir())


def test_the_recipe_refuses_a_bundle_of_another_lock(
    offline: Bundled, tmp_path: Path, pip_site_packages: Path
) -> None:
    sources = offline.root / "locks" / f"{ENV}.sources.toml"
    saved = sources.read_text()
    lock = read_lock(Project(offline.root), ENV)
    assert lock is not None
    moved = "f" * 64
    sources.write_text(saved.replace(lock.input_hash, moved))
    try:
        proc = run_recipe_with_bundle(
            offline.root,
            fresh_venv(tmp_path / "env", pip_site_packages),
            offline.bundle,
            tmp_path / "tmp",
        )
    finally:
        sources.write_text(saved)
    assert proc.returncode != 0
    assert (
        f"made for the lock with input hash {lock.input_hash}" in proc.stderr
        and moved in proc.stderr
    ), proc.stderr


def _run_on_a_terminal(cmd: list[str], env: dict[str, str]) -> tuple[int, str]:
    """`cmd` with its stderr on a pseudo-terminal (as in an interactive shell); what it wrote
    there."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the terminal's other side closed: the process is done writing
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    # Colour and cursor control are the terminal's; the text between them is what the assertions
    # read.
    return proc.wait(timeout=300), re.sub(
        r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace")
    )


def test_downloads_show_a_progress_bar_on_a_terminal_and_plain_lines_elsewhere(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """`envgen bundle` with its stderr on a pseudo-terminal (a child process: the terminal is the
    subject) draws a bar; run again with a cold cache where stderr is no terminal (the command line
    in process), one plain line per file."""
    with served_example(tmp_path_factory, tmp_path / "example") as example:
        env = {
            **os.environ,
            "GIT_CONFIG_GLOBAL": str(example.gitconfig),
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        env["ENVGEN_CACHE_DIR"] = str(tmp_path / "cache")
        assert invoke("lock", ENV, "-q", "--root", str(example.root), env=env)[0] == 0
        bundle = [
            sys.executable,
            "-m",
            "envgen",
            "bundle",
            ENV,
            "--platform",
            HOST,
            "--root",
            str(example.root),
        ]
        code, shown = _run_on_a_terminal([*bundle, "-o", str(tmp_path / "a.tar")], env)
        assert code == 0, shown
        lock = read_lock(Project(example.root), ENV)
        assert lock is not None
        files = len({e.sha256 for e in (*lock.conda_for(HOST), *lock.pip_for(HOST))})
        # The bar, redrawn as files arrive, ends at all of them with the bytes received; then the
        # summary. (the example's pip, made from this host's pip wheel, is most of the bytes)
        assert f"{files}/{files} files" in shown and re.search(r"\d [kM]B ", shown), shown
        assert "downloaded 1/" not in shown
        summary = r"demo: .*a\.tar: \d+ files, \d+ bytes \([\d.]+ [kM]B\) "
        # Every artifact came from the network (before: "(12 downloaded, the rest from the cache)").
        assert re.search(summary + rf"\({files} artifacts, all downloaded\)", shown), shown
        # Elsewhere (here the command line run in process, its stderr no terminal): plain lines.
        env = {k: env[k] for k in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")}
        env["ENVGEN_CACHE_DIR"] = str(tmp_path / "cold-again")
        code, plain = invoke(*bundle[3:], "-o", str(tmp_path / "b.tar"), env=env)
    assert code == 0, plain
    assert f"downloaded {files}/{files}" in plain and "\x1b[" not in plain, plain


def test_the_recipe_takes_pip_hashes_only_from_the_lock_beside_it(
    offline: Bundled, tmp_path: Path, pip_site_packages: Path
) -> None:
    """A bundle altered consistently (a requirement's hash and bundle.json both rewritten) still
    fails: every hash pip is given must be one the lock beside the script pins."""
    files = members(offline.bundle)
    name = f"requirements/{HOST}.txt"
    text = files[name].decode()
    first = re.search(r"--hash=sha256:([0-9a-f]{64})", text)
    assert first is not None
    forged = "0" * 64
    files[name] = text.replace(first.group(1), forged).encode()
    manifest = json.loads(files[MANIFEST])
    for member in manifest["members"]:
        if member["path"] == name:
            member["sha256"], member["size"] = (
                hashlib.sha256(files[name]).hexdigest(),
                len(files[name]),
            )
    files[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    written_tar(tmp_path / "forged.tar", files)
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    before = sorted(p.name for p in site_packages(prefix).iterdir())
    (tmp_path / "tmp").mkdir(exist_ok=True)
    proc = run_recipe_with_bundle(offline.root, prefix, tmp_path / "forged.tar", tmp_path / "tmp")
    assert proc.returncode != 0
    assert (
        f"pins sha256 {forged}, which" in proc.stderr and "nothing was installed" in proc.stderr
    ), proc.stderr
    assert sorted(p.name for p in site_packages(prefix).iterdir()) == before


def test_a_bundle_whose_lock_was_edited_and_its_manifest_updated_is_refused(
    offline: Bundled, tmp_path: Path
) -> None:
    """The manifest holds the members' sha256, but nothing holds the manifest's: a package removed
    from the bundled yml, with bundle.json updated to match, differs from the project's lock (exit
    2, naming the line); with no project, trusted through its own content hash, the lock's integrity
    check still catches it (4)."""
    files = members(offline.bundle)
    yml = f"locks/{ENV}.yml"
    blocks = re.split(r"(?m)^(?=- name: )", files[yml].decode())
    kept = [
        b
        for b in blocks
        if not (b.startswith("- name: demo-peft\n") and f"platform: {HOST}\n" in b)
    ]
    assert len(kept) == len(blocks) - 1
    files[yml] = "".join(kept).encode()
    written_tar(tmp_path / "edited.tar", relisted(files, yml))
    args = ("install", ENV, "--from-bundle", str(tmp_path / "edited.tar"), "--venv")
    args += ("--prefix", str(tmp_path / "env"))
    code, out = invoke(*args, "--root", str(offline.root))
    ours, theirs = (offline.root / yml).read_text().splitlines(), files[yml].decode().splitlines()
    line = next(n for n, (a, b) in enumerate(zip(ours, theirs, strict=False), 1) if a != b)
    assert code == 2, out
    assert f"{tmp_path / 'edited.tar'}:{yml} differs from {yml} at line {line} " in out, out
    have, got = ours[line - 1].strip(), theirs[line - 1].strip()
    assert f"(the project's: {have!r}; the bundle's: {got!r})" in out, out
    (tmp_path / "empty").mkdir()
    names = (yml, f"locks/{ENV}.sources.toml", f"locks/{ENV}.install.sh")
    texts = {name: files[name].decode() for name in names}
    edited = recorded(*texts.values()).computed
    code, out = invoke(*args, "--root", str(tmp_path / "empty"), "--lock-sha256", edited)
    assert code == 4, out
    assert f"the lock of {ENV} was tampered with" in out
    assert f"pip-indexes names index pypi for demo-peft ({HOST})" in out
    assert not (tmp_path / "env").exists() and not list((tmp_path / "tmp").iterdir())


def test_an_archive_wheel_altered_with_its_manifest_is_refused_by_envgen_and_the_recipe(
    offline: Bundled, tmp_path: Path, pip_site_packages: Path
) -> None:
    """bundle.json lists the altered wheel with its new sha256: the lock's sha256 of the wheel is
    what counts, for envgen (exit 4) and for the recipe, which checks it against the lock it
    renders."""
    name = next(n for n in members(offline.bundle) if n.startswith("archives/"))
    altered = members(rewritten(offline.bundle, tmp_path / "altered.tar", name))
    written_tar(tmp_path / "forged.tar", relisted(altered, name))
    found = hashlib.sha256(altered[name]).hexdigest()
    prefix = tmp_path / "env"
    args = ("--prefix", str(prefix), "--venv", "--root", str(offline.root))
    code, out = invoke("install", ENV, "--from-bundle", str(tmp_path / "forged.tar"), *args)
    assert code == 4, out
    assert f"{name}: bundle.json says sha256 {found}, the lock " in out, out
    assert not prefix.exists()
    venv = fresh_venv(tmp_path / "venv", pip_site_packages)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    proc = run_recipe_with_bundle(offline.root, venv, tmp_path / "forged.tar", tmp_path / "tmp")
    assert proc.returncode != 0
    said = f"demo-kernels: {name.removeprefix('archives/')} has sha256 {found}, the lock says "
    assert said in proc.stderr, proc.stderr
    assert "nothing of the archive was installed" in proc.stderr
    assert not list(site_packages(venv).glob("demo_ep*"))
