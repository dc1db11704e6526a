"""locks/: the one reader of an env's lock files (each read once, through the hostile-input reader)
and their one writer (every file, all or nothing).

Reading parses nothing until asked: the no-op lock needs only the input digests the sources.toml
records and the content hash of the three files (`LockTexts.intact`); the yml's and the
sources.toml's schemas and the model are imported by the parse (lockio/conda_lock_yml.py,
lockio/sources_toml.py) when a command needs the Lock itself.
"""

from __future__ import annotations

import functools
import glob
import os
import stat
import tomllib
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envgen import atomic, interrupts
from envgen.errors import InputError
from envgen.inputs.files import bounded_nesting, read_input_text
from envgen.lockio import seal
from envgen.project import Project

if TYPE_CHECKING:
    from envgen.lockio.sources_toml import SourcesToml
    from envgen.model import Lock


@dataclass(frozen=True)
class LockTexts:
    """The three files of one env's lock as read (None: the file does not exist), how messages name
    them, and the first of them that could not be read (a FIFO, a symlink, a device, not UTF-8)."""

    env: str
    yml: str | None
    sources: str | None
    recipe: str | None
    names: tuple[str, str, str]  # yml, sources.toml, recipe
    unreadable: InputError | None = None

    @property
    def present(self) -> bool:
        texts = (self.yml, self.sources, self.recipe)
        return self.unreadable is not None or any(text is not None for text in texts)

    @property
    def intact(self) -> bool:
        """Whether the three files hash to the content hash their sources.toml records
        (lockio/seal.py)."""
        if self.yml is None or self.sources is None or self.recipe is None:
            return False
        return seal.intact(self.yml, self.sources, self.recipe)


def repair_hint(env: str) -> str:
    return (
        f"a lock is never edited by hand: restore the files (git checkout -- locks/) or run "
        f"`envgen lock {env} --force` to write all three again from env-templates/"
    )


def _read(path: Path, hint: str) -> str | None:
    """The text of `path`, None when nothing is there (a dangling symlink is something: it is
    refused)."""
    if not os.path.lexists(path):
        return None
    return read_input_text(path, hint=hint)


def read_files(project: Project, env: str) -> LockTexts:
    """The three lock files of `env` as they are on disk, named relative to the project. A file that
    cannot be read is recorded, not raised: each command decides what an unreadable lock means to
    it."""
    paths = (project.lock_yml(env), project.sources_toml(env), project.install_sh(env))
    texts: list[str | None] = []
    unreadable = None
    for path in paths:
        try:
            texts.append(_read(path, repair_hint(env)))
        except InputError as exc:
            texts.append(None)
            unreadable = unreadable or exc
    yml, sources, recipe = texts
    names = tuple(_shown(project, path) for path in paths)
    return LockTexts(env, yml, sources, recipe, (names[0], names[1], names[2]), unreadable)


def _shown(project: Project, path: Path) -> str:
    try:
        return path.relative_to(project.root).as_posix()
    except ValueError:
        return str(path)


def read_derived(locks_dir: Path, name: str) -> str | None:
    """The text of the derived file locks/`name` (None when absent); InputError when it cannot be
    read."""
    return _read(locks_dir / name, hint="`envgen lock --force` writes it again")


@dataclass(frozen=True)
class RecordedInputs:
    """The input hash, the input digests (by component) and the derived hash a lock's sources.toml
    records."""

    input_hash: str
    inputs: Mapping[str, str]
    # The derived files' hash (lockio/seal.py); None in a lock written before it was recorded.
    derived_hash: str | None = None

    @property
    def sources(self) -> dict[str, str]:
        """The recorded digest of each source, by name."""
        prefix = "source:"
        return {k.removeprefix(prefix): v for k, v in self.inputs.items() if k.startswith(prefix)}


def recorded_inputs(texts: LockTexts) -> RecordedInputs | None:
    """What the sources.toml records of the lock's inputs; None when it does not read so.

    For the no-op lock, which keeps a lock only when its three files are intact
    (`LockTexts.intact`): these are the values the sources.toml schema wrote, read with the TOML
    parser alone (the schema's import would double the no-op's time). Anything unexpected means "not
    known fresh", and the re-lock that follows reads the files through the schema, and reports on
    them.
    """
    if texts.sources is None:
        return None
    try:
        with bounded_nesting(texts.names[1]):
            data = tomllib.loads(texts.sources)
    except (InputError, tomllib.TOMLDecodeError):
        return None
    found, inputs = data.get("input-hash"), data.get("inputs", {})
    derived = data.get("derived-hash")
    if not isinstance(found, str) or not isinstance(inputs, dict):
        return None
    if not all(isinstance(v, str) for v in inputs.values()) or not isinstance(derived, str | None):
        return None
    return RecordedInputs(found, inputs, derived)


