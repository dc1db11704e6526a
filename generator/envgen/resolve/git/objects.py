"""Objects of one cache repository read through a single `git cat-file --batch-command`: whether a
commit or a file exists, a file's blob id and its bytes, without a git process for each question.

A re-lock asks a repository dozens of these (each source's commit, `.gitmodules`, `pyproject.toml`,
`setup.py`, every requirement file); one process answers them all. The process starts on the first
question and ends when the repository is released. Objects fetched meanwhile are found: git looks
for new packs when an object is not in the ones it knows.

A name is one line of git's protocol: a name holding a line break or a NUL is no object (a path
from a matrix must never be read as two requests). A reader whose git ended without answering (a
repository another process is still creating, a git killed by an interrupt) answers "no object", as
`git cat-file -e` failing did; the next question starts git again.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from envgen import interrupts
from envgen.commits import is_full_commit
from envgen.errors import ToolError

# How long the reader may take to end once its input is closed.
_CLOSE_TIMEOUT = 10.0


@dataclass(frozen=True)
class Found:
    """What a name denotes: the object's id and its type (commit, tree, blob, tag)."""

    sha: str
    type: str


class ObjectReader:
    """`git cat-file --batch-command` in `repo`, started on first use; `close()` ends it."""

    def __init__(self, repo: Path, environ: Mapping[str, str]) -> None:
        self._repo = repo
        self._environ = dict(environ)
        self._proc: subprocess.Popen[bytes] | None = None

    def info(self, name: str) -> Found | None:
        """The object `name` denotes (`sha^{commit}`, `commit:path`), or None when there is none."""
        header = self._ask("info", name)
        return None if header is None else Found(header[0], header[1])

    def contents(self, name: str) -> tuple[Found, bytes] | None:
        """The object `name` denotes and its bytes, or None when there is none."""
        header = self._ask("contents", name)
        if header is None:
            return None
        sha, kind, size = header
        data = self._stdout().read(size + 1)  # the object, then git's line break
        if len(data) != size + 1:
            self._ended()
            return None
        return Found(sha, kind), data[:size]

    def entry(self, commit: str, path: str) -> tuple[str, str] | None:
        """What `git ls-tree COMMIT -- PATH` says of `path` (mode and type: `100644 blob`, `040000
        tree`, `120000 blob` for a symbolic link, `160000 commit` for a submodule), read from the
        tree of its directory; None when that tree holds no such entry (or a parent is no
        directory)."""
        directory, _, name = path.rpartition("/")
        found = self.contents(f"{commit}:{directory}" if directory else f"{commit}^{{tree}}")
        if found is None or found[0].type != "tree" or not name:
            return None
        return _tree_entry(found[1], name.encode())

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.close()
            proc.wait(timeout=_CLOSE_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired):
            interrupts.kill_group(proc)
        finally:
            proc.stdout.close()
            interrupts.untrack(proc)

    def _ask(self, command: str, name: str) -> tuple[str, str, int] | None:
        if any(c in name for c in "\n\r\0"):
            return None
        stdin = self._start().stdin
        assert stdin is not None
        try:
            stdin.write(f"{command} {name}\n".encode())
            stdin.flush()
        except OSError:
            self._ended()
            return None
        line = self._stdout().readline()
        if not line.endswith(b"\n"):
            self._ended()
            return None
        # "<sha> <type> <size>"; else "<name> missing" or "<name> ambiguous"
        fields = line.decode(errors="replace").rstrip("\n").split(" ")
        if len(fields) == 3 and is_full_commit(fields[0]) and fields[1] in _TYPES:
            return (fields[0], fields[1], int(fields[2])) if fields[2].isdigit() else None
        return None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            interrupts.check()
            # as process.start: the child tracked before an interrupt is taken
            with interrupts.deferring():
                try:
                    self._proc = subprocess.Popen(
                        ["git", "cat-file", "--batch-command"],
                        cwd=self._repo,
                        env=self._environ,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                        # As every envgen child: its own process group, stopped by envgen on an
                        # interrupt.
                        process_group=0,
                    )
                except OSError as exc:
                    raise ToolError(
                        f"cannot run `git cat-file` in {self._repo}: {exc.strerror}",
                        hint="install git, or check that the cache is readable, and retry",
                    ) from exc
                interrupts.track(self._proc)
        return self._proc

    def _stdout(self) -> IO[bytes]:
        assert self._proc is not None and self._proc.stdout is not None
        return self._proc.stdout

    def _ended(self) -> None:
        """git ended before answering: no object (an interrupt's stop is the interrupt's)."""
        self.close()
        interrupts.check()


_TYPES = frozenset({"commit", "tree", "blob", "tag"})


def _tree_entry(tree: bytes, name: bytes) -> tuple[str, str] | None:
    """The mode and type of `name` in a tree object (`<mode> <name>\\0<20-byte id>` per entry, git's
    own format); ls-tree's six-digit mode."""
    at = 0
    while at < len(tree):
        space = tree.find(b" ", at)
        nul = tree.find(b"\0", space + 1)
        if space < 0 or nul < 0:
            return None
        if tree[space + 1 : nul] == name:
            mode = tree[at:space].decode("ascii", "replace").zfill(6)
            kind = "tree" if mode == "040000" else "commit" if mode == "160000" else "blob"
            return mode, kind
        at = nul + 21
    return None
