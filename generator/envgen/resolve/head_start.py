"""A re-lock's head start: `uv pip compile` of each platform started before the re-lock imports its stages,
asks the hosts and solves the conda part (all of which then happen while uv works), on what the previous lock
predicts (`lockio/prediction.py`): per platform its python, and its pins as preferences.

The git sources are pinned first, as the re-lock pins them, when that needs no remote (the recorded commits are
in the git cache): their requirements are read at their trees, never taken from the lock, so a hand-edited lock
cannot choose what uv resolves. A started run stands in only for a run the pip stage plans equal to it
(`uv_compile.UvJob`: the same files, command and environment, hence the same resolution). When the inputs
turned out otherwise (the conda solve chose another python, a source moved meanwhile), the pip stage runs uv
itself; the runs nobody adopted are stopped.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from envgen import interrupts
from envgen.errors import EnvgenError
from envgen.inputs.channels import access_index
from envgen.lockio.prediction import predict, recorded_archives, recorded_sources
from envgen.lockio.store import LockTexts
from envgen.model import LockedArchive, LockedSource, Matrix
from envgen.process import Running
from envgen.resolve.pip_stage import gather_inputs, ordered_indexes
from envgen.resolve.preferences import kept
from envgen.resolve.upgrade import Upgrade
from envgen.resolve.uv_compile import UvJob, UvOutcome, execute, plan_uv_compile

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class _Run:
    """One run started ahead: its outcome to come, and its process, to stop it when nobody adopts it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: Running | None = None
        self.stopped = False
        self.outcome: Future[UvOutcome] | None = None

    def started(self, process: Running) -> None:
        with self.lock:
            self.process = process
            if self.stopped:
                process.stop()

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            if self.process is not None:
                self.process.stop()


@dataclass(frozen=True)
class PinnedSources:
    """The sources a head start pinned, and from what: the commits kept (by source name), the sources moving."""

    kept: dict[str, str]
    update: Collection[str] | bool
    sources: tuple[LockedSource, ...]


class HeadStart:
    """The uv runs started ahead for one re-lock; `adopt` hands one to the pip stage, `close` stops the rest."""

    def __init__(self, sources: PinnedSources | None = None) -> None:
        self._sources = sources
        self._runs: dict[UvJob, _Run] = {}  # not adopted yet
        self._started: list[_Run] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def _submit(self, work: Callable[..., _T], *args: object) -> Future[_T]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(thread_name_prefix="head-start", initializer=interrupts.worker_thread)
        return self._pool.submit(work, *args)

    def start(self, job: UvJob) -> None:
        run = _Run()
        run.outcome = self._submit(execute, job, run.started)
        with self._lock:
            self._runs[job] = run
            self._started.append(run)

    def pinned(
        self, kept: Mapping[str, LockedSource], update: Collection[str] | bool
    ) -> tuple[LockedSource, ...] | None:
        """The sources the head start pinned, when it pinned them from these kept commits and `update` (the
        re-lock then need not pin them again); else None."""
        pinned = self._sources
        if pinned is None or pinned.kept != {name: s.commit for name, s in kept.items()} or pinned.update != update:
            return None
        return pinned.sources

    def meanwhile(self, work: Callable[..., object], *args: object) -> None:
        """Run `work` (a warm-up: its result and errors do not matter) in the background while uv runs."""
        self._submit(work, *args)

    def adopt(self, job: UvJob) -> UvOutcome | None:
        """The outcome of the run started ahead for `job`, waited for; None when none was (the other runs of its
        platform are stopped then: the pip stage plans one job per platform)."""
        with self._lock:
            run = self._runs.pop(job, None)
            stale = [self._runs.pop(j) for j in [j for j in self._runs if j.platform == job.platform]]
        for other in stale:
            other.stop()
        if stale:
            log.debug("%s: the uv run started ahead does not fit the inputs: resolving afresh", job.platform)
        if run is None or run.outcome is None:
            return None
        log.debug("%s: adopting the uv run started ahead", job.platform)
        return run.outcome.result()

    def close(self) -> None:
        """Stop every run still going, and wait for them to end (each removes its work directory).

        Those nobody adopted, and an adopted one too: its adopter waits for it, so it still goes only when the
        re-lock is being abandoned (Ctrl-C reaches `lock_envs`, which closes the head starts on its way out,
        before the interrupt kills the children: waiting for uv to finish would hold the exit up meanwhile).
        """
        with self._lock:
            runs, self._runs = list(self._started), {}
        for run in runs:
            run.stop()
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def head_start(
    matrix: Matrix,
    previous: LockTexts,
    *,
    cache: Path,
    offline: bool,
    upgrade: Upgrade,
    update: Collection[str] | bool,
) -> HeadStart:
    """Start uv for every platform the lock of `matrix` (its files as read, `previous`) predicts a
    python for: none without a lock, or when a source needs its remote to be pinned (the preflight
    asks the hosts first)."""
    prediction = predict(previous)
    if prediction is None:
        return HeadStart()
    try:
        pinned = _pinned_sources(matrix, previous, cache, update, upgrade)
    except EnvgenError as exc:  # the re-lock proper meets the same problem and reports it
        log.debug("no head start: %s", exc.message)
        return HeadStart()
    archives = _archives(matrix, previous, cache, update, upgrade)
    if pinned is None or archives is None:
        return HeadStart()
    started = HeadStart(pinned)
    try:
        accesses = {i.name: access_index(i, os.environ) for i in matrix.indexes}
        indexes = ordered_indexes(matrix, accesses)
        for platform in matrix.platforms:
            python = prediction.python.get(platform)
            if python is None:
                continue
            inputs = gather_inputs(matrix, platform, pinned.sources, os.environ, archives=archives)
            preferred = kept(prediction.pip.get(platform, ()), upgrade)
            job = plan_uv_compile(
                matrix,
                platform,
                python,
                inputs,
                indexes,
                cache=cache,
                offline=offline,
                environ=os.environ,
                preferred=preferred,
            )
            started.start(job)
            log.debug("%s: uv started ahead, on python %s and %d pins of the lock", platform, python, len(preferred))
            artifacts = [(p.url, p.sha256) for p in prediction.pip.get(platform, ()) if p.sha256]
            started.meanwhile(_warm_metadata, cache, artifacts)
    except EnvgenError as exc:  # the re-lock proper meets the same problem and reports it
        log.debug("no head start: %s", exc.message)
    return started


