"""Before a lock does any work: is every host it needs reachable? Git remotes (`git ls-remote`), conda channels
(their repodata) and pip indexes are asked in parallel, each briefly, and every unreachable host is reported at
once, one line each, rather than one per run as each stage meets the next."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import requests

from envgen import interrupts, network
from envgen.errors import NetworkError, ToolError
from envgen.inputs.channels import access_index, expand_url
from envgen.model import Index, LockedSource, Matrix
from envgen.process import run
from envgen.redact import redact_text, redact_url
from envgen.resolve.archives import archive_path
from envgen.resolve.git_remote import MIRROR_HINT, bare_url, git_env
from envgen.resolve.git_sources import asks_remote
from envgen.resolve.index_client import IndexClient

# Seconds one probe may take: a reachable host answers a single request in well under that.
PROBE_TIMEOUT = 10.0
# Probes run at once; each mostly waits on the network.
PROBE_WORKERS = 16


@dataclass(frozen=True)
class Target:
    """One URL a lock needs: a git remote, a conda channel or a pip index, and who needs it."""

    kind: str  # "git remote", "conda channel", "pip index", "archive"
    url: str  # as the matrix writes it (`${VAR}` unexpanded, credentials masked when shown)
    needed_by: tuple[str, ...]  # "a5 source vllm", "a5", ...

    @property
    def host(self) -> str:
        """The host as reached: a channel's or index's `${VAR}` expanded (git's insteadOf is git's own)."""
        url = self.url if self.kind == "git remote" else expand_url(self.url, f"{self.kind} {self.url}", os.environ)
        return host_of(url)


def host_of(url: str) -> str:
    """The host (and port) a URL reaches as written: `github.com`, `127.0.0.1:8080`; scp-like git URLs
    (`git@host:path`) name their host; a local path is `local`."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https", "ssh", "git") and parts.hostname:
        return parts.hostname + (f":{parts.port}" if parts.port else "")
    scp = re.match(r"^(?:[^@/]+@)?([^:/]+):(?!//)", url)
    return scp.group(1) if scp and not parts.scheme.startswith("file") else "local"


@dataclass(frozen=True)
class Relock:
    """An env about to be re-locked: its matrix, the sources its lock on disk records (their commits are kept
    unless updated) and the `update` asked for (source names, or True for all)."""

    matrix: Matrix
    previous: Mapping[str, LockedSource] = field(default_factory=dict)
    update: Collection[str] | bool = ()


def targets(relocks: Sequence[Relock], *, cache: Path, offline: bool = False) -> list[Target]:
    """Every remote, channel and index the re-locks need (indexes not when `offline`: uv then reads its cache;
    a remote only when asked, see `asks_remote`), each once, with the envs that need it. Git requirements found
    in a source's files and its submodules are known only once it is read, so they are not among them (the
    stage that meets one unreachable names it)."""
    needs: dict[tuple[str, str], list[str]] = {}
    for relock in relocks:
        matrix = relock.matrix
        for source in matrix.sources:
            if asks_remote(source, relock.previous, relock.update, cache):
                needs.setdefault(("git remote", source.url), []).append(f"{matrix.name} source {source.name}")
        for channel in matrix.channels:
            needs.setdefault(("conda channel", channel.url), []).append(matrix.name)
        for index in () if offline else matrix.indexes:
            needs.setdefault(("pip index", index.url), []).append(matrix.name)
        for url, archive in () if offline else _archives(matrix, cache):
            needs.setdefault(("archive", url), []).append(f"{matrix.name} archive {archive}")
    return [Target(kind, url, tuple(dict.fromkeys(who))) for (kind, url), who in needs.items()]


def _archives(matrix: Matrix, cache: Path) -> list[tuple[str, str]]:
    """(URL, archive name) of each archive the lock fetches: those whose pinned sha256 the cache
    lacks."""
    found = []
    for archive in matrix.archives:
        for platform, url in archive.urls:
            pinned = archive.sha256_for(platform)
            if not (pinned and archive_path(cache, pinned).is_file()):
                found.append((url, archive.name))
    return found


def _probe(target: Target, indexes: Sequence[Index], timeout: float) -> str | None:
    """None when the target answered; else why not, in one line."""
    interrupts.check()
    if target.kind == "git remote":
        return _probe_git(target.url, timeout)
    if target.kind == "archive":
        with IndexClient([]) as client:
            return _probe_http(client, target.url, timeout)
    if target.kind == "conda channel":
        # A channel's `user:token@` travels as an index's would: apart from the URL, as a header.
        access = access_index(Index(f"conda channel {redact_url(target.url)}", target.url), os.environ)
        with IndexClient([access]) as client:
            return _probe_http(client, access.url.rstrip("/") + "/noarch/repodata.json", timeout)
    index = next(i for i in indexes if i.url == target.url)
    access = access_index(index, os.environ)
    with IndexClient([access]) as client:
        return _probe_http(client, access.url, timeout)


