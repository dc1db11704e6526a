"""Reading an input file that may be hostile: regular files only, and nesting that cannot crash a
parser.

A symlink (which a pull request can add) could point anywhere on the machine; a FIFO named `*.toml`
would block a read forever; a document nested thousands of levels deep makes the recursive TOML and
YAML parsers (and any walk over what they return) raise RecursionError. All become an InputError
naming the file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from envgen.errors import InputError


def read_input_text(path: Path, hint: str, shown: str | None = None) -> str:
    """The UTF-8 text of `path`, which must be a regular file (a symlink, a FIFO, a device or a
    directory is refused).

    `hint` says how to get a good file again (edit it, re-lock); `shown` is the file's name in
    messages (the path by default; a bundle's member by the bundle and its name).
    """
    shown = str(path) if shown is None else shown
    try:
        # O_NONBLOCK: opening a FIFO with no writer must not hang before its type is seen.
        # O_NOFOLLOW: a pull request can add a symlink, and an input read through one could be any
        # file of the machine.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP and path.is_symlink():
            raise InputError(
                f"{shown} is a symbolic link",
                hint="replace it with a regular file",
                file=shown,
                reason="is a symbolic link",
            ) from exc
        raise _unreadable(shown, str(exc.strerror or exc), hint) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(
                f"{shown} is not a regular file",
                hint="replace it with a regular file, or remove it",
                file=shown,
                reason="is not a regular file",
            )
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read()
    except OSError as exc:
        raise _unreadable(shown, str(exc.strerror or exc), hint) from exc
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        why = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise _unreadable(shown, why, hint) from exc


def _unreadable(shown: str, why: str, hint: str | None) -> InputError:
    """The one message of a file that cannot be read: `cannot read FILE: why`, its parts carried."""
    return InputError(f"cannot read {shown}: {why}", hint=hint, file=shown, reason=why)


def open_input(path: Path, hint: str) -> BinaryIO:
    """`path` open for binary reading, which must be a regular file once symlinks are followed: a
    path given on the command line (a bundle), the user's own choice; a FIFO must not block, a
    device is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise _unreadable(str(path), str(exc.strerror or exc), hint) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        reason = "is not a regular file"
        raise InputError(f"{path} {reason}", hint=hint, file=str(path), reason=reason)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


@contextmanager
def bounded_nesting(where: str) -> Iterator[None]:
    """Report a parser's (or a walk's) RecursionError on deeply nested input as bad input in
    `where`."""
    try:
        yield
    except RecursionError:
        raise InputError(
            file=where,
            reason="nested too deeply to read (arrays or tables thousands of levels deep)",
            hint="no envgen input nests more than a few levels: the file is damaged or hostile",
        ) from None


def safe_yaml(text: str) -> object:
    """A YAML document through the safe loader, libyaml's where present (it reads a lock about ten
    times faster than the pure-Python one; a re-lock reads the previous lock, and check, diff and
    status read locks too).

    Raises yaml.YAMLError; RecursionError past libyaml's nesting limit (the Python loader's own
    failure there), which `bounded_nesting` turns into an InputError.
    """
    import yaml  # only the readers of a lock need it

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):
            raise RecursionError(str(exc)) from exc
        raise
