"""envgen's cache directory: claimed when envgen creates it, cleaned (`envgen cache clean`) only
where envgen claimed it.

The directory is $ENVGEN_CACHE_DIR or the user cache directory (`project.cache_dir`). A command
that caches takes it through `claimed_cache`: a directory that does not exist yet, or is empty, is
marked as envgen's with a cache directory tag (CACHEDIR.TAG, https://bford.info/cachedir/, which
backup tools also honour), written with envgen's own comment line. `clean_cache` removes entries
only from a directory holding that tag and nothing but envgen's own entries
(`project.CACHE_ENTRIES`): a variable pointing at a home, `~/.cache` or the working directory
removes nothing, whatever the names inside. The directory is never followed through a symbolic
link, nor is anything inside it (a link is removed as a link)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from envgen import interrupts
from envgen.atomic import write_file
from envgen.errors import InputError
from envgen.inputs.files import read_input_text
from envgen.project import CACHE_ENTRIES, cache_dir

TAG = "CACHEDIR.TAG"
# The signature line is the specification's; the comment says whose tag it is, so that a directory
# another tool tagged (uv's cache has its own CACHEDIR.TAG) is not taken for envgen's.
TAG_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by envgen (`envgen cache clean` empties it).\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


def claimed_cache() -> Path:
    """envgen's cache directory for a command that caches: created and tagged when it does not
    exist yet; an existing directory is tagged only when empty (one holding anything else may be
    shared, and is used but never cleaned)."""
    cache = cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        if not cache.is_symlink() and not any(cache.iterdir()):
            write_file(cache / TAG, TAG_TEXT.encode())
    except OSError:
        pass  # the command that writes there reports the directory it cannot write
    return cache


def _tagged(cache: Path) -> bool:
    """Whether `cache` holds envgen's tag, as a regular file (never read through a link)."""
    try:
        text = read_input_text(cache / TAG, hint="")
    except InputError:
        return False
    return text == TAG_TEXT


@dataclass(frozen=True)
class Removed:
    """What `clean_cache` removed: each entry with its size in bytes."""

    path: Path
    entries: tuple[tuple[str, int], ...]

    @property
    def size(self) -> int:
        return sum(size for _, size in self.entries)


def clean_cache(cache: Path) -> Removed:
    """Remove envgen's entries from `cache`, leaving the directory and its tag; an absent or empty
    cache removes nothing. A link, a file, a directory without envgen's tag or one holding anything
    envgen does not put there is bad input, and nothing is removed."""
    if not os.path.lexists(cache):
        return Removed(cache, ())
    if cache.is_symlink():
        link = f"the cache {cache} is a symbolic link"
        raise InputError(
            f"{link}: envgen removes its cache only where it is, never through a link",
            hint="set ENVGEN_CACHE_DIR to the directory itself, or remove it yourself",
            file=str(link),
        )
    if not cache.is_dir():
        raise InputError(
            f"the cache {cache} is not a directory",
            hint="set ENVGEN_CACHE_DIR to envgen's cache directory",
            file=str(cache),
        )
    names = sorted(entry.name for entry in cache.iterdir() if entry.name != TAG)
    if names and not _tagged(cache):
        raise InputError(
            f"{cache} is not a cache envgen created (it has no {TAG} of envgen's): nothing was "
            "removed",
            hint="is ENVGEN_CACHE_DIR right? envgen tags the cache directory it creates; remove "
            "this one yourself if it is envgen's",
            file=str(cache),
        )
    foreign = [name for name in names if name not in CACHE_ENTRIES]
    if foreign:
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        shown = ", ".join(foreign[:5]) + more
        raise InputError(
            f"{cache} holds {shown}, which envgen does not put in its cache: nothing was removed",
            hint=f"is ENVGEN_CACHE_DIR right? envgen's cache holds only {', '.join(CACHE_ENTRIES)}",
            file=str(cache),
        )
    return Removed(cache, _remove_all(cache, names))


def _remove_all(cache: Path, names: list[str]) -> tuple[tuple[str, int], ...]:
    """Remove `names` from `cache`, each with its size. What went is recorded as it ends, for the
    message of an interrupt (in the middle, or after the last entry went)."""
    removed: list[tuple[str, int]] = []
    try:
        for name in names:
            removed.append((name, _remove(cache / name)))
    finally:
        interrupts.cleaned(_what_went(cache, names))
    return tuple(removed)


def _what_went(cache: Path, names: list[str]) -> str:
    """What a clean removed and left, as the disk says (an entry removed as a signal came is gone,
    the one it was removing perhaps in part)."""
    gone = [name for name in names if not os.path.lexists(cache / name)]
    left = [name for name in names if name not in gone]
    said = f"removed {', '.join(gone)} from" if gone else "nothing was removed from"
    said = f"{said} the cache {cache}"
    if left:
        said += (
            f"; {', '.join(left)} left (the first perhaps in part): `envgen cache clean` removes "
            "the rest"
        )
    return said


def _remove(path: Path) -> int:
    """Remove `path` (a link as a link, a directory without following any link in it); its size."""
    size = _size(path)
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)
    return size


def _size(path: Path) -> int:
    """The bytes under `path`, links not followed."""
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(directory, name)).st_size
    return total