def _probe_git(url: str, timeout: float) -> str | None:
    """`git ls-remote` of HEAD alone: the user's git config applies (insteadOf mirrors, credentials), and the
    URL's own credential travels in the environment, as for every git call."""
    try:
        cmd = ["git", "ls-remote", "--", bare_url(url), "HEAD"]
        proc = run(cmd, env=git_env(url=url), timeout=timeout, check=False)
    except ToolError as exc:
        if isinstance(exc.__cause__, subprocess.TimeoutExpired):  # git was still waiting for the host
            return f"no answer within {timeout:g} s"
        raise  # git itself is missing: a tool failure (exit 5), not an unreachable host
    if proc.returncode == 0:
        return None
    lines = [line.strip() for line in redact_text(proc.stderr).splitlines() if line.strip()]
    return lines[-1].removeprefix("fatal: ") if lines else f"git ls-remote exited with {proc.returncode}"


def _probe_http(client: IndexClient, url: str, timeout: float) -> str | None:
    """A HEAD (a GET whose body is never read, for a server that does not take HEAD): any answer but a server
    error or a refused login is a reachable host. Not a plain GET: PyPI's root page is 40 MB, and it takes
    PyPI up to a second to start sending it."""
    try:
        status = client.head(url, timeout=timeout).status_code
        if status in (405, 501):  # HEAD not allowed, or not implemented
            with client.get(url, stream=True, timeout=timeout) as response:
                status = response.status_code
    except requests.RequestException as exc:
        return f"no answer within {timeout:g} s" if client.limit_reached(exc) else client.why(exc)
    if status in (401, 403):
        return f"HTTP {status}: the credentials were refused (channels/*.toml, or the variables its URL names)"
    return f"HTTP {status} from the server" if status >= 500 else None


def unreachable_hosts(
    relocks: Sequence[Relock], *, cache: Path, offline: bool = False, timeout: float | None = None
) -> list[tuple[str, list[Target], str]]:
    """Every host with a target that did not answer: (host, its failed targets, the first one's reason).

    A probe waits `timeout` seconds, by default PROBE_TIMEOUT or the network read limit when that is lower."""
    timeout = min(PROBE_TIMEOUT, network.limits().read) if timeout is None else timeout
    found = targets(relocks, cache=cache, offline=offline)
    if not found:
        return []
    indexes = [i for r in relocks for i in r.matrix.indexes]
    pool = ThreadPoolExecutor(max_workers=min(PROBE_WORKERS, len(found)), initializer=interrupts.worker_thread)
    try:
        reasons = list(pool.map(lambda t: _probe(t, indexes, timeout), found))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    by_host: dict[str, tuple[list[Target], str]] = {}
    for target, reason in zip(found, reasons, strict=True):
        if reason is not None:
            by_host.setdefault(target.host, ([], reason))[0].append(target)
    return [(host, failed, reason) for host, (failed, reason) in by_host.items()]


def preflight(relocks: Sequence[Relock], *, cache: Path, offline: bool = False, timeout: float | None = None) -> None:
    """NetworkError (exit 3) naming every unreachable host, one line each, when any host the re-locks need does
    not answer; nothing has been resolved or written then."""
    failed = unreachable_hosts(relocks, cache=cache, offline=offline, timeout=timeout)
    if not failed:
        return
    lines = [_line(host, targets_, reason) for host, targets_, reason in failed]
    count = f"{len(failed)} host{'s' if len(failed) > 1 else ''}"
    raise NetworkError(
        f"{count} that the lock needs did not answer; nothing was locked:\n" + "\n".join(lines),
        hint=f"{MIRROR_HINT}; conda channels and pip indexes: their URLs in channels/*.toml; "
        "`envgen lock --no-preflight` skips this check",
    )


def _line(host: str, failed: Iterable[Target], reason: str) -> str:
    """`  github.com: git remote https://github.com/a/b.git (a5 source b) and 3 more: <reason>`."""
    failed = list(failed)
    first = failed[0]
    more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
    return f"  {host}: {first.kind} {redact_url(first.url)} ({', '.join(first.needed_by)}){more}: {reason}"
