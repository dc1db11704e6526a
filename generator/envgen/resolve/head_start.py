"""A re-lock's head start: `uv pip compile` of each platform started before the re-lock imports its
stages, asks the hosts and solves the conda part (all of which then happen while uv works), on what
the previous lock predicts (`lockio/prediction.py`): per platform its python, and its pins as
preferences.

The git sources are pinned first, as the re-lock pins them, when that needs no remote (the recorded
commits are in the git cache): their requirements are read at their trees, never taken from the
lock, so a hand-edited lock cannot choose what uv resolves. A started run stands in only for a run
the pip stage plans equal to it (`uv_compile.UvJob`: the same files, command and environment, hence
the same resolution). When the inputs turned out otherwise (the conda solve chose another python, a
source moved meanwhile), the pip stage runs uv itself; the runs nobody adopted are stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from envgen import interrupts
from envgen.errors import EnvgenError
from envgen.lockio.prediction import Prediction, predict, recorded_archives, recorded_sources
from envgen.lockio.store import LockTexts
from envgen.model import LockedArchive, LockedSource, Matrix
from envgen.process import Running
from envgen.resolve.movable import NOTHING, Movable, sources_to_update
from envgen.resolve.preferences import kept
from envgen.resolve.pypi.stage import gather_inputs, ordered_indexes
from envgen.resolve.pypi.uv_compile import UvJob, UvOutcome, execute, plan_uv_compile
from envgen.resolve.resolvers import Resolvers, SourcePinner
from envgen.resolve.settings import Settings

log = logging.getLogger(__name__)

_STARTED = "%s: uv started ahead, on python %s and %d pins of the lock"

_T = TypeVar("_T")


class _Run:
    """One run started ahead: its outcome to come, and its process, to stop it when nobody adopts
    it."""

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
    """The sources a head start pinned, and from what: the commits kept (by source name), the
    sources moving."""

    kept: dict[str, str]
    update: Movable
    sources: tuple[LockedSource, ...]


@dataclass(frozen=True)
class PinnedAhead:
    """A `SourcePinner` (resolve/resolvers.py) that hands over the sources a head start pinned when
    asked to pin from the same kept commits and moving sources, and asks `otherwise` else."""

    pinned: PinnedSources | None
    otherwise: SourcePinner

    def pin(
        self,
        matrix: Matrix,
        kept: Mapping[str, LockedSource],
        update: Movable,
    ) -> tuple[LockedSource, ...]:
        ahead, commits = self.pinned, {name: s.commit for name, s in kept.items()}
        if ahead is not None and (ahead.update, ahead.kept) == (update, commits):
            return ahead.sources
        return self.otherwise.pin(matrix, kept, update)


class HeadStart:
    """The uv runs started ahead for one re-lock: a `UvRunner` (resolve/pypi/uv_compile.py) that
    hands over the outcome of the run it started for an equal job, and runs any other job itself
    within `budget` seconds; `close` stops the runs nobody took."""

    def __init__(self, budget: float, sources: PinnedSources | None = None) -> None:
        self._budget = budget
        self._sources = sources
        self._runs: dict[UvJob, _Run] = {}  # not adopted yet
        self._started: list[_Run] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._background: ThreadPoolExecutor | None = None

    def _submit(self, work: Callable[..., _T], *args: object) -> Future[_T]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                thread_name_prefix="head-start", initializer=interrupts.worker_thread
            )
        return self._pool.submit(work, *args)

    def start(self, job: UvJob) -> None:
        run = _Run()
        run.outcome = self._submit(execute, job, self._budget, run.started)
        with self._lock:
            self._runs[job] = run
            self._started.append(run)

    def resolvers(self, real: Resolvers) -> Resolvers:
        """`real` with uv run through this head start, and the sources it pinned handed over when
        the re-lock pins from the same commits."""
        return replace(real, uv=self, sources=PinnedAhead(self._sources, real.sources))

    def meanwhile(self, work: Callable[..., object], *args: object) -> None:
        """Run `work` (a warm-up: its result and errors do not matter) in the background while uv
        runs, yielding the CPU to it."""
        if self._background is None:
            self._background = ThreadPoolExecutor(
                thread_name_prefix="warm-up", initializer=interrupts.background_thread
            )
        self._background.submit(work, *args)

    def run(self, job: UvJob) -> UvOutcome:
        """The outcome of the run started ahead for `job`, or of `job` run now when none was."""
        adopted = self.adopt(job)
        return adopted if adopted is not None else execute(job, self._budget)

    def adopt(self, job: UvJob) -> UvOutcome | None:
        """The outcome of the run started ahead for `job`, waited for; None when none was (the
        other runs of its platform are stopped then: the pip stage plans one job per platform)."""
        with self._lock:
            run = self._runs.pop(job, None)
            stale = [
                self._runs.pop(j) for j in [j for j in self._runs if j.platform == job.platform]
            ]
        for other in stale:
            other.stop()
        if stale:
            log.debug(
                "%s: the uv run started ahead does not fit the inputs: resolving afresh",
                job.platform,
            )
        if run is None or run.outcome is None:
            return None
        log.debug("%s: adopting the uv run started ahead", job.platform)
        return run.outcome.result()

    def close(self) -> None:
        """Stop every run still going, and wait for them to end (each removes its work directory).

        Those nobody adopted, and an adopted one too: its adopter waits for it, so it still goes
        only when the re-lock is being abandoned (Ctrl-C reaches `lock_envs`, which closes the head
        starts on its way out, before the interrupt kills the children: waiting for uv to finish
        would hold the exit up meanwhile).
        """
        with self._lock:
            runs, self._runs = list(self._started), {}
        for run in runs:
            run.stop()
        for pool in (self._pool, self._background):
            if pool is not None:
                pool.shutdown(wait=True)


def head_start(
    matrix: Matrix,
    previous: LockTexts,
    settings: Settings,
    *,
    upgrade: Movable,
    update: Movable,
) -> HeadStart:
    """Start uv for every platform the lock of `matrix` (its files as read, `previous`) predicts a
    python for: none without a lock, with one whose files do not hash to the content hash they
    record (the re-lock does not trust its pins), or when a source needs its remote to be pinned
    (the preflight asks the hosts first)."""
    budget = settings.limits.budget
    prediction = predict(previous) if previous.intact else None
    if prediction is None:
        return HeadStart(budget)
    try:
        pinned = _pinned_sources(matrix, previous, settings, update, upgrade)
    except EnvgenError as exc:  # the re-lock proper meets the same problem and reports it
        log.debug("no head start: %s", exc.message)
        return HeadStart(budget)
    archives = _archives(matrix, previous, settings, update, upgrade)
    if pinned is None or archives is None:
        return HeadStart(budget)
    started = HeadStart(budget, pinned)
    try:
        _start_platforms(started, matrix, prediction, pinned, archives, settings, upgrade)
    except EnvgenError as exc:  # the re-lock proper meets the same problem and reports it
        log.debug("no head start: %s", exc.message)
    return started


def _start_platforms(
    started: HeadStart,
    matrix: Matrix,
    prediction: Prediction,
    pinned: PinnedSources,
    archives: Sequence[LockedArchive],
    settings: Settings,
    upgrade: Movable,
) -> None:
    """Each platform's uv run started, on the python and pins `prediction` gives it (a matrix
    without a conda part names its python itself, as the re-lock takes it)."""
    indexes = ordered_indexes(matrix, settings.accesses(matrix.indexes))
    for platform in matrix.platforms:
        python = prediction.python.get(platform) if matrix.has_conda else matrix.python
        if python is None:
            continue
        variables = settings.variables
        inputs = gather_inputs(matrix, platform, pinned.sources, variables, archives=archives)
        preferred = kept(prediction.pip.get(platform, ()), upgrade)
        job = plan_uv_compile(
            matrix,
            platform,
            python,
            inputs,
            indexes,
            settings,
            preferred=preferred,
        )
        started.start(job)
        log.debug(_STARTED, platform, python, len(preferred))
        artifacts = [(p.url, p.sha256) for p in prediction.pip.get(platform, ()) if p.sha256]
        started.meanwhile(_warm_metadata, settings.cache, artifacts)


def _pinned_sources(
    matrix: Matrix,
    lock: LockTexts,
    settings: Settings,
    update: Movable,
    upgrade: Movable,
) -> PinnedSources | None:
    """The sources as the re-lock pins them, when that needs no remote (None when one does, or the
    lock's sources do not read): each at the commit the lock records for it, its requirements read
    at its tree in the git cache as the re-lock reads them. The lock's own record of a source's
    requirements never reaches uv: a hand-edited lock must not choose what uv resolves (and
    builds)."""
    if not matrix.sources:
        return PinnedSources({}, NOTHING, ())
    # Imported here: a matrix without sources starts uv without git's modules.
    from envgen.resolve.sources.pins import GitPinner, asks_remote

    moving = sources_to_update(matrix, update, upgrade)
    recorded = () if moving.everything else recorded_sources(lock)
    if recorded is None:
        return None
    previous = {s.source.name: s for s in recorded}
    remote = [s.name for s in matrix.sources if asks_remote(s, previous, moving, settings)]
    if remote:
        log.debug("no head start: source %s needs its remote", remote[0])
        return None
    sources = GitPinner(settings).pin(matrix, previous, moving)
    return PinnedSources({name: s.commit for name, s in previous.items()}, moving, sources)


def _archives(
    matrix: Matrix,
    lock: LockTexts,
    settings: Settings,
    update: Movable,
    upgrade: Movable,
) -> tuple[LockedArchive, ...] | None:
    """The archives as the re-lock locks them, when their bytes are in the cache (None otherwise):
    the sha256 the matrix pins or the lock records, the wheels read from the cached archive."""
    if not matrix.archives:
        return ()
    # Imported here: a matrix without archives starts uv without the archive reader.
    from envgen.resolve.archives.members import lock_archives

    afresh = sources_to_update(matrix, update, upgrade).everything
    recorded = () if afresh else recorded_archives(lock)
    try:
        cache, limits = settings.cache, settings.limits
        return lock_archives(matrix, cache, limits, previous=recorded or (), offline=True)
    except EnvgenError as exc:
        log.debug("no head start: %s", exc.message)
        return None


def _warm_metadata(cache: Path, artifacts: Sequence[tuple[str, str]]) -> None:
    # Imported here, in the background: the index client (requests) is not needed before uv has
    # started.
    from envgen.resolve.pypi.indexes import warm_metadata

    warm_metadata(cache, artifacts)
