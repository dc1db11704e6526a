"""`envgen lock`: each env fresh or re-locked, under its mutex. The one place a re-lock's effects
meet: its lock files read (lockio/store.py), the settings built once, the head starts begun and
the hosts asked, the re-lock core run (resolve/pipeline.py), and what it returns written; or, in
the modes that write nothing (`--check`, `--dry-run`), compared with the files on disk."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from envgen import interrupts
from envgen.collector import collector_paused
from envgen.commands.lock.fresh import require_untouched, unchanged_hash
from envgen.commands.lock.names import check_update_names, check_upgrade_names
from envgen.errors import EnvgenError, InputError
from envgen.lockio.store import LockTexts, lock_of, read_files
from envgen.logs import HeldProgress
from envgen.project import Project
from envgen.resolve.movable import NOTHING, Movable

if TYPE_CHECKING:
    from envgen.commands.lock.changes import Unwritten
    from envgen.model import Lock, Matrix
    from envgen.resolve.head_start import HeadStart
    from envgen.resolve.moves import Move
    from envgen.resolve.request import Relock
    from envgen.resolve.resolvers import Resolvers
    from envgen.resolve.settings import Settings

log = logging.getLogger(__name__)

# Seconds the re-locks get to end once a failed preflight stopped them (a killed child ends them at
# once).
STOP_WAIT = 2.0
# How often the main thread, waiting on the re-locks, takes an interrupt (interrupts.py).
_SLICE = 0.1

# What a lock does with a re-lock's result: write it, or only compare it with the files on disk
# ("check": a missing lock is told without resolving; "dry-run": resolved like any other).
Mode = Literal["write", "check", "dry-run"]

# The preflight and the re-lock read the same previous lock at once: one parses it, the other
# then finds it parsed (lockio/store.py keeps it) instead of parsing it a second time alongside.
_PARSING = threading.Lock()


@dataclass(frozen=True)
class LockResult:
    """What `lock_env` did for one env: "locked" (files written, `lock` set), "up-to-date" (nothing
    to do) or, in a mode that writes nothing, "would-lock" (`unwritten` says what a write would
    change and why; `lock` is the Lock it would write, None when --check did not resolve)."""

    env: str
    status: str
    input_hash: str | None
    lock: Lock | None = None
    moves: tuple[Move, ...] = ()
    unwritten: Unwritten | None = None


@dataclass(frozen=True)
class LockOptions:
    """What each env's lock is asked: what may move, the settings it resolves in, whether it
    re-locks even with its inputs unchanged, and whether it writes what it resolved (`mode`)."""

    update: Movable
    upgrade: Movable
    settings: Settings
    relocking: bool
    mode: Mode = "write"

    @property
    def writing(self) -> bool:
        return self.mode == "write"


def lock_env(
    project: Project,
    env: str,
    *,
    update: Movable = NOTHING,
    force: bool = False,
    offline: bool = False,
    cache: Path | None = None,
    upgrade: Movable = NOTHING,
) -> LockResult:
    """Lock one env, without the preflight; a no-op when the recorded inputs are unchanged (unless
    forced, updating or upgrading)."""
    results = lock_envs(
        project,
        [env],
        update=update,
        force=force,
        offline=offline,
        upgrade=upgrade,
        preflight=False,
        cache=cache,
    )
    return results[0]


def lock_envs(
    project: Project,
    envs: Sequence[str],
    *,
    update: Movable = NOTHING,
    force: bool = False,
    offline: bool = False,
    upgrade: Movable = NOTHING,
    preflight: bool = True,
    cache: Path | None = None,
    mode: Mode = "write",
) -> list[LockResult]:
    """Lock several envs concurrently (they share nothing but the caches); results in the given
    order.

    Every name in `update` must be a source of one of the envs (in its matrix or its recorded
    lock), and every name `upgrade` lists a package or source of one of them: both are checked
    before any work. An env whose recorded inputs still hold is up to date (unless forced, updating
    or upgrading); the matrices of the others are all loaded before any work, and each gets its
    head start (resolve/head_start.py). With `preflight`, every host they need is asked meanwhile,
    and all that do not answer are reported at once (NetworkError): the work stops then, and
    nothing is written.

    A `mode` other than "write" takes no mutex and writes nothing: each lock is first refused as
    `status` and `install` refuse it (lock_fresh.require_untouched: exit 2 or 4), is up to date
    only by `status`'s verdict, and each re-lock's result is compared with the files on disk
    ("would-lock" when they differ); with "check", an env with no lock files at all is
    "would-lock" without resolving.
    """
    # Each env's lock files read once here, again under its mutex (another run may have written).
    files = {env: read_files(project, env) for env in envs}
    if update.names:
        check_update_names(project, files, update)
    if upgrade.names:
        check_upgrade_names(project, files, upgrade)
    relocking, strict = bool(force or update or upgrade), mode != "write"
    if strict:
        for texts in files.values():
            require_untouched(project, texts)  # what status and install refuse, with their codes
    fresh = {
        env: None if relocking else unchanged_hash(project, files[env], strict=strict)
        for env in envs
    }
    done = {env: _absent(files[env]) for env in envs if mode == "check" and not files[env].present}
    stale = [env for env in envs if fresh[env] is None and env not in done]
    if stale:
        # Imported here: the settings (uv located), the matrix loader (packaging) and the cache's
        # claim matter only when something may move.
        from envgen.commands.cache import claimed_cache
        from envgen.resolve.settings import Settings

        settings = Settings.read(os.environ, cache=cache or claimed_cache(), offline=offline)
        options = LockOptions(update, upgrade, settings, relocking, mode)
        # Paused: its passes over a re-lock's objects took a tenth of its CPU (collector.py).
        with collector_paused():
            done |= _relock_stale(project, [files[env] for env in stale], options, preflight)
    # The CLI says "up to date", once per env (and -q silences it).
    kept = {env: LockResult(env, "up-to-date", digest) for env, digest in fresh.items() if digest}
    return [done.get(env) or kept[env] for env in envs]


def _absent(texts: LockTexts) -> LockResult:
    """`lock --check` of an env without a lock: it would lock, no need to resolve to know it."""
    # Imported here, as in relock_files: what a write would change (and the matrix loader it
    # imports) is no part of the no-op lock.
    from envgen.commands.lock.changes import without_lock

    return LockResult(texts.env, "would-lock", None, unwritten=without_lock(texts))


def _relock_stale(
    project: Project, stale: Sequence[LockTexts], options: LockOptions, preflight: bool
) -> dict[str, LockResult]:
    """Each env of `stale` (its lock files as read) re-locked, after its head start, while the
    preflight asks the hosts."""
    from envgen.inputs.matrix import check_conda_specs, load_env

    # The conda specs are parsed (rattler) once uv has started: they are not uv's, and nothing runs
    # them before.
    matrices = [load_env(project, texts.env, conda_specs=False) for texts in stale]
    files = {texts.env: texts for texts in stale}
    starts: dict[str, HeadStart] = {}
    pool = ThreadPoolExecutor(max_workers=min(4, len(stale)), initializer=interrupts.worker_thread)
    # The preflight fills the time uv takes: it yields the CPU to uv and the re-locks.
    asking = ThreadPoolExecutor(max_workers=1, initializer=interrupts.background_thread)
    # No solve log before the preflight's verdict: the re-locks' progress waits for it to pass
    # (with -v it is told as it happens, the run's whole timeline).
    holding = preflight and not log.isEnabledFor(logging.DEBUG)
    held, asked = HeldProgress() if holding else None, None
    try:
        for matrix in matrices:
            starts[matrix.name] = _head_start(matrix, files[matrix.name], options)
        for matrix in matrices:
            check_conda_specs(project, matrix.name, matrix)
        asked = asking.submit(ask_hosts, matrices, files, options) if preflight else None
        if held is not None and asked is not None:
            held.after(asked)
        gate = asked.result if asked is not None else lambda: None
        futures: dict[str, Future[LockResult]] = {}
        for matrix in matrices:
            job = (project, matrix, files[matrix.name], starts[matrix.name], gate, options)
            futures[matrix.name] = pool.submit(_relock_env, *job)
        failed = _wait_for(futures, asked)
    finally:
        for started in starts.values():
            started.close()
        # Not waiting: after an interrupt the caller stops the workers (envgen.interrupts) and
        # reports at once.
        for each in (pool, asking):
            each.shutdown(wait=False, cancel_futures=True)
        if held is not None:
            held.end(asked)
    if failed:
        _raise_first_failure(failed, several=len(stale) > 1)
    return {env: future.result() for env, future in futures.items()}


def _head_start(matrix: Matrix, previous: LockTexts, options: LockOptions) -> HeadStart:
    from envgen.resolve.head_start import head_start

    return head_start(
        matrix,
        previous,
        options.settings,
        upgrade=options.upgrade,
        update=options.update,
    )


def _relock_env(
    project: Project,
    matrix: Matrix,
    texts: LockTexts,
    started: HeadStart,
    gate: Callable[[], None],
    options: LockOptions,
) -> LockResult:
    """Re-lock one env under its mutex, unless another run just wrote a fresh lock: its files are
    read again under it (the head start and the preflight read them before, unguarded). A mode
    that writes nothing takes no mutex (its file is under locks/) and compares with `texts`, the
    files as they were read first."""
    # Imported here: the mutex (filelock), the yml's schema, uv and git matter only when
    # something may move, and only once the head start has begun.
    from envgen.lockio.env_mutex import env_lock
    from envgen.resolve.resolvers import Resolvers

    env = matrix.name
    try:
        if not options.writing:
            resolvers = started.resolvers(Resolvers.real(options.settings))
            return relock_files(project, matrix, texts, options, resolvers, gate)
        with env_lock(project, env):
            files = read_files(project, env)
            fresh = None if options.relocking else unchanged_hash(project, files)
            if fresh is not None:
                return LockResult(env, "up-to-date", fresh)
            resolvers = started.resolvers(Resolvers.real(options.settings))
            return relock_files(project, matrix, files, options, resolvers, gate)
    finally:
        started.close()


def relock_files(
    project: Project,
    matrix: Matrix,
    files: LockTexts,
    options: LockOptions,
    resolvers: Resolvers,
    gate: Callable[[], None] = lambda: None,
) -> LockResult:
    """Re-lock `matrix` from its lock files as read (`files`) through `resolvers`, and write what
    the re-lock core returns (or, in a mode that writes nothing, say what writing it would change);
    `gate` may still stop it (with an error) before anything is written. A failure anywhere before
    the write leaves the lock files as they were."""
    from envgen.commands.lock.changes import unwritten
    from envgen.lockio.input_hashes import file_digests
    from envgen.lockio.store import write_lock
    from envgen.resolve.pipeline import relock

    request = replace(
        _request(matrix, files, options, telling=True), files=file_digests(project, matrix)
    )
    relocked = relock(request, options.settings, resolvers)
    lock = relocked.lock
    if not options.writing:
        gate()  # an unreachable host leaves the answer unknown
        found = unwritten(project, files, relocked, matrix.path)
        if not found.files:
            return LockResult(matrix.name, "up-to-date", lock.input_hash)
        return LockResult(matrix.name, "would-lock", lock.input_hash, lock, relocked.moves, found)
    log.info("%s: writing %s", matrix.name, project.lock_yml(matrix.name).relative_to(project.root))
    gate()
    write_lock(project, matrix.name, lock, relocked.recipe, relocked.derived)
    return LockResult(matrix.name, "locked", lock.input_hash, lock, relocked.moves)


def _request(
    matrix: Matrix, files: LockTexts, options: LockOptions, *, telling: bool = False
) -> Relock:
    """The re-lock of `matrix` asked for, its previous lock read from `files` (parsed once: a second
    read of the same texts finds it parsed); `telling` whether an untrusted one is reported (the
    re-lock does, not the preflight that reads the same files meanwhile)."""
    from envgen.resolve.request import Relock

    asked = Relock(matrix, update=options.update, upgrade=options.upgrade)
    previous = read_previous(files, afresh=asked.moving.everything, telling=telling)
    return replace(asked, previous=previous)


def read_previous(texts: LockTexts, *, afresh: bool, telling: bool) -> Lock | None:
    """The lock whose files are `texts`, whose source commits and versions a re-lock keeps; None
    when there is none, or when its files fail the integrity check (lockio/integrity.py): a
    tampered pin is never kept, every ref and archive is resolved again as for a missing lock
    (said on stderr when `telling`).

    An unreadable lock stops the re-lock, unless every source moves anyway (`afresh`): then it is
    ignored.
    """
    env = texts.env
    try:
        with _PARSING:
            lock = lock_of(texts)
            return lock if lock is None or _trusted(texts, telling=telling) else None
    except InputError as exc:
        if afresh:
            log.warning("%s: ignoring the unreadable previous lock: %s", env, exc.message)
            return None
        said = (
            f"{exc.message}\n(the previous lock is read to keep the commits and versions it pins)"
        )
        raise exc.reworded(said).with_hint(
            f"restore locks/{env}.* (e.g. `git checkout -- locks/`), or run "
            f"`envgen lock {env} --upgrade` to lock everything afresh"
        ) from exc


def _trusted(texts: LockTexts, *, telling: bool) -> bool:
    """Whether the lock files `texts` (which parse) are as `envgen lock` wrote them; when not, and
    `telling`, one line on stderr names the file and the first problem."""
    from envgen.lockio.integrity import checked

    found = checked(texts)
    problems = found.problems if found is not None else ()
    if problems and telling:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        log.warning(
            "%s: %s fails the integrity check, so its pins are not trusted: every ref and archive "
            "is resolved again from the matrix, as for a missing lock: %s%s",
            texts.env,
            texts.names[1],
            problems[0],
            more,
        )
    return not problems


def ask_hosts(
    matrices: Sequence[Matrix],
    files: Mapping[str, LockTexts],
    options: LockOptions,
) -> None:
    """The preflight: every host the re-locks of `matrices` (their lock files as read, `files`)
    will ask, asked; all that do not answer are reported at once (NetworkError). A lock that does
    not read is bad input, reported before any host is (exit 2)."""
    from envgen.resolve.preflight import preflight

    preflight([_request(m, files[m.name], options) for m in matrices], options.settings)


def _wait_for(
    futures: Mapping[str, Future[LockResult]], asked: Future[None] | None
) -> list[tuple[str, EnvgenError]]:
    """The envs that failed, once every re-lock has ended; a preflight that found unreachable hosts
    (or could not read what it needed) stops the re-locks at once, and its error is the one raised.
    """
    waiting: set[Future[Any]] = set(futures.values()) | ({asked} if asked is not None else set())
    while waiting:
        # In slices: an interrupt is taken between them, never inside the wait's locks.
        with interrupts.deferring():
            done, waiting = wait(waiting, timeout=_SLICE, return_when=FIRST_COMPLETED)
        if asked in done and asked.exception() is not None:
            _stop(futures.values())
            raise asked.exception()  # type: ignore[misc]
    failed = []
    for env, future in futures.items():
        error = future.exception()
        if isinstance(error, EnvgenError):
            failed.append((env, error))
        elif error is not None:
            raise error
    return failed


def _stop(futures: Iterable[Future[LockResult]]) -> None:
    """Stop the re-locks as an interrupt does (children killed, no lock written from here on); once
    they have all ended, the process may go on with other work (a re-lock stuck in a library call
    leaves it stopped)."""
    interrupts.interrupt()
    running, deadline = set(futures), time.monotonic() + STOP_WAIT
    while running and time.monotonic() < deadline:
        with interrupts.deferring():
            _, running = wait(running, timeout=_SLICE)
    if not running:
        interrupts.reset()


def _raise_first_failure(failed: list[tuple[str, EnvgenError]], *, several: bool) -> NoReturn:
    """Raise the first env's error, naming that env (and the others that failed) when several were
    locked together."""
    env, error = failed[0]
    if several:
        others = [name for name, _ in failed[1:]]
        also = (
            f"\n(env{'s' if len(others) > 1 else ''} {', '.join(others)} failed too)"
            if others
            else ""
        )
        raise error.reworded(f"{env}: {error.message}{also}") from error
    raise error
