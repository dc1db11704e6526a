"""Lock → locks/<env>.nix: the lock as a Nix expression that evaluates without nixpkgs (pure).

Every artifact is a `fetchurl` attribute set (`builtins.fetchurl pkg.fetchurl` realises it, checked
against its sha256) and every git source a `fetchGit` one (`builtins.fetchGit src.fetchGit`); the
rest is the recipe's data. The expression is plain data: evaluating it fetches nothing, so
`nix-instantiate --eval --strict --json` works offline and shows exactly the lock's URLs and hashes.
flake.nix at the repository root builds dev shells from it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from posixpath import basename
from typing import TypeAlias
from urllib.parse import unquote, urlsplit

import msgspec

from envgen.digests import SHA256_HEX, short_digest
from envgen.lockio.exports.common import bare_url, header
from envgen.model import (
    ArchiveMember,
    CondaEntry,
    Lock,
    LockedArchive,
    LockedSource,
    PipEntry,
    Source,
)
from envgen.names import package_key
from envgen.platforms import machine

Value: TypeAlias = str | bool | None | Sequence["Value"] | Mapping[str, "Value"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_'-]*")
_KEYWORDS = {"if", "then", "else", "assert", "with", "let", "in", "rec", "inherit", "or"}
# Characters a Nix store path name may hold; anything else in a file name becomes "-".
_STORE_NAME = re.compile(r"[^A-Za-z0-9+._?=-]")


def nix_system(platform: str) -> str:
    """The Nix system of a conda platform (linux-64 -> x86_64-linux)."""
    return f"{machine(platform)}-linux"


def _string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("${", "\\${")
    escaped = escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{escaped}"'


@functools.lru_cache(maxsize=256)  # the same few keys in every package
def _key(name: str) -> str:
    return name if _IDENTIFIER.fullmatch(name) and name not in _KEYWORDS else _string(name)


def _render(value: Value, indent: str) -> str:
    inner = indent + "  "
    # The types lock_value builds tested first: an ABC's isinstance is slow.
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict) or (not isinstance(value, list) and isinstance(value, Mapping)):
        if not value:
            return "{ }"
        items = [f"{inner}{_key(k)} = {_render(v, inner)};\n" for k, v in value.items()]
        return "{\n" + "".join(items) + indent + "}"
    if not value:
        return "[ ]"
    return "[\n" + "".join([f"{inner}{_render(v, inner)}\n" for v in value]) + indent + "]"


def store_name(url: str) -> str:
    """The file name of `url` as a valid store path name (percent-escapes decoded, other characters
    replaced)."""
    name = _STORE_NAME.sub("-", unquote(basename(urlsplit(url).path)))
    return name.lstrip(".") or "artifact"


def _fetchurl(url: str, sha256: str) -> dict[str, Value]:
    return {"url": bare_url(url), "sha256": sha256, "name": store_name(url)}


def _conda(entry: CondaEntry) -> dict[str, Value]:
    return {
        "name": entry.name,
        "version": entry.version,
        "build": entry.build,
        "md5": entry.md5,
        "fetchurl": _fetchurl(entry.url, entry.sha256),
    }


def _pip(entry: PipEntry) -> dict[str, Value]:
    return {
        "name": package_key(entry.name),
        "version": entry.version,
        "index": entry.index,
        "fetchurl": _fetchurl(entry.url, entry.sha256),
    }


def _platform(lock: Lock, platform: str) -> dict[str, Value]:
    return {
        "system": nix_system(platform),
        "python": lock.python_for(platform),
        "conda": [_conda(e) for e in lock.conda_for(platform)],
        "pip": [_pip(e) for e in sorted(lock.pip_for(platform), key=lambda e: package_key(e.name))],
        **_steps(lock, platform),
    }


def _steps(lock: Lock, platform: str) -> dict[str, Value]:
    """Only where there are any (a lock without them renders as it did): the wheels the recipe takes
    out of release archives (each checked against its sha256), and what the lock leaves out."""
    steps: dict[str, Value] = {}
    if lock.archives_for(platform):
        steps["archives"] = [_archive(a) for a in lock.archives_for(platform)]
    left = [{"name": e.name, "reason": e.reason} for e in lock.exclusions if e.applies(platform)]
    if left:
        steps["excluded"] = left
    return steps


def _wheel(member: ArchiveMember) -> dict[str, Value]:
    fields = {"name": member.name, "version": member.version, "path": member.path}
    return {**fields, "sha256": member.sha256}


def _archive(archive: LockedArchive) -> dict[str, Value]:
    return {
        "name": archive.name,
        "fetchurl": _fetchurl(archive.url, archive.sha256),
        "wheels": [_wheel(m) for m in archive.members],
    }


def _fetchgit(url: str, rev: str) -> dict[str, Value]:
    # allRefs: a locked commit (or a cherry-pick) need not be on the default branch.
    return {"url": url, "rev": rev, "allRefs": True}


def _source(locked: LockedSource, cann: bool) -> dict[str, Value]:
    source = locked.source
    url = bare_url(source.url)
    return {
        "name": source.name,
        "distribution": source.distribution,
        "url": url,
        "ref": source.ref,
        "rev": locked.commit,
        "fetchGit": _fetchgit(url, locked.commit),
        "cherryPicks": [
            {"rev": pick, "fetchGit": _fetchgit(url, pick)} for pick in source.cherry_picks
        ],
        # Each at its gitlink commit, nested ones by their path from the source's root (the recipe
        # checks them out).
        "submodules": [
            {
                "path": sub.path,
                "url": bare_url(sub.url),
                "rev": sub.commit,
                "fetchGit": _fetchgit(bare_url(sub.url), sub.commit),
            }
            for sub in locked.submodules
        ],
        "picked": list(locked.picked),
        "tree": locked.tree or None,
        "editable": source.editable,
        "pythonpath": source.pythonpath,
        "buildIsolation": source.build_isolation,
        # an env without CANN names none
        **({"needsCann": source.needs_cann} if cann else {}),
        "env": dict(source.env),
        **_layout(source),
    }


def _layout(source: Source) -> dict[str, Value]:
    """Where the project lies in the tree, its extras and replaced files; only when set."""
    layout: dict[str, Value] = {}
    if source.subdirectory:
        layout["subdirectory"] = source.subdirectory
    if source.extras:
        layout["extras"] = list(source.extras)
    if source.replacements:
        layout["replace"] = [{"from": r.source, "to": r.target} for r in source.replacements]
    return layout


def _links(lock: Lock) -> dict[str, Value]:
    """The links the recipe makes in site-packages; only when there are any."""
    links = [{"target": x.target, "directory": x.directory, "reason": x.reason} for x in lock.links]
    return {"links": links} if links else {}


def lock_value(lock: Lock) -> dict[str, Value]:
    """The data locks/<env>.nix holds (what `nix-instantiate --eval --strict --json` prints of
    it)."""
    cann = lock.cann
    return {
        "env": lock.env,
        "inputHash": lock.input_hash,
        "systems": {nix_system(p): p for p in lock.platforms},
        "platforms": {p: _platform(lock, p) for p in lock.platforms},
        "sources": [_source(s, cann is not None) for s in lock.sources],
        "order": [s.source.name for s in lock.sources],
        "activation": {
            "env": dict(lock.activation_env),
            "profiles": {
                p.name: {"description": p.description, "env": dict(p.env)} for p in lock.profiles
            },
        },
        # no key at all for an env without CANN
        **(
            {}
            if cann is None
            else {"cann": {"version": cann.version, "setEnv": cann.set_env, "note": cann.note}}
        ),
        "overrides": [
            {
                "name": o.override.name,
                "requirement": o.override.requirement,
                "reason": o.override.reason,
            }
            for o in lock.overrides
        ],
        "pending": [{"name": p.name, "note": p.note} for p in lock.pending],
        **_links(lock),
    }


def render_nix(lock: Lock) -> str:
    """locks/<env>.nix: the Lock as Nix data, every artifact and source as fetcher arguments."""
    lines = header(
        lock, f"The lock of env {lock.env} as a Nix expression; it needs no nixpkgs to evaluate."
    )
    lines += [
        "# builtins.fetchurl p.fetchurl realises an artifact (checked against its "
        "sha256), builtins.fetchGit",
        "# s.fetchGit a source at its locked commit. `nix develop .#"
        + lock.env
        + "` (flake.nix) builds a shell",
        "# from it. CANN and the NPU driver are system software, outside this file."
        if lock.cann is not None
        else "# from it.",
    ]
    return "\n".join(lines) + "\n" + _render(lock_value(lock), "") + "\n"


_FETCHURL = re.compile(rf'fetchurl = \{{\s*url = "([^"]*)";\s*sha256 = "({SHA256_HEX})";')


class Fetched(msgspec.Struct, frozen=True, order=True):
    """One artifact a Nix expression fetches: its URL and sha256."""

    url: str
    sha256: str

    @property
    def name(self) -> str:
        return self.url

    @property
    def detail(self) -> str:
        return f"sha256 {short_digest(self.sha256)}"


def parse_nix(text: str, where: str) -> tuple[Fetched, ...]:
    """Every `fetchurl` set in a file render_nix wrote, sorted (`where` is unused: a file of another
    shape simply lists other artifacts)."""
    del where
    return tuple(sorted(Fetched(url, sha256) for url, sha256 in _FETCHURL.findall(text)))


def expected_nix(lock: Lock) -> tuple[Fetched, ...]:
    """What locks/<env>.nix must list: every artifact of the yml and every archive with its sha256,
    per platform."""
    artifacts = [(e.url, e.sha256) for e in lock.conda] + [(e.url, e.sha256) for e in lock.pip]
    artifacts += [(a.url, a.sha256) for a in lock.archives]
    return tuple(sorted(Fetched(bare_url(url), sha256) for url, sha256 in artifacts))