def _pinned_sources(
    matrix: Matrix,
    lock: LockTexts,
    cache: Path,
    update: Collection[str] | bool,
    upgrade: Upgrade,
) -> PinnedSources | None:
    """The sources as the re-lock pins them, when that needs no remote (None when one does, or the
    lock's sources do not read): each at the commit the lock records for it, its requirements read
    at its tree in the git cache as the re-lock reads them. The lock's own record of a source's
    requirements never reaches uv: a hand-edited lock must not choose what uv resolves (and
    builds)."""
    if not matrix.sources:
        return PinnedSources({}, (), ())
    # Imported here: a matrix without sources starts uv without git's modules.
    from envgen.resolve.git_sources import asks_remote, resolve_sources, sources_to_update

    moving = sources_to_update(matrix, update, upgrade)
    recorded = () if moving is True else recorded_sources(lock)
    if recorded is None:
        return None
    previous = {s.source.name: s for s in recorded}
    remote = [s.name for s in matrix.sources if asks_remote(s, previous, moving, cache)]
    if remote:
        log.debug("no head start: source %s needs its remote", remote[0])
        return None
    log.info("%s: resolving %d git sources", matrix.name, len(matrix.sources))
    sources = resolve_sources(matrix, cache=cache, previous=previous, update=moving)
    return PinnedSources({name: s.commit for name, s in previous.items()}, moving, sources)


def _archives(
    matrix: Matrix,
    lock: LockTexts,
    cache: Path,
    update: Collection[str] | bool,
    upgrade: Upgrade,
) -> tuple[LockedArchive, ...] | None:
    """The archives as the re-lock locks them, when their bytes are in the cache (None otherwise):
    the sha256 the matrix pins or the lock records, the wheels read from the cached archive."""
    if not matrix.archives:
        return ()
    # Imported here: a matrix without archives starts uv without the archive reader.
    from envgen.resolve.archives import lock_archives
    from envgen.resolve.git_sources import sources_to_update

    afresh = sources_to_update(matrix, update, upgrade) is True
    recorded = () if afresh else recorded_archives(lock)
    try:
        return lock_archives(matrix, cache=cache, previous=recorded or (), offline=True)
    except EnvgenError as exc:
        log.debug("no head start: %s", exc.message)
        return None


def _warm_metadata(cache: Path, artifacts: Sequence[tuple[str, str]]) -> None:
    # Imported here, in the background: the index client (requests) is not needed before uv has started.
    from envgen.resolve.index_client import warm_metadata

    warm_metadata(cache, artifacts)
