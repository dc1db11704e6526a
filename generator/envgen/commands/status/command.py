"""`envgen status`: is a lock fresh w.r.t. its inputs, have its branches moved upstream, what is
pending or outdated; with --watch, does the matrix still say what upstream says."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from packaging.version import Version

from envgen.commands.lock.freshness import freshness
from envgen.commits import is_full_commit, short_commit
from envgen.errors import EnvgenError
from envgen.inputs.matrix import load_env
from envgen.lockio.integrity import checked_lock, repair_hint
from envgen.model import Lock, LockedSource, Matrix
from envgen.names import package_key
from envgen.project import Project, cache_dir
from envgen.redact import redact_url, strip_credentials
from envgen.resolve.git.remote import GitEnv, upstream_commit
from envgen.resolve.settings import Settings
from envgen.urls import compare_url

if TYPE_CHECKING:
    # The watch's findings (their requirement checks) come with --watch alone, and the index client
    # (requests, urllib3, ssl) with --outdated.
    from envgen.commands.status.watch_findings import WatchReport
    from envgen.resolve.pypi.index_client import IndexClient

log = logging.getLogger(__name__)

NO_LOCK = "no lock yet"

# --- the report (plain data)
# ------------------------------------------------------------------------------


class SourceDrift(msgspec.Struct, frozen=True):
    """A source pinned from a moving ref: the commit locked and the one the ref names upstream
    now."""

    name: str
    url: str
    ref: str
    locked: str
    upstream: str | None = None  # None when the remote could not be asked
    error: str | None = None

    @property
    def drifted(self) -> bool:
        return self.upstream is not None and self.upstream != self.locked

    @property
    def compare_url(self) -> str | None:
        """The forge's page of the commits between the locked one and upstream's, when it
        drifted."""
        return (
            compare_url(self.url, self.locked, self.upstream)
            if self.upstream and self.drifted
            else None
        )

    def describe(self) -> str:
        if self.error is not None:
            return f"{self.name} {self.ref}: upstream unreachable ({self.error})"
        if self.upstream is not None and self.upstream != self.locked:
            now = short_commit(self.upstream)
            return f"{self.name} {self.ref}: locked {short_commit(self.locked)}, upstream now {now}"
        return f"{self.name} {self.ref}: up to date at {short_commit(self.locked)}"


class Outdated(msgspec.Struct, frozen=True):
    """An unpinned pip package of the matrix: the versions locked and the newest on the default
    indexes."""

    name: str
    locked: tuple[str, ...]
    newest: str | None = None
    index: str | None = None
    error: str | None = None

    @property
    def behind(self) -> bool:
        return self.newest is not None and any(
            Version(v) < Version(self.newest) for v in self.locked
        )

    def describe(self) -> str:
        locked = ", ".join(self.locked) or "not locked"
        if self.error is not None:
            return f"{self.name}: locked {locked}; newest unknown ({self.error})"
        if self.newest is None:
            return f"{self.name}: locked {locked}; not found on the default indexes"
        state = f"newer {self.newest} on {self.index}" if self.behind else f"newest on {self.index}"
        return f"{self.name}: locked {locked}; {state}"


class StatusReport(msgspec.Struct, frozen=True):
    """The status of one env's lock."""

    env: str
    fresh: bool
    reasons: tuple[str, ...] = ()  # why the lock is stale or tampered
    tampered: bool = False  # its files are not as `envgen lock` wrote them (lockio/integrity.py)
    drift: tuple[SourceDrift, ...] = ()
    pending: tuple[tuple[str, str], ...] = ()  # (name, note)
    outdated: tuple[Outdated, ...] = ()
    watch: WatchReport | None = None  # with --watch, for an env whose lock is not tampered

    @property
    def ok(self) -> bool:
        """Fresh, and every moving ref known to still point at its locked commit."""
        return self.fresh and all(d.upstream == d.locked for d in self.drift)

    @property
    def state(self) -> str:
        """One of fresh, stale (an input changed since the lock was written), tampered (its files
        were edited after `envgen lock` wrote them) or no-lock."""
        if self.tampered:
            return "tampered"
        return "fresh" if self.fresh else "no-lock" if self.reasons == (NO_LOCK,) else "stale"

    def as_dict(self) -> dict[str, object]:
        """The `status --json` document of this env; docs/status-json.md describes every key."""
        return {
            "env": self.env,
            "ok": self.ok,
            "fresh": self.fresh,
            "state": self.state,
            "reasons": list(self.reasons),
            "drifted": [d.name for d in self.drift if d.drifted],
            "unreachable": [d.name for d in self.drift if d.error is not None],
            "drift": [
                {
                    "name": d.name,
                    "url": d.url,
                    "ref": d.ref,
                    "locked": d.locked,
                    "upstream": d.upstream,
                    "drifted": d.drifted,
                    "compare_url": d.compare_url,
                    "error": d.error,
                }
                for d in self.drift
            ],
            "pending": {name: note for name, note in self.pending},
            "outdated": [
                {
                    "name": o.name,
                    "locked": list(o.locked),
                    "newest": o.newest,
                    "index": o.index,
                    "error": o.error,
                }
                for o in self.outdated
            ],
            "watch": self.watch.as_dict() if self.watch is not None else None,
        }


