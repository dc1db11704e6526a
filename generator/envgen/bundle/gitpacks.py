"""Sources as `git bundle`s holding exactly the locked commits, and, on the other side, mirrors made from them."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urljoin

from envgen.bundle.manifest import GitPack, git_commits, git_path
from envgen.errors import InputError, VerificationError
from envgen.inputs.untrusted import git_url_problem
from envgen.model import LockedSource
from envgen.process import run, tail
from envgen.resolve.git_cache import CachedRepo, cached_repo
from envgen.resolve.git_remote import git_env

_REF = "refs/heads/envgen/"


def _bundle(repo: CachedRepo, commits: Sequence[str], pack_path: str, scratch: Path) -> tuple[str, ...]:
    """Write the bundle of `commits` to `scratch/pack_path`; returns the shallow boundary it carries."""
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


def gitlinks(repo: CachedRepo, commit: str, parent_url: str) -> list[tuple[str, str, str]]:
    """(path, URL, commit) of each submodule `commit`'s tree records; relative URLs resolved against the parent's."""
    links = {}
    for entry in repo.git("ls-tree", "-r", "-z", commit).split("\0"):
        meta, _, path = entry.partition("\t")
        if meta.startswith("160000 commit "):
            links[path] = meta.split()[2]
    if not links:
        return []
    proc = run(
        ["git", "config", "--blob", f"{commit}:.gitmodules", "--get-regexp", r"^submodule\..*\.(path|url)$"],
        cwd=repo.path,
        env=git_env(),
        check=False,
    )
    keys: dict[str, dict[str, str]] = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition(" ")
        name, _, field = key.removeprefix("submodule.").rpartition(".")
        keys.setdefault(name, {})[field] = value
    urls = {k["path"]: k["url"] for k in keys.values() if "path" in k and "url" in k}
    missing = sorted(set(links) - set(urls))
    if missing:
        raise InputError(
            f"source {repo.source}: .gitmodules at {commit} names no URL for the submodule(s) {', '.join(missing)}",
            hint="pin a commit whose .gitmodules is complete, or set submodules = false for the source",
        )
    resolved = {
        p: urljoin(parent_url.rstrip("/") + "/", u) if u.startswith(("./", "../")) else u for p, u in urls.items()
    }
    for url in resolved.values():
        problem = git_url_problem(url)
        if problem:
            raise InputError(f"source {repo.source}: submodule URL {url} in .gitmodules at {commit}: {problem}")
    return [(path, resolved[path], sha) for path, sha in sorted(links.items())]


def _pack_submodules(cache: Path, owner: str, url: str, commit: str, scratch: Path) -> list[GitPack]:
    """A pack per submodule of `commit` (of the repository at `url`), recursively."""
    with cached_repo(cache, url, owner) as repo:
        links = gitlinks(repo, commit, url)
    packs = []
    for path, sub_url, sha in links:
        name = f"{owner}/{path}"
        pack_path = f"git/submodules/{hashlib.sha256(f'{sub_url} {sha}'.encode()).hexdigest()[:16]}.bundle"
        with cached_repo(cache, sub_url, name) as repo:
            repo.fetch(sha, depth=1, what="submodule commit")
            shallow = _bundle(repo, (sha,), pack_path, scratch)
        packs.append(GitPack(name, sub_url, pack_path, (sha,), shallow))
        packs += _pack_submodules(cache, name, sub_url, sha, scratch)
    return packs


def pack_source(cache: Path, locked: LockedSource, scratch: Path) -> list[GitPack]:
    """Write the bundles of `locked` (and of its submodules, if it checks them out) under `scratch`.

    They come from the cache repositories the git stage filled: commits already cached are not fetched again;
    a missing one is fetched from its remote (an unreachable remote is a ResolutionError naming it). The cache's
    repositories are shallow, so each pack records where its history stops, and its mirror is shallow there too.
    """
    src = locked.source
    commits = git_commits(locked)
    with cached_repo(cache, src.url, src.name) as repo:
        repo.fetch(locked.commit, depth=1, what="commit")
        for pick in src.cherry_picks:
            repo.fetch(pick, depth=2, what="cherry-pick")
        shallow = _bundle(repo, commits, git_path(locked), scratch)
        # The installed tree's gitlinks: after the cherry-picks when the cache still holds their result.
        final = locked.picked[-1] if locked.picked and repo.has_commit(locked.picked[-1]) else locked.commit
    packs = [GitPack(src.name, src.url, git_path(locked), commits, shallow)]
    if src.submodules:
        packs += _pack_submodules(cache, src.name, src.url, final, scratch)
    return packs


def make_mirror(pack: GitPack, bundle_file: Path, mirror: Path) -> None:
    """A bare repository at `mirror` holding the bundle's commits, shallow where the bundle's history stops."""
    mirror.mkdir(parents=True)
    run(["git", "init", "--quiet", "--bare", str(mirror)], env=git_env())
    if pack.shallow:
        (mirror / "shallow").write_text("".join(f"{sha}\n" for sha in pack.shallow))
    proc = run(
        ["git", "fetch", "--quiet", "--", str(bundle_file), f"+{_REF}*:{_REF}*"],
        cwd=mirror,
        env=git_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise VerificationError(
            f"{pack.path} (source {pack.source}) is not a usable git bundle:\n{tail(proc.stderr, 5)}",
            hint="make the bundle again",
        )
    for sha in pack.commits:
        have = run(["git", "cat-file", "-e", "--end-of-options", f"{sha}^{{commit}}"], cwd=mirror, check=False)
        if have.returncode != 0:
            raise VerificationError(f"{pack.path} (source {pack.source}) lacks the locked commit {sha}")


def mirror_git_environment(mirrors: Sequence[tuple[GitPack, Path]], environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` for the recipe with git sent to the mirrors only: every locked URL rewritten to its mirror
    (git's url.<base>.insteadOf, given as GIT_CONFIG_* variables), no user or system config that could reach out."""
    env = {k: v for k, v in environ.items() if not k.startswith("GIT_")}
    pairs = sorted({(f"url.{mirror.as_uri()}.insteadOf", pack.url) for pack, mirror in mirrors})
    for number, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{number}"] = key
        env[f"GIT_CONFIG_VALUE_{number}"] = value
    # Submodules are cloned from the mirrors too, over the file transport git refuses them by default.
    env[f"GIT_CONFIG_KEY_{len(pairs)}"], env[f"GIT_CONFIG_VALUE_{len(pairs)}"] = "protocol.file.allow", "always"
    env.update(
        GIT_CONFIG_COUNT=str(len(pairs) + 1),
        GIT_CONFIG_GLOBAL=str(Path("/dev/null")),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        # Only the local mirrors: any other URL (a submodule not bundled) fails at once instead of reaching out.
        GIT_ALLOW_PROTOCOL="file",
    )
    return env
