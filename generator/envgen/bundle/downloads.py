"""Artifacts downloaded once into envgen's cache by sha256, each checked against the lock before it
is kept."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import requests

from envgen import atomic
from envgen.bundle.manifest import Wanted
from envgen.errors import VerificationError
from envgen.redact import redact_url
from envgen.resolve.pypi.index_client import IndexClient
from envgen.urls import url_host

log = logging.getLogger(__name__)

# Bounded: an index or channel should not see more than this many connections from one bundle run.
DOWNLOAD_JOBS = 4
_CHUNK = 1 << 20


class Display(Protocol):
    """What shows a download run: its start (the files to download), every chunk received (called
    from the worker threads), every file verified and kept, and its end (also when it fails or is
    interrupted)."""

    def started(self, files: int) -> None: ...

    def received(self, size: int) -> None: ...

    def finished(self, wanted: Wanted, size: int) -> None: ...

    def stopped(self) -> None: ...


class LogDisplay:
    """Plain lines through the log, one per file (the display when stderr is no terminal)."""

    def __init__(self) -> None:
        self.total = self.done = self.size = 0

    def started(self, files: int) -> None:
        self.total = files

    def received(self, size: int) -> None:
        return

    def finished(self, wanted: Wanted, size: int) -> None:
        self.done += 1
        self.size += size
        log.info(
            "downloaded %d/%d  %s  (%d bytes so far)", self.done, self.total, wanted.path, self.size
        )

    def stopped(self) -> None:
        return


def cached_path(cache: Path, sha256: str) -> Path:
    """Where the artifact with this sha256 lives in the cache (content-addressed, shared by every
    env)."""
    return cache / "artifacts" / "sha256" / sha256[:2] / sha256


class _Stopped(Exception):
    """Another download failed or the run was interrupted: this one gives up at its next chunk."""


def _download(
    client: IndexClient, wanted: Wanted, target: Path, stop: threading.Event, display: Display
) -> int:
    """Stream `wanted` into a part file next to `target`, hashing as it comes; renamed only when it
    matches."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with atomic.part_file(target) as part:
        try:
            with client.get(wanted.url, stream=True) as response:
                response.raise_for_status()
                for chunk in response.iter_content(_CHUNK):
                    if stop.is_set():
                        raise _Stopped
                    digest.update(chunk)
                    size += len(chunk)
                    part.handle.write(chunk)
                    display.received(len(chunk))
        except requests.RequestException as exc:
            error = client.unreachable("download", wanted.url, exc)
            raise error.with_hint(
                "a bundle needs every index and channel it names (files downloaded stay "
                f"cached); {error.hint}"
            ) from exc
        if digest.hexdigest() != wanted.sha256:
            raise VerificationError(
                f"{redact_url(wanted.url)} has sha256 {digest.hexdigest()}, the lock "
                f"says {wanted.sha256}",
                hint="the index serves other bytes than were locked: find out why, then re-lock",
                host=url_host(wanted.url),
                reason=f"has sha256 {digest.hexdigest()}, the lock says {wanted.sha256}",
            )
        part.place(target)
    return size


def fetch_all(
    client: IndexClient, wanted: Sequence[Wanted], cache: Path, *, display: Display | None = None
) -> tuple[dict[str, Path], int]:
    """Every artifact in the cache (path by sha256) and how many were downloaded (a warm cache:
    none)."""
    paths = {w.sha256: cached_path(cache, w.sha256) for w in wanted}
    # One download per sha256: a file two platforms name (e.g. noarch) is downloaded once, not twice
    # at once.
    missing = list({w.sha256: w for w in wanted if not paths[w.sha256].is_file()}.values())
    if not missing:
        return paths, 0
    log.info(
        "downloading %d of %d artifacts (%d at a time)", len(missing), len(wanted), DOWNLOAD_JOBS
    )
    shown = display or LogDisplay()
    stop = threading.Event()
    shown.started(len(missing))
    try:
        with ThreadPoolExecutor(max_workers=DOWNLOAD_JOBS) as pool:
            futures = [
                (w, pool.submit(_download, client, w, paths[w.sha256], stop, shown))
                for w in missing
            ]
            try:
                for w, future in futures:
                    shown.finished(w, future.result())
            except BaseException:
                # Leaving the pool waits for its threads: make the running ones stop (removing their
                # part files).
                stop.set()
                for _, future in futures:
                    future.cancel()
                raise
    finally:
        shown.stopped()
    return paths, len(missing)
