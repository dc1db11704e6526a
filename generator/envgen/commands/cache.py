"""`envgen cache clean`: remove what envgen cached, from its own cache directory only.

The directory is $ENVGEN_CACHE_DIR or the user cache directory (`project.cache_dir`). It is cleaned
only when it holds nothing but envgen's own entries (`project.CACHE_ENTRIES`): a variable pointing
at a home or a shared directory removes nothing. The directory is never followed through a
symbolic link, nor is anything inside it (a link is removed as a link)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from envgen.errors import InputError
from envgen.project import CACHE_ENTRIES


@dataclass(frozen=True)
class Removed:
    """What `clean_cache` removed: each entry with its size in bytes."""

    path: Path
    entries: tuple[tuple[str, int], ...]

    @property
    def size(self) -> int:
        return sum(size for _, size in self.entries)


def clean_cache(cache: Path) -> Removed:
    """Remove envgen's entries from `cache`, leaving the directory itself; an absent cache removes
    nothing. A link, a file, or a directory holding anything envgen does not put there is bad
    input, and nothing is removed."""
    if not os.path.lexists(cache):
        return Removed(cache, ())
    if cache.is_symlink():
        link = f"the cache {cache} is a symbolic link"
        raise InputError(
            f"{link}: envgen removes its cache only where it is, never through a link",
            hint="set ENVGEN_CACHE_DIR to the directory itself, or remove it yourself",
        )
    if not cache.is_dir():
        raise InputError(
            f"the cache {cache} is not a directory",
            hint="set ENVGEN_CACHE_DIR to envgen's cache directory",
        )
    names = sorted(entry.name for entry in cache.iterdir())
    foreign = [name for name in names if name not in CACHE_ENTRIES]
    if foreign:
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        shown = ", ".join(foreign[:5]) + more
        raise InputError(
            f"{cache} holds {shown}, which envgen does not put in its cache: nothing was removed",
            hint=f"is ENVGEN_CACHE_DIR right? envgen's cache holds only {', '.join(CACHE_ENTRIES)}",
        )
    return Removed(cache, tuple((name, _remove(cache / name)) for name in names))


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
