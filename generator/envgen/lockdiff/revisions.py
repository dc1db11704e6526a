"""Read locks from files or as they were at a git revision (`git show REV:path`), and diff them."""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from envgen.errors import InputError
from envgen.inputs.files import read_input_text
from envgen.lockdiff.changes import LockDiff, Via
from envgen.lockdiff.compare import diff_locks, with_via
from envgen.lockio.conda_lock_yml import LockYml, parse_lock_yml
from envgen.lockio.integrity import checked, missing_files, tampered
from envgen.lockio.store import parse_lock, read_files
from envgen.model import Lock
from envgen.names import env_name_problem
from envgen.process import run
from envgen.project import Project

log = logging.getLogger(__name__)

GIT_TIMEOUT = 60.0


def repo_root(path: Path) -> Path:
    """The top of the git work tree holding `path` (which need not exist any more)."""
    probe = path.absolute()
    while not probe.is_dir():
        probe = probe.parent
    proc = run(
        ["git", "-C", probe, "rev-parse", "--show-toplevel"], check=False, timeout=GIT_TIMEOUT
    )
    if proc.returncode != 0:
        raise InputError(
            f"{path} is not inside a git repository: `git rev-parse --show-toplevel` "
            f"in {probe} failed",
            hint="give a lock file path instead of REV:path, or run inside the repository",
            file=str(path),
        )
    return Path(proc.stdout.strip())


