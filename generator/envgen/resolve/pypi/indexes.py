"""The pip stage's `IndexReader` over the real indexes (resolve/pypi/stage.py): the core metadata of
chosen artifacts, from envgen's cache by sha256 or else fetched (PEP 658, or the file itself, its
sha256 checked); whether the index a locked entry came from still offers its version; the releases
offered of the packages a conflict names. Every request goes through `IndexClient`."""

from __future__ import annotations

import hashlib
import io
import logging
import tarfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from envgen import atomic, network
from envgen.errors import EnvgenError, ResolutionError, VerificationError
from envgen.inputs.channels import IndexAccess
from envgen.model import PipEntry
from envgen.redact import redact_url, strip_credentials
from envgen.resolve.pypi import uv_pylock
from envgen.resolve.pypi.index_client import IndexClient, offers
from envgen.resolve.pypi.offered import Offers, fetch_offers
from envgen.urls import url_host

log = logging.getLogger(__name__)


def _metadata_from_archive(data: bytes, filename: str) -> str:
    if filename.endswith(".whl"):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            name = next(
                n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1
            )
            return zf.read(name).decode()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        member = next(
            m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")
        )
        handle = tar.extractfile(member)
        if handle is None:
            raise ValueError("PKG-INFO is not a file")
        return handle.read().decode()


def _cached(cache: Path, sha256: str) -> Path:
    return cache / "pypi-metadata" / f"{sha256}.METADATA"


# The texts read from the cache in this process, by file: a re-lock reads the metadata of the
# artifacts its lock predicts while uv runs (warm_metadata), then of those uv chose, mostly the
# same. A file, named by its content's sha256, never changes; what is not cached yet is not kept.
_READ: dict[Path, str] = {}
_KEPT = 2048


def cached_metadata(cache: Path, sha256: str) -> str | None:
    """The metadata envgen's cache holds for the artifact with this sha256 (64 hex digits); None if
    none."""
    path = _cached(cache, sha256)
    text = _READ.get(path)
    if text is not None:
        return text
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    if len(_READ) >= _KEPT:
        _READ.clear()
    _READ[path] = text
    return text


def warm_metadata(cache: Path, artifacts: Iterable[tuple[str, str]]) -> None:
    """Parse ahead the cached metadata of these artifacts (URL, 64-hex sha256), which a re-lock most
    likely chooses again (uv_pylock.parse_metadata keeps what it parsed); an artifact not cached is
    left alone."""
    for url, sha256 in artifacts:
        text = cached_metadata(cache, sha256)
        if text is not None:
            uv_pylock.parse_metadata(text, uv_pylock.Artifact(url, sha256).filename)


def fetch_metadata(
    client: IndexClient, choice: uv_pylock.Choice, cache: Path, offline: bool
) -> str:
    """The core metadata of a chosen artifact: from envgen's cache (by sha256), PEP 658, or the file
    itself.

    A whole file is downloaded only when the index serves no `.metadata`, and its sha256 is checked.
    """
    artifact = choice.artifact
    cached = _cached(cache, artifact.sha256)
    text = cached_metadata(cache, artifact.sha256)
    if text is not None:
        return text
    url = strip_credentials(artifact.url)
    if offline:
        raise ResolutionError(
            f"offline: the metadata of {artifact.filename} ({redact_url(url)}) is not "
            f"in {cached.parent}",
            hint="run once without --offline to fill the cache",
            host=url_host(url),
        )
    text = None
    try:
        if artifact.is_wheel:
            response = client.get(url + ".metadata")
            if response.status_code == 200:
                text = response.text
        if text is None:
            response = client.get(url)
            response.raise_for_status()
            digest = hashlib.sha256(response.content).hexdigest()
            if digest != artifact.sha256:
                raise VerificationError(
                    f"{artifact.filename} from {redact_url(url)} has sha256 {digest}, "
                    f"but uv locked {artifact.sha256}",
                    hint="the index changed a published file; re-lock, and report it to the "
                    "index owner",
                    host=url_host(url),
                    reason=f"has sha256 {digest}, but uv locked {artifact.sha256}",
                )
            text = _metadata_from_archive(response.content, artifact.filename)
    except requests.RequestException as exc:
        raise client.unreachable(f"read the metadata of {artifact.filename} at", url, exc) from exc
    except (zipfile.BadZipFile, tarfile.TarError, StopIteration, ValueError) as exc:
        raise ResolutionError(
            f"{artifact.filename} at {redact_url(url)} has no readable metadata: {exc}",
            host=url_host(url),
            reason=f"has no readable metadata: {exc}",
        ) from exc
    cached.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_file(cached, text.encode())
    return text


class Indexes:
    """What the pip stage asks the indexes (its `IndexReader`, resolve/pypi/stage.py): the core
    metadata of chosen artifacts, from envgen's cache by sha256 or else fetched eight at a time;
    whether the index a locked entry came from still offers its version; the releases offered of
    the packages a conflict names."""

    def __init__(self, cache: Path, limits: network.Limits, *, offline: bool) -> None:
        self.cache, self.limits, self.offline = cache, limits, offline

    def metadata(
        self, choices: Sequence[uv_pylock.Choice], indexes: Sequence[IndexAccess]
    ) -> dict[uv_pylock.Choice, str]:
        texts = {c: cached_metadata(self.cache, c.artifact.sha256) for c in choices}
        missing = [c for c, text in texts.items() if text is None]
        if not missing:
            return {c: text or "" for c, text in texts.items()}
        with IndexClient(indexes, self.limits) as client, ThreadPoolExecutor(max_workers=8) as pool:

            def fetch(choice: uv_pylock.Choice) -> str:
                return fetch_metadata(client, choice, self.cache, self.offline)

            texts |= zip(missing, pool.map(fetch, missing), strict=True)
        return {c: text or "" for c, text in texts.items()}

    def offered(self, entries: Sequence[PipEntry], indexes: Mapping[str, IndexAccess]) -> set[str]:
        """The names among `entries` whose version the index they came from (by name in `indexes`)
        still offers; an answer that does not come counts as not offered."""
        found = set()
        with IndexClient(tuple(indexes.values()), self.limits) as client:
            for entry in entries:
                index = indexes.get(entry.index or "")
                if index is None:
                    continue
                try:
                    if offers(client, index, entry.name, entry.version):
                        found.add(entry.name)
                except EnvgenError as exc:
                    shown = f"{entry.name} {entry.version}"
                    log.debug("cannot ask %s about %s: %s", index.name, shown, exc.message)
        return found

    def offers(
        self, wanted: Mapping[str, Sequence[IndexAccess]], indexes: Sequence[IndexAccess]
    ) -> Offers:
        return fetch_offers(wanted, indexes, self.limits)
