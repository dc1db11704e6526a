"""What a bundle holds (`bundle.json`): its lock, platforms and members with their sha256 and size
(pure)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from envgen.commits import is_full_commit
from envgen.digests import is_sha256
from envgen.errors import InputError, VerificationError
from envgen.lockio.exports.requirements_txt import render_find_links
from envgen.model import Lock, LockedSource, Submodule

MANIFEST = "bundle.json"
FORMAT = 1

# A file name taken from a lock's URL may become a path inside the archive: nothing that could climb
# out.
_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+!-]*$")
# A member's path: such names joined by '/', so none is absolute, empty, hidden, '.' or '..'.
_MEMBER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!-]*(?:/[A-Za-z0-9][A-Za-z0-9._+!-]*)*")


@dataclass(frozen=True)
class Member:
    """One file of the bundle: its path in the archive, sha256 and size; `url` is where it was
    downloaded."""

    path: str
    sha256: str
    size: int
    url: str = ""


@dataclass(frozen=True)
class GitPack:
    """A source's `git bundle`: the commits it holds (as refs/heads/envgen/<sha>) and its shallow
    boundary."""

    source: str
    url: str
    path: str
    commits: tuple[str, ...]
    shallow: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    env: str
    input_hash: str
    platforms: tuple[str, ...]
    envgen_version: str
    members: tuple[Member, ...]
    git: tuple[GitPack, ...]


@dataclass(frozen=True)
class Wanted:
    """An artifact a lock names for the chosen platforms: where to get it and where it goes in the
    bundle."""

    path: str
    url: str
    sha256: str


def _filename(url: str) -> str:
    name = unquote(PurePosixPath(urlsplit(url).path).name)
    if not _FILENAME.match(name):
        raise InputError(
            f"the locked URL {url} does not end in a plain file name",
            hint="re-lock from a sane index",
        )
    return name


def wanted_artifacts(lock: Lock, platforms: Iterable[str]) -> tuple[Wanted, ...]:
    """Every conda package and pip artifact of `platforms`, once each (one wheel may serve several
    platforms)."""
    found: dict[str, Wanted] = {}
    for platform in platforms:
        items = [
            (f"conda/{platform}/{_filename(e.url)}", e.url, e.sha256)
            for e in lock.conda_for(platform)
        ]
        items += [(f"pip/{_filename(e.url)}", e.url, e.sha256) for e in lock.pip_for(platform)]
        for path, url, sha in items:
            seen = found.setdefault(path, Wanted(path, url, sha))
            if seen.sha256 != sha:
                raise InputError(
                    f"the lock of {lock.env} names {path.rsplit('/', 1)[1]} with two "
                    f"sha256 ({seen.sha256}, {sha})",
                    hint="re-lock: one file name must have one content",
                )
    return tuple(sorted(found.values(), key=lambda w: w.path))


def archived_wheels(lock: Lock, platforms: Iterable[str]) -> tuple[Wanted, ...]:
    """The wheels the lock takes out of release archives for `platforms`, as the bundle carries them
    (`archives/<wheel>`, the recipe's --archives directory), each with its own sha256 from the lock;
    `url` is the archive's."""
    found: dict[str, Wanted] = {}
    for archive in (a for p in platforms for a in lock.archives_for(p)):
        for member in archive.members:
            path = f"archives/{_filename('/' + member.filename)}"
            seen = found.setdefault(path, Wanted(path, archive.url, member.sha256))
            if seen.sha256 != member.sha256:
                both = f"{seen.sha256}, {member.sha256}"
                raise InputError(
                    f"the lock of {lock.env} names {member.filename} with two sha256 ({both})",
                    hint="re-lock: one file name must have one content",
                )
    return tuple(sorted(found.values(), key=lambda w: w.path))


def requirements_path(platform: str) -> str:
    return f"requirements/{platform}.txt"


def git_path(locked: LockedSource) -> str:
    return f"git/{locked.source.name}.bundle"


def submodule_path(sub: Submodule) -> str:
    """A submodule's pack, named by its URL and commit (two sources may share one)."""
    digest = hashlib.sha256(f"{sub.url} {sub.commit}".encode()).hexdigest()
    return f"git/submodules/{digest[:16]}.bundle"


def git_commits(locked: LockedSource) -> tuple[str, ...]:
    """The commits a source's recipe step fetches: the locked one and every cherry-pick."""
    return tuple(dict.fromkeys((locked.commit, *locked.source.cherry_picks)))


def lock_paths(env: str) -> tuple[str, str, str]:
    """The bundle's copy of the lock's three files: yml, sources.toml, recipe."""
    return (f"locks/{env}.yml", f"locks/{env}.sources.toml", f"locks/{env}.install.sh")


def render_manifest(manifest: Manifest) -> str:
    data = {
        "format": FORMAT,
        "env": manifest.env,
        "input_hash": manifest.input_hash,
        "platforms": list(manifest.platforms),
        "envgen_version": manifest.envgen_version,
        "members": [
            {"path": m.path, "sha256": m.sha256, "size": m.size, "url": m.url}
            for m in manifest.members
        ],
        "git": [
            {
                "source": g.source,
                "url": g.url,
                "path": g.path,
                "commits": list(g.commits),
                "shallow": list(g.shallow),
            }
            for g in manifest.git
        ],
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _member(item: Any) -> Member:
    size = item["size"]
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"member {item['path']!r}: size {size!r} is not a number of bytes")
    return Member(str(item["path"]), str(item["sha256"]), size, str(item.get("url", "")))


def _pack(item: Any) -> GitPack:
    commits, shallow = tuple(map(str, item["commits"])), tuple(map(str, item["shallow"]))
    if not all(map(is_full_commit, commits + shallow)):
        raise ValueError(f"git pack {item['path']!r}: a commit is not 40 hex digits")
    return GitPack(str(item["source"]), str(item["url"]), str(item["path"]), commits, shallow)


def parse_manifest(text: str, where: str) -> Manifest:
    """bundle.json read back; anything malformed is a bundle that cannot be trusted (exit 4). A
    document nested too deeply raises RecursionError (inputs/files.py's `bounded_nesting` reports
    it)."""
    try:
        data = json.loads(text)
        if data["format"] != FORMAT:
            raise ValueError(f"format {data['format']!r}, this envgen reads {FORMAT}")
        members = tuple(_member(m) for m in data["members"])
        manifest = Manifest(
            str(data["env"]),
            str(data["input_hash"]),
            tuple(map(str, data["platforms"])),
            str(data["envgen_version"]),
            members,
            tuple(_pack(g) for g in data["git"]),
        )
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        raise VerificationError(
            file=where,
            reason=f"not a valid bundle manifest ({exc})",
            hint="make the bundle again",
        ) from exc
    for member in members:
        plain = _MEMBER.fullmatch(member.path) and member.path != MANIFEST
        if not plain or not is_sha256(member.sha256):
            raise VerificationError(
                file=where,
                reason=f"member {member.path!r} is not a plain path with a sha256",
            )
    if len({m.path for m in members}) != len(members):
        raise VerificationError(
            file=where, reason="a member is listed twice", hint="make the bundle again"
        )
    return manifest


def check_fits(manifest: Manifest, env: str, platform: str) -> None:
    """A bundle is used only for its env and a platform it carries."""
    if manifest.env != env:
        raise InputError(
            f"the bundle is for env {manifest.env!r}, not {env}",
            hint=f"run `envgen bundle {env}`",
        )
    if platform not in manifest.platforms:
        raise InputError(
            f"the bundle carries {', '.join(manifest.platforms)}, this host is {platform}",
            hint=f"run `envgen bundle {env} --platform {platform}`",
            platform=platform,
        )


@dataclass(frozen=True)
class Expected:
    """What a trusted lock says a bundle holds: each member (its sha256 from the lock wherever the
    lock names it, else the manifest's), the git packs as the lock's sources name them, and every
    way the manifest differs."""

    members: dict[str, Member]
    git: tuple[GitPack, ...]
    problems: tuple[str, ...]


def _lock_packs(lock: Lock) -> dict[str, GitPack]:
    """The packs the lock's sources need (path -> pack; the shallow boundary is the bundle's)."""
    packs = {}
    for locked in lock.sources:
        source, path = locked.source, git_path(locked)
        packs[path] = GitPack(source.name, source.url, path, git_commits(locked), ())
        for sub in locked.submodules:
            name = f"{locked.source.name}/{sub.path}"
            path = submodule_path(sub)
            packs[path] = GitPack(name, sub.url, path, (sub.commit,), ())
    return packs


def expected_members(lock: Lock, manifest: Manifest, lock_files: Mapping[str, Member]) -> Expected:
    """The members a bundle of `lock` (trusted) for the manifest's platforms holds (pure);
    `lock_files` are the lock's three files as trusted. The manifest only adds what the lock cannot
    know: artifact sizes, and the git packs' hashes and shallow boundaries."""
    listed = {m.path: m for m in manifest.members}
    platforms = [p for p in manifest.platforms if p in lock.platforms]
    others = [p for p in manifest.platforms if p not in lock.platforms]
    problems = [f"bundle.json: platform {p} is not the lock's" for p in others]
    trusted = dict(lock_files)
    for want in (*wanted_artifacts(lock, platforms), *archived_wheels(lock, platforms)):
        size = listed[want.path].size if want.path in listed else 0
        trusted[want.path] = Member(want.path, want.sha256, size, want.url)
    for platform in platforms:
        data = render_find_links(lock, platform).encode()
        path = requirements_path(platform)
        trusted[path] = Member(path, hashlib.sha256(data).hexdigest(), len(data))
    packs = _lock_packs(lock)
    git = []
    for pack in manifest.git:
        wanted = packs.get(pack.path)
        named = (pack.source, pack.url, pack.commits)
        if wanted is None or named != (wanted.source, wanted.url, wanted.commits):
            problems.append(f"bundle.json: git pack {pack.path} is not one the lock's sources need")
            continue
        git.append(pack)
        trusted[pack.path] = listed.get(pack.path) or Member(pack.path, "", 0)
    unpacked = sorted(set(packs) - {g.path for g in git})
    problems += [f"{path}: no git pack in bundle.json" for path in unpacked]
    problems += [_differs(path, trusted[path], listed.get(path)) for path in sorted(trusted)]
    extra = sorted(set(listed) - set(trusted))
    problems += [f"{path}: not a file the lock names" for path in extra]
    return Expected(trusted, tuple(git), tuple(p for p in dict.fromkeys(problems) if p))


def _differs(path: str, member: Member, found: Member | None) -> str:
    """How bundle.json's entry `found` differs from the trusted `member` ('' when it does not)."""
    if found is None:
        return f"{path}: missing from bundle.json"
    if found.sha256 != member.sha256:
        return f"{path}: bundle.json says sha256 {found.sha256}, the lock {member.sha256}"
    if found.size != member.size:
        return f"{path}: bundle.json says {found.size} bytes, the lock's file has {member.size}"
    return ""
