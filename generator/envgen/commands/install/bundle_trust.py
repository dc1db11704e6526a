"""What a bundle is trusted through: the project's own lock (reviewed in pull requests), or, with no
checkout, the lock's content hash given on the command line (`--lock-sha256`); never the bundle's
own word."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from envgen.bundle.manifest import lock_paths
from envgen.digests import is_sha256
from envgen.errors import InputError
from envgen.inputs.untrusted import one_line
from envgen.lockio.integrity import checked_lock, integrity_problems, require_intact, tampered
from envgen.lockio.seal import recorded
from envgen.lockio.store import LockTexts, parse_lock_parts, read_files
from envgen.model import Lock
from envgen.project import Project

_SHA256_HINT = "give the 64 hex digits `envgen bundle` printed for the lock"


@dataclass(frozen=True)
class TrustRoot:
    """The project's lock of an env (its three texts and the Lock they hold), or none; and the
    content hash the command line gave, if any."""

    project: LockTexts | None
    lock: Lock | None
    sha256: str | None


def lock_sha256(texts: LockTexts) -> str:
    """The content hash of a lock's three files (lockio/seal.py), which its sources.toml records;
    a lock missing one is tampered (exit 4)."""
    if texts.yml is None or texts.sources is None or texts.recipe is None:
        found = zip((texts.yml, texts.sources, texts.recipe), texts.names, strict=True)
        raise tampered([f"{name} is missing" for text, name in found if text is None], texts.env)
    return recorded(texts.yml, texts.sources, texts.recipe).computed


def trust_root(project: Project, env: str, sha256: str | None) -> TrustRoot:
    """The project's lock of `env` when it has one (refused, exit 4, when tampered); without one,
    the `--lock-sha256` that must then be given (exit 2 when it is not)."""
    if sha256 is not None and not is_sha256(sha256):
        reason = f"{sha256!r} is not a sha256"
        raise InputError(
            f"--lock-sha256 {reason}", hint=_SHA256_HINT, key="--lock-sha256", reason=reason
        )
    if checked_lock(project, env) is not None:
        return TrustRoot(read_files(project, env), require_intact(project, env), sha256)
    if sha256 is None:
        raise InputError(
            f"there is no lock of {env} under {project.root} to check the bundle against",
            hint="run it in the checkout the bundle was made from (--root), or give "
            f"--lock-sha256: the content hash of its locks/{env}.* (`envgen bundle` prints it)",
        )
    return TrustRoot(None, None, sha256)


def _first_difference(ours: str, theirs: str) -> tuple[int, str, str]:
    end = "(the end of the file)"
    lines = itertools.zip_longest(ours.splitlines(), theirs.splitlines(), fillvalue=end)
    for number, (mine, other) in enumerate(lines, 1):
        if mine != other:
            return number, mine, other
    return 1, "(its line breaks)", "(other line breaks)"  # the same lines: only the breaks differ


def _shown(line: str) -> str:
    line = one_line(line)
    return repr(line if len(line) <= 100 else f"{line[:100]}...")


def _same_as_project(root: LockTexts, bundled: LockTexts) -> None:
    """Refuse (exit 2) a bundle whose lock files are not byte for byte the project's, naming the
    first line that differs."""
    ours = (root.yml, root.sources, root.recipe)
    theirs = (bundled.yml, bundled.sources, bundled.recipe)
    for mine, other, our_name, name in zip(ours, theirs, root.names, bundled.names, strict=True):
        if mine is None or other is None or mine == other:
            continue
        line, have, got = _first_difference(mine, other)
        raise InputError(
            f"the bundle carries another lock than the project's: {name} differs from {our_name} "
            f"at line {line} (the project's: {_shown(have)}; the bundle's: {_shown(got)})",
            hint="make the bundle again from this lock, or use the checkout it was made from",
            file=name,
            line=line,
        )


def trusted_lock(root: TrustRoot, bundled: LockTexts) -> Lock:
    """The lock a bundle is checked against: the project's, when the bundle carries exactly it;
    else the bundle's own, when of the content hash the command line gave (exit 2 when not) and
    intact (exit 4 when not)."""
    found = lock_sha256(bundled)
    if root.sha256 is not None and found != root.sha256:
        given = f"{root.sha256} (--lock-sha256)"
        raise InputError(
            f"the bundle carries the lock with content hash {found}, not {given}",
            hint="check the hash, or make the bundle again from the lock you meant",
        )
    if root.project is not None and root.lock is not None:
        _same_as_project(root.project, bundled)
        return root.lock
    return _intact(bundled)


def _intact(bundled: LockTexts) -> Lock:
    """The bundle's own lock, refused (exit 4) unless its files are as `envgen lock` wrote them for
    the env asked for (`lock_sha256` found all three)."""
    yml, sources, names = bundled.yml or "", bundled.sources or "", bundled.names
    lock, parts = parse_lock_parts(yml, sources, names[0], names[1])
    problems = integrity_problems(bundled, lock, parts)
    if lock.env != bundled.env:
        problems.insert(0, f"{names[1]}: it is the lock of another env, not {bundled.env}")
    if problems:
        raise tampered(problems, bundled.env)
    return lock


def bundle_lock_texts(env: str, bundle: Path, found: dict[str, str]) -> LockTexts:
    """The lock files a bundle carries (as `read_head` read them), named inside the bundle."""
    paths = lock_paths(env)
    yml, sources, recipe = (found.get(path) for path in paths)
    names = tuple(f"{bundle}:{path}" for path in paths)
    return LockTexts(env, yml, sources, recipe, (names[0], names[1], names[2]))
