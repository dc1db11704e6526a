"""The bundle file: a tar (zstd-compressed for `.tar.zst`) written whole or not at all, and read
back as hostile input, each member checked as it streams."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

import zstandard

from envgen.bundle.manifest import MANIFEST, Manifest, Member, parse_manifest
from envgen.errors import InputError, VerificationError
from envgen.inputs.files import bounded_nesting, open_input, read_input_text
from envgen.outputs import output_file
from envgen.project import Project

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK = 1 << 20
_AGAIN = "the bundle was altered or damaged: copy or make it again (nothing was installed)"


def compressed(path: Path) -> bool:
    return path.name.endswith((".tar.zst", ".tzst"))


def _info(name: str, size: int) -> tarfile.TarInfo:
    """Members carry no owner, time or mode of the machine that made the bundle."""
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info


class _Hashing(io.RawIOBase):
    """A file read through while its sha256 is computed (the bytes checked are the bytes
    archived)."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle, self.digest = handle, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.handle.read(len(buffer))
        self.digest.update(data)
        buffer[: len(data)] = data
        return len(data)


def write_archive(
    out: Path,
    project: Project,
    files: Sequence[tuple[str, Path, str]],
    manifest_text: str,
) -> None:
    """Write `manifest_text` as bundle.json, then each (path in archive, file, sha256) to `out`.

    Whole or not at all (outputs.py): an interrupt, a full disk or a file that does not match its
    sha256 (exit 4, naming it) leaves no bundle behind.
    """
    with output_file(out, project) as raw, ExitStack() as stack:
        sink: BinaryIO = raw
        if compressed(out):
            writer = zstandard.ZstdCompressor(level=10).stream_writer(raw, closefd=False)
            sink = stack.enter_context(writer)
        tar = stack.enter_context(tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT))
        data = manifest_text.encode()
        tar.addfile(_info(MANIFEST, len(data)), io.BytesIO(data))
        for name, path, sha256 in files:
            with path.open("rb") as handle:
                reader = _Hashing(handle)
                tar.addfile(_info(name, path.stat().st_size), io.BufferedReader(reader, _CHUNK))
            if reader.digest.hexdigest() != sha256:
                raise VerificationError(
                    f"{path} (for {name}) has sha256 {reader.digest.hexdigest()}, not {sha256}",
                    hint=f"delete {path} (a damaged cache entry) and run again",
                    file=str(path),
                )


# bundle.json and the lock's files are read whole into memory: none comes near this (A5's yml:
# about 200 kB).
TEXT_LIMIT = 64 << 20
# What a bundle may unpack to: wheels, conda packages and git packs are compressed already, so a
# real bundle unpacks to little more than its own size, while a few MB of zstd can hold terabytes
# of zeros.
RATIO, FLOOR = 100, 64 << 20


def ceiling(bundle_size: int) -> int:
    """The most bytes the members of a bundle of `bundle_size` bytes may hold in all."""
    return max(RATIO * bundle_size, FLOOR)


@contextmanager
def _open_tar(path: Path) -> Iterator[tarfile.TarFile]:
    with open_input(path, hint="give --from-bundle the file `envgen bundle` wrote") as raw:
        magic = raw.read(4)
        raw.seek(0)
        with ExitStack() as stack:
            source: BinaryIO = raw
            if magic == _ZSTD_MAGIC:
                source = stack.enter_context(zstandard.ZstdDecompressor().stream_reader(raw))
            yield stack.enter_context(tarfile.open(fileobj=source, mode="r|"))


_Member = tuple[tarfile.TarInfo, IO[bytes]]


@contextmanager
def _members(bundle: Path) -> Iterator[Iterator[_Member]]:
    """The bundle's members as they stream (each one's data readable until the next); a damaged
    archive is a VerificationError, one that cannot be read an InputError."""
    try:
        with _open_tar(bundle) as tar:
            yield _regular(bundle, tar)
    except (tarfile.TarError, zstandard.ZstdError, EOFError) as exc:
        reason = f"is not a readable bundle: {exc}"
        raise VerificationError(
            f"{bundle} {reason}", hint=_AGAIN, file=str(bundle), reason=reason
        ) from exc
    except OSError as exc:
        why = str(exc.strerror or exc)
        raise InputError(
            f"cannot read the bundle {bundle}: {why}", file=str(bundle), reason=why
        ) from exc


def _regular(bundle: Path, tar: tarfile.TarFile) -> Iterator[_Member]:
    for info in tar:
        # Plain files only: no link, device, directory, or sparse file (its data is not its size).
        plain = info.type in (tarfile.REGTYPE, tarfile.AREGTYPE)
        data = tar.extractfile(info) if plain else None
        if data is None:
            raise VerificationError(
                f"{bundle}: member {info.name!r} is not a regular file",
                hint=_AGAIN,
                file=str(bundle),
                key=info.name,
            )
        yield info, data


