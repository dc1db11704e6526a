"""Pin git sources: refs to commits, fetched into a cache, cherry-picks applied, requirements read at the tree."""

from __future__ import annotations

import difflib
import functools
import hashlib
import logging
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from filelock import FileLock
from packaging.utils import canonicalize_name

from envgen.errors import EnvgenError, InputError, MatrixError, ResolutionError
from envgen.inputs.channels import access_index
from envgen.inputs.requirements import Line, parse_pyproject, parse_requirement_files
from envgen.inputs.untrusted import git_url_problem, ref_problem
from envgen.model import METADATA, PYPROJECT, LockedSource, Matrix, Origin, Requirement, Source
from envgen.process import run, tail
from envgen.redact import redact_text, redact_url, strip_credentials
from envgen.resolve.source_metadata import BuildSettings, Declared, declared_dependencies

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

SHA = re.compile(r"^[0-9a-f]{40}$")
GIT_PROTOCOLS = "https:http:ssh:file"
LS_REMOTE_TIMEOUT = 300.0
FETCH_TIMEOUT = 3600.0
# Cherry-picks are committed by this identity at this date, so the commit they produce is the same on every
# machine and a recipe can verify it.
PICK_ENV = {
    "GIT_COMMITTER_NAME": "envgen",
    "GIT_COMMITTER_EMAIL": "envgen@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+00:00",
}
# Neither signing nor the user's message cleanup may change the commit a cherry-pick produces.
PICK_ARGS = ("cherry-pick", "--no-gpg-sign", "--cleanup=verbatim")
MIRROR_HINT = (
    "check the URL and your network; if the host is blocked, point git at a mirror with "
    '`git config --global url."<mirror>/".insteadOf "<host>/"` (see docs/mirrors.md)'
)


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The user's environment (so their git config, insteadOf mirrors and credentials apply), never prompting."""
    env = dict(os.environ)
    # Only the transports a source URL may name: `ext::` and other helpers would run a command.
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_ALLOW_PROTOCOL=GIT_PROTOCOLS)
    env.update(extra or {})
    return env


# --- refs ----------------------------------------------------------------------------------------------


def ls_remote(url: str, *, source: str | None = None) -> dict[str, str]:
    """Every ref the remote advertises (`HEAD`, `refs/heads/…`, `refs/tags/…`) -> commit, tags peeled."""
    proc = run(["git", "ls-remote", "--", url], env=git_env(), timeout=LS_REMOTE_TIMEOUT, check=False)
    if proc.returncode != 0:
        raise _unreachable(url, source, proc.stderr)
    return parse_ls_remote(proc.stdout)


def parse_ls_remote(text: str) -> dict[str, str]:
    """`git ls-remote` output as ref -> commit; an annotated tag maps to the commit its `^{}` line names."""
    refs: dict[str, str] = {}
    peeled: dict[str, str] = {}
    for line in text.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.endswith("^{}"):
            peeled[ref[:-3]] = sha
        elif ref:
            refs[ref] = sha
    refs.update(peeled)
    return dict(sorted(refs.items()))


def resolve_ref(refs: Mapping[str, str], ref: str, *, url: str, source: str) -> str:
    """The commit `ref` names among `refs` (a full ref, `HEAD`, a tag, then a branch, as git looks them up)."""
    tag, branch = refs.get(f"refs/tags/{ref}"), refs.get(f"refs/heads/{ref}")
    if tag and branch and tag != branch:
        logger.warning("source %s: %r is both a tag and a branch at %s; using the tag", source, ref, redact_url(url))
    found = refs.get(ref) if ref == "HEAD" or ref.startswith("refs/") else tag or branch
    if found:
        return found
    names = sorted({r.removeprefix("refs/heads/").removeprefix("refs/tags/") for r in refs if _named(r)})
    close = difflib.get_close_matches(ref, names, n=3, cutoff=0.5)
    hint = f"closest branches/tags: {', '.join(close)}" if close else "no branch or tag has a similar name"
    raise ResolutionError(
        f"source {source}: ref {ref!r} not found at {redact_url(url)}",
        hint=f"{hint}; fix `ref` in the matrix, or give a full 40-hex commit",
    )


def upstream_commit(source: Source) -> str:
    """The commit the source's ref names upstream now (a full-sha ref names itself)."""
    if SHA.match(source.ref):
        return source.ref
    return resolve_ref(ls_remote(source.url, source=source.name), source.ref, url=source.url, source=source.name)


