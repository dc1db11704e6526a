"""HTTP access to the matrix's pip indexes: credentials of the index on a URL's host, trusted hosts' TLS."""

from __future__ import annotations

import hashlib
import io
import tarfile
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import requests

from envgen.errors import ResolutionError, VerificationError
from envgen.inputs.channels import IndexAccess
from envgen.redact import redact_text, redact_url, strip_credentials
from envgen.resolve import uv_pylock

HTTP_TIMEOUT = 60.0


def _metadata_from_archive(data: bytes, filename: str) -> str:
    if filename.endswith(".whl"):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
            return zf.read(name).decode()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        member = next(m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
        handle = tar.extractfile(member)
        if handle is None:
            raise ValueError("PKG-INFO is not a file")
        return handle.read().decode()


def _get(session: requests.Session, url: str, indexes: Sequence[IndexAccess]) -> requests.Response:
    """GET `url` with the credentials of the index on its host; a trusted host's certificate is not verified."""
    index = next((i for i in indexes if i.authenticates(url)), None)
    auth = (index.username or "", index.password or "") if index and index.secrets else None
    return session.get(url, auth=auth, timeout=HTTP_TIMEOUT, verify=not any(i.trusts(url) for i in indexes))


def fetch_metadata(
    choice: uv_pylock.Choice,
    indexes: Sequence[IndexAccess],
    cache: Path,
    offline: bool,
    session: requests.Session,
) -> str:
    """The core metadata of a chosen artifact: from envgen's cache (by sha256), PEP 658, or the file itself.

    A whole file is downloaded only when the index serves no `.metadata`, and its sha256 is checked.
    """
    artifact = choice.artifact
    cached = cache / "pypi-metadata" / f"{artifact.sha256}.METADATA"
    if cached.exists():
        return cached.read_text()
    url = strip_credentials(artifact.url)
    if offline:
        raise ResolutionError(
            f"offline: the metadata of {artifact.filename} ({redact_url(url)}) is not in {cached.parent}",
            hint="run once without --offline to fill the cache",
        )
    text = None
    try:
        if artifact.is_wheel:
            response = _get(session, url + ".metadata", indexes)
            if response.status_code == 200:
                text = response.text
        if text is None:
            response = _get(session, url, indexes)
            response.raise_for_status()
            digest = hashlib.sha256(response.content).hexdigest()
            if digest != artifact.sha256:
                raise VerificationError(
                    f"{artifact.filename} from {redact_url(url)} has sha256 {digest}, but uv locked {artifact.sha256}",
                    hint="the index changed a published file; re-lock, and report it to the index owner",
                )
            text = _metadata_from_archive(response.content, artifact.filename)
    except requests.RequestException as exc:
        secrets = tuple(s for i in indexes for s in i.secrets)
        raise ResolutionError(
            f"cannot read the metadata of {artifact.filename} at {redact_url(url)}: {redact_text(str(exc), secrets)}",
            hint="check the network or the index; the resolution itself succeeded",
        ) from exc
    except (zipfile.BadZipFile, tarfile.TarError, StopIteration, ValueError) as exc:
        raise ResolutionError(f"{artifact.filename} at {redact_url(url)} has no readable metadata: {exc}") from exc
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=cached.parent, suffix=".part", delete=False) as partial:
        partial.write(text)
    Path(partial.name).replace(cached)
    return text
