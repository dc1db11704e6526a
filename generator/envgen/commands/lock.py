"""`envgen lock`: decide whether an env's lock is still fresh, and re-lock it when it is not."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envgen import interrupts
from envgen.errors import EnvgenError, InputError
from envgen.inputs.extends import read_layered
from envgen.inputs.toml_reader import did_you_mean
from envgen.lockio.exports.names import derived_present
from envgen.lockio.input_hashes import still_current
from envgen.lockio.store import LockTexts, read_files, recorded_inputs
from envgen.names import package_key
from envgen.project import Project, cache_dir
from envgen.resolve.movable import NOTHING, Movable

if TYPE_CHECKING:
    from envgen.model import Lock, Matrix
    from envgen.resolve.head_start import HeadStart
    from envgen.resolve.moves import Move

log = logging.getLogger(__name__)

# Seconds the re-locks get to end once a failed preflight stopped them (a killed child ends them at once).
STOP_WAIT = 2.0


@dataclass(frozen=True)
class LockResult:
    """What `lock_env` did for one env: "locked" (files written, `lock` set) or "up-to-date" (nothing to do)."""

    env: str
    status: str
    input_hash: str
    lock: Lock | None = None
    moves: tuple[Move, ...] = ()


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
    """Lock one env, without the preflight; a no-op when the recorded inputs are unchanged (unless forced,
    updating or upgrading)."""
    return lock_envs(
        project, [env], update=update, force=force, offline=offline, upgrade=upgrade, preflight=False, cache=cache
    )[0]


def _relock_env(
    project: Project, matrix: Matrix, started: HeadStart, gate: Callable[[], None], options: _Options
) -> LockResult:
    """Re-lock one env under its mutex, unless another run just wrote a fresh lock: its files are
    read again under it (the head start and the preflight read them before, unguarded)."""
    # Imported here: the mutex (filelock), conda-lock's models, uv and git matter only when something may move,
    # and only once the head start has begun.
    from envgen.lockio.env_mutex import env_lock
    from envgen.resolve.pipeline import relock

    env = matrix.name
    try:
        with env_lock(project, env):
            previous = read_files(project, env)
            fresh = None if options.relocking else unchanged_hash(project, previous)
            if fresh is not None:
                return LockResult(env, "up-to-date", fresh)
            done = relock(
                project,
                matrix,
                previous,
                update=options.update,
                offline=options.offline,
                cache=options.cache,
                upgrade=options.upgrade,
                ahead=started.adopt,
                pinned=started.pinned,
                before_write=gate,
            )
            return LockResult(env, "locked", done.lock.input_hash, done.lock, done.moves)
    finally:
        started.close()


def unchanged_hash(project: Project, texts: LockTexts) -> str | None:
    """The input hash recorded for the lock whose files are `texts` when every input it records
    still holds, its files are intact and every derived file is there for it; None when stale,
    absent or unreadable (a re-lock then reads it all properly).

    Reads the files the lock records digests of, the derived files' headers, and the glibc floor of
    the matrix (its virtual packages depend on it): the matrix is not validated, so a no-op lock
    loads none of what resolving needs. A matrix whose bytes are those it was locked from was valid
    then.
    """
    env = texts.env
    recorded = recorded_inputs(texts)
    if recorded is None:
        return None
    digest, inputs = recorded.input_hash, dict(recorded.inputs)
    glibc = _glibc_floor(project.template(env))
    if glibc is None or not still_current(project, env, inputs, glibc):
        return None
    prefix = "virtual-packages:"
    platforms = [k.removeprefix(prefix) for k in inputs if k.startswith(prefix)]
    if not derived_present(project.locks_dir, env, platforms, digest):
        log.info("%s: a derived file is missing or from another lock: locking again", env)
        return None
    if not texts.intact:
        log.info("%s: the lock files do not hash to the content hash they record: locking again", env)
        return None
    return digest


def _glibc_floor(matrix_path: Path) -> str | None:
    """`[system] glibc` of a matrix, the files it extends merged in; None when it does not read (the re-lock
    that follows reports why)."""
    try:
        layered = read_layered(matrix_path)
    except InputError:
        return None
    system = layered.data.get("system")
    glibc = system.get("glibc") if isinstance(system, dict) else None
    return glibc if isinstance(glibc, str) else None


@dataclass(frozen=True)
class _Options:
    update: Movable
    offline: bool
    upgrade: Movable
    cache: Path
    relocking: bool


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
) -> list[LockResult]:
    """Lock several envs concurrently (they share nothing but the caches); results in the given order.

    Every name in `update` must be a source of one of the envs (in its matrix or its recorded lock), and every
    name `upgrade` lists a package or source of one of them: both are checked before any work. An env whose
    recorded inputs still hold is up to date (unless forced, updating or upgrading); the matrices of the others
    are all loaded before any work, and each gets its head start (resolve/head_start.py). With `preflight`,
    every host they need is asked meanwhile, and all that do not answer are reported at once (NetworkError):
    the work stops then, and nothing is written.
    """
    # Each env's lock files read once here, again under its mutex (another run may have written).
    files = {env: read_files(project, env) for env in envs}
    if update.names:
        check_update_names(project, files, update)
    if upgrade.names:
        check_upgrade_names(project, files, upgrade)
    relocking = bool(force or update or upgrade)
    options = _Options(update, offline, upgrade, cache or cache_dir(), relocking)
    fresh = {env: None if relocking else unchanged_hash(project, files[env]) for env in envs}
    stale = [env for env in envs if fresh[env] is None]
    if not stale:  # the CLI says "up to date", once per env (and -q silences it)
        return [LockResult(env, "up-to-date", digest) for env, digest in fresh.items() if digest is not None]
    # Imported here: the matrix loader (packaging) matters only when something may move.
    from envgen.inputs.matrix import check_conda_specs, load_env

    # The conda specs are parsed (rattler) once uv has started: they are not uv's, and nothing runs them before.
    matrices = [load_env(project, env, conda_specs=False) for env in stale]
    starts: dict[str, HeadStart] = {}
    pool = ThreadPoolExecutor(max_workers=min(4, len(stale)) + 1, initializer=interrupts.worker_thread)
    try:
        for matrix in matrices:
            starts[matrix.name] = _head_start(matrix, files[matrix.name], options)
        for env, matrix in zip(stale, matrices, strict=True):
            check_conda_specs(project, env, matrix)
        asked = pool.submit(ask_hosts, matrices, files, options) if preflight else None
        gate = asked.result if asked is not None else lambda: None
        futures = {m.name: pool.submit(_relock_env, project, m, starts[m.name], gate, options) for m in matrices}
        failed = _wait_for(futures, asked)
    finally:
        for started in starts.values():
            started.close()
        # Not waiting: after an interrupt the caller stops the workers (envgen.interrupts) and reports at once.
        pool.shutdown(wait=False, cancel_futures=True)
    if failed:
        raise _first_failure(failed, several=len(envs) > 1)
    return [
        futures[env].result() if env in futures else LockResult(env, "up-to-date", fresh[env] or "") for env in envs
    ]


def _head_start(matrix: Matrix, previous: LockTexts, options: _Options) -> HeadStart:
    from envgen.resolve.head_start import head_start

    return head_start(
        matrix,
        previous,
        cache=options.cache,
        offline=options.offline,
        upgrade=options.upgrade,
        update=options.update,
    )


def _wait_for(futures: Mapping[str, Future[LockResult]], asked: Future[None] | None) -> list[tuple[str, EnvgenError]]:
    """The envs that failed, once every re-lock has ended; a preflight that found unreachable hosts (or could
    not read what it needed) stops the re-locks at once, and its error is the one raised."""
    waiting: set[Future[Any]] = set(futures.values()) | ({asked} if asked is not None else set())
    while waiting:
        done, waiting = wait(waiting, return_when=FIRST_COMPLETED)
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
    """Stop the re-locks as an interrupt does (children killed, no lock written from here on); once they have
    all ended, the process may go on with other work (a re-lock stuck in a library call leaves it stopped)."""
    interrupts.interrupt()
    _, running = wait(list(futures), timeout=STOP_WAIT)
    if not running:
        interrupts.reset()


def ask_hosts(
    matrices: Sequence[Matrix],
    files: Mapping[str, LockTexts],
    options: _Options,
) -> None:
    """The preflight: every host the re-locks of `matrices` (their lock files as read, `files`) will
    ask, asked; all that do not answer are reported at once (NetworkError)."""
    from envgen.resolve.git_sources import sources_to_update
    from envgen.resolve.pipeline import read_previous
    from envgen.resolve.preflight import Relock, preflight

    relocks = []
    for matrix in matrices:
        moving = sources_to_update(matrix, options.update, options.upgrade)  # as the re-lock will read them
        # The whole lock, as the re-lock reads it (parsed once: the re-lock finds it parsed): a lock that does
        # not read is bad input, reported before any host is (exit 2).
        previous = read_previous(files[matrix.name], afresh=moving.everything)
        kept = {} if previous is None else {s.source.name: s for s in previous.sources}
        relocks.append(Relock(matrix, kept, moving))
    preflight(relocks, cache=options.cache, offline=options.offline)


def _first_failure(failed: list[tuple[str, EnvgenError]], *, several: bool) -> EnvgenError:
    """The first env's error, naming that env (and the others that failed) when several were locked together."""
    env, error = failed[0]
    if several:
        others = [name for name, _ in failed[1:]]
        also = f"\n(env{'s' if len(others) > 1 else ''} {', '.join(others)} failed too)" if others else ""
        error.message = f"{env}: {error.message}{also}"
    return error


