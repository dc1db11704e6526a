"""The files `envgen lock` derives from a Lock next to its yml, and whether those on disk still match it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from envgen.errors import InputError
from envgen.lockio.exports.names import nix_name, pylock_name, recorded_hash, requirements_name
from envgen.lockio.exports.nix import expected_nix, parse_nix, render_nix
from envgen.lockio.exports.pylock import expected_pylock, parse_pylock, render_pylock
from envgen.lockio.exports.requirements_txt import expected_requirements, parse_requirements, render_requirements
from envgen.lockio.store import read_derived
from envgen.model import Lock, Matrix


@dataclass(frozen=True)
class Derived:
    """One derived file: its name in locks/, its text, and how to list the artifacts a file of its kind names."""

    name: str
    text: str
    artifacts: Callable[[str, str], tuple[object, ...]]
    expected: tuple[object, ...]


def derived_files(lock: Lock, matrix: Matrix | None) -> list[Derived]:
    """Every file derived from `lock`, in a fixed order: per platform its requirements.txt and pylock, then
    the Nix expression of every platform."""
    files: list[Derived] = []
    for platform in lock.platforms:
        files.append(
            Derived(
                requirements_name(lock.env, platform),
                render_requirements(lock, platform, matrix),
                parse_requirements,
                expected_requirements(lock, platform),
            )
        )
        files.append(
            Derived(
                pylock_name(lock.env, platform),
                render_pylock(lock, platform),
                parse_pylock,
                expected_pylock(lock, platform),
            )
        )
    files.append(Derived(nix_name(lock.env), render_nix(lock), parse_nix, expected_nix(lock)))
    return files


def _differences(found: Sequence[object], wanted: Sequence[object]) -> list[str]:
    extra = [f"not in the lock: {item}" for item in found if item not in wanted]
    missing = [f"missing: {item}" for item in wanted if item not in found]
    return extra + missing


def derived_problem(locks_dir: Path, file: Derived, lock: Lock) -> str | None:
    """Why locks/<file> does not match `lock` (missing, from another lock, other artifacts or hashes, edited),
    or None when it is byte-identical to what the lock renders."""
    try:
        text = read_derived(locks_dir, file.name)
    except InputError as exc:
        return exc.message
    if text is None:
        return f"locks/{file.name} is missing"
    if text == file.text:
        return None
    recorded = recorded_hash(text)
    if recorded != lock.input_hash:
        return f"locks/{file.name} belongs to another lock (input hash {(recorded or 'none')[:12]})"
    try:
        found = file.artifacts(text, f"locks/{file.name}")
    except InputError as exc:
        return exc.message
    differences = _differences(found, file.expected)
    if differences:
        return f"locks/{file.name} does not carry the yml's artifacts and hashes: " + "; ".join(differences[:5])
    return f"locks/{file.name} was edited by hand (its artifacts match, its text differs from the lock's rendering)"


def derived_problems(locks_dir: Path, lock: Lock, matrix: Matrix | None) -> list[str]:
    """Every derived file of `lock` that is missing or does not match it."""
    problems = (derived_problem(locks_dir, file, lock) for file in derived_files(lock, matrix))
    return [p for p in problems if p is not None]