# --- pure comparisons
# ---------------------------------------------------------------------------------------


def moving_sources(lock: Lock) -> tuple[LockedSource, ...]:
    """Sources pinned from a branch, a tag or HEAD rather than a 40-hex commit."""
    return tuple(s for s in lock.sources if not is_full_commit(s.source.ref))


def unpinned_packages(matrix: Matrix) -> tuple[str, ...]:
    """The pip packages the matrix leaves unpinned (no version, URL or explicit index) and not
    pending."""
    return tuple(
        sorted(
            p.name
            for p in matrix.packages
            if not p.specifier
            and not p.pending
            and not p.url
            and not any(platform for platform, _ in p.index)
        )
    )


def newest_version(filenames: Iterable[str], allow_prereleases: bool = False) -> str | None:
    """The newest version among a simple page's file names (wheels and sdists), final releases
    first."""
    from envgen.resolve.pypi.index_client import file_versions

    versions = file_versions(filenames)
    final = {v for v in versions if allow_prereleases or not v.is_prerelease}
    return str(max(final or versions)) if versions else None


def build_report(
    env: str,
    lock: Lock | None,
    reasons: Sequence[str],
    drift: Sequence[SourceDrift] = (),
    outdated: Sequence[Outdated] = (),
) -> StatusReport:
    """A StatusReport from what was found; a missing lock is stale for that reason alone."""
    if lock is None:
        return StatusReport(env, fresh=False, reasons=(NO_LOCK,))
    return StatusReport(
        env,
        fresh=not reasons,
        reasons=tuple(reasons),
        drift=tuple(drift),
        pending=tuple((p.name, p.note) for p in lock.pending),
        outdated=tuple(outdated),
    )


# --- effects
# ------------------------------------------------------------------------------------------------


def status_env(
    project: Project,
    env: str,
    *,
    outdated: bool = False,
    watch: Path | None = None,
) -> StatusReport:
    """The status of `env`: the lock's integrity, inputs re-digested, derived files compared, moving
    refs asked upstream, with `outdated` the indexes, and with `watch` (the cache directory) the
    watch."""
    # What the remotes, the indexes and the watch are asked in, read once (the watch's objects go
    # in its cache).
    settings = Settings.live(os.environ, cache=watch if watch is not None else cache_dir())
    checked = checked_lock(project, env)
    if checked is None:
        # With no lock yet the watch still follows the matrix's pages, release refs and pins.
        none = build_report(env, None, ())
        if watch is None:
            return none
        return _watched(none, load_env(project, env), None, (), settings)
    if checked.problems or checked.lock is None:
        # Nothing else about a tampered lock can be trusted: its inputs and sources are what was
        # edited.
        return StatusReport(env, fresh=False, reasons=checked.problems, tampered=True)
    lock = checked.lock
    fresh = freshness(project, env, lock)
    if fresh.matrix is None:
        return build_report(env, lock, fresh.reasons)
    matrix, reasons = fresh.matrix, fresh.reasons
    drift = check_drift(moving_sources(lock), settings.git, matrix)
    found = check_outdated(matrix, lock, settings) if outdated else ()
    report = build_report(env, lock, reasons, drift, found)
    return _watched(report, matrix, lock, drift, settings if watch is not None else None)


def _watched(
    report: StatusReport,
    matrix: Matrix,
    lock: Lock | None,
    drift: Sequence[SourceDrift],
    settings: Settings | None,
) -> StatusReport:
    """The report with the watch's, when asked for (`settings`, its cache where its git objects
    go)."""
    if settings is None:
        return report
    from envgen.commands.status.watch import (
        watch_env,  # git, indexes, moved trees: only with --watch
    )

    drifted = [(d.name, d.ref, d.upstream) for d in drift if d.upstream and d.drifted]
    return msgspec.structs.replace(report, watch=watch_env(matrix, lock, drifted, settings))


def status_exit_code(reports: Sequence[StatusReport]) -> int:
    """4 when a lock is tampered; 3 when the watch could not ask a host; 1 when a lock is missing or
    stale, a ref moved, a remote could not be asked, or the watch found the matrix no longer true;
    else 0."""
    watched = [r.watch for r in reports if r.watch is not None]
    if any(r.tampered for r in reports):
        return 4
    if any(w.errors for w in watched):
        return 3
    return 0 if all(r.ok for r in reports) and not any(w.findings for w in watched) else 1


def check_drift(
    sources: Sequence[LockedSource], git: GitEnv, matrix: Matrix | None = None
) -> tuple[SourceDrift, ...]:
    """Ask each source's remote (through git, so `insteadOf` mirrors apply) what its ref names now.

    A lock records URLs without credentials: a source the matrix gives with `user:password@` is
    asked with them."""
    given = {strip_credentials(s.url): s.url for s in matrix.sources} if matrix else {}
    found = []
    for locked in sources:
        src = locked.source
        url = redact_url(src.url)
        try:
            asked = msgspec.structs.replace(src, url=given.get(strip_credentials(src.url), src.url))
            now = upstream_commit(asked, git)
        except EnvgenError as exc:
            log.warning("%s: cannot ask %s for %s: %s", src.name, url, src.ref, exc.message)
            said = exc.summary or "no detail"
            found.append(SourceDrift(src.name, url, src.ref, locked.commit, error=said))
            continue
        found.append(SourceDrift(src.name, url, src.ref, locked.commit, upstream=now))
    return tuple(found)


