"""The one HTTP client of the matrix's pip indexes: simple pages and artifacts.

Every request goes through IndexClient.get, which sends the credentials of the index whose host
serves the URL and skips certificate verification only for an index's `trusted_host`, as uv and pip
do with the same settings; nothing else in envgen speaks HTTP to an index.
"""

from __future__ import annotations

import html.parser
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from urllib.parse import urljoin

import requests
import urllib3
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from envgen import network
from envgen.credentials import NO_CREDENTIALS, Credentials
from envgen.errors import NetworkError, ResolutionError, Unreached
from envgen.inputs.channels import IndexAccess
from envgen.names import package_key
from envgen.redact import redact_text, redact_url
from envgen.urls import same_host, url_host, url_host_name

log = logging.getLogger(__name__)

# Answers worth asking again: the index is busy or restarting, not saying no.
_RETRIED_STATUS = (429, 500, 502, 503, 504)


class IndexClient:
    """HTTP GETs to a set of indexes over one session, within the network `limits`; a context
    manager closing the session it opened.

    `credentials` are more (a conda channel's, an index's read from channels/) for the hosts no
    index covers."""

    def __init__(
        self,
        indexes: Sequence[IndexAccess],
        limits: network.Limits,
        session: requests.Session | None = None,
        credentials: Credentials = NO_CREDENTIALS,
    ) -> None:
        self.indexes = tuple(indexes)
        self.limits = limits
        self._owned = session is None
        self.credentials = credentials
        self.session = session or requests.Session()
        if self._owned:
            retry = urllib3.Retry(
                total=self.limits.retries,
                backoff_factor=0.5,
                status_forcelist=_RETRIED_STATUS,
                allowed_methods=("GET",),
                raise_on_status=False,
            )
            for scheme in ("http://", "https://"):
                self.session.mount(scheme, requests.adapters.HTTPAdapter(max_retries=retry))

    def __enter__(self) -> IndexClient:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._owned:
            self.session.close()

    @property
    def secrets(self) -> tuple[str, ...]:
        """The indexes' credentials, to mask in messages."""
        return (*(s for i in self.indexes for s in i.secrets), *self.credentials.secrets)

    def get(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        stream: bool = False,
        timeout: float | None = None,
        redirects: bool = True,
    ) -> requests.Response:
        """GET `url` with the credentials of the index on its host; a trusted host's certificate is
        not verified.

        `stream` leaves the body unread, for artifacts too large to hold in memory. The connection
        and each wait for data are bounded by the network limits, or by `timeout` (seconds) when
        given (a brief probe). Without `redirects` a redirect is the answer, for the caller to
        follow or not (an archive's, resolve/archives/redirects.py)."""
        return self._request(
            "GET", url, headers, stream=stream, timeout=timeout, redirects=redirects
        )

    def head(
        self, url: str, *, timeout: float | None = None, redirects: bool = True
    ) -> requests.Response:
        """HEAD `url` as `get` would GET it, redirects followed unless told: whether a host answers,
        without a body (an index's root page or a channel's repodata may be tens of megabytes)."""
        return self._request("HEAD", url, None, stream=False, timeout=timeout, redirects=redirects)

    def _request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None,
        *,
        stream: bool,
        timeout: float | None,
        redirects: bool = True,
    ) -> requests.Response:
        index = next((i for i in self.indexes if same_host(i.url, url) and i.secrets), None)
        other = self.credentials.for_url(url) if index is None else None
        auth = (index.username or "", index.password or "") if index else None
        auth = (other.username, other.password) if other else auth
        verify = not any(_trusts(i, url) for i in self.indexes)
        limit = timeout if timeout is not None else (self.limits.connect, self.limits.read)
        return self.session.request(
            method,
            url,
            headers=dict(headers or {}),
            auth=auth,
            timeout=limit,
            verify=verify,
            stream=stream,
            allow_redirects=redirects,
        )

    @staticmethod
    def limit_reached(exc: requests.RequestException) -> str | None:
        """The limit a failed request ran into, "connect" or "read" (None: it failed otherwise).
        After the last retry requests reports a read timeout as a ConnectionError wrapping
        urllib3's, and so does a body that stalls after the headers."""
        inner = exc.args[0] if exc.args else None
        reason = getattr(inner, "reason", inner)
        if isinstance(exc, requests.exceptions.ConnectTimeout):
            return "connect"
        # urllib3's refused connection (NewConnectionError) is a ConnectTimeoutError too, for
        # history's sake.
        if isinstance(reason, urllib3.exceptions.ConnectTimeoutError) and not isinstance(
            reason, urllib3.exceptions.NewConnectionError
        ):
            return "connect"
        if isinstance(exc, requests.exceptions.Timeout) or isinstance(
            reason, urllib3.exceptions.ReadTimeoutError
        ):
            return "read"
        return None

    def why(self, exc: requests.RequestException) -> str:
        """Why a request failed, in a few words: the limit it ran into, or the innermost cause."""
        limit = self.limit_reached(exc)
        if limit == "connect":
            return f"no connection within {network.seconds('connect', self.limits)}"
        if limit == "read":
            return f"no answer within {network.seconds('read', self.limits)}"
        if isinstance(exc, requests.exceptions.RetryError):
            return f"still failing after {network.seconds('retries', self.limits)} retries"
        reason = exc.args[0] if exc.args else exc
        reason = getattr(reason, "reason", reason)  # urllib3's MaxRetryError wraps the last failure
        # "<connection object>: Failed to establish a new connection: [Errno 111] Connection
        # refused"
        said = re.sub(r"\s*\(_ssl\.c:\d+\)", "", str(reason)).rsplit(": ", 1)[-1].strip("'\"")
        # the wrappers' closers only
        while said.endswith((")", "'", '"')) and said.count(")") > said.count("("):
            said = said[:-1].rstrip("'\"")
        kind = "SSLError: " if isinstance(exc, requests.exceptions.SSLError) else ""
        return redact_text(f"{kind}{said or type(exc).__name__}", self.secrets)

    def unreachable(self, what: str, url: str, exc: requests.RequestException) -> NetworkError:
        """One line naming the URL and why, the hint saying which limit to raise when one was
        reached."""
        limit = self.limit_reached(exc)
        slow = f"; {network.raise_hint(limit, self.limits)}" if limit else ""
        shown, why = redact_url(url), self.why(exc)
        return NetworkError(
            f"cannot {what} {shown}: {why}",
            hint=f"check the URL and the network{slow}",
            hosts=[Unreached(shown, why)],
        )


