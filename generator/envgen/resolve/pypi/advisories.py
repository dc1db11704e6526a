"""The PyPI JSON API asked about releases (`GET {base}/pypi/{name}/{version}/json`), for `envgen
audit`: through the index client (the connect and read timeouts, the retries), the whole audit
within the network budget, each answer read up to a size limit, parsed as JSON and checked by the
caller before it is kept in envgen's cache by name and version. A cached answer younger than a day
is used without asking (offline too); an older one is asked again."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import requests

from envgen import atomic, network
from envgen.errors import NetworkError, Unreached
from envgen.redact import redact_url
from envgen.resolve.pypi.index_client import IndexClient, arrived
from envgen.urls import url_host

VARIABLE = "ENVGEN_AUDIT_URL"  # where to ask instead (a mirror, a stand-in)
DEFAULT_URL = "https://pypi.org"
ENTRY = "advisories"  # its directory in envgen's cache (project.CACHE_ENTRIES)
FRESH = 24 * 3600.0  # seconds a cached answer is used without asking again
MAX_BYTES = 16 << 20  # an answer longer than this is not PyPI's
_WORKERS = 8

Release = tuple[str, str]  # (canonical name, version)


@dataclass(frozen=True)
class Service:
    """Where to ask (`base`, e.g. https://pypi.org), within which `limits`, with which cache; the
    `check` turns a decoded answer into what the caller keeps (ValueError: not an answer of the
    API). `now` is the clock a cached answer's age is measured with."""

    base: str
    cache: Path
    limits: network.Limits
    check: Callable[[object], object]
    now: Callable[[], float] = time.time

    def url(self, release: Release) -> str:
        name, version = release
        return f"{self.base.rstrip('/')}/pypi/{quote(name, safe='')}/{quote(version, safe='')}/json"


def cached_path(service: Service, release: Release) -> Path:
    """Where the answer of `service` about a release is kept: named by the sha256 of its URL (a
    lock's names and versions never become a path; another service's answers are not taken)."""
    key = hashlib.sha256(service.url(release).encode()).hexdigest()
    return service.cache / ENTRY / f"{key}.json"


def ask(service: Service, releases: Sequence[Release]) -> dict[Release, object | None]:
    """What the service says of each release, checked (None: it does not know the release, 404);
    eight at a time, all within the network budget. The first failure stops the rest (NetworkError,
    exit 3, naming the URL and why)."""
    deadline = time.monotonic() + service.limits.budget
    answers: dict[Release, object | None] = {}
    missing = []
    for release in releases:
        found = _cached(service, release)
        if found is _NONE:
            missing.append(release)
        else:
            answers[release] = found
    if not missing:
        return answers
    with IndexClient((), service.limits) as client:
        pool = ThreadPoolExecutor(max_workers=_WORKERS)
        futures: list[Future[object | None]] = [
            pool.submit(_fetch, service, client, release, deadline) for release in missing
        ]
        try:
            for release, future in zip(missing, futures, strict=True):
                answers[release] = future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return answers


_NONE = object()  # no usable cached answer


def _cached(service: Service, release: Release) -> object:
    """The cached, checked answer about `release` when it is younger than FRESH, else _NONE (an
    entry that is no longer readable or checks no more is asked again)."""
    path = cached_path(service, release)
    try:
        if path.is_symlink() or service.now() - path.stat().st_mtime >= FRESH:
            return _NONE
        data = path.read_bytes()[: MAX_BYTES + 1]
        if len(data) > MAX_BYTES:
            return _NONE
        document = json.loads(data)
        return None if document is None else service.check(document)
    except (OSError, ValueError, RecursionError):
        return _NONE


def _fetch(service: Service, client: IndexClient, release: Release, deadline: float) -> object:
    url = service.url(release)
    if time.monotonic() > deadline:
        raise _over_budget(url, service.limits)
    try:
        with client.get(url, headers={"Accept": "application/json"}, stream=True) as response:
            if response.status_code == 404:
                _keep(service, release, b"null")
                return None
            if response.status_code != 200:
                raise _refused(url, f"it answered HTTP {response.status_code}")
            data = _body(response, url, service.limits, deadline)
    except requests.RequestException as exc:
        raise client.unreachable("ask", url, exc) from exc
    try:
        checked = service.check(json.loads(data))
    except ValueError as exc:  # json's errors and the check's are both ValueErrors
        raise _refused(url, f"its answer is not PyPI's JSON API ({exc})") from exc
    except RecursionError as exc:  # json's parser on arrays nested thousands deep
        raise _refused(url, "its answer is not PyPI's JSON API (nested too deep)") from exc
    _keep(service, release, data)
    return checked


def _body(response: requests.Response, url: str, limits: network.Limits, deadline: float) -> bytes:
    chunks, size = [], 0
    for chunk in arrived(response):
        size += len(chunk)
        if size > MAX_BYTES:
            raise _refused(url, f"its answer is longer than {MAX_BYTES} bytes")
        if time.monotonic() > deadline:
            raise _over_budget(url, limits)
        chunks.append(chunk)
    return b"".join(chunks)


def _keep(service: Service, release: Release, data: bytes) -> None:
    """Keep an answer in the cache; a cache that cannot be written costs only the next ask."""
    path = cached_path(service, release)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_file(path, data)
    except OSError:
        pass


def _refused(url: str, why: str) -> NetworkError:
    shown = redact_url(url)
    return NetworkError(
        f"cannot ask {shown}: {why}",
        hint=f"is {url_host(url)} the PyPI JSON API? ({VARIABLE} sets where envgen asks)",
        hosts=[Unreached(shown, why)],
    )


def _over_budget(url: str, limits: network.Limits) -> NetworkError:
    shown, why = redact_url(url), f"no answer within {network.seconds('budget', limits)} in all"
    return NetworkError(
        f"cannot ask {shown}: {why}",
        hint=network.raise_hint("budget", limits),
        hosts=[Unreached(shown, why)],
    )
