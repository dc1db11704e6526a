"""`envgen audit` on the served example, locked once for the module, against a stand-in of the PyPI
JSON API served on 127.0.0.1 (files written for the lock's actual packages): a vulnerable release
with its path and smallest fixed version, a fixed one, an ignored id with its reason, a stall, a
500, an answer that is not the API's, a cached answer used when the server is gone, the JSON and
the markdown; and one test against real PyPI."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from envgen.example.http import serve_directory
from envgen.example.project import Example
from envgen.project import Project

from tests.support.advisories import releases, stand_in
from tests.support.builders import make_lock, pip_entry, write_intact
from tests.support.closed import closed_url
from tests.support.example import run_envgen
from tests.support.schemas import validate
from tests.support.servers import serving as loopback
from tests.support.stalling import stalling_server

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "cli.schema.json").read_text())
ENV = "demo"
P = "linux-64"
VULNERABLE = "demo-numpy"
ADVISORY = {
    "id": "GHSA-demo-numpy-0001",
    "aliases": ["CVE-2099-0001"],
    # 1.26.3 is below the locked 1.26.4 and 2.0.1 above 1.26.5: the smallest fix above is 1.26.5
    "fixed_in": ["2.0.1", "1.26.3", "1.26.5"],
    "summary": "a crafted array overflows a buffer",
    "link": "https://osv.dev/vulnerability/GHSA-demo-numpy-0001",
    "withdrawn": None,
}


@pytest.fixture(scope="module")
def locked(read_only_locked: Example) -> Example:
    """The worker's served example, locked (tests/integration/conftest.py). The tests only read its
    locks/, and nothing upstream or served."""
    return read_only_locked


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's own cache and limits short enough for a stall (no retry of what failed)."""
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ENVGEN_READ_TIMEOUT", "0.5")
    monkeypatch.setenv("ENVGEN_CONNECT_TIMEOUT", "2")
    monkeypatch.setenv("ENVGEN_RETRIES", "0")
    return tmp_path / "cache"


