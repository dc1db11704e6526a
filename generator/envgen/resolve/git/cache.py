"""envgen's cache of git repositories: one bare repository per URL, commits fetched by sha,
cherry-picks applied."""

from __future__ import annotations

import hashlib
import logging
import re
import subprocess
import tarfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from filelock import FileLock

from envgen.cherry_picks import PICK_ENV, PICK_FLAGS
from envgen.errors import InputError, ResolutionError
from envgen.process import run, tail
from envgen.redact import redact_text, redact_url
from envgen.resolve.git.objects import ObjectReader
from envgen.resolve.git.remote import GitEnv, bare_url, ls_remote, remote_git
from envgen.scratch import scratch_dir

logger = logging.getLogger(__name__)

FETCH_TIMEOUT = 3600.0


@dataclass(frozen=True)
class CachedRepo:
    """A bare repository under <cache>/git/ holding the commits fetched from one canonical URL."""

    path: Path
    url: str
    source: str
    git_env: GitEnv
    objects: ObjectReader = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "objects", ObjectReader(self.path, self.git_env.environ()))

    def git(self, *args: str, check: bool = True, extra: Mapping[str, str] | None = None) -> str:
        env = self.git_env.environ(extra)
        proc = run(["git", *args], cwd=self.path, env=env, timeout=FETCH_TIMEOUT, check=check)
        return proc.stdout

    def has_commit(self, sha: str) -> bool:
        found = self.objects.info(f"{sha}^{{commit}}")
        return found is not None

    def has_file(self, commit: str, path: str) -> bool:
        """Whether the tree of `commit` holds `path`."""
        return self.objects.info(f"{commit}:{path}") is not None

    def blob(self, commit: str, path: str) -> str | None:
        """The blob id of the file `path` in the tree of `commit`; None when it has no such file."""
        found = self.objects.info(f"{commit}:{path}")
        return found.sha if found is not None and found.type == "blob" else None

    def read(self, commit: str, path: str) -> bytes | None:
        """A text file of the tree at `commit` (newlines normalised), or None when it does not
        exist."""
        found = self.objects.contents(f"{commit}:{path}")
        if found is None or found[0].type != "blob":
            return None
        try:
            text = found[1].decode()
        except UnicodeDecodeError as exc:
            raise InputError(
                f"source {self.source} at commit {commit}: {path} is not UTF-8 text ({exc.reason})",
                hint="a requirement file must be UTF-8; pin another ref or add overrides in "
                "the matrix",
                file=path,
            ) from exc
        return text.replace("\r\n", "\n").replace("\r", "\n").encode()

    def close(self) -> None:
        self.objects.close()

    def export(self, commit: str, dest: Path) -> None:
        """The tree of `commit` as plain files under `dest` (through `git archive`; no worktree left
        behind)."""
        dest.mkdir(parents=True, exist_ok=True)
        archive = dest.parent / f"{dest.name}.tar"
        self.git("archive", "--format=tar", "-o", str(archive), commit)
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")
        archive.unlink()

    def _remote(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        return remote_git(args, self.git_env, url=self.url, source=self.source, cwd=self.path)

    def fetch(self, sha: str, *, depth: int, what: str) -> None:
        """Make `sha` present: one shallow fetch by sha, or all refs when the server refuses
        that."""
        if self.has_commit(sha):
            return
        # By URL, not through a configured remote: nothing but objects and refs is written here.
        remote = bare_url(self.url)
        shallow_fetch = ["fetch", "--quiet", f"--depth={depth}", "--", remote, sha]
        shallow = self._remote(shallow_fetch)
        if shallow.returncode == 0 and self.has_commit(sha):
            return
        # An unreachable remote gets its own message, not a fallback.
        ls_remote(self.url, self.git_env, source=self.source)
        logger.info(
            "source %s: %s cannot fetch %s by sha; fetching all refs",
            self.source,
            redact_url(self.url),
            sha,
        )
        unshallow = (
            ["--unshallow"]
            if self.git("rev-parse", "--is-shallow-repository").strip() == "true"
            else []
        )
        refs = ["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"]
        fetch_all = ["fetch", "--quiet", *unshallow, "--", remote, *refs]
        full = self._remote(fetch_all)
        if full.returncode != 0:
            raise ResolutionError(
                f"source {self.source}: fetching {what} {sha} from {redact_url(self.url)} failed:\n"
                f"{redact_text(tail(shallow.stderr + full.stderr, 5))}",
                hint="check that the commit exists upstream",
                host=redact_url(self.url),
            )
        if not self.has_commit(sha):
            raise ResolutionError(
                f"source {self.source}: {what} {sha} does not exist at {redact_url(self.url)}",
                hint="check the sha (force-pushed away?) or pin a branch or tag in the "
                "matrix instead",
                host=redact_url(self.url),
            )


def repo_path(cache: Path, url: str) -> Path:
    """Where the cache keeps the repository of `url`: `<cache>/git/<path slug>-<hash of the
    URL>.git` (the URL without credentials: a token named nothing on disk, and a new token finds the
    same repository)."""
    bare = bare_url(url)
    slug = (
        re.sub(r"[^A-Za-z0-9._-]+", "-", urlsplit(bare).path.strip("/"))[-60:].strip("-.") or "repo"
    )
    return cache / "git" / f"{slug}-{hashlib.sha256(bare.encode()).hexdigest()[:12]}.git"


# The commits found in a cache repository by this process, by repository: a lock asks for the same
# ones twice (its head start, then its preflight), each time through a `git cat-file` of its own.
# Only an answer for the choice of asking the remote: pinning reads the commit in the repository.
_PRESENT: set[tuple[Path, str]] = set()


def has_commits(cache: Path, url: str, shas: Sequence[str], git: GitEnv) -> bool:
    """Whether the cache already holds every commit of `shas` from `url` (then a lock need not ask
    the remote)."""
    path = repo_path(cache, url)
    if not (path / "HEAD").exists():  # never made, or removed since (`envgen cache clean`)
        return False
    unseen = [sha for sha in shas if (path, sha) not in _PRESENT]
    if not unseen:
        return True
    with closing(CachedRepo(path, url, "", git)) as repo:
        for sha in unseen:
            if not repo.has_commit(sha):
                return False
            _PRESENT.add((path, sha))
    return True


@contextmanager
def cached_repo(cache: Path, url: str, source: str, git: GitEnv) -> Iterator[CachedRepo]:
    """The cache repository of `url`, created on first use and held exclusively (sources may share a
    URL); `git` is what every git call in it runs with.

    Fetches name the URL without credentials (nothing on disk names them) and get them from the
    environment (`GitEnv.environ(url=...)`); the repository's `config` records no remote."""
    path = repo_path(cache, url)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock"):
        remove_stale_git_locks(path, before=time.time())
        repo = CachedRepo(path, url, source, git)
        if not (path / "HEAD").exists():
            path.mkdir(parents=True, exist_ok=True)
            repo.git("init", "--quiet", "--bare")
        with closing(repo):
            yield repo


def remove_stale_git_locks(repo: Path, *, before: float) -> list[Path]:
    """Remove the `*.lock` files git left in `repo` (config.lock, shallow.lock, refs/…/x.lock) older
    than `before`.

    Called holding the repository's mutex, which every envgen git call in it runs under: a lock file
    made before that was taken belongs to a run that was killed, and would fail every later `git
    config` or fetch here. Ref names cannot end in `.lock`, so each such file is git's; `objects/`
    (packs, loose objects) is not walked.
    """
    if not repo.is_dir():
        return []
    walked = [p for p in repo.iterdir() if p.name != "objects"] + [repo / "objects" / "info"]
    found = [p for top in walked for p in ([top] if top.is_file() else top.rglob("*.lock"))]
    removed = sorted(
        p for p in found if p.name.endswith(".lock") and p.is_file() and p.stat().st_mtime < before
    )
    for lock in removed:
        lock.unlink(missing_ok=True)
    if removed:
        names = ", ".join(str(p.relative_to(repo)) for p in removed)
        logger.warning(
            "git cache %s: removed lock files a killed run left behind: %s", repo.name, names
        )
    return removed


def apply_cherry_picks(repo: CachedRepo, commit: str, picks: tuple[str, ...]) -> tuple[str, ...]:
    """Apply `picks` in order on `commit` in a scratch worktree; the commit each one produced."""
    produced: list[str] = []
    with scratch_dir("envgen-picks-") as scratch:
        tree = scratch / "tree"
        repo.git("worktree", "add", "--quiet", "--detach", "--", str(tree), commit)
        try:
            for pick in picks:
                head = produced[-1] if produced else commit
                proc = run(
                    ["git", "cherry-pick", *PICK_FLAGS, "--end-of-options", pick],
                    cwd=tree,
                    env=repo.git_env.environ(PICK_ENV),
                    check=False,
                )
                if proc.returncode != 0:
                    raise _pick_failed(repo, tree, head, pick, proc.stderr)
                rev = run(["git", "rev-parse", "HEAD"], cwd=tree, env=repo.git_env.environ())
                produced.append(rev.stdout.strip())
        finally:
            repo.git("worktree", "remove", "--force", "--", str(tree), check=False)
            repo.git("worktree", "prune", check=False)
    return tuple(produced)


def _pick_failed(
    repo: CachedRepo, tree: Path, head: str, pick: str, stderr: str
) -> ResolutionError:
    env = repo.git_env.environ()
    unmerged = ["git", "diff", "--name-only", "--diff-filter=U"]
    conflicts = run(unmerged, cwd=tree, env=env, check=False)
    files = sorted(conflicts.stdout.split())
    run(["git", "cherry-pick", "--abort"], cwd=tree, env=env, check=False)
    if files:
        return ResolutionError(
            f"source {repo.source}: cherry-pick of {pick} onto {head} conflicts in "
            f"{', '.join(files)}",
            hint="drop or replace that cherry-pick in the matrix, or pin a ref it applies to",
        )
    return ResolutionError(
        f"source {repo.source}: cherry-pick of {pick} onto {head} "
        f"failed:\n{redact_text(tail(stderr, 5))}",
        hint="a cherry-pick that is already contained in the ref leaves nothing to commit: "
        "drop it from the matrix",
    )
