"""The one error tree of envgen; each class carries the exit code the CLI uses.

No module raises the root `EnvgenError` itself (tests/unit/test_architecture.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self


def placed(file: str | None, line: int | None, key: str | None, reason: str) -> str:
    """The one format of a problem at a place: `file[:line]: key: reason`, each part left out when
    not known."""
    where = f"{file}:{line}" if file and line else file
    return ": ".join(part for part in (where, key, reason) if part)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


class EnvgenError(Exception):
    """Root of every error envgen reports to a user (never a bug).

    Its message is given, or composed (`placed`) from the parts of a problem found in an input:
    the `reason`, in `file` (at `line`) under `key`. Where the problem is one package's, one
    platform's or one host's, `package`, `platform` and `host` name it. Those parts stay on the
    error as data (`--json` carries them), whether they composed the message or a given message
    names them. `headline` is the message's first line, or the one given where the error is
    built."""

    exit_code = 1

    def __init__(
        self,
        message: str | None = None,
        hint: str | None = None,
        *,
        headline: str | None = None,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
        reason: str | None = None,
        package: str | None = None,
        platform: str | None = None,
        host: str | None = None,
    ) -> None:
        if message is None:
            message = placed(file, line, key, reason or "")
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.file, self.line, self.key, self.reason = file, line, key, reason
        self.package, self.platform, self.host = package, platform, host
        self.headline = _first_line(message) if headline is None else headline

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"

    @property
    def gist(self) -> str:
        """What went wrong in one line, without the file it happened in: `key: reason` when the
        error was built from its parts, else the headline."""
        if self.reason is None:
            return self.headline
        return _first_line(placed(None, None, self.key, self.reason))

    @property
    def summary(self) -> str:
        """The headline and, when it ends in a colon, the first detail under it (never a dangling
        colon); empty for an empty message."""
        if not self.headline.endswith(":"):
            return self.headline
        lines = [line.strip() for line in self.message.splitlines() if line.strip()]
        rest = lines[1:] if lines and lines[0] == self.headline else lines
        return f"{self.headline} {rest[0]}" if rest else self.headline.rstrip(":")

    def parts(self) -> dict[str, str | int]:
        """The parts the error was built from (file, line, key, reason, package, platform, host),
        those known."""
        given = {
            "file": self.file,
            "line": self.line,
            "key": self.key,
            "reason": self.reason,
            "package": self.package,
            "platform": self.platform,
            "host": self.host,
        }
        return {name: value for name, value in given.items() if value is not None}

    def reworded(self, message: str) -> Self:
        """The same error (its class, exit code, hint and parts: a conflict's, an unreachable
        host's, a place's) saying `message`, headed by its first line."""
        other = type(self).__new__(type(self), message)
        other.__dict__.update(self.__dict__, message=message, headline=_first_line(message))
        return other

    def with_hint(self, hint: str | None) -> Self:
        """The same error (its class, exit code, message and parts) with `hint` instead."""
        other = type(self).__new__(type(self), self.message)
        other.__dict__.update(self.__dict__, hint=hint)
        return other


class InputError(EnvgenError):
    """Bad input: a matrix, a channel file, a lock or the command line."""

    exit_code = 2


class StaleError(EnvgenError):
    """A lock whose inputs changed since it was written, or whose derived files it no longer
    renders, refused where a fresh one is needed (`install` without --frozen): exit 1, the
    verdict `status` gives it."""

    exit_code = 1


class ResolutionError(EnvgenError):
    """Resolution failed: a conflict, an unreachable index or remote, a missing ref."""

    exit_code = 3


@dataclass(frozen=True)
class Unreached:
    """One host that could not be reached: as shown (its URL or host name, credentials redacted) and
    why, in a few words."""

    host: str
    reason: str

    def __str__(self) -> str:
        return f"{self.host}: {self.reason}"


class NetworkError(ResolutionError):
    """A host (an index, a channel, a remote) could not be reached: the answer is unknown, not
    wrong.

    Besides the message (composed from them where it is raised), its parts: `hosts`, each host not
    reached and why (one for most failures, every one when a probe or a download asked several at
    once, none when the tool named no host), and `host` the one host when only one was not reached;
    `platform`, the platform being locked or installed, when one was (both carried by `--json`);
    `listed`, whether the message names each host on a line of its own under a headline;
    `failure`, the line `check` reports: that headline, or the message, and for a resolution
    (grouped across platforms there) without the platform."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        hosts: Sequence[Unreached],
        platform: str | None = None,
        failure: str | None = None,
        listed: bool = False,
    ) -> None:
        single = hosts[0].host if len(hosts) == 1 else None
        headline = failure if listed else None
        super().__init__(message, hint, headline=headline, platform=platform, host=single)
        self.hosts = tuple(hosts)
        self.failure = message if failure is None else failure
        self.listed = listed

    @classmethod
    def listing(
        cls,
        headline: str,
        hosts: Sequence[Unreached],
        hint: str | None = None,
        *,
        platform: str | None = None,
        lines: Sequence[str] | None = None,
    ) -> NetworkError:
        """Several hosts at once: the headline, then one line per host (`  host: reason`, or the
        `lines` given, one per host)."""
        shown = [str(h) for h in hosts] if lines is None else list(lines)
        message = headline + "".join(f"\n  {line}" for line in shown)
        return cls(message, hint, hosts=hosts, platform=platform, failure=headline, listed=True)


class ConflictError(ResolutionError):
    """No resolution exists: `conflicts` are the direct layer's (plain data, as `--json` shows
    them), `said` is the resolver's own explanation."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        conflicts: tuple[dict[str, object], ...] = (),
        said: str = "",
    ) -> None:
        super().__init__(message, hint)
        self.conflicts = conflicts
        self.said = said


class VerificationError(EnvgenError):
    """A lock did not verify: stale, tampered, failed to install or to import."""

    exit_code = 4


class ToolError(EnvgenError):
    """An external tool (git, uv, pip, a build) failed."""

    exit_code = 5


class Problem:
    """One problem found in an input file: where (file, line, key path) and what."""

    __slots__ = ("file", "line", "key", "message")

    def __init__(self, file: str, key: str, message: str, line: int | None = None) -> None:
        self.file, self.key, self.message, self.line = file, key, message, line

    def __str__(self) -> str:
        return placed(self.file, self.line, self.key, self.message)

    def __repr__(self) -> str:
        return f"Problem({self})"

    def parts(self) -> dict[str, str | int]:
        """Its parts as `--json` gives them (those known): file, line, key, reason."""
        given = {"file": self.file, "line": self.line, "key": self.key or None}
        return {name: value for name, value in given.items() if value} | {"reason": self.message}

    def error(self, hint: str | None = None) -> InputError:
        """This problem alone as the error that stops a command, its parts carried."""
        return InputError(
            file=self.file, line=self.line, key=self.key or None, reason=self.message, hint=hint
        )


class MatrixError(InputError):
    """Every problem found in a matrix or channel file, reported at once."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        body = "\n".join(f"  {p}" for p in problems)
        super().__init__(
            f"invalid input ({count}):\n{body}", hint="fix the keys named above and run again"
        )
