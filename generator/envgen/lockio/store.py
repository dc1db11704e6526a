"""locks/: read a Lock from its two files, write a Lock's three files all or nothing."""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from envgen import interrupts
from envgen.errors import InputError
from envgen.inputs.files import read_input_text
from envgen.lockio.conda_lock_yml import parse_lock_yml, render_lock_yml
from envgen.lockio.seal import seal
from envgen.lockio.sources_toml import SourcesToml, parse_sources_toml, render_sources_toml
from envgen.model import Lock
from envgen.project import Project


def _read_text(path: Path) -> str:
    return read_input_text(path, hint="re-run `envgen lock` to rewrite it")


# Pure, and most of reading a lock (pydantic validates every package): a re-lock reads the previous lock in its
# preflight and again under the env's mutex, so the last few texts parsed are kept with their Lock.
@functools.lru_cache(maxsize=8)
def parse_lock(yml_text: str, sources_text: str, yml_where: str, sources_where: str) -> Lock:
    """The Lock held by a yml and its sources.toml (pure; the `where`s name the files in errors)."""
    return parse_lock_parts(yml_text, sources_text, yml_where, sources_where)[0]


def parse_lock_parts(yml_text: str, sources_text: str, yml_where: str, sources_where: str) -> tuple[Lock, SourcesToml]:
    """The Lock held by a yml and its sources.toml, and the sources.toml as read (its pip-index rows and file
    hosts, which the integrity check compares with the yml)."""
    yml = parse_lock_yml(yml_text, yml_where)
    sources = parse_sources_toml(sources_text, sources_where)
    if sources.lock.input_hash != yml.input_hash:
        raise InputError(
            f"{yml_where} and {sources_where} are not from one `envgen lock` run (their input hashes differ)",
            hint=f"re-run `envgen lock {sources.lock.env}` to write both again",
        )
    index = dict(sources.pip_indexes)
    pip = tuple(replace(e, index=index.get((e.platform, e.name))) for e in yml.pip)
    return replace(sources.lock, platforms=yml.platforms, conda=yml.conda, pip=pip), sources


def read_lock(project: Project, env: str) -> Lock | None:
    """The Lock recorded in locks/<env>.yml + locks/<env>.sources.toml; None when neither exists."""
    yml_path, toml_path = project.lock_yml(env), project.sources_toml(env)
    if not yml_path.exists() and not toml_path.exists():
        return None
    for path in (yml_path, toml_path):
        if not path.exists():
            raise InputError(f"{path} is missing while its sibling exists", hint=f"re-run `envgen lock {env}`")
    lock = parse_lock(_read_text(yml_path), _read_text(toml_path), str(yml_path), str(toml_path))
    if lock.env != env:
        raise InputError(
            f"{toml_path}: env: the file is the lock of {lock.env!r}, not {env!r}",
            hint=f"re-run `envgen lock {env}`",
        )
    return lock


def no_lock(project: Project, env: str) -> InputError:
    """A command needs the lock of `env` and there is none yet: bad input (exit 2), naming how to make one."""
    return InputError(
        f"no lock for {env} yet: {project.lock_yml(env)} does not exist",
        hint=f"run `envgen lock {env}` (a checkout gets locks/ from the relock workflow or `make lock`)",
    )


def require_lock(project: Project, env: str) -> Lock:
    lock = read_lock(project, env)
    if lock is None:
        raise no_lock(project, env)
    return lock


def _write_temp(directory: Path, target: Path, text: str, mode: int) -> Path:
    """`text` in a new temp file next to `target`, flushed to disk."""
    fd, name = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    path = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        path.chmod(mode)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


def _replace_all(pairs: Sequence[tuple[Path, Path]]) -> None:
    """Rename each temp over its target; if one rename fails, put back the targets already replaced."""
    backups: dict[Path, Path] = {}
    replaced: list[Path] = []
    try:
        for _, target in pairs:
            if target.is_file():
                backups[target] = target.with_name(f".{target.name}.bak")
                backups[target].unlink(missing_ok=True)
                os.link(target, backups[target])
        for temp, target in pairs:
            os.replace(temp, target)
            replaced.append(target)
    except BaseException:
        for target in reversed(replaced):
            if target in backups:
                os.replace(backups[target], target)
            else:
                target.unlink()
        raise
    finally:
        for backup in backups.values():
            backup.unlink(missing_ok=True)


def _remove_leftovers(targets: Sequence[Path]) -> None:
    """Temp and backup files a killed run left next to `targets` (only names this module makes)."""
    for target in targets:
        for leftover in [*target.parent.glob(f".{target.name}.*.tmp"), target.with_name(f".{target.name}.bak")]:
            leftover.unlink(missing_ok=True)


def write_lock(project: Project, env: str, lock: Lock, recipe: str, derived: Sequence[tuple[str, str]] = ()) -> None:
    """Write locks/<env>.yml, .sources.toml, .install.sh (0755) and the `derived` files (name, text) all or nothing.

    The sources.toml records the content hash of the three (lockio/seal.py), so a hand edit of any shows.
    Every file is rendered first, then written to temp files in locks/ and fsynced, then renamed; a failure
    before the renames leaves the old files byte-identical, and a failed rename puts back those already renamed.
    """
    yml = render_lock_yml(lock)
    sources = seal(yml, render_sources_toml(lock), recipe)
    files = [
        (project.lock_yml(env), yml, 0o644),
        (project.sources_toml(env), sources, 0o644),
        (project.install_sh(env), recipe, 0o755),
        *((project.locks_dir / name, text, 0o644) for name, text in derived),
    ]
    directory = project.locks_dir
    temps: list[Path] = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _remove_leftovers([target for target, _, _ in files])
        # The commit point: once past it an interrupt waits for all files; before it, none is touched.
        with interrupts.commit_point(env):
            for target, text, mode in files:
                temps.append(_write_temp(directory, target, text, mode))
            _replace_all([(temp, target) for temp, (target, _, _) in zip(temps, files, strict=True)])
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except (OSError, UnicodeError) as exc:
        raise InputError(
            f"cannot write the lock of env {env!r} into {directory}: {exc}",
            hint="check that locks/ is a writable directory; the previous lock files are unchanged",
        ) from exc
    finally:
        for temp in temps:
            temp.unlink(missing_ok=True)
