"""A release archive's URL is followed through a redirect to its own scheme, host and port only, or
to a host name its `redirect-hosts` lists: through `envgen lock`, `envgen install` and the recipe's
own fetch, against a redirecting server on 127.0.0.1 and the archives served on 127.0.0.2 (another
host) or on another port of 127.0.0.1 (another host too: the port counts)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import re
import tomllib
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from envgen.example.http import serve_directory
from envgen.example.project import RELEASES, Example
from envgen.example.wheels import FixtureDist, build_wheel
from envgen.model import ArchiveMember, LockedArchive
from envgen.platforms import host_platform

from tests.integration.test_archive_limits import nothing_cached
from tests.integration.test_recipe_run import in_env, run_recipe
from tests.support.builders import make_lock
from tests.support.example import run_envgen, with_example_metadata
from tests.support.servers import serving
from tests.support.venvs import fresh_venv

ENV = "demo"
ARCHIVE = "demo-kernels"


class _Redirecting(http.server.SimpleHTTPRequestHandler):
    """`/same/PATH` redirects to `/PATH` on this server; any other path to the same path under
    `to["base"]`, or is served from the directory when `to` names no base."""

    to: dict[str, str] = {}

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if not self.path.startswith("/same/") and "base" not in self.to:
            super().do_GET()
            return
        self.send_response(302)
        same = self.path.startswith("/same/")
        location = self.path.removeprefix("/same") if same else self.to["base"] + self.path
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def redirector(root: Path, to: dict[str, str]) -> Iterator[str]:
    """The base URL of a server on 127.0.0.1 redirecting (or serving `root`) as `_Redirecting`
    says."""
    handler = type("Handler", (_Redirecting,), {"to": to})
    with serving(functools.partial(handler, directory=str(root))) as url:
        yield url


@pytest.fixture
def cache(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The test's own cache (what it holds is the subject), holding what the example's build
    backends said, as after a first lock."""
    path = with_example_metadata(tmp_path_factory, tmp_path / "cache")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(path))
    return path


@pytest.fixture
def redirected(example: Example) -> Iterator[tuple[dict[str, str], str, str]]:
    """The example's archive URLs pointed at the redirector: a hop on its own host first, then one
    to the releases served on 127.0.0.2. Yields the redirector's target (to change), that base and
    the redirector's."""
    served = example.root.parent / "pypi"
    to: dict[str, str] = {}
    with serve_directory(served, host="127.0.0.2") as other, redirector(served, to) as base:
        to["base"] = other
        text = example.matrix.read_text()
        example.matrix.write_text(text.replace(example.pypi_url, f"{base}/same"))
        assert f"{base}/same/{RELEASES}/" in example.matrix.read_text()
        yield to, other, base


def allow(example: Example, *hosts: str) -> None:
    listed = ", ".join(f'"{h}"' for h in hosts)
    text = example.matrix.read_text()
    head = f"[archives.{ARCHIVE}]\n"
    assert head in text
    example.matrix.write_text(text.replace(head, f"{head}redirect-hosts = [{listed}]\n", 1))


def test_lock_refuses_a_redirect_to_another_host_with_exit_3_and_nothing_cached(
    example: Example, cache: Path, redirected: tuple[dict[str, str], str, str]
) -> None:
    """The same-host hop is followed, the one to 127.0.0.2 refused, naming what allows it."""
    _, other, base = redirected
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 3, err
    found = re.search(
        rf"error: archive {ARCHIVE}: ({re.escape(base)}/same/{RELEASES}/\S+) redirects to the host "
        rf"{re.escape(other[7:])} \({re.escape(other)}/{RELEASES}/\S+\); an archive's redirects "
        r"are followed to its own scheme, host and port only, unless "
        rf"archives\.{ARCHIVE}\.redirect-hosts names the other host",
        err,
    )
    assert found, err
    assert f'add "127.0.0.2" to archives.{ARCHIVE}.redirect-hosts in the matrix' in err, err
    assert "Traceback" not in err
    assert nothing_cached(cache)
    assert not (example.root / "locks" / f"{ENV}.yml").exists()


