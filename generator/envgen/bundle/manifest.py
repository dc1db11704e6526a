"""What a bundle holds (`bundle.json`): its lock, platforms and members with their sha256 and size (pure)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from envgen.errors import InputError, VerificationError
from envgen.model import Lock, LockedSource

MANIFEST = "bundle.json"
FORMAT = 1

# A file name taken from a lock's URL may become a path inside the archive: nothing that could climb out.
_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+!-]*$")


@dataclass(frozen=True)
class Member:
    """One file of the bundle: its path in the archive, sha256 and size; `url` is where it was downloaded."""

    path: str
    sha256: str
    size: int
    url: str = ""


@dataclass(frozen=True)
class GitPack:
    """A source's `git bundle`: the commits it holds (as refs/heads/envgen/<sha>) and its shallow boundary."""

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
    """An artifact a lock names for the chosen platforms: where to get it and where it goes in the bundle."""

    path: str
    url: str
    sha256: str


def _filename(url: str) -> str:
    name = unquote(PurePosixPath(urlsplit(url).path).name)
    if not _FILENAME.match(name):
        raise InputError(f"the locked URL {url} does not end in a plain file name", hint="re-lock from a sane index")
    return name


def wanted_artifacts(lock: Lock, platforms: Iterable[str]) -> tuple[Wanted, ...]:
    """Every conda package and pip artifact of `platforms`, once each (one wheel may serve several platforms)."""
    found: dict[str, Wanted] = {}
    for platform in platforms:
        items = [(f"conda/{platform}/{_filename(e.url)}", e.url, e.sha256) for e in lock.conda_for(platform)]
        items += [(f"pip/{_filename(e.url)}", e.url, e.sha256) for e in lock.pip_for(platform)]
        for path, url, sha in items:
            seen = found.setdefault(path, Wanted(path, url, sha))
            if seen.sha256 != sha:
                raise InputError(
                    f"the lock of {lock.env} names {path.rsplit('/', 1)[1]} with two sha256 ({seen.sha256}, {sha})",
                    hint="re-lock: one file name must have one content",
                )
    return tuple(sorted(found.values(), key=lambda w: w.path))


def requirements_path(platform: str) -> str:
    return f"requirements/{platform}.txt"


def find_links_requirements(lock: Lock, platform: str) -> str:
    """The pip part of `platform` as `name==version --hash=sha256:...` lines, sorted: what the recipe's
    `--bundle` installs with `pip --no-index --find-links` from the bundle's pip/ (pip checks every hash)."""
    entries = sorted(lock.pip_for(platform), key=lambda e: e.name)
    return "".join(f"{e.name}=={e.version} --hash=sha256:{e.sha256}\n" for e in entries)


def git_path(locked: LockedSource) -> str:
    return f"git/{locked.source.name}.bundle"


def git_commits(locked: LockedSource) -> tuple[str, ...]:
    """The commits a source's recipe step fetches: the locked one and every cherry-pick."""
    return tuple(dict.fromkeys((locked.commit, *locked.source.cherry_picks)))


def render_manifest(manifest: Manifest) -> str:
    data = {
        "format": FORMAT,
        "env": manifest.env,
        "input_hash": manifest.input_hash,
        "platforms": list(manifest.platforms),
        "envgen_version": manifest.envgen_version,
        "members": [{"path": m.path, "sha256": m.sha256, "size": m.size, "url": m.url} for m in manifest.members],
        "git": [
            {"source": g.source, "url": g.url, "path": g.path, "commits": list(g.commits), "shallow": list(g.shallow)}
            for g in manifest.git
        ],
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def parse_manifest(text: str, where: str) -> Manifest:
    """bundle.json read back; anything malformed is a bundle that cannot be trusted (exit 4)."""
    try:
        data = json.loads(text)
        if data["format"] != FORMAT:
            raise ValueError(f"format {data['format']!r}, this envgen reads {FORMAT}")
        members = tuple(
            Member(str(m["path"]), str(m["sha256"]), int(m["size"]), str(m.get("url", ""))) for m in data["members"]
        )
        git = tuple(
            GitPack(str(g["source"]), str(g["url"]), str(g["path"]), tuple(g["commits"]), tuple(g["shallow"]))
            for g in data["git"]
        )
        manifest = Manifest(
            str(data["env"]),
            str(data["input_hash"]),
            tuple(map(str, data["platforms"])),
            str(data["envgen_version"]),
            members,
            git,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise VerificationError(f"{where}: not a valid bundle manifest ({exc})", hint="make the bundle again") from exc
    for member in members:
        path = PurePosixPath(member.path)
        if path.is_absolute() or ".." in path.parts or not re.fullmatch(r"[0-9a-f]{64}", member.sha256):
            raise VerificationError(f"{where}: member {member.path!r} is not a plain path with a sha256")
    return manifest


def member_problems(manifest: Manifest, found: Mapping[str, tuple[str, int]]) -> list[str]:
    """What differs between the manifest and the files found (path -> (sha256, size)), one line per member."""
    problems = []
    for member in manifest.members:
        got = found.get(member.path)
        if got is None:
            problems.append(f"{member.path}: missing")
        elif got != (member.sha256, member.size):
            problems.append(f"{member.path}: sha256 {got[0]} ({got[1]} bytes), the manifest says {member.sha256}")
    listed = {m.path for m in manifest.members} | {MANIFEST}
    problems += [f"{path}: not in the manifest" for path in sorted(set(found) - listed)]
    return problems


def check_fits(manifest: Manifest, env: str, platform: str, lock_hash: str | None) -> None:
    """A bundle is used only for its env, a platform it carries, and (when a lock is at hand) that lock."""
    if manifest.env != env:
        raise InputError(f"the bundle is for env {manifest.env}, not {env}", hint=f"run `envgen bundle {env}`")
    if platform not in manifest.platforms:
        raise InputError(
            f"the bundle carries {', '.join(manifest.platforms)}, this host is {platform}",
            hint=f"run `envgen bundle {env} --platform {platform}`",
        )
    if lock_hash is not None and lock_hash != manifest.input_hash:
        raise InputError(
            f"the bundle was made for the lock with input hash {manifest.input_hash}; locks/{env}.yml has {lock_hash}",
            hint="make the bundle again from the current lock, or install the bundle's own lock (another --root)",
        )