def known_sources(project: Project, files: Mapping[str, LockTexts]) -> set[str]:
    """The source names of the envs whose lock files are `files`: in their matrices and their
    recorded locks."""
    from envgen.inputs.matrix import load_env

    known: set[str] = set()
    for env, texts in files.items():
        known |= {s.name for s in load_env(project, env).sources}
        recorded = recorded_inputs(texts)
        known |= set(recorded.sources) if recorded else set()
    return known


def check_update_names(
    project: Project,
    files: Mapping[str, LockTexts],
    update: Movable,
) -> None:
    """InputError for a name in `update` that no env has as a source, rather than a lock that moves nothing."""
    envs = list(files)
    known = known_sources(project, files)
    unknown = update.unknown(known)
    if unknown:
        names = ", ".join(sorted(known)) or "none"
        raise InputError(
            f"--update {unknown[0]}: no source of that name in {', '.join(envs)} (matrix or recorded lock)"
            f"{did_you_mean(unknown[0], known)}",
            hint=f"name one of the sources: {names}; or use --update-all",
        )


def check_upgrade_names(
    project: Project,
    files: Mapping[str, LockTexts],
    upgrade: Movable,
) -> None:
    """InputError for an `--upgrade-package` name that is no package or source of any env, before any work."""
    from envgen.inputs.matrix import load_env

    envs = list(files)
    known = {package_key(n) for n in known_sources(project, files)}
    for env, texts in files.items():
        matrix = load_env(project, env)
        known |= {package_key(p.name) for p in matrix.packages}
        known |= {package_key(spec.split()[0]) for spec in matrix.conda_specs if spec.split()}
        known |= {package_key(n) for n in _locked_names(texts)}
    unknown = upgrade.unknown(known)
    if unknown:
        raise InputError(
            f"--upgrade-package {unknown[0]}: no package or source of that name in {', '.join(envs)} "
            f"(matrix or recorded lock){did_you_mean(unknown[0], known)}",
            hint="name a package the lock pins, a matrix package or a source; or use --upgrade for everything",
        )


