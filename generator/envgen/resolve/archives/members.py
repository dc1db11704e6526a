"""Wheels that come inside release archives: each archive fetched once into envgen's cache by its
sha256, checked against the sha256 the matrix pins (else the one the previous lock recorded), and
the wheels the matrix names taken from it, each hashed, its metadata read.

A lock records per platform the archive's URL and sha256 and each wheel's path, version, sha256 and
requirements (evaluated for that platform); installing takes the same wheels out of the same bytes
(`extract_members`), and refuses an archive or a wheel whose sha256 is not the lock's (exit 4).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tarfile
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from packaging.requirements import Requirement as Pep508
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from envgen import atomic, network, platforms
from envgen.digests import short_digest
from envgen.errors import ResolutionError, VerificationError
from envgen.inputs.untrusted import tree_path_problem
from envgen.model import Archive, ArchiveMember, Lock, LockedArchive, Matrix
from envgen.names import package_key
from envgen.redact import redact_url
from envgen.resolve.archives.fetch import archive_format, fetch
from envgen.resolve.pypi import uv_pylock
from envgen.resolve.pypi.index_client import IndexClient
from envgen.resolve.settings import Settings
from envgen.scratch import scratch_dir
from envgen.urls import url_host

log = logging.getLogger(__name__)

_CHUNK = 1 << 20


def member_path(cache: Path, member: ArchiveMember) -> Path:
    """Where a wheel taken from an archive is kept: under its sha256, by its own file name (pip
    reads the wheel's tags from it)."""
    return cache / "archives" / "wheels" / member.sha256[:2] / member.sha256 / member.filename


class ArchiveFetcher:
    """The archives of a matrix locked over HTTP into the cache, as `settings` say (the re-lock's
    resolver of archives, resolve/resolvers.py)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def lock(self, matrix: Matrix, previous: Sequence[LockedArchive]) -> tuple[LockedArchive, ...]:
        settings = self.settings
        return lock_archives(
            matrix, settings.cache, settings.limits, previous=previous, offline=settings.offline
        )


def lock_archives(
    matrix: Matrix,
    cache: Path,
    limits: network.Limits,
    *,
    previous: Sequence[LockedArchive] = (),
    offline: bool = False,
) -> tuple[LockedArchive, ...]:
    """Every archive of `matrix` for each platform it has a URL for, in the matrix's order.

    An archive keeps the sha256 `previous` records for the same URL unless the matrix pins one: the
    bytes at a URL the lock pinned must not change under it."""
    recorded = {(a.name, a.platform, a.url): a.sha256 for a in previous}
    locked: list[LockedArchive] = []
    with IndexClient((), limits) as client:
        for archive in matrix.archives:
            for platform in matrix.platforms:
                url = archive.url_for(platform)
                if url is None:
                    continue
                expected = archive.sha256_for(platform)
                origin = str(matrix.origin("archives", archive.name, "sha256"))
                if expected is None and (archive.name, platform, url) in recorded:
                    expected, origin = (
                        recorded[(archive.name, platform, url)],
                        "the lock it was locked in",
                    )
                hosts = archive.redirect_hosts
                path = fetch(
                    client,
                    url,
                    expected,
                    cache,
                    offline=offline,
                    expected_by=origin,
                    name=archive.name,
                    redirect_hosts=hosts,
                )
                members = read_members(path, archive, platform, matrix, url)
                log.info(
                    "archive %s for %s: %s -> %s",
                    archive.name,
                    platform,
                    redact_url(url),
                    short_digest(path.name),
                )
                locked.append(LockedArchive(archive.name, platform, url, path.name, members, hosts))
    return tuple(locked)


@contextmanager
def _opened(path: Path, url: str) -> Iterator[tuple[list[str], object]]:
    """The regular files of a zip or tar archive by path, and the open archive."""
    mode = archive_format(path, url)
    try:
        if mode == "zip":
            with zipfile.ZipFile(path) as zf:
                yield [i.filename for i in zf.infolist() if not i.is_dir()], zf
                return
        with tarfile.open(path, mode) as tar:
            yield [m.name for m in tar.getmembers() if m.isfile()], tar
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as exc:
        raise VerificationError(
            f"the archive {redact_url(url)} is neither a zip nor a tar archive that reads: {exc}",
            hint="check the URL names the release archive",
            host=url_host(url),
        ) from exc


def _stream(archive: object, name: str) -> IO[bytes]:
    if isinstance(archive, zipfile.ZipFile):
        return archive.open(name)
    assert isinstance(archive, tarfile.TarFile)
    handle = archive.extractfile(name)
    if handle is None:
        reason = "is not a regular file of its archive"
        raise VerificationError(f"{name} {reason}", file=name, reason=reason)
    return handle


def _copy(archive: object, name: str, dest: Path, *, ceiling: int, expect: str | None) -> str:
    """Member `name` streamed through its sha256 into a part file, placed at `dest` only when its
    sha256 is `expect` (or none is expected); at most `ceiling` bytes (VerificationError past it:
    a member that expands past what its archive could hold is a bomb, never written out whole)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with atomic.part_file(dest) as part, _stream(archive, name) as src:
        while chunk := src.read(_CHUNK):
            size += len(chunk)
            if size > ceiling:
                raise VerificationError(
                    f"{name} of its archive expands past {ceiling} bytes, more than a wheel "
                    "that archive could hold; nothing of it was kept",
                    hint="check the URL names the release archive",
                    file=name,
                )
            digest.update(chunk)
            part.handle.write(chunk)
        found = digest.hexdigest()
        if expect is None or found == expect:
            part.place(dest)
    return found


def _ceiling(archive: Path) -> int:
    """The most bytes one member may expand to: wheels are compressed already, so a member is
    never much larger than the archive that holds it."""
    return 4 * archive.stat().st_size + (1 << 20)


def _wheels(names: list[str]) -> list[tuple[str, str, str, frozenset[Tag]]]:
    """(path, canonical name, version, tags) of each wheel an archive holds at a plain path."""
    found = []
    for path in names:
        if not path.endswith(".whl") or tree_path_problem(path):
            continue
        try:
            name, version, _, tags = parse_wheel_filename(path.rsplit("/", 1)[-1])
        except InvalidWheelFilename:
            continue
        found.append((path, str(name), str(version), tags))
    return found


def read_members(
    path: Path,
    archive: Archive,
    platform: str,
    matrix: Matrix,
    url: str,
) -> tuple[ArchiveMember, ...]:
    """The wheel of each distribution `archive` names that installs on `platform` (the best tag),
    each hashed and its requirements read; ResolutionError (exit 3) naming what the archive holds
    otherwise."""
    tags = platforms.platform_tags(platform, matrix.python, matrix.glibc)
    priority = uv_pylock.tag_priority(tags)
    environment = {**platforms.marker_environment(platform, matrix.python), "extra": ""}
    members = []
    with _opened(path, url) as (names, opened):
        wheels = _wheels(names)
        for wanted in archive.wheels:
            normal = package_key(wanted)
            fits = [w for w in wheels if w[1] == normal and w[3] & priority.keys()]
            if not fits:
                held = ", ".join(w[0] for w in wheels) or "no wheel"
                raise ResolutionError(
                    f"archive {archive.name} for {platform} ({redact_url(url)}) holds no wheel of "
                    f"{wanted} that installs on {platform} with python {matrix.python}; it holds "
                    f"{held}",
                    hint=f"check archives.{archive.name} (wheels, url.{platform}) in {matrix.path}",
                    package=wanted,
                    platform=platform,
                )
            best = min(fits, key=lambda w: min(priority[t] for t in w[3] if t in priority))
            members.append(_member(opened, best[0], best[1], best[2], path, environment))
    return tuple(members)


def _member(
    opened: object, path: str, name: str, version: str, archive: Path, environment: dict[str, str]
) -> ArchiveMember:
    """One wheel taken out, hashed, and its Requires-Dist as they apply on the platform."""
    dest = archive.parent / f"{os.getpid()}-{path.rsplit('/', 1)[-1]}"
    try:
        sha256 = _copy(opened, path, dest, ceiling=_ceiling(archive), expect=None)
        with zipfile.ZipFile(dest) as wheel:
            names = wheel.namelist()
            info = [n for n in names if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
            text = wheel.read(info[0]).decode("utf-8", errors="replace") if info else ""
    except zipfile.BadZipFile as exc:
        reason = f"is not a wheel that reads: {exc}"
        raise VerificationError(
            f"{path} of its archive {reason}", file=path, reason=reason
        ) from exc
    finally:
        dest.unlink(missing_ok=True)
    requires = uv_pylock.parse_metadata(text, path).requires
    applying = [r for r in requires if r.marker is None or r.marker.evaluate(environment)]
    # Evaluated here for the platform: the resolution gets the requirement without its marker.
    kept = [r for r in applying if not uv_pylock.needs_extra(r)]
    plain = sorted({_without_marker(r) for r in kept})
    return ArchiveMember(path, name, version, sha256, tuple(plain))


def _without_marker(requirement: Pep508) -> str:
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return f"{package_key(requirement.name)}{extras}{requirement.specifier}"


def archive_wheels(
    client: IndexClient, locked: LockedArchive, *, cache: Path, offline: bool = False
) -> dict[str, Path]:
    """The wheels of a locked archive as files (member sha256 -> path): the archive fetched or taken
    from the cache, checked against the lock's sha256, each wheel against its own (exit 4)."""
    where = f"the lock of archive {locked.name} ({locked.platform})"
    path = fetch(
        client,
        locked.url,
        locked.sha256,
        cache,
        offline=offline,
        expected_by=where,
        name=locked.name,
        redirect_hosts=locked.redirect_hosts,
    )
    found: dict[str, Path] = {}
    with _opened(path, locked.url) as (names, opened):
        for member in locked.members:
            dest = member_path(cache, member)
            if member.path not in names:
                shown = redact_url(locked.url)
                raise VerificationError(
                    f"the archive {shown} holds no {member.path}, named by {where}",
                    hint="the lock does not describe this archive: re-lock",
                    key=member.path,
                )
            sha256 = _copy(opened, member.path, dest, ceiling=_ceiling(path), expect=member.sha256)
            if sha256 != member.sha256:
                raise VerificationError(
                    f"{member.path} of the archive {redact_url(locked.url)} has sha256 {sha256}, "
                    f"{where} says {member.sha256}",
                    hint="the archive is not the one locked: find out why, then re-lock",
                    key=member.path,
                )
            found[member.sha256] = dest
    return found


@contextmanager
def fetched_wheels(
    lock: Lock, platform: str, cache: Path, limits: network.Limits
) -> Iterator[Path | None]:
    """A directory of the wheels the lock takes out of release archives on `platform`, by file name
    (the recipe's --archives), out of each archive, fetched or cached; an archive or wheel whose
    sha256 is not the lock's is refused (exit 4) before anything is installed. None when the
    platform has no archive."""
    with IndexClient((), limits) as client:
        wheels = functools.partial(archive_wheels, client, cache=cache)
        with _wheels_directory(lock.archives_for(platform), wheels) as directory:
            yield directory


@contextmanager
def bundled_wheels(lock: Lock, platform: str, local: Mapping[str, Path]) -> Iterator[Path | None]:
    """The same directory from a bundle's verified files (`local`, sha256 -> path): one lacking is
    refused (exit 4) before anything is installed."""
    wheels = functools.partial(_located, local=local)
    with _wheels_directory(lock.archives_for(platform), wheels) as directory:
        yield directory


@contextmanager
def _wheels_directory(
    archives: Sequence[LockedArchive], wheels: Callable[[LockedArchive], Mapping[str, Path]]
) -> Iterator[Path | None]:
    if not archives:
        yield None
        return
    with scratch_dir("envgen-archives-") as directory:
        for archive in archives:
            found = wheels(archive)
            for member in archive.members:
                (directory / member.filename).symlink_to(found[member.sha256].absolute())
        yield directory


def _located(archive: LockedArchive, local: Mapping[str, Path]) -> dict[str, Path]:
    for member in archive.members:
        if member.sha256 not in local:
            raise VerificationError(
                f"the bundle holds no {member.filename} (archive {archive.name} of "
                f"{archive.platform})",
                hint="make the bundle again from this lock (nothing was installed)",
                platform=archive.platform,
            )
    return {m.sha256: local[m.sha256] for m in archive.members}