def _trusts(index: IndexAccess, url: str) -> bool:
    """Whether `url` is on the index's trusted host (pip's --trusted-host: host or host:port)."""
    if not index.trusted_host:
        return False
    return index.trusted_host.lower() in (url_host_name(url), url_host(url))


def fetch_filenames(client: IndexClient, index: IndexAccess, name: str) -> list[str] | None:
    """The file names on an index's simple page for `name` (PEP 691 JSON or PEP 503 HTML); None on
    404."""
    url = urljoin(index.url.rstrip("/") + "/", f"{package_key(name)}/")
    shown = urljoin(index.shown.rstrip("/") + "/", f"{package_key(name)}/")
    try:
        response = client.get(
            url, headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"}
        )
    except requests.RequestException as exc:
        untrusted = isinstance(exc, requests.exceptions.SSLError) and not index.trusted_host
        trust = (
            f" (if you trust the host, set trusted_host in channels/{index.name}.toml)"
            if untrusted
            else ""
        )
        why = client.why(exc)
        raise NetworkError(
            f"cannot reach {shown}: {why}{trust}", hosts=[Unreached(shown, why)]
        ) from exc
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        # The host answered: the page is not what an index serves (a proxy's or a server's error).
        reason = f"answered HTTP {response.status_code}"
        raise ResolutionError(f"{shown} {reason}", host=shown, reason=reason, package=name)
    if "json" in response.headers.get("Content-Type", ""):
        try:
            files = response.json()["files"]
            return [f["filename"] for f in files if not f.get("yanked")]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ResolutionError(
                f"{shown} answered with a page that is not PEP 691 JSON ({type(exc).__name__})",
                hint="check the index URL in channels/ (a proxy error page?)",
                host=shown,
                package=name,
            ) from exc
    return _html_filenames(response.text)


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self._yanked = False
        self._in_anchor = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._in_anchor = True
            self._yanked = any(k == "data-yanked" for k, _ in attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._in_anchor = False

    def handle_data(self, data: str) -> None:
        if self._in_anchor and not self._yanked and data.strip():
            self.names.append(data.strip())


def _html_filenames(text: str) -> list[str]:
    parser = _Anchors()
    parser.feed(text)
    return parser.names


def file_versions(filenames: Iterable[str]) -> set[Version]:
    """The versions a simple page's file names (wheels and sdists) offer; names that parse as
    neither are skipped."""
    versions: set[Version] = set()
    for filename in filenames:
        try:
            if filename.endswith(".whl"):
                versions.add(parse_wheel_filename(filename)[1])
            else:
                versions.add(parse_sdist_filename(filename)[1])
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue
    return versions


def offers(client: IndexClient, index: IndexAccess, name: str, version: str) -> bool:
    """Whether `index` still offers a file (not yanked) of `name` at `version`."""
    return Version(version) in file_versions(fetch_filenames(client, index, name) or ())


# What a streamed body is read in: a piece as soon as it arrives, at most this many bytes.
_CHUNK = 1 << 20


def arrived(response: requests.Response) -> Iterator[bytes]:
    """The body in pieces as they arrive (a trickle is measured against the budget between them,
    where `iter_content` would wait for a whole chunk); urllib3's errors as requests raises them."""
    try:
        while chunk := response.raw.read1(_CHUNK, decode_content=True):
            yield chunk
    except urllib3.exceptions.HTTPError as exc:
        raise requests.ConnectionError(exc) from exc
