"""Credentials of channels, indexes and git sources: used by every command, written nowhere.

The example is served behind basic auth: its conda channel and "extra" index take a token from
`${VAR}`, its "pypi" index and one git source (over git's smart HTTP) carry theirs in the URL. lock,
status, check, install and bundle must all succeed, each installer once (check's throwaway env by
pip, install's prefix by uv), and afterwards no file of the cache, `locks/`, the prefix, the kept
throwaway env, the temporary directory or the home directory holds a secret, nor the base64 of a
`user:secret` pair. What they cached is all envgen's own, what `envgen cache clean` removes
(test_cache cleans a cache a lock and bundles filled; this one is also the real check's and
install's).
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.commands.cache import TAG, TAG_TEXT
from envgen.errors import InputError, VerificationError
from envgen.example.condapkgs import demo_packages, write_channel
from envgen.example.gitrepos import GitRepo
from envgen.example.http import serve_directory
from envgen.example.project import (
    ENV,
    EXAMPLE_DIR,
    RELEASES,
    build_example,
    write_gitconfig,
    write_project,
)
from envgen.inputs.credentials import lock_credentials
from envgen.installer.conda import install_conda
from envgen.lockio.store import read_lock
from envgen.model import Channel
from envgen.network import limits
from envgen.platforms import host_platform
from envgen.project import CACHE_ENTRIES, Project
from envgen.resolve.conda.stage import solve_conda
from packaging.utils import canonicalize_name

from tests.support.builders import at, make_lock, make_matrix
from tests.support.example import use_git_config
from tests.support.githttp import serve_git
from tests.support.shared import build_once
from tests.support.venvs import seeded_cache

PAIRS = {
    "conda": ("condauser", "cOnDa-t0ken-9f31"),
    "pypi": ("pipuser", "pYpI-t0ken-77aa"),
    "extra": ("extrauser", "eXtRa-t0ken-c0de"),
    "git": ("gituser", "g1t-t0ken-5eed"),
}
SECRETS = tuple(secret for _, secret in PAIRS.values())


def _needles() -> tuple[bytes, ...]:
    """Each secret, and each `user:secret` pair as an Authorization header carries it (base64)."""
    pairs = [f"{user}:{secret}".encode() for user, secret in PAIRS.values()]
    return (*(s.encode() for s in SECRETS), *(base64.b64encode(p) for p in pairs))


def secret_hits(*roots: Path) -> tuple[int, list[str]]:
    """How many files under `roots` were read, and each `path: needle` where a secret was found."""
    needles = _needles()
    scanned, hits = 0, []
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            scanned += 1
            data = path.read_bytes()
            hits += [f"{path}: {needle.decode()}" for needle in needles if needle in data]
    return scanned, hits


def envgen(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*args, "--root", str(root)], catch_exceptions=False)
    return result.exit_code, result.stdout + result.stderr


def installed_by(root: Path, prefix: Path) -> set[str]:
    """The installers named by the dist-info of the lock's pip part in `prefix`."""
    lock = read_lock(Project(root), ENV)
    assert lock is not None
    names = {canonicalize_name(e.name) for e in lock.pip_for(host_platform())}
    infos = [
        p
        for p in prefix.glob("lib/python*/site-packages/*.dist-info")
        if canonicalize_name(p.stem.split("-")[0]) in names
    ]
    assert len(infos) == len(names), (sorted(names), infos)
    return {(p / "INSTALLER").read_text().strip() for p in infos}


@dataclass(frozen=True)
class Served:
    """The example served behind basic auth and locked once (`served_with_credentials`)."""

    root: Path
    gitconfig: Path
    # What the lock used and left: its cache, temporary directory and home.
    cache: Path
    temp: Path
    home: Path


def use_credentials(
    monkeypatch: pytest.MonkeyPatch, gitconfig: Path, cache: Path, temp: Path, home: Path
) -> None:
    """The tokens `${VAR}` names, git's mirror rule, and a cache, temporary directory and home of
    the command's own (anything a tool writes under ~, a cache or a config, is scanned too)."""
    monkeypatch.setenv("CONDA_TOKEN", PAIRS["conda"][1])
    monkeypatch.setenv("EXTRA_TOKEN", PAIRS["extra"][1])
    use_git_config(gitconfig, monkeypatch)
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(cache))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))


