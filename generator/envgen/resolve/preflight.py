"""Before a lock does any work: is every host it needs reachable? Git remotes (`git ls-remote`),
conda channels (their repodata) and pip indexes are asked in parallel, each briefly, and every
unreachable host is reported at once, one short line each with what it serves below it, rather than
one per run as each stage meets the next."""

from __future__ import annotations

import re
import subprocess
import textwrap
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import requests

from envgen import interrupts
from envgen.errors import NetworkError, ToolError, Unreached
from envgen.model import Index, Matrix
from envgen.process import run
from envgen.redact import redact_text, redact_url
from envgen.resolve.archives.fetch import archive_path
from envgen.resolve.git.remote import GIT_MIRROR, bare_url
from envgen.resolve.pypi.index_client import IndexClient
from envgen.resolve.request import Relock
from envgen.resolve.settings import Settings
from envgen.resolve.sources.pins import asks_remote
from envgen.urls import url_host

# Seconds one probe may take: a reachable host answers a single request in well under that.
PROBE_TIMEOUT = 10.0
# Probes run at once; each mostly waits on the network.
PROBE_WORKERS = 16
# What an unreachable host serves is named below it, this many targets, then "and N more"; the
# lines wrap at WIDTH columns.
SHOWN = 3
WIDTH = 100


@dataclass(frozen=True)
class Target:
    """One URL a lock needs: a git remote, a conda channel or a pip index, and who needs it."""

    kind: str  # "git remote", "conda channel", "pip index", "archive"
    url: str  # as the matrix writes it (`${VAR}` unexpanded, credentials masked when shown)
    needed_by: tuple[str, ...]  # "a5 source vllm", "a5", ...

    def host(self, settings: Settings) -> str:
        """The host as reached: a channel's or index's `${VAR}` expanded (git's insteadOf is git's
        own)."""
        if self.kind == "git remote":
            return host_of(self.url)
        return host_of(settings.expand(self.url, f"{self.kind} {self.url}"))


