"""Is a lock as `envgen lock` wrote it: the integrity check of locks/<env>.yml, .sources.toml and
.install.sh.

One check, used by `check` (static step), `install` (before the prefix is touched), `status`
("tampered") and `diff --git`. It finds: a missing file; a content hash (lockio/seal.py) the files
do not hash to; a sources.toml that names packages or indexes the yml does not have; a recipe other
than the one the lock renders; an artifact URL on a host its index or channels do not serve.
`integrity_problems` is pure; reading the files is apart."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from envgen.digests import short_digest
from envgen.errors import VerificationError
from envgen.lockio.seal import host_problems, recorded
from envgen.lockio.sources_toml import SourcesToml
from envgen.lockio.store import LockTexts, no_lock, parse_lock_parts, read_files, repair_hint
from envgen.model import Lock
from envgen.project import Project
from envgen.recipe.render import render_recipe
from envgen.urls import url_host


def missing_files(texts: LockTexts) -> list[str]:
    """The files of a lock that are missing while another of its files exists (one that is there but
    does not read is not missing: its error is the one reported)."""
    if not texts.present or texts.unreadable is not None:
        return []
    found = zip((texts.yml, texts.sources, texts.recipe), texts.names, strict=True)
    return [f"{name} is missing" for text, name in found if text is None]


def _hash_problems(yml: str, sources: str, recipe: str, names: tuple[str, str, str]) -> list[str]:
    found = recorded(yml, sources, recipe)
    if found.recorded is None:
        return [f"{names[1]} records no content hash: it was edited after `envgen lock` wrote it"]
    if found.computed != found.recorded:
        return [
            f"{names[0]}, {names[1]} and {names[2]} do not hash to the content hash "
            f"{names[1]} records "
            f"({short_digest(found.recorded)}, now {short_digest(found.computed)}): "
            "a file was edited after `envgen lock` wrote it"
        ]
    return []


def _consistency_problems(
    lock: Lock, sources: SourcesToml, names: tuple[str, str, str]
) -> list[str]:
    """What the sources.toml says about packages and indexes that the yml contradicts."""
    locked = {(e.platform, e.name) for e in lock.pip}
    indexes = {i.name for i in lock.indexes}
    problems = [
        f"{names[1]}: pip-indexes names index {index} for {package} ({platform}), "
        f"which {names[0]} does not lock"
        for (platform, package), index in sources.pip_indexes
        if (platform, package) not in locked
    ]
    problems += [
        f"{names[1]}: {e.name} ({e.platform}) comes from index {e.index}, which it does not list"
        for e in lock.pip
        if e.index is not None and e.index not in indexes
    ]
    return problems


def _conda_host_problems(lock: Lock) -> list[str]:
    """Conda artifacts on a host none of the lock's channels is on (unknowable when a host is a
    ${VAR}, or when the lock lists no channel: one made by hand, not by `envgen lock`)."""
    hosts = {url_host(c.url) for c in lock.channels}
    if not hosts or any("$" in host for host in hosts):
        return []
    return [
        f"{e.name} {e.version} ({e.platform}): its URL is on "
        f"{url_host(e.url) or 'no host'}, which no channel of "
        f"the lock serves ({', '.join(sorted(hosts))})"
        for e in lock.conda
        if url_host(e.url) not in hosts
    ]


def recipe_problem(lock: Lock, recipe: str, name: str) -> str | None:
    """Why `recipe` (the text of the file `name`) is not the recipe `lock` renders; None when it
    is."""
    if recipe == render_recipe(lock):
        return None
    return (
        f"{name} differs from the recipe its lock renders: it was edited by hand or "
        "belongs to another lock"
    )


def integrity_problems(texts: LockTexts, lock: Lock, sources: SourcesToml) -> list[str]:
    """Every way the three files of `lock` differ from what `envgen lock` wrote (pure; `lock` and
    `sources` are what `texts` parse to). Empty when intact."""
    problems = missing_files(texts)
    if texts.yml is not None and texts.sources is not None and texts.recipe is not None:
        problems += _hash_problems(texts.yml, texts.sources, texts.recipe, texts.names)
    problems += _consistency_problems(lock, sources, texts.names)
    if texts.recipe is not None and (problem := recipe_problem(lock, texts.recipe, texts.names[2])):
        problems.append(problem)
    problems += [f"{texts.names[0]}: {p}" for p in host_problems(lock, dict(sources.file_hosts))]
    problems += [f"{texts.names[0]}: {p}" for p in _conda_host_problems(lock)]
    return problems


def tampered(problems: Sequence[str], env: str) -> VerificationError:
    """The error (exit 4) of a lock whose files are not as `envgen lock` wrote them."""
    listed = "\n".join(f"  {p}" for p in problems)
    return VerificationError(
        f"the lock of {env} was tampered with:\n{listed}", hint=repair_hint(env)
    )


# --- the files under locks/, read by lockio/store.py ----------------------------------------------


class Checked(msgspec.Struct, frozen=True):
    """The lock of an env (None when its yml or sources.toml is missing) and its integrity
    problems."""

    lock: Lock | None
    problems: tuple[str, ...]


def checked_lock(project: Project, env: str) -> Checked | None:
    """The lock of `env` and its integrity problems; None when it has no files at all. A yml or
    sources.toml that does not read or parse raises InputError, as `read_lock` does."""
    return checked(read_files(project, env))


def checked(texts: LockTexts) -> Checked | None:
    """The lock the files `texts` hold and their integrity problems (`checked_lock` of texts already
    read)."""
    if not texts.present:
        return None
    if texts.unreadable is not None:
        raise texts.unreadable
    if texts.yml is None or texts.sources is None:
        return Checked(None, tuple(missing_files(texts)))
    lock, sources = parse_lock_parts(texts.yml, texts.sources, texts.names[0], texts.names[1])
    problems = integrity_problems(texts, lock, sources)
    if lock.env != texts.env:
        problems.insert(0, f"{texts.names[1]}: it is the lock of {lock.env!r}, not {texts.env!r}")
    return Checked(lock, tuple(problems))


def require_intact(project: Project, env: str) -> Lock:
    """The lock of `env` if its three files are as `envgen lock` wrote them; VerificationError (exit
    4) listing every problem otherwise, InputError (exit 2) when there is no lock."""
    found = checked_lock(project, env)
    if found is None:
        raise no_lock(project, env)
    if found.problems or found.lock is None:
        raise tampered(found.problems, env)
    return found.lock
