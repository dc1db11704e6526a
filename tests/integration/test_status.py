"""`envgen status` end to end: a project on disk, real git remotes that move, a PEP 503 index on
127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner, Result
from envgen.cli import cli
from envgen.commands.lock.freshness import stale_reasons
from envgen.commands.status.command import newest_version
from envgen.errors import InputError, NetworkError, ResolutionError
from envgen.example.gitrepos import GitRepo
from envgen.example.http import serve_directory
from envgen.inputs.channels import IndexAccess, expand_url
from envgen.inputs.matrix import load_env, load_matrix
from envgen.lockio.exports.derived import derived_files
from envgen.lockio.input_hashes import input_digests, input_hash
from envgen.lockio.store import write_lock
from envgen.model import Lock, LockedSource, Pending
from envgen.network import Limits
from envgen.platforms import virtual_packages
from envgen.project import Project
from envgen.recipe.render import render_recipe
from envgen.resolve.pypi.index_client import IndexClient, fetch_filenames

from tests.support.builders import make_lock, pip_entry
from tests.support.schemas import validate
from tests.support.servers import serving

STATUS_SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "status.schema.json"

MATRIX = """\
schema = 1

[env]
name = "demo"
description = "a small env for status tests"
platforms = ["linux-64"]
python = "3.11"

[system]
glibc = "2.28"

[system.cann]
version = "pending"
note = "no public version yet"
set_env = "/usr/local/Ascend/cann/set_env.sh"

[conda]
channels = ["conda-forge"]
specs = ["python 3.11.*"]

[pip]
indexes = ["pypi"]

[pip.packages]
mbridge = {{}}
transformers = {{ version = "==4.57.6" }}

[sources.tool]
url = "{tool}"
ref = "releases/v1"
distribution = "tool"

