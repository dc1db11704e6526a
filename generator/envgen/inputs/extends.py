"""`extends = "base"`: a matrix written as the keys that differ from another env's matrix, merged
before validation.

Merge rule (one home, documented in docs/matrix.md): tables merge key by key, recursively; any other
value (a string, a number, an array, an array of tables) written in the extending file replaces the
base's value whole. Every merged key remembers the file and line it was written on, so a problem
names the file that wrote it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envgen.inputs.toml_reader import KeyPath, Problems, read_toml, type_name
from envgen.names import is_plain_name

EXTENDS = "extends"


class Layered:
    """A matrix file merged with the chain of files it extends."""

    def __init__(self, data: dict[str, Any], problems: Problems, bases: tuple[Path, ...]) -> None:
        self.data = data
        self.problems = problems
        # The files extended, nearest first (a2.toml extends a3.toml: (a3.toml,)).
        self.bases = bases


def read_layered(path: Path) -> Layered:
    """Read `path` and every file it extends, merged; `extends` itself is removed from the data.

    A syntax error, a wrong `extends`, a missing base or a cycle is one problem (with its file and
    line) and empty data: nothing further is validated until the chain reads.
    """
    layers: list[tuple[Path, dict[str, Any], Problems]] = []
    current = path
    while True:
        data, problems = read_toml(current)
        if problems.items:
            return Layered({}, problems, ())
        layers.append((current, data, problems))
        if EXTENDS not in data:
            break
        base = _base_path(current, data[EXTENDS], problems, [p for p, _, _ in layers])
        if base is None:
            return Layered({}, problems, ())
        current = base
    merged: dict[str, Any] = {}
    lines: dict[KeyPath, int] = {}
    files: dict[KeyPath, str] = {}
    for file, data, problems in reversed(layers):
        data = {k: v for k, v in data.items() if k != EXTENDS}
        written = {k: v for k, v in problems.lines.items() if k[0] != EXTENDS}
        for replaced in _merge(merged, data, ()):
            for key in [k for k in lines if k[: len(replaced)] == replaced]:
                del lines[key], files[key]
        lines.update(written)
        files.update(dict.fromkeys(written, str(file)))
    return Layered(merged, Problems(str(path), lines, files), tuple(p for p, _, _ in layers[1:]))


def _base_path(file: Path, value: object, problems: Problems, chain: list[Path]) -> Path | None:
    """The file `extends` names, or None with the problem recorded (not a name, missing, or a
    cycle)."""
    key: KeyPath = (EXTENDS,)
    if not isinstance(value, str) or not is_plain_name(value):
        shown = repr(value) if isinstance(value, str) else type_name(value)
        problems.add(
            key, f"expected the name of another env (its env-templates/<name>.toml), got {shown}"
        )
        return None
    base = file.parent / f"{value}.toml"
    # Matrices arrive in pull requests, which can add a symlink: a base is read only as a file of
    # its own.
    if base.is_symlink():
        problems.add(
            key,
            f"{base} is a symbolic link; the env to extend must be a regular file in {file.parent}",
        )
        return None
    if base.resolve() in [p.resolve() for p in chain]:
        cycle = " -> ".join([*(p.stem for p in chain), value])
        problems.add(
            key, f"extends itself through {cycle}; remove `extends` from one of these files"
        )
        return None
    if not base.is_file():
        envs = sorted(p.stem for p in file.parent.glob("*.toml") if p != file)
        problems.add(
            key, f"no matrix {base} to extend; available envs: {', '.join(envs) or 'none'}"
        )
        return None
    return base


def _merge(into: dict[str, Any], over: dict[str, Any], prefix: KeyPath) -> list[KeyPath]:
    """Merge `over` into `into` in place; the key paths whose base values were replaced whole."""
    replaced: list[KeyPath] = []
    for key, value in over.items():
        path = (*prefix, key)
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            replaced += _merge(into[key], value, path)
            continue
        if key in into:
            replaced.append(path)
        into[key] = _copy(value)
    return replaced


def _copy(value: Any) -> Any:
    """A deep copy of parsed TOML, so merging never changes a base's own data."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