@contextmanager
def serving(url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("ENVGEN_AUDIT_URL", url)
    yield url


def audit(example: Example, *args: str) -> tuple[int, str, str]:
    return run_envgen(example, "audit", ENV, *args)


def test_a_vulnerable_release_is_exit_1_with_its_path_and_smallest_fix(
    locked: Example, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = stand_in(tmp_path / "api", locked, {VULNERABLE: [ADVISORY]})
    with serve_directory(root) as url, serving(url, monkeypatch):
        code, out, err = audit(locked, "--platform", P)
    assert code == 1, err
    lines = out.splitlines()
    assert lines[0] == (
        "demo-numpy 1.26.4: GHSA-demo-numpy-0001 (CVE-2099-0001), fixed in 1.26.5 [linux-64]"
    )
    assert lines[1] == "  a crafted array overflows a buffer"
    assert lines[2] == (
        "  path: matrix (env-templates/demo.toml: pip.packages.demo-torch) -> demo-torch"
        " -> demo-numpy" + lines[2].split(" -> demo-numpy", 1)[1]
    )
    assert lines[-1].startswith("1 known vulnerability, 0 ignored; pinned packages asked about: ")
    # the archive's wheel is not on the stand-in: said, not counted
    assert "(not audited): demo-ep==1.0.0" in err
    # every release was kept in the cache, and each platform's finding is one line naming both
    assert len(list((cache / "advisories").iterdir())) >= len(releases(locked))
    code, out, _ = audit(locked)
    platforms = out.splitlines()[0].rsplit(" [", 1)[1].removesuffix("]")
    assert code == 1 and sorted(platforms.split(", ")) == ["linux-64", "linux-aarch64"]


def test_a_fixed_release_is_exit_0(
    locked: Example, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The advisory is of the release before the locked one; the locked one has only a withdrawn
    advisory."""
    withdrawn = ADVISORY | {"id": "GHSA-demo-numpy-0002", "withdrawn": "2099-01-01T00:00:00Z"}
    root = stand_in(tmp_path / "api", locked, {VULNERABLE: [withdrawn]})
    older = root / "pypi" / VULNERABLE / "1.26.3" / "json"
    older.parent.mkdir(parents=True)
    older.write_text(json.dumps({"vulnerabilities": [ADVISORY]}))
    with serve_directory(root) as url, serving(url, monkeypatch):
        code, out, err = audit(locked, "--platform", P)
    assert code == 0, err
    (line,) = out.splitlines()
    assert line.startswith("no known vulnerability, 0 ignored; pinned packages asked about: ")
    assert "GHSA-demo-numpy" not in out + err


def test_an_ignored_id_is_listed_with_its_reason_and_not_counted(
    locked: Example, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = stand_in(tmp_path / "api", locked, {VULNERABLE: [ADVISORY]})
    matrix = locked.matrix.read_text()
    try:
        locked.matrix.write_text(
            matrix + '\n[audit.ignore]\n"CVE-2099-0001" = "only reachable through pickles"\n'
            '"GHSA-none-none-none" = "an old decision"\n'
        )
        with serve_directory(root) as url, serving(url, monkeypatch):
            code, out, err = audit(locked, "--platform", P)
            assert code == 0, err
            assert (
                "ignored: GHSA-demo-numpy-0001 (CVE-2099-0001) in demo-numpy 1.26.4 "
                "(audit.ignore.CVE-2099-0001: only reachable through pickles)"
            ) in out.splitlines()
            assert out.splitlines()[-1].startswith("no known vulnerability, 1 ignored;")
            assert "audit.ignore.GHSA-none-none-none matches no finding" in err
            code, out, _ = audit(locked, "--platform", P, "--json")
            (result,) = json.loads(out)["results"]
            assert result["findings"] == []
            assert result["ignored"][0]["reason"] == "only reachable through pickles"
            # an ignore without a reason is bad input naming the file and the key
            locked.matrix.write_text(matrix + '\n[audit.ignore]\n"CVE-2099-0001" = " "\n')
            code, out, err = audit(locked, "--platform", P)
            assert code == 2 and out == ""
            assert "env-templates/demo.toml" in err and "audit.ignore.CVE-2099-0001" in err
            assert 'say why the advisory is ignored: ID = "reason"' in err
    finally:
        locked.matrix.write_text(matrix)


def test_a_stall_is_exit_3_naming_the_host(
    locked: Example, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with stalling_server("headers") as url, serving(url, monkeypatch):
        code, out, err = audit(locked, "--platform", P)
    assert code == 3 and out == ""
    host = url.removeprefix("http://")
    first = err.splitlines()[0]
    assert first.startswith(f"error: cannot ask http://{host}/pypi/") and first.endswith(
        ": no answer within 0.5 s"
    ), err
    assert "ENVGEN_READ_TIMEOUT" in err and "Traceback" not in err
    # the budget bounds the audit as a whole, a silent host too
    monkeypatch.setenv("ENVGEN_NETWORK_BUDGET", "0.000001")
    with stalling_server("silent") as url, serving(url, monkeypatch):
        code, _, err = audit(locked, "--platform", P)
    assert code == 3 and "Traceback" not in err
    assert url.removeprefix("http://") in err.splitlines()[0]


class _Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_error(500)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def failing_server() -> Iterator[str]:
    with loopback(_Failing) as url:
        yield url


def test_a_500_and_an_answer_not_the_apis_are_exit_3(
    locked: Example, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with failing_server() as url, serving(url, monkeypatch):
        code, out, err = audit(locked, "--platform", P)
    assert code == 3 and out == ""
    assert err.startswith(f"error: cannot ask {url}/pypi/") and ": it answered HTTP 500" in err
    root = stand_in(tmp_path / "api", locked, {})
    page = root / "pypi" / VULNERABLE / "1.26.4" / "json"
    page.write_text(json.dumps({"vulnerabilities": [{"id": "X-1", "fixed_in": "1.0"}]}))
    with serve_directory(root) as url, serving(url, monkeypatch):
        code, out, err = audit(locked, "--platform", P)
    assert code == 3, err
    assert f"{url}/pypi/demo-numpy/1.26.4/json: its answer is not PyPI's JSON API" in err
    assert "vulnerabilities[0].fixed_in is not a list of non-empty strings" in err
    # an answer not checked is not kept: asked again, it is the service's fault again
    assert audit(locked, "--platform", P)[0] == 3
    page.write_text("[" * 200_000)
    with serve_directory(root) as url, serving(url, monkeypatch):
        code, out, err = audit(locked, "--platform", P)
    assert code == 3 and "its answer is not PyPI's JSON API (nested too deep)" in err, err
    # a service that knows none of the lock's releases is not the API envgen was meant to ask
    (tmp_path / "empty").mkdir()
    with serve_directory(tmp_path / "empty") as url, serving(url, monkeypatch):
        code, out, err = audit(locked, "--platform", P)
    assert code == 3 and out == ""
    assert f"error: cannot ask {url}: it knows none of the " in err and "(HTTP 404 for each)" in err


def test_a_cached_answer_is_used_when_the_server_is_gone(
    locked: Example, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = stand_in(tmp_path / "api", locked, {VULNERABLE: [ADVISORY]})
    with serve_directory(root) as url, serving(url, monkeypatch):
        first = audit(locked, "--platform", P, "--json")
    assert first[0] == 1, first[2]
    shutil.rmtree(root)
    # the same URL, nothing listening there any more
    again = audit(locked, "--platform", P, "--json")
    assert again[:2] == first[:2]
    # answers older than a day are asked again
    kept = sorted((cache / "advisories").iterdir())
    for path in kept:
        os.utime(path, (path.stat().st_atime, path.stat().st_mtime - 2 * 24 * 3600))
    code, _, err = audit(locked, "--platform", P)
    assert code == 3 and f"error: cannot ask {url}/pypi/" in err
    for path in kept:
        os.utime(path)
    assert audit(locked, "--platform", P)[0] == 1
    # another service's answers are not taken for this one's
    with serving(closed_url(), monkeypatch):
        code, _, err = audit(locked, "--platform", P)
    assert code == 3 and "connection refused" in err.lower()
    monkeypatch.setenv("ENVGEN_AUDIT_URL", url)
    shutil.rmtree(cache / "advisories")
    code, _, err = audit(locked, "--platform", P)
    assert code == 3 and f"error: cannot ask {url}/pypi/" in err


def test_json_and_markdown(
    locked: Example, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = ADVISORY | {"summary": "a | b <script>\x1b[31m", "id": "GHSA-demo-numpy-0001"}
    root = stand_in(tmp_path / "api", locked, {VULNERABLE: [hostile]})
    with serve_directory(root) as url, serving(url, monkeypatch):
        code, out, err = audit(locked, "--json")
        assert code == 1, err
        document = json.loads(out)
        validate(document, SCHEMA)
        assert document["command"] == "audit" and not document["ok"]
        results = {r["platform"]: r for r in document["results"]}
        assert sorted(results) == ["linux-64", "linux-aarch64"]
        finding = results[P]["findings"][0]
        assert {k: finding[k] for k in ("name", "version", "id", "aliases", "fixed")} == {
            "name": "demo-numpy",
            "version": "1.26.4",
            "id": "GHSA-demo-numpy-0001",
            "aliases": ["CVE-2099-0001"],
            "fixed": "1.26.5",
        }
        assert finding["path"].endswith(" -> demo-numpy" + finding["path"].split("demo-numpy")[-1])
        assert "demo-ep==1.0.0" in results[P]["unknown"]
        code, out, err = audit(locked, "--markdown")
    assert code == 1, err
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert rows[0] == "| package | version | advisory | fixed in | platforms | brought in by |"
    assert rows[1].startswith(
        "| demo-numpy | 1.26.4 | [GHSA-demo-numpy-0001](https://osv.dev/vulnerability/"
        "GHSA-demo-numpy-0001) (CVE-2099-0001) | 1.26.5 | "
    )
    assert "| matrix (env-templates/demo.toml: pip.packages.demo-torch) -> " in rows[1]
    assert "\x1b" not in out and "<script>" not in out


@pytest.mark.network
def test_real_pypi_knows_an_advisory_of_requests_2_31_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hand-built minimal lock with requests 2.31.0, asked of pypi.org itself."""
    monkeypatch.delenv("ENVGEN_AUDIT_URL", raising=False)
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "project"
    data = Path(__file__).parents[1] / "data" / "matrices"
    shutil.copytree(data / "channels", root / "channels")
    (root / "env-templates").mkdir()
    shutil.copy(data / "env-templates" / "valid.toml", root / "env-templates" / "valid.toml")
    lock = make_lock(env="valid", pip=(pip_entry("requests", "2.31.0", "linux-64"),))
    write_intact(Project(root), lock)
    code, out, err = run_envgen_at(root, "audit", "valid", "--json")
    assert code == 1, err
    found = [f for r in json.loads(out)["results"] for f in r["findings"]]
    assert "GHSA-9wx4-h78v-vm56" in {f["id"] for f in found}
    advisory = next(f for f in found if f["id"] == "GHSA-9wx4-h78v-vm56")
    assert advisory["fixed"] == "2.32.0" and advisory["name"] == "requests"


def run_envgen_at(root: Path, *args: str) -> tuple[int, str, str]:
    from click.testing import CliRunner
    from envgen.cli import cli

    result = CliRunner().invoke(cli, [*args, "--root", str(root)], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr
