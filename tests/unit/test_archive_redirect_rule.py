"""Which redirects of an archive's URL are followed (resolve/archives/redirects.py): its own scheme,
host and port, or a host name the archive lists; a loop and a Location that is no http(s) URL end
in one error, never a traceback."""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from envgen import network
from envgen.errors import ResolutionError
from envgen.resolve.archives.redirects import MAX_REDIRECTS, allowed, followed
from envgen.resolve.pypi.index_client import IndexClient

from tests.support.servers import serving

ARCHIVE = "https://github.com/org/kernels/releases/download/1/k.zip"


@pytest.mark.parametrize(
    ("target", "hosts", "followed_there"),
    [
        ("https://github.com/org/other.zip", (), True),
        ("https://GitHub.com:443/org/other.zip", (), True),  # the scheme's own port, any case
        ("http://github.com/org/k.zip", (), False),  # another scheme
        ("https://github.com:8443/org/k.zip", (), False),  # another port
        ("https://objects.githubusercontent.com/x", (), False),
        ("https://objects.githubusercontent.com/x", ("objects.githubusercontent.com",), True),
        ("https://objects.githubusercontent.com:8443/x", ("Objects.GitHubUserContent.com",), True),
        ("https://evil.githubusercontent.com/x", ("objects.githubusercontent.com",), False),
        (
            "https://objects.githubusercontent.com.evil.example/x",
            ("objects.githubusercontent.com",),
            False,
        ),
    ],
)
def test_the_rule(target: str, hosts: tuple[str, ...], followed_there: bool) -> None:
    assert allowed(ARCHIVE, target, hosts) is followed_there


class _Answer(http.server.BaseHTTPRequestHandler):
    location = ""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(302)
        self.send_header("Location", self.location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def answering(location: str) -> Iterator[str]:
    with serving(type("Handler", (_Answer,), {"location": location})) as url:
        yield f"{url}/k.zip"


@pytest.mark.parametrize(
    ("location", "said"),
    [
        ("/k.zip", f"redirects more than {MAX_REDIRECTS} times"),
        ("file:///etc/passwd", "redirects to file:///etc/passwd, no https:// or http:// URL"),
        ("http://[::1/x", "redirects to a Location that is no URL (Invalid IPv6 URL)"),
    ],
)
def test_a_loop_or_a_location_that_is_no_url_ends_in_one_error(location: str, said: str) -> None:
    with (
        answering(location) as url,
        IndexClient((), network.limits({})) as client,
        pytest.raises(ResolutionError) as raised,
        followed(client, url, name="kernels", hosts=()),
    ):
        pass
    assert raised.value.message == f"archive kernels: {url} {said}"
