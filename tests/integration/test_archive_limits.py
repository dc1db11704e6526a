"""A release archive is downloaded within the network budget and the download limit, lands in the
cache only once hashed and found to be an archive, is hashed again when read from the cache, and
gives up no member past what it could hold: through `envgen lock` on the served example, its
archive URLs pointed at hostile servers on 127.0.0.1."""

from __future__ import annotations

import hashlib
import http.server
import os
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from envgen import network
from envgen.example.project import RELEASES, Example
from envgen.example.releases import MACHINES, archive_name, build_release, kernel_dists
from envgen.example.wheels import FixtureDist
from envgen.lockio.store import read_lock
from envgen.project import Project
from envgen.resolve.archives.fetch import archive_path
from envgen.resolve.archives.members import archive_wheels
from envgen.resolve.pypi.index_client import IndexClient

from tests.support.example import run_envgen, with_example_metadata
from tests.support.servers import serving

ENV = "demo"


class _Hostile(http.server.BaseHTTPRequestHandler):
    """Answers every GET as the server's `mode` says."""

    mode = ""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        with suppress(OSError):  # envgen hangs up on purpose
            self.send_response(200)
            if self.mode == "trickle":
                self.send_header("Content-Length", "100000")
                self.end_headers()
                for _ in range(100000):
                    self.wfile.write(b"P")
                    self.wfile.flush()
                    time.sleep(0.25)
            elif self.mode in ("huge", "endless"):
                if self.mode == "huge":
                    self.send_header("Content-Length", str(1 << 30))
                self.send_header("Connection", "close")
                self.end_headers()
                zeros = bytes(1 << 20)
                for _ in range(1 << 10):
                    self.wfile.write(zeros)
            else:  # junk: not an archive, under every limit
                body = os.urandom(300_000)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def hostile_server(mode: str) -> Iterator[str]:
    """The URL of a release archive served on 127.0.0.1 in `mode`."""
    with serving(type("Handler", (_Hostile,), {"mode": mode})) as url:
        yield f"{url}/release.zip"


def point_archives_at(example: Example, url: str) -> None:
    text = example.matrix.read_text()
    for machine in MACHINES.values():
        old = f"/{RELEASES}/{archive_name(machine)}"
        start = text.index('"', text.rindex("\n", 0, text.index(old))) + 1
        text = text[:start] + url + text[text.index('"', start) :]
    example.matrix.write_text(text)


def nothing_cached(cache: Path) -> bool:
    """No archive under its sha256, no part file of one left behind."""
    archives = cache / "archives"
    return not archives.exists() or not [p for p in archives.rglob("*") if p.is_file()]


@pytest.fixture
def cache(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The test's own cache (what it holds is the subject), holding what the example's build
    backends said, as after a first lock."""
    path = with_example_metadata(tmp_path_factory, tmp_path / "cache")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(path))
    return path


def test_a_trickling_archive_ends_at_the_budget_with_exit_3_and_nothing_cached(
    example: Example, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read is answered within the read timeout, the whole never: the budget ends it."""
    monkeypatch.setenv("ENVGEN_READ_TIMEOUT", "3")
    monkeypatch.setenv("ENVGEN_NETWORK_BUDGET", "4")
    with hostile_server("trickle") as url:
        point_archives_at(example, url)
        code, _, err = run_envgen(example, "lock", ENV)
    assert code == 3, err
    assert f"error: the archive {url} did not arrive within 4 s (" in err, err
    assert "raise ENVGEN_NETWORK_BUDGET (now 4 s)" in err
    assert nothing_cached(cache)
    assert not (example.root / "locks" / f"{ENV}.yml").exists()


@pytest.mark.parametrize(
    ("mode", "said"),
    [("huge", f"announces {1 << 30} bytes"), ("endless", "sent more than 1000000 bytes")],
)
def test_an_archive_past_the_download_limit_is_refused_with_exit_3_and_nothing_cached(
    example: Example, cache: Path, monkeypatch: pytest.MonkeyPatch, mode: str, said: str
) -> None:
    """1 GiB announced, or bytes without end and no length: refused at the limit, not read to the
    end."""
    monkeypatch.setenv("ENVGEN_DOWNLOAD_LIMIT", "1000000")
    with hostile_server(mode) as url:
        point_archives_at(example, url)
        code, _, err = run_envgen(example, "lock", ENV)
    assert code == 3, err
    limit = "more than the download limit of 1000000 bytes; nothing of it was kept"
    assert f"error: the archive {url} {said}, {limit}" in err, err
    assert "raise ENVGEN_DOWNLOAD_LIMIT" in err
    assert nothing_cached(cache)


def test_bytes_that_are_no_archive_are_refused_with_exit_4_and_never_cached(
    example: Example, cache: Path
) -> None:
    with hostile_server("junk") as url:
        point_archives_at(example, url)
        code, _, err = run_envgen(example, "lock", ENV)
    assert code == 4, err
    assert f"error: the archive {url} is neither a zip nor a tar archive" in err, err
    assert nothing_cached(cache)


def test_a_member_expanding_past_its_archive_is_refused_before_it_is_written_out(
    example: Example, cache: Path
) -> None:
    """A 16 MiB wheel of zeros deflated into a zip of a few KiB: a bomb, stopped at the ceiling."""
    for machine in MACHINES.values():
        served = example.root.parent / "pypi" / RELEASES / archive_name(machine)
        wheel = f"demo_kernel_npu-1.0.0-cp311-cp311-manylinux_2_28_{machine}.whl"
        with (
            zipfile.ZipFile(served, "w", zipfile.ZIP_DEFLATED) as bomb,
            bomb.open(wheel, "w") as member,
        ):
            for _ in range(16):
                member.write(bytes(1 << 20))
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 4, err
    assert "expands past" in err and "nothing of it was kept" in err, err
    held = [p for p in (cache / "archives").rglob("*") if p.is_file()]
    assert [p.parent.parent.name for p in held] == ["sha256"] and held[0].stat().st_size < 1 << 20


def test_a_poisoned_cache_entry_is_reported_and_fetched_again_by_lock_and_install(
    example: Example, cache: Path, tmp_path: Path
) -> None:
    """The cached zip replaced by one whose wheel is another: the re-lock and the install's fetch
    take the served bytes again, never the replaced ones (before: the lock recorded the replaced
    wheel's sha256 under the archive's own, and install installed it)."""
    assert run_envgen(example, "lock", ENV)[0] == 0
    written = (example.root / "locks" / f"{ENV}.yml").read_bytes()
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    other = tmp_path / "other"
    for locked in lock.archives:
        machine = MACHINES[locked.platform]
        kernel, ep = kernel_dists(machine)
        dists = (kernel, FixtureDist(ep.name, "6.6.6", tags=ep.tags, files=ep.files))
        poison = build_release(other / machine, archive_name(machine), dists)
        archive_path(cache, locked.sha256).write_bytes(poison.read_bytes())

    code, _, err = run_envgen(example, "lock", ENV, "--force")
    assert code == 0, err
    assert err.count("envgen's cached copy of the archive") == len(lock.archives), err
    assert "removed, fetching it again" in err
    assert (example.root / "locks" / f"{ENV}.yml").read_bytes() == written

    (locked, *_) = lock.archives
    cached = archive_path(cache, locked.sha256)
    cached.write_bytes(poison.read_bytes())
    with IndexClient((), network.limits()) as client:
        wheels = archive_wheels(client, locked, cache=cache)
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == locked.sha256
    assert {hashlib.sha256(p.read_bytes()).hexdigest() for p in wheels.values()} == {
        m.sha256 for m in locked.members
    }
