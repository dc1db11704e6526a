"""The conda side of a lock: solve a matrix's conda specs per platform with rattler."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import rattler
import rattler.exceptions
from rattler.networking import (
    AddHeadersMiddleware,
    AuthenticationMiddleware,
    GCSMiddleware,
    OciMiddleware,
    RetryMiddleware,
    S3Middleware,
)
from rattler.package import BuildString

from envgen import network
from envgen.credentials import Credentials, split_credential
from envgen.errors import EnvgenError, InputError, NetworkError, ResolutionError, Unreached
from envgen.inputs.channels import expand_url
from envgen.model import Channel, CondaEntry, Matrix, python_versions
from envgen.platforms import virtual_packages
from envgen.redact import redact_text, redact_url, strip_credentials
from envgen.resolve.settings import Settings

log = logging.getLogger(__name__)


def _generic(spec: str) -> rattler.GenericVirtualPackage:
    name, version, build = spec.split("=")
    return rattler.GenericVirtualPackage(
        rattler.PackageName(name), rattler.Version(version), BuildString(build)
    )


def _split_depend(depend: str) -> tuple[str, str]:
    """`python >=3.8` -> ("python", ">=3.8"); a bare name has the empty spec."""
    name, _, spec = depend.strip().partition(" ")
    return name, spec.strip()


def _depends(depends: Sequence[str]) -> tuple[tuple[str, str], ...]:
    merged: dict[str, list[str]] = {}
    for depend in depends:
        name, spec = _split_depend(depend)
        merged.setdefault(name, [])
        if spec:
            merged[name].append(spec)
    return tuple(sorted((name, ",".join(specs)) for name, specs in merged.items()))


def _entry(record: rattler.RepoDataRecord, platform: str) -> CondaEntry:
    if record.md5 is None or record.sha256 is None:
        raise ResolutionError(
            f"conda package {record.file_name} from "
            f"{redact_url(record.channel or record.url)} has no md5 or "
            "sha256 in its repodata",
            hint="a lock needs both hashes: use a channel whose repodata.json records them",
            package=record.name.normalized,
            platform=platform,
        )
    return CondaEntry(
        name=record.name.normalized,
        version=str(record.version),
        build=str(record.build),
        platform=platform,
        url=strip_credentials(record.url),
        md5=record.md5.hex(),
        sha256=record.sha256.hex(),
        depends=_depends(record.depends),
    )


def rattler_client(credentials: Credentials, limits: network.Limits) -> rattler.Client:
    """rattler's standard client, plus each credential as an Authorization header on the requests it
    covers, within envgen's network limits: each request bounded as a whole (rattler offers no
    connect or read timeout), a transient failure retried `retries` times.

    The channel URLs rattler sees carry no credentials, so none reaches its repodata cache
    (`*.info.json`, shard caches) or a record's URL; the header is added in memory for each request.
    """
    network.native_threads.set()
    return rattler.Client(
        [
            RetryMiddleware(limits.retries),
            AuthenticationMiddleware(),
            AddHeadersMiddleware(credentials.headers),
            OciMiddleware(),
            GCSMiddleware(),
            S3Middleware(),
        ],
        timeout=max(1, math.ceil(limits.conda)),
    )


# anaconda.org's token in the path: `https://conda.anaconda.org/t/<token>/<channel>`.
_PATH_TOKEN = re.compile(r"/t/[^/]+(/|$)")


def _channel_url(channel: Channel, environ: Mapping[str, str]) -> str:
    """The channel's URL, `${VAR}` expanded; a token in its path is refused: every package URL
    rattler records and caches, and so the lock, would carry it (only userinfo is split off and sent
    as a header)."""
    url = expand_url(channel.url, f"conda channel {channel.name}", environ)
    if _PATH_TOKEN.search(urlsplit(url).path):
        shown = _PATH_TOKEN.sub(r"/t/***\1", redact_url(channel.url))
        raise InputError(
            file=f"channels/{channel.name}.toml",
            reason=f"url {shown} has a token in its path (/t/...), which every package URL "
            "of the lock and rattler's cache would carry",
            hint="give it as user:token@ (sent as a header, e.g. "
            "https://user:${TOKEN}@host/channel), or store "
            "it with rattler's authentication (`pixi auth login HOST --conda-token "
            "...`, RATTLER_AUTH_FILE)",
        )
    return url


def _failed_channels(matrix: Matrix, message: str) -> list[str]:
    """The channel URLs a gateway message names (all of them when it names none), redacted."""
    named = [c.url for c in matrix.channels if c.url.rstrip("/") in message]
    return [redact_url(url) for url in (named or [c.url for c in matrix.channels])]


def _unsatisfiable(matrix: Matrix, platform: str, said: str) -> ResolutionError:
    return ResolutionError(
        f"{matrix.file_of('conda', 'specs')}: [conda] specs cannot be satisfied for {platform} "
        f"(glibc {matrix.glibc}): {', '.join(matrix.conda_specs)}\n{said}",
        hint="relax the specs named above, or check that the channels carry them for this platform",
        file=matrix.file_of("conda", "specs"),
        key="conda.specs",
        platform=platform,
    )


def _unreachable(
    matrix: Matrix, platform: str, message: str, limits: network.Limits
) -> NetworkError:
    """One line naming the channel and why (the innermost cause, or the timeout that ended the
    wait)."""
    if network.timed_out(message):
        why = f"no complete answer within {network.seconds('conda', limits)}"
        hint = network.raise_hint("conda", limits)
    else:
        why, hint = redact_text(network.reason(message, limits)), "check the network"
    channels = _failed_channels(matrix, message)
    shown = ", ".join(channels)
    return NetworkError(
        f"cannot fetch repodata for {platform} from conda channel {shown}: {why}",
        hint=f"check the channel URL in channels/*.toml (a mirror can replace it there); {hint}",
        hosts=[Unreached(channel, why) for channel in channels],
        platform=platform,
        failure=f"cannot fetch repodata from conda channel {shown}: {why}",
    )


@dataclass(frozen=True)
class CondaSolve:
    """One platform's conda solve: entries sorted by name, and the preferred entries the channels no
    longer offer."""

    entries: tuple[CondaEntry, ...]
    unavailable: tuple[CondaEntry, ...] = ()


def solve_conda(matrix: Matrix, platform: str, settings: Settings) -> tuple[CondaEntry, ...]:
    """Solve the matrix's conda specs for `platform` (+ noarch) against its channels; entries sorted
    by name."""
    return solve_conda_preferring(matrix, platform, (), settings).entries


def solve_conda_preferring(
    matrix: Matrix, platform: str, preferred: Sequence[CondaEntry], settings: Settings
) -> CondaSolve:
    """Solve the matrix's conda specs for `platform` (+ noarch), keeping `preferred` records where
    the specs allow.

    Repodata is cached under the cache's `conda/`. Virtual packages come from `virtual_packages`,
    never the host. `${VAR}` in a channel URL is expanded from the settings' variables; its
    credentials travel as a header (`rattler_client`), never in a URL rattler could cache or an
    entry could record. A preferred entry is handed to rattler as the channel's own record of the
    same file (same sha256): rattler would otherwise keep a record the channel no longer serves;
    those fall back to a fresh choice.
    """
    vpkgs = [_generic(v) for v in virtual_packages(matrix, platform)]
    urls = [_channel_url(c, settings.variables) for c in matrix.channels]
    credentials = Credentials.of(urls)
    channels = [rattler.Channel(split_credential(url)[0]) for url in urls]
    limits = settings.limits
    client = rattler_client(credentials, limits)
    gateway = rattler.Gateway(cache_dir=settings.cache / "conda" / "repodata", client=client)
    subdirs = [rattler.Subdir(platform), rattler.Subdir("noarch")]
    specs = ", ".join(matrix.conda_specs)
    log.info("solving conda specs for %s: %s", platform, specs)

    async def solve() -> tuple[list[rattler.RepoDataRecord], tuple[CondaEntry, ...]]:
        locked, unavailable = await _offered(gateway, channels, subdirs, preferred)
        records = await rattler.solve(
            channels,
            list(matrix.conda_specs),
            gateway=gateway,
            platforms=subdirs,
            virtual_packages=vpkgs,
            locked_packages=locked,
        )
        return records, unavailable

    def over() -> EnvgenError:
        channels = _failed_channels(matrix, "")
        took = f"took more than {network.seconds('budget', limits)}"
        return NetworkError(
            f"the conda solve for {platform} (repodata from {', '.join(channels)}) {took}",
            hint="check the channels' URLs and the network; "
            f"{network.raise_hint('budget', limits)}",
            hosts=[Unreached(channel, took) for channel in channels],
            platform=platform,
            failure=f"the conda solve (repodata from {', '.join(channels)}) {took}",
        )

    try:
        records, unavailable = network.run_bounded(solve(), budget=limits.budget, over=over)
    except rattler.exceptions.SolverError as exc:
        said = redact_text(str(exc).strip(), credentials.secrets)
        raise _unsatisfiable(matrix, platform, said) from exc
    except (rattler.exceptions.GatewayError, rattler.exceptions.FetchRepoDataError) as exc:
        # Another platform's or subdir's request may still be running in rattler's threads.
        network.abandoned.set()
        raise _unreachable(
            matrix, platform, redact_text(str(exc), credentials.secrets), limits
        ) from exc
    return _solved(records, unavailable, platform)


def _solved(
    records: Sequence[rattler.RepoDataRecord],
    unavailable: Sequence[CondaEntry],
    platform: str,
) -> CondaSolve:
    """The solve's entries, and the preferred ones the channels no longer offer that are still
    needed (a package no longer needed is simply gone)."""
    entries = tuple(sorted((_entry(r, platform) for r in records), key=lambda e: e.name))
    needed = {e.name for e in entries}
    gone = tuple(e for e in unavailable if e.name in needed)
    if gone:
        shown = ", ".join(f"{e.name} {e.version} {e.build}" for e in gone)
        log.warning("%s: the conda channels no longer offer %s; resolved afresh", platform, shown)
    return CondaSolve(entries, gone)


@dataclass(frozen=True)
class RattlerSolver:
    """Solves with rattler against the matrix's channels (the re-lock's `CondaSolver`)."""

    settings: Settings

    def solve(self, matrix: Matrix, platform: str, preferred: Sequence[CondaEntry]) -> CondaSolve:
        return solve_conda_preferring(matrix, platform, preferred, self.settings)


async def _offered(
    gateway: rattler.Gateway,
    channels: Sequence[rattler.Channel],
    subdirs: Sequence[rattler.Subdir],
    preferred: Sequence[CondaEntry],
) -> tuple[list[rattler.RepoDataRecord], tuple[CondaEntry, ...]]:
    """The channels' records of the `preferred` files (matched by sha256), and the entries they no
    longer offer."""
    if not preferred:
        return [], ()
    names = sorted({e.name for e in preferred})
    found = await gateway.query(channels, subdirs, names, recursive=False)
    by_sha = {r.sha256.hex(): r for records in found for r in records if r.sha256 is not None}
    locked = [by_sha[e.sha256] for e in preferred if e.sha256 in by_sha]
    return locked, tuple(e for e in preferred if e.sha256 not in by_sha)


def repodata_record(entry: CondaEntry) -> rattler.RepoDataRecord:
    """A rattler record of a locked entry: enough for rattler to download, verify and link it."""
    path = urlsplit(entry.url).path
    subdir = path.rsplit("/", 2)[-2]
    file_name = path.rsplit("/", 1)[-1]
    package = rattler.PackageRecord(
        name=entry.name,
        version=entry.version,
        build=BuildString(entry.build),
        build_number=0,
        subdir=subdir,
        depends=[f"{name} {spec}".strip() for name, spec in entry.depends],
        md5=bytes.fromhex(entry.md5),
        sha256=bytes.fromhex(entry.sha256),
    )
    channel = entry.url[: entry.url.rindex(f"/{subdir}/")] + "/"
    return rattler.RepoDataRecord(package, file_name, entry.url, channel)


def admits(name: str, spec: str, entry: CondaEntry) -> bool:
    """Whether the conda requirement `name spec` (a depends string's parts) admits the locked
    `entry`."""
    try:
        return bool(rattler.MatchSpec(f"{name} {spec}".strip()).matches(repodata_record(entry)))
    except (rattler.exceptions.InvalidMatchSpecError, ValueError):
        # A spec rattler cannot read says nothing about the entry (the solve itself read it).
        return True


def python_version(entries: Sequence[CondaEntry]) -> str:
    """The exact python version a conda solve chose (one platform's entries)."""
    versions = python_versions(entries)
    if len(versions) != 1:
        found = f"versions {', '.join(versions)}" if versions else "no python package"
        raise ResolutionError(
            f"the conda solve must choose exactly one python; it has {found}",
            hint="add one `python X.Y.*` to [conda] specs in the matrix",
            package="python",
        )
    return versions[0]