def parse_lock(yml_text: str, sources_text: str, yml_where: str, sources_where: str) -> Lock:
    """The Lock held by a yml and its sources.toml (pure; the `where`s name the files in errors)."""
    return parse_lock_parts(yml_text, sources_text, yml_where, sources_where)[0]


# Pure, and most of reading a lock (the schema converts every package): a re-lock reads the previous
# lock in its preflight and again under the env's mutex, and `lock --check` checks its integrity
# and then its freshness, so the last few texts parsed are kept with their Lock.
@functools.lru_cache(maxsize=8)
def parse_lock_parts(
    yml_text: str, sources_text: str, yml_where: str, sources_where: str
) -> tuple[Lock, SourcesToml]:
    """The Lock held by a yml and its sources.toml, and the sources.toml as read (its pip-index rows
    and file hosts, which the integrity check compares with the yml)."""
    # Imported here: the schemas and the model are for the commands that use a Lock, not the
    # no-op.
    from envgen.lockio.conda_lock_yml import parse_lock_yml
    from envgen.lockio.sources_toml import parse_sources_toml

    yml = parse_lock_yml(yml_text, yml_where)
    sources = parse_sources_toml(sources_text, sources_where)
    if sources.lock.input_hash != yml.input_hash:
        raise InputError(
            f"{yml_where} and {sources_where} are not from one `envgen lock` run "
            "(their input hashes differ)",
            hint=f"re-run `envgen lock {sources.lock.env}` to write both again",
        )
    import msgspec  # imported here: a no-op lock reads no lock's parts (the schemas import it)

    index = dict(sources.pip_indexes)
    pip = tuple(msgspec.structs.replace(e, index=index.get((e.platform, e.name))) for e in yml.pip)
    return msgspec.structs.replace(
        sources.lock, platforms=yml.platforms, conda=yml.conda, pip=pip
    ), sources


def lock_of(texts: LockTexts) -> Lock | None:
    """The Lock the yml and sources.toml hold; None when no file of the lock exists. InputError when
    one cannot be read or parsed, or the two are not the lock of `texts.env`."""
    if not texts.present:
        return None
    if texts.unreadable is not None:
        raise texts.unreadable
    yml_name, sources_name = texts.names[0], texts.names[1]
    if texts.yml is None or texts.sources is None:
        missing = yml_name if texts.yml is None else sources_name
        raise InputError(
            f"{missing} is missing while its sibling exists",
            hint=f"re-run `envgen lock {texts.env}`",
            file=missing,
        )
    lock = parse_lock(texts.yml, texts.sources, yml_name, sources_name)
    if lock.env != texts.env:
        raise InputError(
            file=sources_name,
            key="env",
            reason=f"the file is the lock of {lock.env!r}, not {texts.env!r}",
            hint=f"re-run `envgen lock {texts.env}`",
        )
    return lock


def read_lock(project: Project, env: str) -> Lock | None:
    """The Lock recorded in locks/<env>.yml + locks/<env>.sources.toml; None when neither exists."""
    return lock_of(read_files(project, env))


def read_sealed_sources(project: Project, env: str) -> SourcesToml | None:
    """The sources.toml of `env`'s lock, read through its schema, when the lock's three files are
    as `envgen lock` wrote them (`LockTexts.intact`) and it is the lock of `env`; None otherwise.
    For a command that needs none of the lock's packages (`show`: its overrides): the yml is hashed
    for the seal, not parsed. InputError when the sources.toml does not read."""
    texts = read_files(project, env)
    if texts.sources is None or not texts.intact:
        return None
    from envgen.lockio.sources_toml import parse_sources_toml

    found = parse_sources_toml(texts.sources, texts.names[1])
    return found if found.lock.env == env else None


def no_lock(project: Project, env: str) -> InputError:
    """A command needs the lock of `env` and there is none yet: bad input (exit 2), naming how to
    make one."""
    return InputError(
        f"no lock for {env} yet: {project.lock_yml(env)} does not exist",
        hint=f"run `envgen lock {env}` (a checkout gets locks/ from the relock workflow or "
        "`make lock`)",
        file=str(project.lock_yml(env)),
    )


def require_platforms(lock: Lock, chosen: Sequence[str], hint: str) -> None:
    """Each platform `chosen` (by --platform) one the lock has a part for; else InputError naming
    the first that is not, and the lock's platforms."""
    unknown = [p for p in chosen if p not in lock.platforms]
    if unknown:
        reason = f"the lock of {lock.env} has no such part (it has {', '.join(lock.platforms)})"
        raise InputError(
            f"--platform {unknown[0]}: {reason}",
            hint=hint,
            key="--platform",
            platform=unknown[0],
            reason=reason,
        )


