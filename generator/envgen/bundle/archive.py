"""The bundle file: a tar (zstd-compressed for `.tar.zst`) written whole or not at all, and read back verified."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import BinaryIO

import zstandard

from envgen.bundle.manifest import MANIFEST, Manifest, member_problems, parse_manifest
from envgen.errors import InputError, VerificationError

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK = 1 << 20


def compressed(path: Path) -> bool:
    return path.name.endswith((".tar.zst", ".tzst"))


def _info(name: str, size: int) -> tarfile.TarInfo:
    """Members carry no owner, time or mode of the machine that made the bundle."""
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info


class _Hashing(io.RawIOBase):
    """A file read through while its sha256 is computed (the bytes checked are the bytes archived)."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle, self.digest = handle, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.handle.read(len(buffer))
        self.digest.update(data)
        buffer[: len(data)] = data
        return len(data)


def write_archive(out: Path, files: Sequence[tuple[str, Path, str]], manifest_text: str) -> None:
    """Write `manifest_text` as bundle.json then each (path in archive, file, expected sha256) to `out`.

    Everything goes to a temporary file beside `out`, renamed over it only once complete: an interrupt, a full
    disk or a file that does not match its sha256 (exit 4, naming it) leaves no bundle behind.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent)
    temp = Path(temp_name)
    try:
        with ExitStack() as stack:
            raw = stack.enter_context(os.fdopen(fd, "wb"))
            sink: BinaryIO = raw
            if compressed(out):
                sink = stack.enter_context(zstandard.ZstdCompressor(level=10).stream_writer(raw, closefd=False))
            tar = stack.enter_context(tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT))
            data = manifest_text.encode()
            tar.addfile(_info(MANIFEST, len(data)), io.BytesIO(data))
            for name, path, sha256 in files:
                with path.open("rb") as handle:
                    reader = _Hashing(handle)
                    tar.addfile(_info(name, path.stat().st_size), io.BufferedReader(reader, _CHUNK))
                if reader.digest.hexdigest() != sha256:
                    raise VerificationError(
                        f"{path} (for {name}) has sha256 {reader.digest.hexdigest()}, the lock says {sha256}",
                        hint=f"delete {path} (a damaged cache entry) and run again",
                    )
        os.chmod(temp, 0o644)
        os.replace(temp, out)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


@contextmanager
def _open_tar(path: Path) -> Iterator[tarfile.TarFile]:
    try:
        with path.open("rb") as raw:
            magic = raw.read(4)
            raw.seek(0)
            with ExitStack() as stack:
                source: BinaryIO = raw
                if magic == _ZSTD_MAGIC:
                    source = stack.enter_context(zstandard.ZstdDecompressor().stream_reader(raw))
                yield stack.enter_context(tarfile.open(fileobj=source, mode="r|"))
    except OSError as exc:
        raise InputError(f"cannot read the bundle {path}: {exc.strerror or exc}") from exc


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in chunks (artifacts may be gigabytes)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def unpack_verified(bundle: Path, dest: Path) -> Manifest:
    """Extract `bundle` into `dest` (a fresh scratch directory) and check every member against bundle.json.

    Any member missing, altered or unlisted is a VerificationError naming it, before anything uses the bundle.
    """
    try:
        with _open_tar(bundle) as tar:
            for info in tar:
                if not info.isfile():
                    raise VerificationError(f"{bundle}: member {info.name!r} is not a regular file")
                tar.extract(info, dest, filter="data")
    except (tarfile.TarError, zstandard.ZstdError) as exc:
        raise VerificationError(f"{bundle} is not a readable bundle: {exc}", hint="copy or make it again") from exc
    manifest_file = dest / MANIFEST
    if not manifest_file.is_file():
        raise VerificationError(f"{bundle} has no {MANIFEST}", hint="make it with `envgen bundle`")
    manifest = parse_manifest(manifest_file.read_text(encoding="utf-8"), f"{bundle}:{MANIFEST}")
    found = {
        path.relative_to(dest).as_posix(): (file_sha256(path), path.stat().st_size)
        for path in sorted(dest.rglob("*"))
        if path.is_file() and path != manifest_file
    }
    problems = member_problems(manifest, found)
    if problems:
        raise VerificationError(
            f"{bundle}: {len(problems)} member(s) do not match its manifest:\n  " + "\n  ".join(problems),
            hint="the bundle was altered or damaged in transit: copy it again (nothing was installed)",
        )
    return manifest
