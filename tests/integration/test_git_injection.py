"""Git option injection: a URL, commit or ref from a matrix or a lock never reaches git as an
option.

Each payload, if git read it as `--upload-pack=<command>`, would run `touch <marker>`; every test
asserts the marker file is absent afterwards, besides the error it expects.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.errors import EnvgenError, InputError
from envgen.example.gitrepos import GitRepo
from envgen.inputs.untrusted import commit_problem, git_url_problem, ref_problem
from envgen.lockio.conda_lock_yml import render_lock_yml
from envgen.lockio.sources_toml import parse_sources_toml, render_sources_toml
from envgen.model import LockedSource, Source
from envgen.resolve.git.remote import ls_remote
from envgen.resolve.sources.pins import resolve_sources

from tests.support.builders import at, current_git, make_matrix, sample_lock
from tests.support.example import empty_git_config

TEMPLATES = Path(__file__).parents[1] / "data" / "matrices"


@pytest.fixture(autouse=True)
def git_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty_git_config(tmp_path, monkeypatch)


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "pwned"


def payload(marker: Path) -> str:
    # The `;git-upload-pack` keeps the fetch going after the injected command, as a real attack
    # would.
    return f"--upload-pack=touch {marker};git-upload-pack"


@pytest.fixture
def inside_a_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    """The working directory is a checkout whose origin is reachable: what git falls back to without
    a URL."""
    upstream = GitRepo.create(tmp_path / "upstream", {"a.txt": "1\n"})
    checkout = GitRepo.create(tmp_path / "checkout", {"b.txt": "1\n"})
    checkout.git("remote", "add", "origin", upstream.url)
    monkeypatch.chdir(checkout.path)
    return upstream


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/org/repo.git",
        "http://127.0.0.1:8080/repo.git",
        "ssh://git@host.example/org/repo.git",
        "git@github.com:org/repo.git",
        "file:///srv/git/repo.git",
        "/srv/git/repo.git",
        "../repo",
        "repo.git",
    ],
)
def test_accepted_git_urls(url: str) -> None:
    assert git_url_problem(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "--upload-pack=touch${IFS}/tmp/x",
        "-oProxyCommand=touch /tmp/x",
        "ext::sh -c touch% /tmp/x",
        "ext::sh",
        "fd::17",
        "ssh://-oProxyCommand=touch/x/repo",
        "ftp://host/repo.git",
        "git@host:-upload",
        "host:repo",
        "https://",
        "https://host",
        "https://host/repo\n.git",
        "",
    ],
)
def test_rejected_git_urls(url: str) -> None:
    assert git_url_problem(url) is not None


@pytest.mark.parametrize(
    "ref", ["--upload-pack=x", "-b", "a..b", "x.lock/y", "@", "", "a b", "a\nb", "refs/heads/"]
)
def test_rejected_refs(ref: str) -> None:
    assert ref_problem(ref) is not None


@pytest.mark.parametrize("sha", ["--upload-pack=x", "a" * 39, "g" * 40, "a" * 41, ""])
def test_rejected_commits(sha: str) -> None:
    assert commit_problem(sha) is not None


def test_ls_remote_never_reads_a_url_as_an_option(inside_a_repo: GitRepo, marker: Path) -> None:
    """Without `--`, git takes the payload as --upload-pack and lists the checkout's origin, running
    it."""
    with pytest.raises(EnvgenError):
        ls_remote(payload(marker), current_git())
    assert not marker.exists()


def test_a_recorded_commit_never_reaches_git_fetch_as_an_option(
    tmp_path: Path, marker: Path
) -> None:
    """A kept commit from a tampered lock goes to `git fetch origin <commit>`: after `--` it is a
    bad refspec."""
    upstream = GitRepo.create(tmp_path / "up", {"a.txt": "1\n"})
    source = Source(name="lib", url=upstream.url, ref="main", distribution="lib")
    matrix = make_matrix(sources=(source,))
    previous = {"lib": LockedSource(source, payload(marker))}
    with pytest.raises(EnvgenError):
        resolve_sources(matrix, at(tmp_path / "cache"), previous=previous)
    assert not marker.exists()


@pytest.mark.parametrize(
    "field", ["url", "commit", "ref", "cherry-picks", "picked", "tree", "name"]
)
def test_the_lock_parser_rejects_option_shaped_git_strings(field: str, marker: Path) -> None:
    text = render_sources_toml(sample_lock())
    bad = payload(marker)
    replacements = {
        "url": ('"https://github.com/verl-project/verl.git"', f'"{bad}"'),
        "commit": (f'commit = "{"d" * 40}"', f'commit = "{bad}"'),
        "ref": ('ref = "releases/v0.23.0"', f'ref = "{bad}"'),
        "cherry-picks": (f'"{"1" * 40}"', f'"{bad}"'),
        "picked": (f'picked = [\n    "{"c" * 40}",', f'picked = [\n    "{bad}",'),
        "tree": (f'tree = "{"b" * 40}"', f'tree = "{bad}"'),
        "name": ('name = "verl"', 'name = "ve\\nrl"'),
    }
    old, new = replacements[field]
    assert old in text
    with pytest.raises(InputError, match=rf"sources\[\d\]\.{field}(\[\d\])?: "):
        parse_sources_toml(text.replace(old, new, 1), "locks/a5.sources.toml")


def test_lock_rejects_an_option_shaped_url_in_the_matrix(
    tmp_path: Path, marker: Path, inside_a_repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    shutil.copytree(TEMPLATES / "channels", root / "channels")
    template = (TEMPLATES / "env-templates" / "valid.toml").read_text()
    url = f"--upload-pack=touch${{IFS}}{marker};git-upload-pack"
    template = template.replace('url = "https://example.com/third.git"', f'url = "{url}"')
    (root / "env-templates").mkdir()
    (root / "env-templates" / "valid.toml").write_text(template)
    result = CliRunner().invoke(cli, ["lock", "valid", "--root", str(root)])
    assert result.exit_code == 2, result.output
    assert "sources.third.url" in result.stderr and "starts with '-'" in result.stderr
    assert not marker.exists()
    assert not (root / "locks").exists()


def test_status_never_passes_a_tampered_lock_url_to_git(
    tmp_path: Path, marker: Path, inside_a_repo: GitRepo
) -> None:
    """`status` asks each moving source's remote; a URL edited into sources.toml is refused before
    that."""
    root = tmp_path / "project"
    shutil.copytree(TEMPLATES / "channels", root / "channels")
    (root / "env-templates").mkdir()
    shutil.copy(TEMPLATES / "env-templates" / "valid.toml", root / "env-templates" / "valid.toml")
    (root / "locks").mkdir()
    lock = msgspec.structs.replace(sample_lock(), env="valid")
    (root / "locks" / "valid.yml").write_text(render_lock_yml(lock))
    text = render_sources_toml(lock)
    assert text.count("https://github.com/verl-project/verl.git") == 1
    (root / "locks" / "valid.sources.toml").write_text(
        text.replace("https://github.com/verl-project/verl.git", payload(marker))
    )
    result = CliRunner().invoke(cli, ["status", "valid", "--root", str(root)])
    assert result.exit_code == 2, result.output
    assert "sources[1].url" in result.stderr
    assert not marker.exists()
