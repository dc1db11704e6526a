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


@pytest.fixture
def project(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """The example served behind basic auth, with credentials in its channel files and one source
    URL."""
    workdir = tmp_path / "work"
    shutil.copytree(
        build_once(tmp_path_factory, "example-artifacts", build_example), workdir, symlinks=True
    )
    repos = {path.name: GitRepo(path) for path in sorted((workdir / "upstream").iterdir())}
    monkeypatch.setenv("CONDA_TOKEN", PAIRS["conda"][1])
    monkeypatch.setenv("EXTRA_TOKEN", PAIRS["extra"][1])
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
        use_git_config(write_gitconfig(workdir / "gitconfig", repos), monkeypatch)
        monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
        temp = tmp_path / "tmp"
        temp.mkdir()
        # A home of its own: anything a tool writes under ~ (a cache, a config) is scanned too.
        (tmp_path / "home").mkdir()
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        monkeypatch.setenv("TMPDIR", str(temp))
        monkeypatch.setattr(tempfile, "tempdir", str(temp))
        yield root


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


@pytest.mark.long
def test_every_command_uses_credentials_and_writes_none(project: Path, tmp_path: Path) -> None:
    code, out = envgen(project, "lock", ENV)
    assert code == 0, out
    code, out = envgen(project, "status", ENV)
    assert code == 0, out
    # Each installer takes the credentials once: pip in check's throwaway env (kept, to be scanned),
    # uv in install's prefix. The two commands install through the same Installer, so a check by uv
    # and an install by pip would only repeat those paths (a full env each).
    code, out = envgen(project, "check", ENV, "--venv", "--keep", "--installer", "pip")
    assert code == 0, out
    assert "env: install (venv)" in out
    prefix = tmp_path / "prefix"
    code, out = envgen(
        project, "install", ENV, "--venv", "--prefix", str(prefix), "--installer", "uv"
    )
    assert code == 0, out
    assert (prefix / "src" / "rollout").is_dir() or any(prefix.rglob("rollout*"))
    code, out = envgen(project, "bundle", ENV, "-o", str(tmp_path / "demo.tar"))
    assert code == 0, out
    for secret in SECRETS:
        assert secret not in out
    # The kept throwaway env is in the temporary directory the scan reads.
    kept = sorted((tmp_path / "tmp").glob("envgen-check-*"))
    assert len(kept) == 1 and all((path / "env" / "bin" / "python").exists() for path in kept)
    # Which installer put the locked wheels there: each records itself in the dist-info.
    assert installed_by(project, kept[0] / "env") == {"pip"} and installed_by(project, prefix) == {
        "uv"
    }
    scanned, hits = secret_hits(
        tmp_path / "cache", project / "locks", prefix, tmp_path / "tmp", tmp_path / "home"
    )
    assert scanned > 100
    assert hits == []
    # The cache the five commands filled for real (pip's and uv's installs included) holds only
    # what envgen puts there, in the directory the first of them created and tagged.
    cached = {p.name for p in (tmp_path / "cache").iterdir()} - {TAG}
    assert (tmp_path / "cache" / TAG).read_text() == TAG_TEXT
    assert {"uv", "git", "conda", "pypi-metadata", "artifacts"} <= cached
    assert cached <= set(CACHE_ENTRIES), sorted(cached - set(CACHE_ENTRIES))


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
