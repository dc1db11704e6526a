"""The one way envgen replaces a file: its bytes written whole to a part file beside it, then
renamed over it, so no reader sees half a file; the part file never outlives its block unless it was
renamed into place, whatever ended the block (an error, a Ctrl-C, a failed check)."""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

# What every part file's name ends with: `.<target's name>.<64 random bits>.part`.
_SUFFIX = ".part"
# A check of the directory entry a part file is about to replace (it raises to stop the rename).
Check = Callable[[Path], None]


class Part:
    """An open part file: what is written to `handle` reaches a target only through `place`."""

    def __init__(self, path: Path, handle: BinaryIO) -> None:
        self.path = path
        self.handle = handle
        self.placed = False

    def close(self, *, sync: bool = False) -> None:
        """Its bytes flushed (and on disk when `sync`), the handle closed."""
        if not self.handle.closed:
            self.handle.flush()
            if sync:
                os.fsync(self.handle.fileno())
            self.handle.close()

    def place(self, target: Path, *, check: Check | None = None, sync: bool = False) -> None:
        """Rename it over `target` (on the same file system), `check(target)` called just before."""
        self.close(sync=sync)
        if check is not None:
            check(target)
        os.replace(self.path, target)
        self.placed = True


@contextmanager
def part_file(beside: Path, *, mode: int | None = None) -> Iterator[Part]:
    """A new part file in `beside`'s directory, open for writing, removed when the block ends unless
    it was placed. Created as any new file is (mode 0666 less the umask), or with exactly `mode`. It
    is made inside the block that removes it, so an interrupt as it is made leaves nothing; a name
    of 64 random bits is never taken (one that is, is another's and never removed)."""
    import secrets  # here: hmac and base64 come with it, and most commands write nothing

    path = beside.with_name(f".{beside.name}.{secrets.token_hex(8)}{_SUFFIX}")
    theirs = False
    part: Part | None = None
    try:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        except FileExistsError:
            theirs = True
            raise
        part = Part(path, os.fdopen(fd, "wb"))
        if mode is not None:
            os.fchmod(part.handle.fileno(), mode)
        yield part
    finally:
        if part is not None:
            _closed(part)
        if not theirs and (part is None or not part.placed):
            _removed(path)


def _closed(part: Part) -> None:
    with contextlib.suppress(OSError):  # what its close could not write goes with the file
        part.handle.close()


def _removed(path: Path) -> None:
    """`path` removed to the end: a Ctrl-C meanwhile (a second one) takes effect once it is gone."""
    interrupted = False
    while True:
        try:
            path.unlink(missing_ok=True)
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt


def write_file(
    target: Path, data: bytes, *, check: Check | None = None, mode: int | None = None
) -> None:
    """`target` replaced by `data`, whole or not at all (its directory must exist)."""
    with part_file(target, mode=mode) as part:
        part.handle.write(data)
        part.place(target, check=check)


def place_all(
    parts: Sequence[tuple[Part, Path]], *, check: Check | None = None, sync: bool = False
) -> None:
    """Each part renamed over its target, every part on disk first when `sync`; if one rename fails
    (or its check), the targets already replaced are put back. A target's old file is kept meanwhile
    as a hard link `.<name>.bak` beside it, removed at the end."""
    for part, _ in parts:
        part.close(sync=sync)
    backups: dict[Path, Path] = {}
    replaced: list[Path] = []
    try:
        for _, target in parts:
            if target.is_file():
                backups[target] = backup_of(target)
                backups[target].unlink(missing_ok=True)
                os.link(target, backups[target])
        for part, target in parts:
            part.place(target, check=check)
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


def backup_of(target: Path) -> Path:
    return target.with_name(f".{target.name}.bak")


def leftovers(target: Path) -> list[Path]:
    """Where a killed process may have left part files or the backup of `target` (only names this
    module makes; the backup's path whether or not it exists)."""
    return [*target.parent.glob(f".{glob.escape(target.name)}.*{_SUFFIX}"), backup_of(target)]