def _locked_names(texts: LockTexts) -> set[str]:
    """The names of the packages a lock pins (any platform, conda or pip); none when it does not
    read (the re-lock reports why)."""
    from envgen.lockio.store import lock_of

    try:
        lock = lock_of(texts)
    except InputError:
        return set()
    if lock is None:
        return set()
    return {e.name for e in lock.conda} | {e.name for e in lock.pip}


def summarize(result: LockResult) -> dict[str, Any]:
    """The JSON-able summary `envgen lock --json` prints for one env."""
    summary: dict[str, Any] = {"env": result.env, "status": result.status, "input_hash": result.input_hash}
    lock = result.lock
    if lock is not None:
        summary |= {
            "platforms": {p: {"conda": len(lock.conda_for(p)), "pip": len(lock.pip_for(p))} for p in lock.platforms},
            "sources": {s.source.name: {"ref": s.source.ref, "commit": s.commit} for s in lock.sources},
            "pending": {p.name: p.note for p in lock.pending},
            "overrides": {o.override.name: o.override.reason for o in lock.overrides},
            "builds_from_source": sorted({f"{e.name}=={e.version}" for e in lock.pip if e.sdist}),
            "moved": {p: [m.as_dict() for m in result.moves if m.platform == p] for p in lock.platforms},
            "sources_moved": [m.as_dict() for m in result.moves if m.manager in ("source", "submodule")],
        }
    return summary


def summary_lines(summaries: Sequence[Mapping[str, Any]]) -> list[tuple[str, bool]]:
    """`envgen lock`'s report, one (line, is it a pending item) per line, from the summaries of `summarize`."""
    lines: list[tuple[str, bool]] = []
    for item in summaries:
        if item["status"] == "up-to-date":
            lines.append((f"{item['env']}: up to date (input hash {item['input_hash'][:12]})", False))
            continue
        counts = ", ".join(f"{p}: {c['conda']} conda + {c['pip']} pip" for p, c in item["platforms"].items())
        lines.append((f"{item['env']}: locked ({counts}; {len(item['sources'])} sources)", False))
        for platform, moves in [("sources", item["sources_moved"]), *item["moved"].items()]:
            if moves:
                lines.append((f"  {platform}: {len(moves)} moved", False))
            for move in moves:
                old, new = move["old"] or "(new)", move["new"] or "(removed)"
                lines.append((f"    {move['manager']} {move['name']} {old} -> {new}: {move['reason']}", False))
        lines += [(f"  pending {name}: {note}", True) for name, note in item["pending"].items()]
    return lines