def _named(ref: str) -> bool:
    return ref.startswith(("refs/heads/", "refs/tags/"))


def _unreachable(url: str, source: str | None, stderr: str) -> ResolutionError:
    who = f"source {source}: " if source else ""
    return ResolutionError(
        f"{who}cannot reach git remote {redact_url(url)}:\n{redact_text(tail(stderr, 5))}", hint=MIRROR_HINT
    )


# --- the cache -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Repo:
    """A bare repository under <cache>/git/ holding the commits fetched from one canonical URL."""

    path: Path
    url: str
    source: str

    def git(self, *args: str, check: bool = True, extra: Mapping[str, str] | None = None) -> str:
        return run(["git", *args], cwd=self.path, env=git_env(extra), timeout=FETCH_TIMEOUT, check=check).stdout

    def has_commit(self, sha: str) -> bool:
        proc = run(
            ["git", "cat-file", "-e", "--end-of-options", f"{sha}^{{commit}}"],
            cwd=self.path,
            env=git_env(),
            check=False,
        )
        return proc.returncode == 0

    def read(self, commit: str, path: str) -> bytes | None:
        """A text file of the tree at `commit` (newlines normalised), or None when it does not exist."""
        cmd = ["git", "cat-file", "blob", "--end-of-options", f"{commit}:{path}"]
        try:
            proc = run(cmd, cwd=self.path, env=git_env(), check=False)
        except UnicodeDecodeError as exc:
            raise InputError(
                f"source {self.source} at commit {commit}: {path} is not UTF-8 text ({exc.reason})",
                hint="a requirement file must be UTF-8; pin another ref or add overrides in the matrix",
            ) from exc
        return proc.stdout.encode() if proc.returncode == 0 else None

    def export(self, commit: str, dest: Path) -> None:
        """The tree of `commit` as plain files under `dest` (through `git archive`; no worktree left behind)."""
        dest.mkdir(parents=True, exist_ok=True)
        archive = dest.parent / f"{dest.name}.tar"
        self.git("archive", "--format=tar", "-o", str(archive), commit)
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")
        archive.unlink()

    def fetch(self, sha: str, *, depth: int, what: str) -> None:
        """Make `sha` present: one shallow fetch by sha, or all refs when the server refuses that."""
        if self.has_commit(sha):
            return
        shallow = run(
            ["git", "fetch", "--quiet", f"--depth={depth}", "--", "origin", sha],
            cwd=self.path,
            env=git_env(),
            timeout=FETCH_TIMEOUT,
            check=False,
        )
        if shallow.returncode == 0 and self.has_commit(sha):
            return
        ls_remote(self.url, source=self.source)  # an unreachable remote gets its own message, not a fallback
        logger.info("source %s: %s cannot fetch %s by sha; fetching all refs", self.source, redact_url(self.url), sha)
        unshallow = ["--unshallow"] if self.git("rev-parse", "--is-shallow-repository").strip() == "true" else []
        full = run(
            [
                "git",
                "fetch",
                "--quiet",
                *unshallow,
                "--",
                "origin",
                "+refs/heads/*:refs/remotes/origin/*",
                "+refs/tags/*:refs/tags/*",
            ],
            cwd=self.path,
            env=git_env(),
            timeout=FETCH_TIMEOUT,
            check=False,
        )
        if full.returncode != 0:
            raise ResolutionError(
                f"source {self.source}: fetching {what} {sha} from {redact_url(self.url)} failed:\n"
                f"{redact_text(tail(shallow.stderr + full.stderr, 5))}",
                hint="check that the commit exists upstream",
            )
        if not self.has_commit(sha):
            raise ResolutionError(
                f"source {self.source}: {what} {sha} does not exist at {redact_url(self.url)}",
                hint="check the sha (force-pushed away?) or pin a branch or tag in the matrix instead",
            )


@contextmanager
def _cached_repo(cache: Path, url: str, source: str) -> Iterator[_Repo]:
    """The cache repository of `url`, created on first use and held exclusively (sources may share a URL)."""
    root = cache / "git"
    root.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", urlsplit(url).path.strip("/"))[-60:].strip("-.") or "repo"
    path = root / f"{slug}-{hashlib.sha256(url.encode()).hexdigest()[:12]}.git"
    with FileLock(f"{path}.lock"):
        repo = _Repo(path, url, source)
        if not (path / "HEAD").exists():
            path.mkdir(parents=True, exist_ok=True)
            repo.git("init", "--quiet", "--bare")
        # Set on every use (it is idempotent), so a repository an interrupted run left without it still works.
        repo.git("config", "--", "remote.origin.url", url)
        yield repo