def verify_rev(root: Path, rev: str) -> str:
    """The commit `rev` names in the repository at `root`; InputError when it names none."""
    if rev.startswith("-"):
        # git would read it as an option.
        raise InputError(f"{rev!r} is not a git revision", hint="name a branch, tag or commit")
    proc = run(
        [
            "git",
            "-C",
            root,
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            f"{rev}^{{commit}}",
        ],
        check=False,
        timeout=GIT_TIMEOUT,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise InputError(
            f"unknown git revision {rev!r} in {root}",
            hint="name a branch, tag or commit that exists there (`git log --oneline`), "
            "fetching it first if remote",
        )
    return proc.stdout.strip()


def repo_path(root: Path, path: Path) -> str:
    """`path` relative to the work tree at `root`, with forward slashes, as `git show REV:<path>`
    wants it."""
    absolute = Path(os.path.realpath(path.absolute()))
    try:
        return absolute.relative_to(Path(os.path.realpath(root))).as_posix()
    except ValueError:
        reason = f"is outside the git repository at {root}"
        raise InputError(f"{path} {reason}", file=str(path), reason=reason) from None


def show_at_rev(root: Path, rev: str, relpath: str) -> str | None:
    """The text of `relpath` at `rev`, or None when the file does not exist there (`rev` must be
    valid)."""
    proc = run(
        ["git", "-C", root, "show", "--end-of-options", f"{rev}:{relpath}"],
        check=False,
        timeout=GIT_TIMEOUT,
    )
    return proc.stdout if proc.returncode == 0 else None


def list_at_rev(root: Path, rev: str, reldir: str) -> list[str]:
    """The paths of the files directly inside `reldir` at `rev`, sorted; empty when the directory is
    absent."""
    proc = run(
        [
            "git",
            "-C",
            root,
            "ls-tree",
            "--name-only",
            "--end-of-options",
            rev,
            "--",
            f"{reldir.rstrip('/')}/",
        ],
        check=False,
        timeout=GIT_TIMEOUT,
    )
    return sorted(line for line in proc.stdout.splitlines() if line) if proc.returncode == 0 else []


# --- locks as text
# ------------------------------------------------------------------------------------------


def _no_file(name: str) -> str | None:
    return None


# A derived file next to a side's lock (`a5.linux-64.requirements.txt`): its text, None when absent.
Derived = Callable[[str], str | None]
# What names the roots of a side's pip packages (commands/diff_via.py): its Lock and derived files.
Explain = Callable[[Lock, Derived], Via]


@dataclass(frozen=True)
class LockText:
    """One side of a diff as read: a label for humans, the env, the yml and (if present) its
    sources.toml, and a reader of the derived files next to it."""

    label: str
    env: str
    yml: str
    sources: str | None
    derived: Derived = field(default=_no_file, compare=False, repr=False)


def sibling_sources(path: str) -> str:
    """locks/a5.yml -> locks/a5.sources.toml."""
    return f"{path.removesuffix('.yml')}.sources.toml"


def env_of(path: str) -> str:
    """The env a lock file is of; a pull request names its files, and the name reaches markdown and
    git."""
    env = Path(path).name.removesuffix(".yml")
    if problem := env_name_problem(env):
        raise InputError(file=path, reason=problem, hint="rename the lock file to locks/<env>.yml")
    return env


def read_side(spec: str, cwd: Path) -> LockText:
    """A lock named as a file path or as `REV:path` (read with git in the repository holding the
    path)."""
    path = cwd / spec
    if path.is_file():
        return _file_side(path, spec)
    rev, colon, rel = spec.partition(":")
    if not colon or not rev or not rel:
        raise InputError(
            f"no lock file at {path}",
            hint="give a path like locks/a5.yml or REV:path like HEAD:locks/a5.yml",
            file=str(path),
        )
    root = repo_root(cwd / rel)
    verify_rev(root, rev)
    relpath = repo_path(root, cwd / rel)
    side = _rev_side(root, rev, relpath, spec)
    if side is None:
        raise InputError(
            f"{relpath} does not exist at revision {rev} in {root}",
            hint=f"list what it holds with `git ls-tree -r --name-only {rev}`",
            file=relpath,
        )
    return side


def _file_side(path: Path, label: str) -> LockText:
    sources = Path(sibling_sources(str(path)))

    def derived(name: str) -> str | None:
        file = path.parent / name
        return _read(file) if file.is_file() else None

    return LockText(
        label,
        env_of(str(path)),
        _read(path),
        _read(sources) if sources.is_file() else None,
        derived,
    )


def _rev_side(root: Path, rev: str, relpath: str, label: str) -> LockText | None:
    yml = show_at_rev(root, rev, relpath)
    if yml is None:
        return None

    def derived(name: str) -> str | None:
        return show_at_rev(root, rev, posixpath.join(posixpath.dirname(relpath), name))

    sources = show_at_rev(root, rev, sibling_sources(relpath))
    return LockText(label, env_of(relpath), yml, sources, derived)


def _read(path: Path) -> str:
    return read_input_text(path, hint="restore it (git checkout -- locks/) or re-run `envgen lock`")


def parse_side(side: LockText, *, with_sources: bool = True) -> Lock:
    """The Lock a side holds; without its sources.toml (or `with_sources`), only platforms and
    packages."""
    yml = _lock_yml(side)
    if side.sources is None or not with_sources:
        return Lock(side.env, yml.platforms, yml.input_hash, yml.conda, yml.pip, sources=())
    # Named by its file: an env read from the sources.toml (another, when edited) is an integrity
    # problem of the work tree's lock (`working_integrity`), never the name a diff is headed with.
    lock = parse_lock(side.yml, side.sources, side.label, sibling_sources(side.label))
    return msgspec.structs.replace(lock, env=side.env)


def _lock_yml(side: LockText) -> LockYml:
    """The yml of a side, or an error saying plainly that the file is not a lock (diff is given any
    path)."""
    try:
        return parse_lock_yml(side.yml, side.label)
    except InputError as exc:
        reason = exc.gist if exc.file == side.label else exc.headline
        raise InputError(
            f"{side.label} is not an envgen lock (locks/<env>.yml in conda-lock format "
            f"1): {reason}",
            hint="give two lock files, e.g. `envgen diff HEAD:locks/a5.yml locks/a5.yml`, "
            "or `envgen diff --git`",
            file=side.label,
        ) from exc


def diff_sides(old: LockText, new: LockText, explain: Explain | None = None) -> LockDiff:
    """Diff two sides; when one lacks its sources.toml both are compared on their packages only.
    With `explain`, each pip change names the root that brought the package in."""
    complete = old.sources is not None and new.sources is not None
    # Parsed first: a file that is not a lock says so before anything about its sources.toml.
    locks = parse_side(old, with_sources=complete), parse_side(new, with_sources=complete)
    if not complete and (old.sources is not None or new.sources is not None):
        missing = old.label if old.sources is None else new.label
        log.warning("%s has no sources.toml next to it: comparing packages only", missing)
    diff = diff_locks(*locks, labels=(old.label, new.label))
    return _explained(diff, explain, (locks[0], old.derived), (locks[1], new.derived))


def _explained(
    diff: LockDiff, explain: Explain | None, old: tuple[Lock, Derived], new: tuple[Lock, Derived]
) -> LockDiff:
    if explain is None or not any(c.manager == "pip" for c in diff.packages):
        return diff
    return with_via(diff, explain(*old), explain(*new))


def working_integrity(project: Project, env: str) -> tuple[str, ...]:
    """The integrity problems of the work tree's lock of `env` (lockio/integrity.py); a missing file
    of the three, while another exists, is an error (exit 4): there is no lock to compare."""
    texts = read_files(project, env)
    missing = missing_files(texts)
    if missing:
        raise tampered(missing, env)
    found = checked(texts)
    return found.problems if found is not None else ()


def diff_against_rev(project: Project, rev: str, explain: Explain | None = None) -> list[LockDiff]:
    """Each lock in locks/ against the same file at `rev` (added and deleted locks too); unchanged
    ones left out. The work tree's locks are checked for integrity too: a hand-edited file is a
    change to report. With `explain`, each pip change names the root that brought it in."""
    root = repo_root(project.locks_dir)
    verify_rev(root, rev)
    reldir = repo_path(root, project.locks_dir)
    present = project.locks_dir.is_dir()
    names = {p.name for p in project.locks_dir.glob("*.yml")} if present else set()
    names |= {Path(p).name for p in list_at_rev(root, rev, reldir) if p.endswith(".yml")}
    diffs = []
    for name in sorted(names):
        relpath = f"{reldir}/{name}"
        working = project.locks_dir / name
        old = _rev_side(root, rev, relpath, f"{rev}:{relpath}")
        new = _file_side(working, relpath) if working.is_file() else None
        problems = working_integrity(project, env_of(relpath)) if present else ()
        if old is not None and new is not None:
            diff = diff_sides(old, new, explain)
        elif new is not None:
            none, lock = Lock(new.env, (), "", (), (), ()), parse_side(new)
            diff = diff_locks(none, lock, labels=(f"{rev}: none", relpath))
            diff = _explained(diff, explain, (none, _no_file), (lock, new.derived))
        elif old is not None:
            lock, none = parse_side(old), Lock(old.env, (), "", (), (), ())
            diff = diff_locks(lock, none, labels=(old.label, "deleted"))
            diff = _explained(diff, explain, (lock, old.derived), (none, _no_file))
        diff = msgspec.structs.replace(diff, tampered=problems)
        if not diff.empty:
            diffs.append(diff)
    return diffs