def check_outdated(matrix: Matrix, lock: Lock, settings: Settings) -> tuple[Outdated, ...]:
    """For each unpinned package, the newest version on the first default index that has it."""
    from envgen.resolve.pypi.index_client import IndexClient

    indexes = [settings.access(i) for i in matrix.default_indexes]
    found = []
    with IndexClient(indexes, settings.limits) as client:
        for name in unpinned_packages(matrix):
            key = package_key(name)
            locked = tuple(
                sorted({e.version for e in lock.pip if package_key(e.name) == key}, key=Version)
            )
            found.append(_newest_on_indexes(client, name, locked))
    return tuple(found)


def _newest_on_indexes(client: IndexClient, name: str, locked: tuple[str, ...]) -> Outdated:
    # uv's first-index strategy: the first index that has the package is the only one it comes from.
    from envgen.resolve.pypi.index_client import fetch_filenames

    allow_pre = any(Version(v).is_prerelease for v in locked)
    for index in client.indexes:
        try:
            files = fetch_filenames(client, index, name)
        except EnvgenError as exc:
            return Outdated(name, locked, error=exc.message)
        if files is not None:
            return Outdated(name, locked, newest_version(files, allow_pre), index.name)
    return Outdated(name, locked)


# --- rendering
# ----------------------------------------------------------------------------------------------


def render_status(reports: Sequence[StatusReport]) -> str:
    """Plain text: one headline per env, then why it is stale, what drifted, what is pending or
    outdated; an env without a lock, the command that writes it (said once when no env has one)."""
    if len(reports) > 1 and all(r.state == "no-lock" and r.watch is None for r in reports):
        return (
            f"no lock yet for any of the {len(reports)} envs: "
            + ", ".join(r.env for r in reports)
            + "\n  run `envgen lock` to write them all (it asks every host the matrices name), "
            "or `envgen lock ENV` for one\n"
        )
    out = []
    for report in reports:
        state = "no lock yet" if report.state == "no-lock" else report.state
        out.append(f"{report.env}: {state}{_drift_note(report)}")
        if state in ("stale", "tampered"):
            out += [f"  {reason}" for reason in report.reasons]
        if state == "tampered":
            out.append(f"  {repair_hint(report.env)}")
        if state == "no lock yet":
            out.append(f"  run `envgen lock {report.env}` to write it")
        out += _drift_lines(report)
        if report.pending:
            out.append("  still pending:")
            out += [f"    {name}: {note}" for name, note in report.pending]
        if report.outdated:
            out.append("  unpinned packages:")
            out += [f"    {o.describe()}" for o in report.outdated]
            behind = [o.name for o in report.outdated if o.behind]
            if behind:
                # A re-lock keeps locked versions; only an upgrade takes the newer ones.
                names = " ".join(f"--upgrade-package {name}" for name in behind)
                out.append(
                    f"  `envgen lock {report.env} {names}` takes them (or --upgrade: everything)"
                )
        out += _watch_lines(report.watch)
    return "\n".join(out) + "\n" if out else ""


def _drift_note(report: StatusReport) -> str:
    """What the headline adds about the moving refs: a fresh lock's inputs are unchanged, and its
    sources may still have moved upstream since."""
    drifted = sum(1 for d in report.drift if d.drifted)
    unknown = sum(1 for d in report.drift if d.error is not None)
    notes = [f"{drifted} {_sources(drifted)} moved upstream since the lock"] if drifted else []
    notes += [f"{unknown} remote{'s' if unknown != 1 else ''} unreachable"] if unknown else []
    if not notes:
        return ""
    if report.state == "fresh":
        return f" against its inputs, but {' and '.join(notes)}"
    return f" ({', '.join(notes)})"


def _sources(count: int) -> str:
    return "source" if count == 1 else "sources"


def _drift_lines(report: StatusReport) -> list[str]:
    """Each moving ref against upstream, and the re-lock that takes the ones that moved."""
    if not report.drift:
        return []
    lines = ["  upstream:", *(f"    {d.describe()}" for d in report.drift)]
    if moved := [d.name for d in report.drift if d.drifted]:
        names = " ".join(f"--update {name}" for name in moved)
        lines.append(f"  `envgen lock {report.env} {names}` takes the new commits")
    return lines


def _watch_lines(watch: WatchReport | None) -> list[str]:
    if watch is None:
        return []
    if not watch.findings and not watch.errors:
        return ["  watch: the matrix still says what upstream says"]
    lines = ["  watch (the matrix against upstream now):"]
    lines += [f"    {f.message}" for f in watch.findings]
    return lines + [f"    not asked: {error}" for error in watch.errors]