def require_lock(project: Project, env: str) -> Lock:
    lock = read_lock(project, env)
    if lock is None:
        raise no_lock(project, env)
    return lock


def _remove_leftovers(targets: Sequence[Path]) -> None:
    """Part and backup files a killed run left next to `targets` (only names envgen makes; `.tmp`
    is how a lock's temp files were named before `atomic.py`)."""
    for target in targets:
        for leftover in [
            *atomic.leftovers(target),
            *target.parent.glob(f".{glob.escape(target.name)}.*.tmp"),
        ]:
            leftover.unlink(missing_ok=True)


def _refuse_special(targets: Sequence[Path]) -> None:
    """InputError naming the first target that exists and is not a regular file: an output never
    replaces a symlink (a pull request can plant one), a FIFO, a device or a directory."""
    for target in targets:
        try:
            mode = target.lstat().st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            raise InputError(
                f"{target} is not a regular file: envgen does not write over it",
                hint="remove it (a lock's files are regular files), then run `envgen lock` again",
                file=str(target),
            )


def _rendered(
    project: Project, env: str, lock: Lock, recipe: str, derived: Sequence[tuple[str, str]]
) -> list[tuple[Path, str, int]]:
    """Every file `write_lock` writes for `lock`: its path, its text (the sources.toml sealed) and
    its mode."""
    from envgen.lockio.conda_lock_yml import render_lock_yml

    yml = render_lock_yml(lock)
    sources = sealed_sources(lock, yml, recipe, derived)
    return [
        (project.lock_yml(env), yml, 0o644),
        (project.sources_toml(env), sources, 0o644),
        (project.install_sh(env), recipe, 0o755),
        *((project.locks_dir / name, text, 0o644) for name, text in derived),
    ]


def sealed_sources(
    lock: Lock, yml: str, recipe: str, derived: Sequence[tuple[str, str]] = ()
) -> str:
    """The sources.toml `write_lock` writes for `lock` beside `yml`, `recipe` and the `derived`
    files (name, text): their derived hash recorded, then the three files sealed."""
    from envgen.lockio.sources_toml import render_sources_toml

    return seal.seal(yml, seal.with_derived(render_sources_toml(lock), derived), recipe)


def unwritten_changes(
    project: Project, env: str, lock: Lock, recipe: str, derived: Sequence[tuple[str, str]] = ()
) -> list[tuple[str, bool]]:
    """The files `write_lock` would write for `lock` whose bytes are not those on disk, each named
    relative to the project with whether it exists now; nothing is written. A target that is not a
    regular file is refused (InputError), as `write_lock` refuses it."""
    files = _rendered(project, env, lock, recipe, derived)
    _refuse_special([target for target, _, _ in files])
    changed = []
    for target, text, _ in files:
        try:
            now = _read(target, repair_hint(env))
        except InputError:  # a regular file that is not UTF-8 text: the write replaces it
            changed.append((_shown(project, target), True))
            continue
        if now != text:
            changed.append((_shown(project, target), now is not None))
    return changed


def write_lock(
    project: Project, env: str, lock: Lock, recipe: str, derived: Sequence[tuple[str, str]] = ()
) -> None:
    """Write locks/<env>.yml, .sources.toml, .install.sh (0755) and the `derived` files (name, text)
    all or nothing.

    The sources.toml records the content hash of the three (lockio/seal.py), so a hand edit of any
    shows. Every file is rendered first, then written to part files in locks/ and fsynced, then
    renamed (`atomic.place_all`); a failure before the renames leaves the old files byte-identical,
    and a failed rename puts back those already renamed. A target that is not a regular file is
    refused before anything is written, and again just before its rename.
    """
    files = _rendered(project, env, lock, recipe, derived)
    directory = project.locks_dir
    try:
        _refuse_special([target for target, _, _ in files])
        directory.mkdir(parents=True, exist_ok=True)
        _remove_leftovers([target for target, _, _ in files])
        # The commit point: once past it an interrupt waits for all files; before it, none is
        # touched.
        with interrupts.commit_point(env), ExitStack() as parts:
            written = []
            for target, text, mode in files:
                part = parts.enter_context(atomic.part_file(target, mode=mode))
                part.handle.write(text.encode("utf-8"))
                written.append((part, target))
            atomic.place_all(written, check=lambda target: _refuse_special([target]), sync=True)
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