def test_a_listed_host_is_followed_and_locked_and_every_download_after_refuses_one_not_listed(
    example: Example,
    cache: Path,
    redirected: tuple[dict[str, str], str, str],
    tmp_path: Path,
) -> None:
    """`redirect-hosts` travels into the lock (lock --check agrees); install, bundle and check
    follow the lock's list: the releases moved to another port of 127.0.0.1, a host the lock does
    not list."""
    to, _, base = redirected
    allow(example, "127.0.0.2")
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 0, err
    sources = tomllib.loads((example.root / "locks" / f"{ENV}.sources.toml").read_text())
    assert [a["redirect-hosts"] for a in sources["archives"]] == [["127.0.0.2"]] * 2
    assert run_envgen(example, "lock", ENV, "--check")[0] == 0

    served = example.root.parent / "pypi"
    with serve_directory(served) as moved:
        to["base"] = moved
        for path in (cache / "archives").rglob("*"):
            if path.is_file():
                path.unlink()
        prefix, bundle = tmp_path / "prefix", tmp_path / "demo.tar"
        install = run_envgen(example, "install", ENV, "--venv", "--prefix", str(prefix))
        bundled = run_envgen(example, "bundle", ENV, "--platform", "linux-64", "-o", str(bundle))
        checked = run_envgen(example, "check", ENV, "--venv", "--no-solve")
    for code, _, err in (install, bundled):
        assert code == 3, err
        assert f"error: archive {ARCHIVE}: {base}/same/{RELEASES}/" in err, err
        assert f"redirects to the host {moved[7:]} ({moved}/{RELEASES}/" in err, err
        assert f'add "127.0.0.1" to archives.{ARCHIVE}.redirect-hosts' in err, err
        assert "Traceback" not in err
    assert not prefix.exists() and not bundle.exists()
    # check's install step fails as a step (exit 4), naming the same.
    assert checked[0] == 4, checked[1]
    assert f"failed  env: install (venv): archive {ARCHIVE}: {base}/same/" in checked[1]
    assert f"redirects to the host {moved[7:]} (" in checked[1]


def test_a_redirect_on_its_own_host_is_followed_without_the_key(
    example: Example, cache: Path, redirected: tuple[dict[str, str], str, str]
) -> None:
    """No redirect-hosts (as in every lock before the key): a redirect to the URL's own scheme,
    host and port is followed, and the lock records no key."""
    to, _, _ = redirected
    del to["base"]  # the redirector serves the releases itself after its own hop
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 0, err
    assert "redirect-hosts" not in (example.root / "locks" / f"{ENV}.sources.toml").read_text()


def _release(where: Path) -> tuple[Path, ArchiveMember]:
    """A zip holding one pure wheel, and that wheel as a lock records it."""
    wheel = build_wheel(FixtureDist("redirected-demo", "1.0.0"), "py3-none-any", where / "built")
    path = where / "served" / "release.zip"
    path.parent.mkdir(parents=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.write(wheel, wheel.name)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return path, ArchiveMember(wheel.name, "redirected-demo", "1.0.0", sha)


@pytest.mark.parametrize("listed", [False, True])
def test_the_recipe_s_own_fetch_follows_a_redirect_to_a_listed_host_only(
    tmp_path: Path, pip_site_packages: Path, listed: bool
) -> None:
    """The recipe run alone (no --archives): its python fetch holds to the lock's list too."""
    path, member = _release(tmp_path)
    venv = fresh_venv(tmp_path / "env", pip_site_packages)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    hosts = ("127.0.0.2",) if listed else ()
    with (
        serve_directory(path.parent, host="127.0.0.2") as other,
        redirector(path.parent, {"base": other}) as base,
    ):
        url = f"{base}/{path.name}"
        locked = LockedArchive(ARCHIVE, host_platform(), url, sha, (member,), hosts)
        done = run_recipe(make_lock(platforms=(host_platform(),), archives=(locked,)), venv)
    version = "import importlib.metadata as m; print(m.version('redirected-demo'))"
    if listed:
        assert done.returncode == 0, done.stderr
        assert in_env(venv, version).stdout.strip() == "1.0.0"
        return
    assert done.returncode != 0
    assert f"{url} redirects to the host {other[7:]} ({other}/{path.name})" in done.stderr
    assert f'add "127.0.0.2" to archives.{ARCHIVE}.redirect-hosts' in done.stderr
    assert "Traceback" not in done.stderr
    assert in_env(venv, version).returncode != 0
