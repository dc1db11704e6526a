"""Sources as `git bundle`s holding exactly the locked commits, and, on the other side, mirrors made
from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from envgen.bundle.manifest import GitPack, git_commits, git_path, submodule_path
from envgen.errors import VerificationError
from envgen.model import LockedSource
from envgen.process import run, tail
from envgen.resolve.git.cache import CachedRepo, cached_repo
from envgen.resolve.git.remote import GitEnv

_REF = "refs/heads/envgen/"


def _bundle(
    repo: CachedRepo, commits: Sequence[str], pack_path: str, scratch: Path
) -> tuple[str, ...]:
    """Write the bundle of `commits` to `scratch/pack_path`; returns the shallow boundary it
    carries."""
    refs = [f"{_REF}{sha}" for sha in commits]
    for ref, sha in zip(refs, commits, strict=True):
        # A ref also keeps the commits from being pruned out of the cache.
        repo.git("update-ref", "--", ref, sha)
    dest = scratch / pack_path
    dest.parent.mkdir(parents=True, exist_ok=True)
    repo.git("bundle", "create", "--quiet", str(dest), *refs)
    reachable = set(repo.git("rev-list", *refs, "--").split())
    shallow_file = repo.path / "shallow"
    boundary = shallow_file.read_text().split() if shallow_file.is_file() else []
    return tuple(sorted(sha for sha in boundary if sha in reachable))


def _pack_submodules(
    cache: Path,
    locked: LockedSource,
    scratch: Path,
    git: GitEnv,
) -> list[GitPack]:
    """A pack per submodule the lock records for `locked` (nested ones included), each at its
    gitlink commit."""
    packs = []
    for sub in locked.submodules:
        name = f"{locked.source.name}/{sub.path}"
        pack_path = submodule_path(sub)
        with cached_repo(cache, sub.url, name, git) as repo:
            repo.fetch(sub.commit, depth=1, what="submodule commit")
            shallow = _bundle(repo, (sub.commit,), pack_path, scratch)
        packs.append(GitPack(name, sub.url, pack_path, (sub.commit,), shallow))
    return packs


def pack_source(cache: Path, locked: LockedSource, scratch: Path, git: GitEnv) -> list[GitPack]:
    """Write the bundles of `locked` and of each submodule its lock records under `scratch`.

    They come from the cache repositories the git stage filled: commits already cached are not
    fetched again; a missing one is fetched from its remote (an unreachable remote is a
    ResolutionError naming it). The cache's repositories are shallow, so each pack records where its
    history stops, and its mirror is shallow there too.
    """
    src = locked.source
    commits = git_commits(locked)
    with cached_repo(cache, src.url, src.name, git) as repo:
        repo.fetch(locked.commit, depth=1, what="commit")
        for pick in src.cherry_picks:
            repo.fetch(pick, depth=2, what="cherry-pick")
        shallow = _bundle(repo, commits, git_path(locked), scratch)
    pack = GitPack(src.name, src.url, git_path(locked), commits, shallow)
    return [pack, *_pack_submodules(cache, locked, scratch, git)]


def make_mirror(pack: GitPack, bundle_file: Path, mirror: Path, git: GitEnv) -> None:
    """A bare repository at `mirror` holding the bundle's commits, shallow where the bundle's
    history stops."""
    mirror.mkdir(parents=True)
    run(["git", "init", "--quiet", "--bare", str(mirror)], env=git.environ())
    if pack.shallow:
        (mirror / "shallow").write_text("".join(f"{sha}\n" for sha in pack.shallow))
    proc = run(
        ["git", "fetch", "--quiet", "--", str(bundle_file), f"+{_REF}*:{_REF}*"],
        cwd=mirror,
        env=git.environ(),
        check=False,
    )
    if proc.returncode != 0:
        raise VerificationError(
            f"{pack.path} (source {pack.source}) is not a usable git "
            f"bundle:\n{tail(proc.stderr, 5)}",
            hint="make the bundle again",
            file=str(pack.path),
        )
    for sha in pack.commits:
        have = run(
            ["git", "cat-file", "-e", "--end-of-options", f"{sha}^{{commit}}"],
            cwd=mirror,
            check=False,
        )
        if have.returncode != 0:
            raise VerificationError(
                f"{pack.path} (source {pack.source}) lacks the locked commit {sha}",
                file=str(pack.path),
            )


def mirror_git_environment(
    mirrors: Sequence[tuple[GitPack, Path]], environ: Mapping[str, str]
) -> dict[str, str]:
    """`environ` for the recipe with git sent to the mirrors only: every locked URL rewritten to its
    mirror (git's url.<base>.insteadOf, given as GIT_CONFIG_* variables), no user or system config
    that could reach out."""
    env = {k: v for k, v in environ.items() if not k.startswith("GIT_")}
    pairs = sorted({(f"url.{mirror.as_uri()}.insteadOf", pack.url) for pack, mirror in mirrors})
    for number, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{number}"] = key
        env[f"GIT_CONFIG_VALUE_{number}"] = value
    # Submodules are cloned from the mirrors too, over the file transport git refuses them by
    # default.
    env[f"GIT_CONFIG_KEY_{len(pairs)}"], env[f"GIT_CONFIG_VALUE_{len(pairs)}"] = (
        "protocol.file.allow",
        "always",
    )
    env.update(
        GIT_CONFIG_COUNT=str(len(pairs) + 1),
        GIT_CONFIG_GLOBAL=str(Path("/dev/null")),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        # Only the local mirrors: any other URL (a submodule not bundled) fails at once instead of
        # reaching out.
        GIT_ALLOW_PROTOCOL="file",
    )
    return env