# --- cherry-picks --------------------------------------------------------------------------------------


def _apply_cherry_picks(repo: _Repo, commit: str, picks: tuple[str, ...]) -> tuple[str, ...]:
    """Apply `picks` in order on `commit` in a scratch worktree; the commit each one produced."""
    scratch = Path(tempfile.mkdtemp(prefix="envgen-picks-"))
    tree = scratch / "tree"
    repo.git("worktree", "add", "--quiet", "--detach", "--", str(tree), commit)
    produced: list[str] = []
    try:
        for pick in picks:
            head = produced[-1] if produced else commit
            proc = run(["git", *PICK_ARGS, "--end-of-options", pick], cwd=tree, env=git_env(PICK_ENV), check=False)
            if proc.returncode != 0:
                raise _pick_failed(repo, tree, head, pick, proc.stderr)
            produced.append(run(["git", "rev-parse", "HEAD"], cwd=tree, env=git_env()).stdout.strip())
    finally:
        repo.git("worktree", "remove", "--force", "--", str(tree), check=False)
        repo.git("worktree", "prune", check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    return tuple(produced)


def _pick_failed(repo: _Repo, tree: Path, head: str, pick: str, stderr: str) -> ResolutionError:
    conflicts = run(["git", "diff", "--name-only", "--diff-filter=U"], cwd=tree, env=git_env(), check=False)
    files = sorted(conflicts.stdout.split())
    run(["git", "cherry-pick", "--abort"], cwd=tree, env=git_env(), check=False)
    if files:
        return ResolutionError(
            f"source {repo.source}: cherry-pick of {pick} onto {head} conflicts in {', '.join(files)}",
            hint="drop or replace that cherry-pick in the matrix, or pin a ref it applies to",
        )
    return ResolutionError(
        f"source {repo.source}: cherry-pick of {pick} onto {head} failed:\n{redact_text(tail(stderr, 5))}",
        hint="a cherry-pick that is already contained in the ref leaves nothing to commit: drop it from the matrix",
    )


# --- requirements --------------------------------------------------------------------------------------


def _read_requirements(
    source: Source, read: Callable[[str], bytes | None], commit: str
) -> tuple[tuple[Line, ...], tuple[tuple[str, bytes], ...]]:
    """Every requirement line of the files `source.requirements` names, and the files read, in order."""
    context = f"source {source.name} at commit {commit}"
    lines: list[Line] = []
    files: dict[str, bytes] = {}
    for entry in source.requirements:
        if entry == PYPROJECT:
            data = read("pyproject.toml")
            if data is None:
                raise ResolutionError(
                    f"{context}: pyproject.toml does not exist, so its [project] dependencies cannot be read",
                    hint='name a requirements file instead of "pyproject" in the source\'s `requirements`',
                )
            files.setdefault("pyproject.toml", data)
            lines.extend(parse_pyproject(data.decode("utf-8", errors="replace"), "pyproject.toml", context=context))
            continue
        parsed = parse_requirement_files((entry,), read, context=context)
        for option in parsed.ignored:
            logger.warning(
                "%s: %s:%d: `%s` ignored: indexes and pip options come only from the matrix and channels/",
                context,
                option.file,
                option.line,
                option.option,
            )
        lines.extend(parsed.lines)
        for path, data in parsed.files:
            files.setdefault(path, data)
    unique = tuple(dict.fromkeys(lines))
    return unique, tuple(files.items())


def digest_files(files: tuple[tuple[str, bytes], ...]) -> str:
    """sha256 over each file's path and bytes, in the order read."""
    h = hashlib.sha256()
    for path, data in files:
        h.update(f"{path}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def _split(
    source: Source, lines: tuple[Line, ...], matrix_names: frozenset[str]
) -> tuple[tuple[Requirement, ...], tuple[Source, ...]]:
    """Plain requirements, and the git requirements turned into sources (unless the matrix has that source)."""
    requirements: list[Requirement] = []
    discovered: list[Source] = []
    for line in lines:
        req = line.requirement
        origin = Origin(file=line.file, line=line.line or None, key=line.key, source=source.name)
        if not req.url or line.constraint:
            requirements.append(Requirement(line.text, origin, constraint=line.constraint))
            continue
        scheme = urlsplit(req.url).scheme
        if "+" not in scheme:
            requirements.append(Requirement(line.text, origin))
            continue
        where = f"source {source.name}: {line.file}:{line.line}"
        if not scheme.startswith("git+"):
            raise InputError(
                f"{where}: `{line.text}` is a {scheme.split('+')[0]} requirement; only git sources are supported",
                hint="declare it as a source in the matrix with a git URL, or add an override",
            )
        name = canonicalize_name(req.name)
        if name in matrix_names:
            logger.info("%s: %s is satisfied by the matrix's source of that name", where, req.name)
            continue
        if req.extras or req.marker:
            logger.warning(
                "%s: extras and markers of `%s` are not applied: git sources install without deps", where, line.text
            )
        url, ref = _split_vcs_url(req.url, where=where)
        discovered.append(
            Source(
                name=name,
                url=url,
                ref=ref,
                distribution=req.name,
                editable=False,
                origin=f"{source.name}:{line.file}:{line.line}",
            )
        )
    return tuple(requirements), tuple(discovered)


def _split_vcs_url(vcs_url: str, *, where: str) -> tuple[str, str]:
    """`git+https://host/repo.git@ref#egg=x` as (`https://host/repo.git`, `ref`); no `@ref` means HEAD."""
    parts = urlsplit(vcs_url.removeprefix("git+"))
    fragment = dict(p.partition("=")[::2] for p in parts.fragment.split("&") if p)
    if "subdirectory" in fragment:
        raise InputError(
            f"{where}: `{redact_url(vcs_url)}` installs from a subdirectory, which git sources do not support",
            hint="declare the project as a source in the matrix and install it by hand, or add an override",
        )
    path, at, ref = parts.path.rpartition("@")
    if not at:
        path, ref = parts.path, "HEAD"
    url = strip_credentials(urlunsplit((parts.scheme, parts.netloc, path, parts.query, "")))
    problem = git_url_problem(url) or ref_problem(ref)
    if problem:
        raise InputError(
            f"{where}: `{redact_url(vcs_url)}`: {problem}", hint="fix the requirement upstream, or add an override"
        )
    return url, ref


# --- resolution ----------------------------------------------------------------------------------------


def _is_kept(source: Source, previous: Mapping[str, LockedSource], update: Collection[str] | bool) -> str | None:
    """The recorded commit to keep, if the source is unchanged and not asked to update."""
    if update is True:
        return None
    old = previous.get(source.name)
    if old is None or (update and source.name in update):
        return None
    # A lock records URLs without credentials: compare them so.
    recorded = (strip_credentials(old.source.url), old.source.ref, old.source.cherry_picks)
    same = recorded == (strip_credentials(source.url), source.ref, source.cherry_picks)
    return old.commit if same else None


def _pin(
    source: Source,
    *,
    cache: Path,
    kept: str | None,
    matrix_names: frozenset[str],
    settings: BuildSettings,
) -> tuple[LockedSource, tuple[Source, ...]]:
    """One source pinned, with its requirements and the git requirements it brings."""
    for pick in source.cherry_picks:
        if not SHA.match(pick):
            raise InputError(
                f"source {source.name}: cherry-pick {pick!r} is not a full 40-hex commit",
                hint="name each cherry-pick by its full commit sha",
            )
    if kept:
        commit = kept
    elif SHA.match(source.ref):
        commit = source.ref
    else:
        commit = resolve_ref(ls_remote(source.url, source=source.name), source.ref, url=source.url, source=source.name)
    what = "recorded commit" if kept else "commit"
    with _cached_repo(cache, source.url, source.name) as repo:
        repo.fetch(commit, depth=1, what=what)
        for pick in source.cherry_picks:
            repo.fetch(pick, depth=2, what="cherry-pick")
        picked = _apply_cherry_picks(repo, commit, source.cherry_picks) if source.cherry_picks else ()
        head = picked[-1] if picked else commit
        tree = repo.git("rev-parse", "--verify", "--end-of-options", f"{head}^{{tree}}").strip()
        lines, files = _read_requirements(source, lambda path: repo.read(head, path), head)
        declared = Declared()
        if source.dependencies == METADATA:
            export = functools.partial(repo.export, head)
            declared = declared_dependencies(source, tree, lambda path: repo.read(head, path), export, settings)
    if declared.fallback:
        listed = ", ".join(source.requirements) or "none listed"
        logger.warning(
            "source %s: its declared dependencies cannot be read (%s); only its requirement files count (%s)",
            source.name,
            declared.fallback,
            listed,
        )
    # The guide installs the listed files, then the project itself (`pip install -e .`); a requirement both
    # list keeps the file's origin.
    written = {line.text for line in lines}
    counted = (*lines, *(line for line in declared.lines if line.text not in written))
    requirements, discovered = _split(source, counted, matrix_names)
    logger.info("source %s: %s -> %s", source.name, source.ref, commit)
    metadata = tuple((f"{line.file} {line.key}", line.text.encode()) for line in declared.lines)
    locked = LockedSource(
        source,
        commit,
        requirements,
        digest=digest_files(files + metadata),
        tree=tree,
        picked=picked,
        metadata_fallback=declared.fallback,
    )
    return locked, discovered


def resolve_sources(
    matrix: Matrix,
    *,
    cache: Path,
    previous: Mapping[str, LockedSource] | None = None,
    update: Collection[str] | bool = (),
    jobs: int = 4,
) -> tuple[LockedSource, ...]:
    """Pin every source of `matrix` (and the git requirements they bring) to a commit, in install order.

    `cache` is envgen's cache directory (repositories live in `cache/git/`). A source whose url, ref and
    cherry-picks match its `previous` record keeps that commit unless named in `update` (or update is True).
    Sources are resolved `jobs` at a time; git requirements found in their files are pinned in a second round
    and placed right after the source that names them.
    """
    previous = previous or {}
    matrix_names = frozenset(
        name for s in matrix.sources for name in (canonicalize_name(s.name), canonicalize_name(s.distribution))
    )

    environ = os.environ
    settings = BuildSettings(tuple(access_index(i, environ) for i in matrix.indexes), cache, environ)

    def pin(source: Source) -> tuple[LockedSource, tuple[Source, ...]]:
        kept = _is_kept(source, previous, update)
        return _pin(source, cache=cache, kept=kept, matrix_names=matrix_names, settings=settings)

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="envgen-git") as pool:
        first = _results({s.name: pool.submit(pin, s) for s in matrix.sources})
        children = _unique_discovered(list(first.values()))
        second = _results({s.name: pool.submit(pin, s) for group in children.values() for s in group})
    pinned = {name: locked for name, (locked, _) in second.items()}
    ordered: list[LockedSource] = []
    for locked, _ in first.values():
        ordered.append(locked)
        ordered.extend(pinned[s.name] for s in children.get(locked.source.name, ()))
    return tuple(ordered)