[sources.pinned]
url = "{pinned}"
ref = "{pinned_commit}"
distribution = "pinned"
"""


def write_whole_lock(project: Project, lock: Lock) -> None:
    """Write `lock` with its recipe and the files derived from it, as `envgen lock` does."""
    derived = [(f.name, f.text) for f in derived_files(lock, load_env(project, "demo"))]
    write_lock(project, "demo", lock, render_recipe(lock), derived)


class Demo:
    """A project with one env `demo`: a moving-branch source, a pinned one, and a served index."""

    def __init__(self, root: Path, index_url: str) -> None:
        self.root = root
        self.tool = GitRepo.create(root.parent / "remotes" / "tool", {"tool.py": "v = 1\n"})
        self.tool.branch("releases/v1")
        self.pinned = GitRepo.create(root.parent / "remotes" / "pinned", {"pinned.py": "v = 1\n"})
        (root / "env-templates").mkdir(parents=True)
        (root / "channels").mkdir()
        (root / "channels" / "conda-forge.toml").write_text(
            'kind = "conda"\nurl = "https://conda.example.org/cf"\n'
        )
        (root / "channels" / "pypi.toml").write_text(f'kind = "pip"\nurl = "{index_url}/simple"\n')
        self.template.write_text(
            MATRIX.format(
                tool=self.tool.url, pinned=self.pinned.url, pinned_commit=self.pinned.rev()
            )
        )

    @property
    def project(self) -> Project:
        return Project(self.root)

    @property
    def template(self) -> Path:
        return self.root / "env-templates" / "demo.toml"

    def lock(self) -> Lock:
        """Write a lock whose inputs are the current ones, sources pinned to what their refs name
        now."""
        matrix = load_matrix(self.template, self.project.channels_dir)
        sources = tuple(
            LockedSource(
                s,
                self.tool.rev("releases/v1") if s.name == "tool" else self.pinned.rev(),
                digest=s.name,
            )
            for s in matrix.sources
        )
        inputs = input_digests(
            self.template,
            self.project.channel_files(matrix),
            sources,
            {p: virtual_packages(matrix, p) for p in matrix.platforms},
        )
        lock = make_lock(
            platforms=matrix.platforms,
            input_hash=input_hash(inputs),
            pip=(
                pip_entry("mbridge", "0.13.0", "linux-64"),
                pip_entry("transformers", "4.57.6", "linux-64"),
            ),
            sources=sources,
            pending=(Pending("CANN", "no public version yet"),),
            channels=matrix.channels,
            indexes=matrix.indexes,
            cann=matrix.cann,
            inputs=inputs,
        )
        (self.root / "locks").mkdir(exist_ok=True)
        write_whole_lock(self.project, lock)
        return lock

    def status(self, *args: str) -> Result:
        return CliRunner().invoke(
            cli, ["status", "--root", str(self.root), *args], catch_exceptions=False
        )


@pytest.fixture
def index(tmp_path: Path) -> Iterator[str]:
    """A PEP 503 index: mbridge 0.13.0 and 0.15.1 (and a 0.16.0rc1 pre-release that must not
    count)."""
    page = tmp_path / "index" / "simple" / "mbridge"
    page.mkdir(parents=True)
    files = [
        "mbridge-0.13.0-py3-none-any.whl",
        "mbridge-0.15.1.tar.gz",
        "mbridge-0.16.0rc1-py3-none-any.whl",
    ]
    links = "".join(f'<a href="../../files/{f}#sha256={"0" * 64}">{f}</a><br>\n' for f in files)
    (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    with serve_directory(tmp_path / "index") as url:
        yield url


@pytest.fixture
def demo(tmp_path: Path, index: str) -> Demo:
    return Demo(tmp_path / "project", index)


def _valid_status_json(*reports: dict[str, object]) -> None:
    """The reports match the documented schema (docs/status.schema.json)."""
    validate(list(reports), json.loads(STATUS_SCHEMA.read_text()))


def test_no_lock_yet(demo: Demo) -> None:
    result = demo.status()
    assert result.exit_code == 1
    assert result.stdout == "demo: no lock yet\n  run `envgen lock demo` to write it\n"
    (report,) = json.loads(demo.status("--json").stdout)["results"]
    assert (report["state"], report["fresh"], report["reasons"]) == (
        "no-lock",
        False,
        ["no lock yet"],
    )
    _valid_status_json(report)


def test_no_lock_for_any_env_is_said_once_with_the_command(demo: Demo) -> None:
    """Before: one bare "no lock yet" line per env and no next step."""
    other = demo.template.read_text().replace('name = "demo"', 'name = "other"')
    (demo.root / "env-templates" / "other.toml").write_text(other)
    result = demo.status()
    assert result.exit_code == 1
    assert result.stdout == (
        "no lock yet for any of the 2 envs: demo, other\n"
        "  run `envgen lock` to write them all (it asks every host the matrices name), "
        "or `envgen lock ENV` for one\n"
    )
    assert [r["state"] for r in json.loads(demo.status("--json").stdout)["results"]] == [
        "no-lock",
        "no-lock",
    ]
    demo.lock()
    result = demo.status("demo", "other")
    assert "demo: fresh\n" in result.stdout
    assert "other: no lock yet\n  run `envgen lock other` to write it\n" in result.stdout


def test_fresh_lock_without_drift(demo: Demo) -> None:
    lock = demo.lock()
    result = demo.status()
    assert result.exit_code == 0, result.output
    tool = (
        lock.sources[0].commit[:12]
        if lock.sources[0].source.name == "tool"
        else lock.sources[1].commit[:12]
    )
    assert result.stdout == (
        "demo: fresh\n"
        "  upstream:\n"
        f"    tool releases/v1: up to date at {tool}\n"
        "  still pending:\n"
        "    CANN: no public version yet\n"
    )


def test_stale_lock_names_the_edited_matrix(demo: Demo) -> None:
    demo.lock()
    demo.template.write_text(
        demo.template.read_text().replace('version = "==4.57.6"', 'version = "==4.57.7"')
    )
    result = demo.status()
    assert result.exit_code == 1
    assert "demo: stale\n  matrix env-templates/demo.toml changed\n" in result.stdout


def test_stale_lock_names_the_edited_channel(demo: Demo) -> None:
    demo.lock()
    (demo.root / "channels" / "conda-forge.toml").write_text(
        'kind = "conda"\nurl = "https://mirror.example.org/cf"\n'
    )
    report = json.loads(demo.status("--json").stdout)["results"][0]
    assert report["fresh"] is False and report["reasons"] == ["channel conda-forge changed"]
    assert (report["state"], report["drifted"]) == ("stale", [])
    _valid_status_json(report)


def test_drifted_branch(demo: Demo) -> None:
    lock = demo.lock()
    locked = next(s.commit for s in lock.sources if s.source.name == "tool")
    moved = demo.tool.commit({"tool.py": "v = 2\n"}, "fix", branch="releases/v1")
    result = demo.status()
    assert result.exit_code == 1
    # Before: "demo: fresh (1 source drifted)", which read as a contradiction.
    assert (
        "demo: fresh against its inputs, but 1 source moved upstream since the lock\n"
        in result.stdout
    )
    assert "  `envgen lock demo --update tool` takes the new commits\n" in result.stdout
    assert (
        f"    tool releases/v1: locked {locked[:12]}, upstream now {moved[:12]}\n" in result.stdout
    )
    drift = json.loads(demo.status("--json").stdout)["results"][0]["drift"]
    assert drift == [
        {
            "name": "tool",
            "url": demo.tool.url,
            "ref": "releases/v1",
            "locked": locked,
            "upstream": moved,
            "drifted": True,
            "compare_url": None,  # a file:// remote has no compare page
            "error": None,
        }
    ]


def test_mirror_config_is_honoured(
    demo: Demo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock names a canonical URL that does not exist; git's insteadOf sends ls-remote to the
    mirror."""
    lock = demo.lock()
    canonical = "https://github.com/example/tool.git"
    sources = tuple(
        msgspec.structs.replace(s, source=msgspec.structs.replace(s.source, url=canonical))
        if s.source.name == "tool"
        else s
        for s in lock.sources
    )
    write_whole_lock(demo.project, msgspec.structs.replace(lock, sources=sources))
    config = tmp_path / "gitconfig"
    config.write_text(f'[url "{demo.tool.url}"]\n\tinsteadOf = {canonical}\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    moved = demo.tool.commit({"tool.py": "v = 3\n"}, "fix", branch="releases/v1")
    (report,) = json.loads(demo.status("--json").stdout)["results"]
    (drift,) = report["drift"]
    assert (drift["url"], drift["upstream"], drift["error"]) == (canonical, moved, None)
    locked = next(s.commit for s in lock.sources if s.source.name == "tool")
    assert drift["compare_url"] == f"https://github.com/example/tool/compare/{locked}...{moved}"
    assert (report["state"], report["drifted"], report["unreachable"]) == ("fresh", ["tool"], [])
    _valid_status_json(report)


def test_unreachable_remote_is_reported_not_raised(demo: Demo, tmp_path: Path) -> None:
    lock = demo.lock()
    gone = (tmp_path / "gone").as_uri()
    sources = tuple(
        msgspec.structs.replace(s, source=msgspec.structs.replace(s.source, url=gone))
        if s.source.name == "tool"
        else s
        for s in lock.sources
    )
    write_whole_lock(demo.project, msgspec.structs.replace(lock, sources=sources))
    result = demo.status()
    assert result.exit_code == 1
    assert "demo: fresh against its inputs, but 1 remote unreachable\n" in result.stdout
    assert "--update" not in result.stdout
    (report,) = json.loads(demo.status("--json").stdout)["results"]
    assert (report["drifted"], report["unreachable"], report["drift"][0]["compare_url"]) == (
        [],
        ["tool"],
        None,
    )
    _valid_status_json(report)
    # Before: the line ended in a dangling colon; now git's reason follows it.
    line = (
        "    tool releases/v1: upstream unreachable (source tool: cannot reach git remote "
        f"{gone}: fatal: "
    )
    assert line in result.stdout and ":)" not in result.stdout


def test_outdated_unpinned_packages(demo: Demo) -> None:
    demo.lock()
    result = demo.status("--outdated")
    assert result.exit_code == 0, result.output
    assert (
        "  unpinned packages:\n    mbridge: locked 0.13.0; newer 0.15.1 on pypi\n" in result.stdout
    )
    assert "--upgrade-package mbridge` takes them" in result.stdout
    (report,) = json.loads(demo.status("--outdated", "--json").stdout)["results"]
    _valid_status_json(report)
    (item,) = report["outdated"]
    assert item == {
        "name": "mbridge",
        "locked": ["0.13.0"],
        "newest": "0.15.1",
        "index": "pypi",
        "error": None,
    }


class _Pep691(BaseHTTPRequestHandler):
    """A PEP 691 JSON simple page for mbridge (one yanked file that must not count), a failing
    server's answer for `failing`; 404 for anything else."""

    def do_GET(self) -> None:
        if self.path == "/simple/broken/":
            # A proxy's error page under a JSON content type.
            self._send(b"<html>502 Bad Gateway</html>")
            return
        if self.path == "/simple/failing/":
            self.send_error(503)
            return
        if self.path != "/simple/mbridge/":
            self.send_error(404)
            return
        files = [
            {"filename": "mbridge-0.15.1-py3-none-any.whl", "url": "x", "hashes": {}},
            {
                "filename": "mbridge-0.20.0-py3-none-any.whl",
                "url": "y",
                "hashes": {},
                "yanked": "broken",
            },
        ]
        self._send(
            json.dumps({"meta": {"api-version": "1.0"}, "name": "mbridge", "files": files}).encode()
        )

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_pep691_json_pages_are_read() -> None:
    with serving(_Pep691) as url:
        base = IndexAccess("json", f"{url}/simple", explicit=False)
        with IndexClient([base], Limits()) as client:
            assert fetch_filenames(client, base, "MBridge") == ["mbridge-0.15.1-py3-none-any.whl"]
            assert fetch_filenames(client, base, "absent") is None
            with pytest.raises(
                ResolutionError,
                match=r"/simple/broken/ answered with a page that is not PEP 691 JSON",
            ):
                fetch_filenames(client, base, "broken")
            # The host answered, not with a page: a failed resolution (exit 3), no unreachable host.
            with pytest.raises(
                ResolutionError, match=r"/simple/failing/ answered HTTP 503$"
            ) as answered:
                fetch_filenames(client, base, "failing")
            assert not isinstance(answered.value, NetworkError) and answered.value.exit_code == 3


def test_index_urls_expand_variables_and_name_missing_ones() -> None:
    assert (
        expand_url(
            "https://${USER_}:${TOKEN_}@idx/simple", "index private", {"USER_": "u", "TOKEN_": "t"}
        )
        == "https://u:t@idx/simple"
    )
    with pytest.raises(
        InputError, match=r"index private: its URL .* refers to \$\{TOKEN_\}, which is not set"
    ):
        expand_url("https://${TOKEN_}@idx/simple", "index private", {})


def test_stale_reasons_name_each_component() -> None:
    recorded = [("matrix", "1"), ("channel:pypi", "2"), ("channel:old", "3"), ("schema", "1")]
    current = [("matrix", "1"), ("channel:pypi", "9"), ("channel:new", "4"), ("schema", "2")]
    assert stale_reasons(recorded, current, "env-templates/a5.toml") == (
        "channel new added",
        "channel old removed",
        "channel pypi changed",
        "lock schema (envgen was upgraded) changed",
    )
    assert stale_reasons(recorded, recorded, "env-templates/a5.toml") == ()


def test_newest_version_prefers_final_releases() -> None:
    names = [
        "x-1.0.tar.gz",
        "x-1.2-py3-none-any.whl",
        "x-2.0rc1-py3-none-any.whl",
        "x-junk.zip",
        "README",
    ]
    assert newest_version(names) == "1.2"
    assert newest_version(names, allow_prereleases=True) == "2.0rc1"
    assert newest_version(["x-2.0rc1.tar.gz"]) == "2.0rc1"
    assert newest_version([]) is None


@pytest.mark.network
def test_pypi_answers_with_versions() -> None:
    pypi = IndexAccess("pypi", "https://pypi.org/simple", False)
    with IndexClient([pypi], Limits()) as client:
        files = fetch_filenames(client, pypi, "packaging")
    assert files and newest_version(files) is not None
