"""A commit's git submodules, recursively: path, canonical URL and gitlink commit, each fetched into
the cache."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urljoin

from envgen.errors import InputError
from envgen.inputs.untrusted import git_url_problem, submodule_path_problem
from envgen.model import Submodule
from envgen.process import run
from envgen.resolve.git.cache import CachedRepo, cached_repo
from envgen.resolve.git.remote import GitEnv

_GITLINK = "160000 commit "


def resolve_url(parent_url: str, url: str) -> str:
    """A `.gitmodules` URL as git clones it: `./x` and `../x` are relative to the URL of the
    repository naming it."""
    if url.startswith(("./", "../")):
        return urljoin(parent_url.rstrip("/") + "/", url)
    return url


def _recorded_urls(repo: CachedRepo, commit: str) -> dict[str, str]:
    """path -> URL of each entry of `.gitmodules` at `commit` (one NUL-separated `key\\nvalue` per
    setting)."""
    proc = run(
        [
            "git",
            "config",
            "-z",
            "--blob",
            f"{commit}:.gitmodules",
            "--get-regexp",
            r"^submodule\..*\.(path|url)$",
        ],
        cwd=repo.path,
        env=repo.git_env.environ(),
        check=False,
    )
    keys: dict[str, dict[str, str]] = {}
    for entry in filter(None, proc.stdout.split("\0")):
        key, _, value = entry.partition("\n")
        name, _, field = key.removeprefix("submodule.").rpartition(".")
        keys.setdefault(name, {})[field] = value
    return {k["path"]: k["url"] for k in keys.values() if "path" in k and "url" in k}


def gitlinks(repo: CachedRepo, commit: str) -> list[Submodule]:
    """The submodules `commit`'s tree records, one level deep, sorted by path; none without
    `.gitmodules`.

    A gitlink that `.gitmodules` names no URL for, a path that is not a plain relative path, or a
    URL that could reach git as an option or another transport is refused: the repository is not
    trusted.
    """
    if not repo.has_file(commit, ".gitmodules"):
        return []
    links: dict[str, str] = {}
    for entry in repo.git("ls-tree", "-r", "-z", "--end-of-options", commit).split("\0"):
        meta, _, path = entry.partition("\t")
        if meta.startswith(_GITLINK):
            links[path] = meta.removeprefix(_GITLINK)
    where = f"source {repo.source}: .gitmodules at {commit}"
    urls = _recorded_urls(repo, commit)
    missing = sorted(set(links) - set(urls))
    if missing:
        raise InputError(
            f"{where} names no URL for the submodule(s) {', '.join(missing)}",
            hint="pin a commit whose .gitmodules is complete, or set submodules = false "
            "(with submodules-reason)",
            file=".gitmodules",
        )
    found = []
    for path, sha in sorted(links.items()):
        url = resolve_url(repo.url, urls[path])
        problem = submodule_path_problem(path) or git_url_problem(url)
        if problem:
            raise InputError(
                f"{where}: submodule {path!r} ({url}): {problem}",
                hint="pin another commit, or set submodules = false (with submodules-reason)",
                file=".gitmodules",
                key=path,
                reason=problem,
            )
        found.append(Submodule(path, url, sha))
    return found


def lock_submodules(
    cache: Path, source: str, links: list[Submodule], git: GitEnv
) -> tuple[Submodule, ...]:
    """Each of `links` (the gitlinks of a commit of `source`, `gitlinks`) and their submodules,
    recursively: each gitlink commit fetched from its URL (mirrors apply) and read in turn; nested
    paths are given from the outermost repository's root. One cache repository is held at a time (a
    submodule may name its parent's URL)."""
    found: list[Submodule] = []
    for link in links:
        owner = f"{source} submodule {link.path}"
        with cached_repo(cache, link.url, owner, git) as sub:
            sub.fetch(link.commit, depth=1, what="submodule commit")
            nested_links = gitlinks(sub, link.commit)
        found.append(link)
        nested = lock_submodules(cache, owner, nested_links, git)
        found += [Submodule(f"{link.path}/{n.path}", n.url, n.commit) for n in nested]
    return tuple(found)