def _extract(bundle: Path, member: _Member, dest: Path, want: Member | None) -> Path:
    """Write `member` to `dest/<its name>`, its sha256 computed as it streams; removed again unless
    it has the size (checked before a byte is written) and sha256 `want` gives. Without `want`
    (bundle.json: there is no hash to check it against), at most TEXT_LIMIT bytes."""
    info, data = member
    if want is None and info.size > TEXT_LIMIT:
        too_big = f"{bundle}: member {info.name} holds {info.size} bytes"
        raise VerificationError(too_big, hint=_AGAIN)
    if want is not None and info.size != want.size:
        other = f"{bundle}: member {info.name} holds {info.size} bytes, not {want.size}"
        raise VerificationError(other, hint=_AGAIN)
    target = dest / info.name
    digest = hashlib.sha256()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("xb") as out:  # never over a file already there
            while chunk := data.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
    except OSError as exc:
        why = exc.strerror or exc
        raise VerificationError(
            file=str(bundle), reason=f"cannot unpack member {info.name}: {why}"
        ) from exc
    if want is not None and digest.hexdigest() != want.sha256:
        target.unlink()
        raise VerificationError(
            f"{bundle}: member {info.name} has sha256 {digest.hexdigest()}, not {want.sha256}",
            hint=_AGAIN,
            file=str(bundle),
            key=info.name,
        )
    return target


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in chunks (artifacts may be gigabytes)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@dataclass(frozen=True)
class Head:
    """What a bundle says of itself, read before anything else is unpacked: bundle.json, and the
    texts of the members `read_head` was asked for (the lock's files) that it holds."""

    manifest: Manifest
    texts: dict[str, str]


def _text(bundle: Path, path: Path, name: str) -> str:
    """An unpacked member through the hostile-input reader: not UTF-8 is exit 4, naming it."""
    try:
        return read_input_text(path, hint="make the bundle again", shown=f"{bundle}:{name}")
    except InputError as exc:
        raise VerificationError(exc.message, hint=_AGAIN) from exc


def _manifest(bundle: Path, path: Path) -> Manifest:
    where = f"{bundle}:{MANIFEST}"
    text = _text(bundle, path, MANIFEST)
    try:
        with bounded_nesting(where):
            return parse_manifest(text, where)
    except InputError as exc:
        raise VerificationError(exc.message, hint=_AGAIN) from exc


def _check_total(bundle: Path, manifest: Manifest) -> None:
    total, limit = sum(m.size for m in manifest.members), ceiling(bundle.stat().st_size)
    if total > limit:
        raise VerificationError(
            f"{bundle}: bundle.json lists {total} bytes of members, more than the ceiling of "
            f"{limit} bytes ({RATIO} times the bundle's size)",
            hint="a bundle unpacks to little more than its own size: this one would fill the disk",
            file=str(bundle),
        )


def read_head(bundle: Path, dest: Path, texts: Sequence[str]) -> Head:
    """bundle.json, which must come first, then the members named in `texts` (each checked against
    it), read into `dest`; nothing else is written, and the manifest's total must be within the
    ceiling."""
    found: dict[str, str] = {}
    with _members(bundle) as members:
        first = next(members, None)
        if first is None or first[0].name != MANIFEST:
            raise VerificationError(
                file=str(bundle), reason=f"its first member is not {MANIFEST}", hint=_AGAIN
            )
        manifest = _manifest(bundle, _extract(bundle, first, dest, None))
        _check_total(bundle, manifest)
        listed = {m.path: m for m in manifest.members if m.path in texts}
        for member in members:
            info = member[0]
            if info.name in listed and info.name not in found:
                if info.size > TEXT_LIMIT:
                    too_big = f"{bundle}: member {info.name} holds {info.size} bytes"
                    raise VerificationError(too_big, hint=_AGAIN)
                path = _extract(bundle, member, dest, listed[info.name])
                found[info.name] = _text(bundle, path, info.name)
            if len(found) == len(listed):
                break
    return Head(manifest, found)


def extract_members(
    bundle: Path,
    dest: Path,
    expected: Mapping[str, Member],
    done: Collection[str],
) -> None:
    """Unpack into `dest` every member `expected` lists but those in `done` (`read_head` read them),
    each checked as it streams; a member not expected, or one coming twice, is refused before it
    is written, and every expected one must come."""
    seen = {MANIFEST}
    with _members(bundle) as members:
        next(members, None)  # bundle.json, read already
        for member in members:
            name = member[0].name
            if name in seen:
                raise VerificationError(
                    file=str(bundle), reason=f"member {name} comes twice", hint=_AGAIN
                )
            seen.add(name)
            if name in done:
                continue
            if name not in expected:
                reason = "is not a file the lock names (refused before it was written)"
                raise VerificationError(
                    f"{bundle}: member {name!r} {reason}",
                    hint=_AGAIN,
                    file=str(bundle),
                    key=name,
                    reason=reason,
                )
            _extract(bundle, member, dest, expected[name])
    missing = sorted(set(expected) - seen)
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise VerificationError(
            file=str(bundle), reason=f"member {missing[0]} is missing{more}", hint=_AGAIN
        )
