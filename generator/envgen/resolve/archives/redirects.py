"""Which redirects of a release archive's URL are followed: one to the URL's own host (its scheme,
host name and port) always, one to another host only when the matrix names that host name in the
archive's `redirect-hosts`. A redirect elsewhere is refused (ResolutionError, exit 3) before that
host is asked anything."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import urljoin, urlsplit

import requests

from envgen.errors import ResolutionError
from envgen.redact import redact_url
from envgen.resolve.pypi.index_client import IndexClient
from envgen.urls import url_host, url_host_name

# More hops than this is a loop (uv's HTTP client, reqwest, stops at 10 too).
MAX_REDIRECTS = 10
# The port a URL without one is on.
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> tuple[str, str, int | None]:
    """The scheme, host name and port a URL is on (its scheme's port when it names none; None for a
    port that is no number): what `own host` compares."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        port = None
    return scheme, url_host_name(url), port


def allowed(url: str, target: str, hosts: Sequence[str]) -> bool:
    """Whether `url` (an archive's) may redirect to `target`: on its own origin, or on a host name
    `hosts` lists (any scheme and port there)."""
    return origin(target) == origin(url) or url_host_name(target) in {h.lower() for h in hosts}


@contextmanager
def followed(
    client: IndexClient, url: str, *, name: str, hosts: Sequence[str]
) -> Iterator[requests.Response]:
    """The streamed answer to a GET of archive `name`'s `url`, its redirects followed where
    `allowed`; the first one elsewhere is refused, naming the host and the key that would allow it.
    """
    at = url
    for _ in range(MAX_REDIRECTS + 1):
        try:
            response = client.get(at, stream=True, redirects=False)
        except ValueError as exc:  # requests splits a redirect's Location before answering
            if isinstance(exc, requests.RequestException):
                raise
            raise _no_url(name, url, f"a Location that is no URL ({exc})") from exc
        if not response.is_redirect:
            with response:
                yield response
            return
        location = response.headers["Location"]
        response.close()
        try:
            target = urljoin(at, location)
            scheme = urlsplit(target).scheme.lower()
        except ValueError:
            target, scheme = location, ""
        if scheme not in ("https", "http") or not url_host_name(target):
            raise _no_url(name, url, f"{redact_url(target)}, no https:// or http:// URL")
        if not allowed(url, target, hosts):
            raise _refused(name, url, target)
        at = target
    raise ResolutionError(
        f"archive {name}: {redact_url(url)} redirects more than {MAX_REDIRECTS} times",
        hint="check the URL names the release archive",
        host=url_host_name(url),
    )


def _no_url(name: str, url: str, what: str) -> ResolutionError:
    return ResolutionError(
        f"archive {name}: {redact_url(url)} redirects to {what}",
        hint="check the URL names the release archive",
        host=url_host_name(url),
    )


def _refused(name: str, url: str, target: str) -> ResolutionError:
    host = url_host_name(target)
    return ResolutionError(
        f"archive {name}: {redact_url(url)} redirects to the host {url_host(target)} "
        f"({redact_url(target)}); an archive's redirects are followed to its own scheme, host and "
        f"port only, unless archives.{name}.redirect-hosts names the other host",
        hint=f'if {host} rightly serves the archive (a release\'s download host), add "{host}" to '
        f"archives.{name}.redirect-hosts in the matrix and lock again",
        host=host,
    )
