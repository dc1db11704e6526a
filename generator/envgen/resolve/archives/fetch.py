"""A release archive's bytes in envgen's cache, by their sha256: downloaded within the network
budget and the download limit, placed only once hashed and found to be a zip or tar archive, and
hashed again whenever they are read from the cache (a copy that no longer matches is a miss,
reported, never a new pin)."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Literal

import requests

from envgen import atomic, network
from envgen.digests import short_digest
from envgen.errors import ResolutionError, VerificationError
from envgen.redact import redact_url
from envgen.resolve.archives.redirects import followed
from envgen.resolve.pypi.index_client import IndexClient, arrived
from envgen.urls import url_host

log = logging.getLogger(__name__)


def archive_path(cache: Path, sha256: str) -> Path:
    """Where the archive with this sha256 is kept (content-addressed, shared by every env)."""
    return cache / "archives" / "sha256" / sha256[:2] / sha256


def fetch(
    client: IndexClient,
    url: str,
    sha256: str | None,
    cache: Path,
    *,
    offline: bool,
    expected_by: str,
    name: str,
    redirect_hosts: Sequence[str] = (),
) -> Path:
    """The archive `name` at `url` in the cache, downloaded unless the cache has `sha256`; its bytes
    must have that sha256 when one is given (VerificationError, exit 4, naming who expects it). A
    redirect is followed to the URL's own host, or to one of `redirect_hosts` (redirects.py).

    A cached copy is hashed again before use: one that no longer matches (a shared or restored
    cache) is reported, removed and downloaded anew, never taken for the expected bytes. A download
    is bounded by the network budget in all and by the download limit in bytes (ResolutionError,
    exit 3), and lands in the cache only once hashed and found to be a zip or tar archive."""
    if sha256:
        cached = _verified_copy(cache, sha256)
        if cached is not None:
            return cached
    if offline:
        raise ResolutionError(
            f"the archive {redact_url(url)} is not in envgen's cache; nothing is fetched offline",
            hint="lock once without --offline to fetch it",
            host=url_host(url),
            reason="not in envgen's cache; nothing is fetched offline",
        )
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    partial = cache / "archives" / "partial" / key
    partial.parent.mkdir(parents=True, exist_ok=True)
    with atomic.part_file(partial) as part:
        found = _download(client, url, part.handle, name=name, hosts=redirect_hosts)
        if sha256 and found != sha256:
            raise VerificationError(
                f"the archive {redact_url(url)} has sha256 {found}, "
                f"but {expected_by} says {sha256}",
                hint="it is not the archive that was pinned: find out why; if the new one "
                "is wanted, "
                "write its sha256 into the matrix (archives.<name>.sha256) and lock again",
                host=url_host(url),
                reason=f"has sha256 {found}, but {expected_by} says {sha256}",
            )
        part.handle.flush()
        archive_format(part.path, url)
        target = archive_path(cache, found)
        target.parent.mkdir(parents=True, exist_ok=True)
        part.place(target)
    return target


def _verified_copy(cache: Path, sha256: str) -> Path | None:
    """The cached archive with `sha256`, hashed again; None when there is none or it no longer has
    that sha256 (then it is removed, and the caller downloads the archive anew)."""
    path = archive_path(cache, sha256)
    if not path.is_file() or path.is_symlink():
        return None
    with path.open("rb") as handle:
        found = hashlib.file_digest(handle, "sha256").hexdigest()
    if found == sha256:
        return path
    log.warning(
        "envgen's cached copy of the archive %s has sha256 %s: removed, fetching it again",
        short_digest(sha256),
        short_digest(found),
    )
    path.unlink(missing_ok=True)
    return None


def _download(
    client: IndexClient, url: str, out: IO[bytes], *, name: str, hosts: Sequence[str]
) -> str:
    """The body at `url` written to `out`, its sha256; at most the download limit in bytes, within
    the network budget, redirects followed only where `followed` allows."""
    limits = client.limits
    deadline = time.monotonic() + limits.budget
    digest, size = hashlib.sha256(), 0
    try:
        with followed(client, url, name=name, hosts=hosts) as response:
            response.raise_for_status()
            announced = response.headers.get("Content-Length", "")
            if announced.isdigit() and int(announced) > limits.download:
                raise _too_large(url, f"announces {announced} bytes", limits)
            for chunk in arrived(response):
                size += len(chunk)
                if size > limits.download:
                    raise _too_large(url, f"sent more than {limits.download} bytes", limits)
                if time.monotonic() > deadline:
                    raise ResolutionError(
                        f"the archive {redact_url(url)} did not arrive within "
                        f"{network.seconds('budget', limits)} ({size} bytes by then)",
                        hint=network.raise_hint("budget", limits),
                        host=url_host(url),
                    )
                digest.update(chunk)
                out.write(chunk)
    except requests.RequestException as exc:
        raise client.unreachable("fetch the archive", url, exc) from exc
    return digest.hexdigest()


def _too_large(url: str, what: str, limits: network.Limits) -> ResolutionError:
    return ResolutionError(
        f"the archive {redact_url(url)} {what}, more than the download limit of "
        f"{network.seconds('download', limits)}; nothing of it was kept",
        hint=f"check the URL names the release archive; if it is that large, raise "
        f"{network.variable('download')}",
        host=url_host(url),
    )


# The first bytes of each archive `_opened` reads, and the mode it opens it with: a file that
# starts with none of them is refused before any reader probes it.
_Format = Literal["zip", "r:", "r:gz", "r:bz2", "r:xz"]
_FORMATS: tuple[tuple[int, bytes, _Format], ...] = (
    (0, b"PK\x03\x04", "zip"),
    (0, b"PK\x05\x06", "zip"),
    (0, b"\x1f\x8b", "r:gz"),
    (0, b"BZh", "r:bz2"),
    (0, b"\xfd7zXZ\x00", "r:xz"),
    (257, b"ustar", "r:"),
)


def archive_format(path: Path, url: str) -> _Format:
    """`zip` or the tarfile mode `path` is read with, by its first bytes (VerificationError, exit 4,
    for anything else)."""
    with path.open("rb") as handle:
        head = handle.read(512)
    for offset, magic, mode in _FORMATS:
        if head[offset : offset + len(magic)] == magic:
            return mode
    raise VerificationError(
        f"the archive {redact_url(url)} is neither a zip nor a tar archive (gzip, bzip2, xz or "
        "plain); nothing of it was kept",
        hint="check the URL names the release archive",
        host=url_host(url),
    )
