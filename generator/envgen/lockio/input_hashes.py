"""The input digests of an env's lock and their hash, and whether the digests a lock recorded still
hold.

Kept apart from the yml's module (its schema imports msgspec and PyYAML) so a no-op `envgen lock`
stays fast."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from envgen.errors import InputError
from envgen.inputs.files import read_input_text
from envgen.names import name_problem
from envgen.platforms import glibc_virtual_packages, virtual_packages
from envgen.project import Project

if TYPE_CHECKING:
    from envgen.model import LockedSource, Matrix

# Bumped when the meaning of a lock's files changes; part of every input hash, so old locks read as
# stale.
LOCK_SCHEMA = 1


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def input_digests(
    matrix_path: Path,
    channel_paths: Mapping[str, Path],
    sources: Sequence[LockedSource] | Mapping[str, str],
    virtual_packages: Mapping[str, Sequence[str]],
    base_paths: Mapping[str, Path] | None = None,
) -> tuple[tuple[str, str], ...]:
    """The digest of every input of a lock, by component, sorted.

    Components: "matrix", "base:<env>" (each matrix it extends), "channel:<name>" (the file, so a
    changed URL changes it), "source:<name>", "virtual-packages:<platform>" and "schema". Paths
    themselves never enter: a checkout anywhere hashes the same. `sources` is the locked sources, or
    their digests by name as a lock recorded them.
    """
    files = _read_digests(matrix_path, channel_paths, base_paths or {})
    return combined_digests(files, sources, virtual_packages)


def _read_digests(
    matrix_path: Path, channel_paths: Mapping[str, Path], base_paths: Mapping[str, Path]
) -> dict[str, str]:
    files = {"matrix": _file_digest(matrix_path, "the matrix")}
    for name, path in base_paths.items():
        files[f"base:{name}"] = _file_digest(path, "the matrix it extends")
    for name, path in channel_paths.items():
        files[f"channel:{name}"] = _file_digest(path, f"channel file of {name!r}")
    return files


def combined_digests(
    files: Mapping[str, str],
    sources: Sequence[LockedSource] | Mapping[str, str],
    virtual_packages: Mapping[str, Sequence[str]],
) -> tuple[tuple[str, str], ...]:
    """The input digests of a lock from its files' digests (`file_digests`), its sources and its
    platforms' virtual packages, by component, sorted (pure)."""
    digests = {**files, "schema": str(LOCK_SCHEMA)}
    if isinstance(sources, Mapping):
        source_digests = dict(sources)
    else:
        # A source without a tree digest is identified by its commit alone.
        source_digests = {s.source.name: s.digest or s.commit for s in sources}
    for name, digest in source_digests.items():
        digests[f"source:{name}"] = digest
    for platform, specs in virtual_packages.items():
        digests[f"virtual-packages:{platform}"] = _specs_digest(specs)
    return tuple(sorted(digests.items()))


def _file_digest(path: Path, what: str) -> str:
    # Through the hostile-input reader: a FIFO planted as a channel file must not hang the no-op
    # lock.
    try:
        return _sha256(read_input_text(path, hint="check the file exists").encode())
    except InputError as exc:
        raise exc.reworded(f"{what}: {exc.message}") from exc


def _specs_digest(specs: Sequence[str]) -> str:
    return _sha256("\n".join(sorted(specs)).encode())


def input_hash(inputs: Sequence[tuple[str, str]]) -> str:
    """One sha256 over the component digests (canonical JSON, sorted)."""
    return _sha256(json.dumps(sorted(inputs), separators=(",", ":")).encode())


def still_current(project: Project, env: str, recorded: Mapping[str, str], glibc: str) -> bool:
    """Whether every input digest the lock of `env` recorded still holds: its matrix, the matrices
    it extends and its channel files byte for byte, the schema, and each recorded platform's virtual
    packages for the matrix's glibc floor `glibc` (sources keep their recorded digests: they move
    only when asked).

    The components are the recorded ones, so the matrix is neither loaded nor validated: which
    bases, channels and platforms it names follows from its text and its bases' texts, both checked
    unchanged here.
    """
    for component, digest in recorded.items():
        kind, _, name = component.partition(":")
        if kind == "source":
            continue
        try:
            if _current_digest(project, env, kind, name, glibc) != digest:
                return False
        except InputError:  # a file gone, or a name the lock should not hold: a re-lock reports it
            return False
    return True


def _current_digest(project: Project, env: str, kind: str, name: str, glibc: str) -> str | None:
    """What the component `kind:name` of env's input digests is now (None for a kind no lock
    records)."""
    if kind in ("base", "channel") and name_problem(name, kind):
        # names read from the lock are file names under env-templates/ or channels/, never paths
        return None
    if kind == "matrix" and not name:
        return _file_digest(project.template(env), "the matrix")
    if kind == "base":
        return _file_digest(project.template(name), "the matrix it extends")
    if kind == "channel":
        return _file_digest(project.channel(name), f"channel file of {name!r}")
    if kind == "virtual-packages":
        return _specs_digest(glibc_virtual_packages(name, glibc))
    if kind == "schema" and not name:
        return str(LOCK_SCHEMA)
    return None


def file_digests(project: Project, matrix: Matrix) -> dict[str, str]:
    """The digests of the files a lock of `matrix` is made from, as they stand in `project`: the
    matrix, the matrices it extends, its channel files."""
    bases = {env: project.template(env) for env in matrix.extends}
    return _read_digests(project.template(matrix.name), project.channel_files(matrix), bases)


def lock_inputs(
    files: Mapping[str, str], matrix: Matrix, sources: Sequence[LockedSource] | Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    """The input digests of a lock of `matrix` from the digests of its files (`file_digests`) and
    its sources (pure)."""
    vpkgs = {p: virtual_packages(matrix, p) for p in matrix.platforms}
    return combined_digests(files, sources, vpkgs)


def project_inputs(
    project: Project, matrix: Matrix, sources: Sequence[LockedSource] | Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    """The input digests of `matrix` as it stands in `project` (its file, its channel files, its
    platforms)."""
    return lock_inputs(file_digests(project, matrix), matrix, sources)
