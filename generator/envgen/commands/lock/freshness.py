"""Is a lock fresh: the inputs it records against the project's now, then its derived files
against what it renders. The one verdict of `status` (stale), `install` and `check` (refused
unless --frozen)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import msgspec

from envgen.digests import short_digest
from envgen.errors import StaleError
from envgen.inputs.matrix import check_conda_specs, load_env
from envgen.lockio.exports.derived import derived_problems
from envgen.lockio.input_hashes import input_hash, project_inputs
from envgen.model import Lock, Matrix
from envgen.project import Project


def stale_reasons(
    recorded: Iterable[tuple[str, str]], current: Iterable[tuple[str, str]], matrix_path: str
) -> tuple[str, ...]:
    """What changed between the input digests a lock recorded and the current ones, one phrase
    each (pure)."""
    before, after = dict(recorded), dict(current)
    reasons = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) == after.get(key):
            continue
        kind, _, name = key.partition(":")
        what = {
            "matrix": f"matrix {matrix_path}",
            "base": f"matrix {name} (extended by {matrix_path})",
            "channel": f"channel {name}",
            "source": f"source {name}",
            "virtual-packages": f"virtual packages of {name}",
            "schema": "lock schema (envgen was upgraded)",
        }.get(kind, key)
        state = "added" if key not in before else "removed" if key not in after else "changed"
        reasons.append(f"{what} {state}")
    return tuple(reasons)


class Freshness(msgspec.Struct, frozen=True):
    """A lock's freshness: what changed among its inputs, which derived files it no longer
    renders, and the matrix now (None when its file is gone)."""

    inputs: tuple[str, ...]
    derived: tuple[str, ...]
    matrix: Matrix | None

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the lock is stale (empty: fresh). The derived files count once the inputs hold."""
        return self.inputs or self.derived


def input_changes(project: Project, matrix: Matrix, lock: Lock) -> tuple[str, ...]:
    """What changed among the inputs `lock` records, `matrix` being its env's matrix now."""
    current = project_inputs(project, matrix, lock.sources)
    changed = stale_reasons(lock.inputs, current, matrix.path)
    if not changed and input_hash(current) != lock.input_hash:
        now = input_hash(current)
        changed = (f"input hash {short_digest(lock.input_hash)} recorded, {short_digest(now)} now",)
    return changed


def freshness(project: Project, env: str, lock: Lock) -> Freshness:
    """The freshness of `lock`, the lock of `env`: its matrix loaded (InputError when malformed;
    its conda specs parsed only once an input changed), the recorded input digests compared with
    the current ones, then each derived file."""
    template = project.template(env)
    if not template.is_file():
        return Freshness((f"matrix {_shown(project, template)} removed",), (), None)
    # The conda specs parsed by rattler only when an input changed: a matrix whose bytes are those
    # the lock was made from had specs the lock's solve read (rattler's import is a tenth of a
    # `status`). A malformed one is then reported as before (MatrixError).
    matrix = load_env(project, env, conda_specs=False)
    inputs = input_changes(project, matrix, lock)
    if inputs:
        check_conda_specs(project, env, matrix)
        return Freshness(inputs, (), matrix)
    problems = derived_problems(project.locks_dir, lock, matrix)
    derived = tuple(f"{p}: `envgen lock {env} --force` writes it again" for p in problems)
    return Freshness((), derived, matrix)


def require_fresh(project: Project, env: str, lock: Lock, command: str) -> Matrix | None:
    """The matrix of a fresh `lock`; StaleError (exit 1) naming why it is stale, with what makes it
    fresh and the `--frozen` that takes it as it is (`command`: what `--frozen` then does)."""
    found = freshness(project, env, lock)
    if not found.reasons:
        return found.matrix
    listed = "\n".join(f"  {reason}" for reason in found.reasons)
    fix = f"envgen lock {env}" + (" --force" if not found.inputs else "")
    raise StaleError(
        f"the lock of {env} is stale: its inputs changed since it was written\n{listed}"
        if found.inputs
        else f"the lock of {env} is stale: its derived files are not what it renders\n{listed}",
        hint=f"run `{fix}`, or pass --frozen to {command} the lock as it is",
    )


def _shown(project: Project, path: Path) -> str:
    try:
        return path.relative_to(project.root).as_posix()
    except ValueError:
        return str(path)
