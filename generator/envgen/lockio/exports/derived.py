"""The files `envgen lock` derives from a Lock next to its yml, and whether those on disk still
match it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import msgspec

from envgen.digests import short_digest
from envgen.errors import InputError, VerificationError
from envgen.lockio.exports.names import nix_name, pylock_name, recorded_hash, requirements_name
from envgen.lockio.exports.nix import expected_nix, parse_nix, render_nix
from envgen.lockio.exports.pylock import expected_pylock, parse_pylock, render_pylock, uv_reads
from envgen.lockio.exports.requirements_txt import (
    expected_requirements,
    parse_requirements,
    pip_reads,
    render_requirements,
)
from envgen.lockio.store import read_derived
from envgen.model import Lock, Matrix


class Artifact(Protocol):
    """An artifact a derived file names: its package (or URL) and the rest in words."""

    @property
    def name(self) -> str: ...

    @property
    def detail(self) -> str: ...


class Derived(msgspec.Struct, frozen=True):
    """One derived file: its name in locks/, its text, how to list the artifacts a file of its kind
    names, the artifacts the lock says it names (listed only when a file on disk differs from
    `text`), and what the tool installing from it reads of a text (comments aside)."""

    name: str
    text: str
    artifacts: Callable[[str, str], Sequence[Artifact]]
    expected: Callable[[], Sequence[Artifact]]
    reads: Callable[[str], object]


def derived_files(lock: Lock, matrix: Matrix | None) -> list[Derived]:
    """Every file derived from `lock`, in a fixed order: per platform its requirements.txt and
    pylock, then the Nix expression of every platform."""
    pylocks, nix = _matrix_free(lock)
    files: list[Derived] = []
    for platform, pylock in zip(lock.platforms, pylocks, strict=True):
        files.append(
            Derived(
                requirements_name(lock.env, platform),
                render_requirements(lock, platform, matrix),
                parse_requirements,
                functools.partial(expected_requirements, lock, platform),
                pip_reads,
            )
        )
        files.append(pylock)
    files.append(nix)
    return files


# Pure, and most of rendering the derived files: `lock --check` renders them for the hand-edit
# check (no matrix) and again for the freshness verdict (with it), and only the requirements
# files' comments depend on the matrix.
@functools.lru_cache(maxsize=2)
def _matrix_free(lock: Lock) -> tuple[tuple[Derived, ...], Derived]:
    """The pylock of each platform of `lock` and its Nix expression."""
    pylocks = tuple(
        Derived(
            pylock_name(lock.env, platform),
            render_pylock(lock, platform),
            parse_pylock,
            functools.partial(expected_pylock, lock, platform),
            uv_reads,
        )
        for platform in lock.platforms
    )
    return pylocks, Derived(
        nix_name(lock.env),
        render_nix(lock),
        parse_nix,
        functools.partial(expected_nix, lock),
        str,
    )


def _by_name(artifacts: Sequence[Artifact]) -> dict[str, list[str]]:
    named: dict[str, list[str]] = {}
    for artifact in artifacts:
        named.setdefault(artifact.name, []).append(artifact.detail)
    return {name: sorted(details) for name, details in named.items()}


def _differences(found: Sequence[Artifact], wanted: Sequence[Artifact]) -> list[str]:
    """What a file names that the lock does not, and the other way round, in words, by package."""
    have, want = _by_name(found), _by_name(wanted)
    differences = []
    for name in sorted(set(have) | set(want)):
        ours, theirs = " and ".join(have.get(name, ())), " and ".join(want.get(name, ()))
        if ours == theirs:
            continue
        if not theirs:
            differences.append(f"{name} {ours} is not in the lock")
        elif not ours:
            differences.append(f"{name} {theirs} is missing")
        else:
            differences.append(f"{name}: {ours} here, {theirs} in the lock")
    return differences


def _read_alike(file: Derived, text: str) -> bool:
    """Whether the tool installing from `file` reads `text` as the lock's rendering."""
    try:
        return file.reads(text) == file.reads(file.text)
    except InputError:
        return False


def derived_problem(
    locks_dir: Path,
    file: Derived,
    lock: Lock,
    *,
    as_read: bool = False,
) -> str | None:
    """Why locks/<file> does not match `lock` (missing, from another lock, other artifacts or
    hashes, edited), or None when it is byte-identical to what the lock renders (with `as_read`:
    when its tool reads it as that, its comments aside)."""
    try:
        text = read_derived(locks_dir, file.name)
    except InputError as exc:
        return exc.message
    if text is None:
        return f"locks/{file.name} is missing"
    return _text_problem(file, text, lock, as_read=as_read)


def _text_problem(file: Derived, text: str, lock: Lock, *, as_read: bool) -> str | None:
    """Why `text`, the text of locks/<file>, does not match `lock` (`derived_problem` once read)."""
    if text == file.text or (as_read and _read_alike(file, text)):
        return None
    recorded = recorded_hash(text)
    if recorded != lock.input_hash:
        return (
            f"locks/{file.name} belongs to another lock (input hash "
            f"{short_digest(recorded or 'none')})"
        )
    try:
        found = file.artifacts(text, f"locks/{file.name}")
    except InputError as exc:
        return exc.message
    differences = _differences(found, file.expected())
    if differences:
        listed = "; ".join(differences[:5])
        return f"locks/{file.name} does not carry the yml's artifacts and hashes: {listed}"
    return (
        f"locks/{file.name} was edited by hand (its artifacts match, its text differs from "
        "the lock's rendering)"
    )


def derived_problems(
    locks_dir: Path,
    lock: Lock,
    matrix: Matrix | None,
    *,
    as_read: bool = False,
) -> list[str]:
    """Every derived file of `lock` that is missing or does not match it (`as_read`: comments
    aside, as `derived_problem`)."""
    files = derived_files(lock, matrix)
    found = (derived_problem(locks_dir, f, lock, as_read=as_read) for f in files)
    return [p for p in found if p is not None]


def hand_edits(locks_dir: Path, lock: Lock) -> list[str]:
    """The derived files of `lock` that name its input hash but are not what their tool (pip, uv)
    reads of its rendering, comments aside: edited after `envgen lock` wrote them, each named as
    `installable` names it. A file that is missing or names another lock's input hash is stale,
    not edited (a re-lock writes it again); one that cannot be read is edited (a FIFO, a
    symlink)."""
    edits = []
    for file in derived_files(lock, None):
        try:
            text = read_derived(locks_dir, file.name)
        except InputError as exc:
            edits.append(exc.message)
            continue
        if text is None or recorded_hash(text) != lock.input_hash:
            continue
        problem = _text_problem(file, text, lock, as_read=True)
        if problem is not None:
            edits.append(problem)
    return edits


def installable(locks_dir: Path, lock: Lock, name: str) -> Path:
    """locks/`name`, the derived file pip or uv installs from, once what the tool reads of it is
    what `lock` renders: the comments aside (they name matrix keys, and a lock may be installed as
    it is while its matrix has moved on), it must name exactly the lock's artifacts, hashes and
    options. VerificationError (exit 4) naming what differs."""
    file = next(f for f in derived_files(lock, None) if f.name == name)
    problem = derived_problem(locks_dir, file, lock, as_read=True)
    if problem is not None:
        raise VerificationError(problem, hint=f"`envgen lock {lock.env} --force` writes it again")
    return locks_dir / name
