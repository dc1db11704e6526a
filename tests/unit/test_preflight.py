"""The preflight's plan: which hosts a re-lock asks (each URL once, a kept and cached commit asks
nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from envgen.errors import NetworkError, Unreached
from envgen.model import Channel, Index, Source
from envgen.resolve.preflight import host_of, preflight, targets, unreachable_hosts
from envgen.resolve.request import Relock

from tests.support.builders import at, locked_source, make_lock, make_matrix
from tests.support.closed import closed_port
from tests.support.preflight import verdict
from tests.support.servers import serving

SHA = "a" * 40


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://github.com/vllm-project/vllm.git", "github.com"),
        ("http://127.0.0.1:8080/simple", "127.0.0.1:8080"),
        ("ssh://git@gitcode.com:2222/Ascend/MindSpeed.git", "gitcode.com:2222"),
        ("git@github.com:NVIDIA/Megatron-LM.git", "github.com"),
        ("https://user:secret@pypi.example.com/simple", "pypi.example.com"),
        ("file:///srv/git/verl.git", "local"),
        ("/srv/git/verl.git", "local"),
    ],
)
def test_host_of(url: str, host: str) -> None:
    assert host_of(url) == host


def test_targets_each_url_once_and_only_the_remotes_a_re_lock_asks(tmp_path: Path) -> None:
    pinned = Source("pinned", "https://github.com/o/pinned.git", SHA, "pinned")
    moving = Source("moving", "https://github.com/o/moving.git", "main", "moving")
    kept = Source("kept", "https://github.com/o/kept.git", "main", "kept")
    fields = {
        "channels": (Channel("forge", "https://conda.example.org/forge"),),
        "indexes": (Index("pypi", "https://pypi.org/simple"),),
        "sources": (pinned, moving, kept),
    }
    previous = make_lock(sources=(locked_source("kept", kept.url, "main", SHA),))
    relocks = [
        Relock(make_matrix("a3", **fields), previous),
        Relock(make_matrix("a2", **fields), previous),
    ]
    found = {(t.kind, t.url): t.needed_by for t in targets(relocks, at(tmp_path))}
    # The kept commit and the pinned one are not in the (empty) cache: their remotes are asked too.
    assert found == {
        ("git remote", pinned.url): ("a3 source pinned", "a2 source pinned"),
        ("git remote", moving.url): ("a3 source moving", "a2 source moving"),
        ("git remote", kept.url): ("a3 source kept", "a2 source kept"),
        ("conda channel", "https://conda.example.org/forge"): ("a3", "a2"),
        ("pip index", "https://pypi.org/simple"): ("a3", "a2"),
    }
    offline = targets(relocks[:1], at(tmp_path, offline=True))
    assert [t.kind for t in offline] == ["git remote"] * 3 + ["conda channel"]


class _Recording(BaseHTTPRequestHandler):
    """An index root: HEAD answered (unless `head` is None: 501, as a server without HEAD), GET a
    large page; every request's method recorded."""

    head: int | None = 200
    seen: list[str] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append("GET")
        self.send_response(200)
        self.send_header("Content-Length", str(1 << 20))
        self.end_headers()
        self.wfile.write(b" " * (1 << 20))

    def do_HEAD(self) -> None:
        self.seen.append("HEAD")
        if self.head is None:
            self.send_error(501)
            return
        self.send_response(self.head)
        self.send_header("Content-Length", "0")
        self.end_headers()


@contextmanager
def index_root(head: int | None) -> Iterator[tuple[str, list[str]]]:
    handler = type("Handler", (_Recording,), {"head": head, "seen": []})
    with serving(handler) as url:
        yield f"{url}/simple/", handler.seen


@pytest.mark.parametrize(
    ("head", "methods", "reason"),
    [
        (200, ["HEAD"], None),  # the page itself is never asked for
        (None, ["HEAD", "GET"], None),  # a server without HEAD: its GET answers, the body unread
        (401, ["HEAD"], "HTTP 401: the credentials were refused"),
        (503, ["HEAD"], "HTTP 503 from the server"),
    ],
)
def test_an_index_is_asked_with_head_and_a_get_only_when_head_is_not_taken(
    tmp_path: Path, head: int | None, methods: list[str], reason: str | None
) -> None:
    with index_root(head) as (url, seen):
        matrix = make_matrix("a5", indexes=(Index("pypi", url),))
        failed = unreachable_hosts([Relock(matrix)], at(tmp_path), timeout=10)
    assert seen == methods
    assert [(why.split(" (")[0] if why else why) for _, _, why in failed] == (
        [reason] if reason else []
    )


def test_the_error_names_every_target_of_a_host_and_the_hint_opens_with_the_channels(
    tmp_path: Path,
) -> None:
    """One channel of two answers: the hint says which file to point elsewhere, channels first."""
    down = f"http://127.0.0.1:{closed_port()}"
    with index_root(200) as (up, _):
        forge, extra = Channel("forge", up.removesuffix("/simple/")), Channel("extra", f"{down}/x")
        indexes = (Index("mirror", f"{down}/simple"), Index("pypi", up))
        relocks = [Relock(make_matrix("a5", channels=(forge, extra), indexes=indexes))]
        with pytest.raises(NetworkError) as failed:
            preflight(relocks, at(tmp_path), timeout=5)
    host = down.removeprefix("http://")
    first, *below = failed.value.message.splitlines()[1:]
    reason = first.removeprefix(f"  {host}: ")
    assert reason.endswith("Connection refused"), first
    assert below == [f"    conda channel {down}/x (a5)", f"    pip index {down}/simple (a5)"]
    assert failed.value.hosts == (Unreached(host, reason),)
    assert failed.value.listed and failed.value.failure == failed.value.message.splitlines()[0]
    assert failed.value.hint == (
        "conda channels: point `url` in channels/extra.toml at a mirror this host reaches; "
        "pip indexes: point `url` in channels/mirror.toml at a mirror this host reaches; "
        "`envgen lock --no-preflight` skips this check"
    )


def test_a_host_is_one_short_line_with_at_most_three_of_its_targets_below_it(
    tmp_path: Path,
) -> None:
    """Before: one line of about 1,000 characters for github.com, every remote of every env and
    git's "unable to access 'URL'" in it."""
    down = f"http://127.0.0.1:{closed_port()}"
    sources = tuple(
        Source(f"repository-{n}", f"{down}/org/repository-{n}.git", "main", f"dist{n}")
        for n in range(5)
    )
    envs = ("a3-sglang-fsdp", "a3-sglang", "a2-sglang", "a5-950pr")
    relocks = [Relock(make_matrix(env, sources=sources)) for env in envs]
    with pytest.raises(NetworkError) as failed:
        preflight(relocks, at(tmp_path), timeout=10)
    lines = failed.value.message.splitlines()
    host = down.removeprefix("http://")
    assert lines[1].startswith(f"  {host}: ") and "unable to access" not in lines[1], lines[1]
    assert "Couldn't connect to server" in lines[1] or "Connection refused" in lines[1]
    assert len(lines[1]) <= 100 and all(len(line) <= 100 for line in lines), lines
    assert all(line.startswith("    ") for line in lines[2:]), lines
    ((reason, below),) = verdict("\n".join(lines)).values()
    needed = [", ".join(f"{env} source repository-{n}" for env in envs) for n in range(3)]
    assert below == [
        *(f"git remote {down}/org/repository-{n}.git ({needed[n]})" for n in range(3)),
        "and 2 more",
    ]
    assert any(line.startswith("      ") for line in lines), "the long lines wrap"
    assert failed.value.hosts == (Unreached(host, reason),)