def host_of(url: str) -> str:
    """The host (and port) a URL reaches as written: `github.com`, `127.0.0.1:8080`; scp-like git
    URLs (`git@host:path`) name their host; a local path is `local`."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https", "ssh", "git") and parts.hostname:
        return url_host(url)
    scp = re.match(r"^(?:[^@/]+@)?([^:/]+):(?!//)", url)
    return scp.group(1) if scp and not parts.scheme.startswith("file") else "local"


def targets(relocks: Sequence[Relock], settings: Settings) -> list[Target]:
    """Every remote, channel and index the re-locks need (indexes not offline: uv then reads its
    cache; a remote only when asked, see `asks_remote`), each once, with the envs that need it. Git
    requirements found in a source's files and its submodules are known only once it is read, so
    they are not among them (the stage that meets one unreachable names it)."""
    needs: dict[tuple[str, str], list[str]] = {}
    for relock in relocks:
        matrix, kept, moving = relock.matrix, relock.kept, relock.moving
        for source in matrix.sources:
            if asks_remote(source, kept, moving, settings):
                needs.setdefault(("git remote", source.url), []).append(
                    f"{matrix.name} source {source.name}"
                )
        for channel in matrix.channels:
            needs.setdefault(("conda channel", channel.url), []).append(matrix.name)
        for index in () if settings.offline else matrix.indexes:
            needs.setdefault(("pip index", index.url), []).append(matrix.name)
        for url, archive in () if settings.offline else _archives(matrix, settings.cache):
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


def _probe(
    target: Target,
    indexes: Sequence[Index],
    settings: Settings,
    timeout: float,
) -> str | None:
    """None when the target answered; else why not, in one line."""
    interrupts.check()
    if target.kind == "git remote":
        return _probe_git(target.url, settings, timeout)
    if target.kind == "archive":
        # Its redirect is its answer: the lock follows one only where the matrix allows it.
        with IndexClient([], settings.limits) as client:
            return _probe_http(client, target.url, timeout, redirects=False)
    if target.kind == "conda channel":
        # A channel's `user:token@` travels as an index's would: apart from the URL, as a header.
        access = settings.access(Index(f"conda channel {redact_url(target.url)}", target.url))
        with IndexClient([access], settings.limits) as client:
            return _probe_http(client, access.url.rstrip("/") + "/noarch/repodata.json", timeout)
    access = settings.access(next(i for i in indexes if i.url == target.url))
    with IndexClient([access], settings.limits) as client:
        return _probe_http(client, access.url, timeout)


def _probe_git(url: str, settings: Settings, timeout: float) -> str | None:
    """`git ls-remote` of HEAD alone: the user's git config applies (insteadOf mirrors,
    credentials), and the URL's own credential travels in the environment, as for every git
    call."""
    try:
        cmd = ["git", "ls-remote", "--", bare_url(url), "HEAD"]
        proc = run(cmd, env=settings.git.environ(url=url), timeout=timeout, check=False)
    except ToolError as exc:
        # git was still waiting for the host
        if isinstance(exc.__cause__, subprocess.TimeoutExpired):
            return f"no answer within {timeout:g} s"
        raise  # git itself is missing: a tool failure (exit 5), not an unreachable host
    if proc.returncode == 0:
        return None
    lines = [line.strip() for line in redact_text(proc.stderr).splitlines() if line.strip()]
    if not lines:
        return f"git ls-remote exited with {proc.returncode}"
    # "unable to access 'URL/': " repeats the URL the verdict names below its host.
    return re.sub(r"^unable to access '[^']*': ", "", lines[-1].removeprefix("fatal: "))


def _probe_http(
    client: IndexClient, url: str, timeout: float, *, redirects: bool = True
) -> str | None:
    """A HEAD (a GET whose body is never read, for a server that does not take HEAD): any answer but
    a server error or a refused login is a reachable host. Not a plain GET: PyPI's root page is 40
    MB, and it takes PyPI up to a second to start sending it."""
    try:
        status = client.head(url, timeout=timeout, redirects=redirects).status_code
        if status in (405, 501):  # HEAD not allowed, or not implemented
            with client.get(url, stream=True, timeout=timeout, redirects=redirects) as response:
                status = response.status_code
    except requests.RequestException as exc:
        return f"no answer within {timeout:g} s" if client.limit_reached(exc) else client.why(exc)
    if status in (401, 403):
        return (
            f"HTTP {status}: the credentials were refused (channels/*.toml, or the "
            "variables its URL names)"
        )
    return f"HTTP {status} from the server" if status >= 500 else None


def unreachable_hosts(
    relocks: Sequence[Relock], settings: Settings, *, timeout: float | None = None
) -> list[tuple[str, list[Target], str]]:
    """Every host with a target that did not answer: (host, its failed targets, the first one's
    reason).

    A probe waits `timeout` seconds, by default PROBE_TIMEOUT or the network read limit when that
    is lower."""
    timeout = min(PROBE_TIMEOUT, settings.limits.read) if timeout is None else timeout
    found = targets(relocks, settings)
    if not found:
        return []
    indexes = [i for r in relocks for i in r.matrix.indexes]
    pool = ThreadPoolExecutor(
        max_workers=min(PROBE_WORKERS, len(found)), initializer=interrupts.worker_thread
    )
    try:
        reasons = list(pool.map(lambda t: _probe(t, indexes, settings, timeout), found))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    by_host: dict[str, tuple[list[Target], str]] = {}
    for target, reason in zip(found, reasons, strict=True):
        if reason is not None:
            by_host.setdefault(target.host(settings), ([], reason))[0].append(target)
    return [(host, failed, reason) for host, (failed, reason) in by_host.items()]


def preflight(
    relocks: Sequence[Relock],
    settings: Settings,
    *,
    timeout: float | None = None,
) -> None:
    """NetworkError (exit 3) naming every unreachable host, one line each with what it serves
    below it, when any host the re-locks need does not answer; nothing has been resolved or written
    then."""
    failed = unreachable_hosts(relocks, settings, timeout=timeout)
    if not failed:
        return
    count = f"{len(failed)} host{'s' if len(failed) > 1 else ''}"
    raise NetworkError.listing(
        f"{count} that the lock needs did not answer; nothing was locked:",
        [Unreached(host, reason) for host, _, reason in failed],
        _hint([t for _, targets_, _ in failed for t in targets_], relocks),
        lines=[_line(host, targets_, reason) for host, targets_, reason in failed],
    )


def _line(host: str, failed: Sequence[Target], reason: str) -> str:
    """`github.com: <reason>`, then below it the first SHOWN of its remotes, channels, indexes and
    archives, each with who needs it, and `and N more`; a line too long wraps (never inside a URL,
    nor between it and its kind), indented further."""
    below = [_wrapped(f"{t.kind} {redact_url(t.url)}", t.needed_by) for t in failed[:SHOWN]]
    below += [f"and {len(failed) - SHOWN} more"] if len(failed) > SHOWN else []
    return f"{host}: {reason}" + "".join(f"\n    {line}" for line in below)


def _wrapped(what: str, needed_by: Sequence[str]) -> str:
    # The kind and its URL are one word to textwrap (a NUL holds their spaces meanwhile).
    text = f"{what.replace(' ', chr(0))} ({', '.join(needed_by)})"
    lines = textwrap.wrap(text, WIDTH - 4, break_long_words=False, break_on_hyphens=False)
    return "\n      ".join(lines).replace(chr(0), " ")


# The order a hint takes the failed kinds in: the conda part is solved first, and without a channel
# nothing else matters; git remotes last, their mirrors are set outside the project.
_KINDS = ("conda channel", "pip index", "git remote")


def _hint(failed: Sequence[Target], relocks: Sequence[Relock]) -> str:
    """What to do, opening with what failed first in _KINDS: a channel's or an index's mirror is its
    `url` in channels/<name>.toml, a git remote's is git's own `insteadOf`."""
    channels = {c.url: c.name for r in relocks for c in r.matrix.channels}
    files = channels | {i.url: i.name for r in relocks for i in r.matrix.indexes}
    parts = []
    for kind in (k for k in _KINDS if any(t.kind == k for t in failed)):
        if kind == "git remote":
            parts.append(f"git remotes: a mirror through {GIT_MIRROR} (docs/mirrors.md)")
            continue
        urls = {t.url for t in failed if t.kind == kind}
        names = ", ".join(sorted(f"channels/{files[url]}.toml" for url in urls))
        if kind == "pip index":
            what = "pip indexes"
        else:
            what = "conda channels" if urls < set(channels) else "no conda channel answered"
        parts.append(f"{what}: point `url` in {names} at a mirror this host reaches")
    return "; ".join([*parts, "`envgen lock --no-preflight` skips this check"])