def _results(futures: Mapping[str, Future[_T]]) -> dict[str, _T]:
    """Every future's result by source name; when several failed, the first one's error names the others too."""
    failed = [name for name, future in futures.items() if future.exception() is not None]
    error = futures[failed[0]].exception() if len(failed) > 1 else None
    # A user who sees every unreachable host at once fixes them in one go.
    if isinstance(error, EnvgenError) and not isinstance(error, MatrixError):
        raise type(error)(f"{error.message}\n(sources {', '.join(failed[1:])} failed too)", hint=error.hint) from error
    return {name: future.result() for name, future in futures.items()}


def _unique_discovered(first: list[tuple[LockedSource, tuple[Source, ...]]]) -> dict[str, tuple[Source, ...]]:
    """Discovered sources by parent; one named twice is kept where first met (in install order)."""
    seen: dict[str, Source] = {}
    by_parent: dict[str, tuple[Source, ...]] = {}
    for locked, discovered in first:
        mine: list[Source] = []
        for source in discovered:
            earlier = seen.get(source.name)
            if earlier is None:
                seen[source.name] = source
                mine.append(source)
            elif (earlier.url, earlier.ref) != (source.url, source.ref):
                logger.warning(
                    "%s asks for %s at %s@%s; keeping %s@%s from %s",
                    source.origin,
                    source.distribution,
                    redact_url(source.url),
                    source.ref,
                    redact_url(earlier.url),
                    earlier.ref,
                    earlier.origin,
                )
        by_parent[locked.source.name] = tuple(mine)
    return by_parent