@pytest.fixture(scope="session")
def served_with_credentials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The example served behind basic auth for this worker's session, with credentials in its
    channel files and one source URL, and locked once: the lock is the `lock` case's subject and
    what every other command reads.

    Once per worker (a lock names the ports of the servers it was made against, and these servers
    are this worker's), so that the commands' cases spread over the workers without each locking
    again. Shared read only: each case works on a copy of the locked project and of the lock's
    cache (`project`); the lock's own cache, temporary directory and home are only scanned.
    """
    workdir = tmp_path_factory.mktemp("secrets") / "work"
    shutil.copytree(
        build_once(tmp_path_factory, "example-artifacts", build_example), workdir, symlinks=True
    )
    repos = {path.name: GitRepo(path) for path in sorted((workdir / "upstream").iterdir())}
    with ExitStack() as stack:
        hosts = {
            # Each on a host of its own: pip and uv get credentials by host (a netrc).
            name: stack.enter_context(
                serve_directory(workdir / name, auth=":".join(PAIRS[name]), host=host)
            ).removeprefix("http://")
            for name, host in (
                ("pypi", "127.0.0.1"),
                ("extra", "127.0.0.2"),
                ("conda", "127.0.0.3"),
            )
        }
        git_base, _ = stack.enter_context(serve_git(workdir / "upstream", ":".join(PAIRS["git"])))
        # A release archive is fetched without credentials (its URL may carry none): served apart.
        releases = stack.enter_context(serve_directory(workdir / "pypi" / RELEASES))
        urls = {
            "releases": releases,
            "conda": f"http://{PAIRS['conda'][0]}:${{CONDA_TOKEN}}@{hosts['conda']}",
            "pypi": f"http://{':'.join(PAIRS['pypi'])}@{hosts['pypi']}",
            "extra": f"http://{PAIRS['extra'][0]}:${{EXTRA_TOKEN}}@{hosts['extra']}",
        }
        root = write_project(workdir / "project", EXAMPLE_DIR, urls, repos["post"].rev("fix"))
        matrix = root / "env-templates" / f"{ENV}.toml"
        git_url = git_base.replace("http://", f"http://{':'.join(PAIRS['git'])}@") + "/rollout"
        matrix.write_text(
            matrix.read_text().replace("https://github.com/envgen-demo/rollout.git", git_url)
        )
        # The other sources come from local repositories through a mirror rule, as in the demo.
        gitconfig = write_gitconfig(workdir / "gitconfig", repos)
        cache = seeded_cache(tmp_path_factory, workdir / "cache")
        served = Served(root, gitconfig, cache, workdir / "tmp", workdir / "home")
        served.temp.mkdir()
        served.home.mkdir()
        with pytest.MonkeyPatch.context() as monkeypatch:
            use_credentials(monkeypatch, gitconfig, served.cache, served.temp, served.home)
            code, out = envgen(root, "lock", ENV)
        assert code == 0, out
        for secret in SECRETS:
            assert secret not in out
        yield served


@pytest.fixture
def project(
    served_with_credentials: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A copy of the locked project, the credentials, and of the test's own: a copy of the lock's
    cache (tmp_path/cache, which the command fills as it would after that lock), a temporary
    directory (tmp_path/tmp) and a home (tmp_path/home)."""
    served = served_with_credentials
    root = tmp_path / "project"
    shutil.copytree(served.root, root, symlinks=True)
    shutil.copytree(served.cache, tmp_path / "cache", symlinks=True)
    (tmp_path / "tmp").mkdir()
    (tmp_path / "home").mkdir()
    use_credentials(
        monkeypatch, served.gitconfig, tmp_path / "cache", tmp_path / "tmp", tmp_path / "home"
    )
    return root


# What the cache holds (at least) after each command, on top of the lock's (the lock's uv resolve
# fills uv/): between them, every kind of entry the five commands cache for real.
LOCKED = {"uv", "git", "conda", "pypi-metadata"}
CACHED = {"lock": LOCKED, "status": LOCKED, "check": LOCKED, "install": LOCKED}
CACHED["bundle"] = LOCKED | {"artifacts"}


def assert_no_secret_written(command: str, cache: Path, *roots: Path) -> None:
    """No file of the cache or `roots` holds a secret, and the cache holds only what envgen puts
    there, in the directory the first command created and tagged."""
    scanned, hits = secret_hits(cache, *roots)
    assert scanned > 100
    assert hits == []
    cached = {p.name for p in cache.iterdir()} - {TAG}
    assert (cache / TAG).read_text() == TAG_TEXT
    assert CACHED[command] <= cached, sorted(cached)
    assert cached <= set(CACHE_ENTRIES), sorted(cached - set(CACHE_ENTRIES))


def test_the_lock_uses_credentials_and_writes_none(served_with_credentials: Served) -> None:
    """The worker's one lock (served_with_credentials, which asserts its exit code and that its
    output names no secret): what it wrote and cached."""
    served = served_with_credentials
    assert_no_secret_written("lock", served.cache, served.root / "locks", served.temp, served.home)


@pytest.mark.parametrize(
    # check's full env by pip is the longest: started first.
    "command",
    ["status", pytest.param("check", marks=pytest.mark.long), "install", "bundle"],
)
def test_every_command_uses_credentials_and_writes_none(
    command: str, project: Path, tmp_path: Path
) -> None:
    """Each command after the lock, on a copy of the locked project and of the lock's cache. Each
    installer takes the credentials once: pip in check's throwaway env (kept, to be scanned), uv in
    install's prefix. The two commands install through the same Installer, so a check by uv and an
    install by pip would only repeat those paths (a full env each)."""
    prefix = tmp_path / "prefix"
    args = {
        "status": ["status", ENV],
        "check": ["check", ENV, "--venv", "--keep", "--installer", "pip"],
        "install": ["install", ENV, "--venv", "--prefix", str(prefix), "--installer", "uv"],
        "bundle": ["bundle", ENV, "-o", str(tmp_path / "demo.tar")],
    }[command]
    code, out = envgen(project, *args)
    assert code == 0, out
    for secret in SECRETS:
        assert secret not in out
    if command == "check":
        assert "env: install (venv)" in out
        # The kept throwaway env is in the temporary directory the scan reads.
        kept = sorted((tmp_path / "tmp").glob("envgen-check-*"))
        assert len(kept) == 1 and all((path / "env" / "bin" / "python").exists() for path in kept)
        # Which installer put the locked wheels there: each records itself in the dist-info.
        assert installed_by(project, kept[0] / "env") == {"pip"}
    if command == "install":
        assert (prefix / "src" / "rollout").is_dir() or any(prefix.rglob("rollout*"))
        assert installed_by(project, prefix) == {"uv"}
    written = [project / "locks", tmp_path / "tmp", tmp_path / "home"]
    if command == "install":
        written.append(prefix)
    assert_no_secret_written(command, tmp_path / "cache", *written)


def test_a_conda_prefix_installs_from_an_authenticated_channel_and_keeps_no_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_channel(tmp_path / "served" / "demo", demo_packages())
    user, secret = PAIRS["conda"]
    monkeypatch.setenv("CONDA_TOKEN", secret)
    with serve_directory(tmp_path / "served", auth=f"{user}:{secret}") as base:
        written = base.replace("http://", f"http://{user}:${{CONDA_TOKEN}}@") + "/demo"
        channel = Channel("demo", written)
        matrix = make_matrix(channels=(channel,), conda_specs=("python 3.11.*", "pip"))
        entries = solve_conda(matrix, "linux-64", at(tmp_path / "cache"))
        assert all(e.url.startswith(f"{base}/demo/") for e in entries)
        lock = make_lock(channels=(channel,), conda=entries)
        credentials = lock_credentials(lock, tmp_path / "no-channels", None, os.environ)
        # Without them the channel refuses the downloads: the credentials are what makes the install
        # work.
        with pytest.raises(VerificationError, match="401"):
            install_conda(
                entries, tmp_path / "refused", cache=tmp_path / "cache-refused", limits=limits()
            )
        install_conda(
            entries,
            tmp_path / "prefix",
            cache=tmp_path / "cache",
            limits=limits(),
            credentials=credentials.conda,
        )
    assert (tmp_path / "prefix" / "conda-meta").is_dir()
    # The channel's repodata and packages are cached where envgen keeps them (CACHE_ENTRIES).
    assert {p.name for p in (tmp_path / "cache").iterdir()} == {"conda"}
    scanned, hits = secret_hits(tmp_path / "cache", tmp_path / "prefix")
    assert scanned > 10
    assert hits == []


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/t/${CONDA_TOKEN}/demo", "http://127.0.0.1:9/t/tk-5ecret/demo"]
)
def test_a_conda_token_in_the_channel_path_is_refused_before_any_request(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDA_TOKEN", "tk-5ecret")
    matrix = make_matrix(channels=(Channel("private", url),), conda_specs=("python 3.11.*",))
    with pytest.raises(InputError) as raised:
        solve_conda(matrix, "linux-64", at(tmp_path / "cache"))
    assert "channels/private.toml" in raised.value.message and "/t/***/demo" in raised.value.message
    assert "tk-5ecret" not in str(raised.value) + (raised.value.hint or "")
    assert not (tmp_path / "cache").exists()
