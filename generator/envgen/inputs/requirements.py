"""Parse pip requirement files and PEP 621 dependencies into located requirement lines (pure)."""

from __future__ import annotations

import posixpath
import re
import shlex
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508

from envgen.errors import InputError, ResolutionError, placed
from envgen.inputs.files import bounded_nesting
from envgen.names import vcs_of

# Options that only change how pip finds or builds packages; indexes come from the matrix and
# channels/.
INDEX_OPTIONS = (
    "-i",
    "--index-url",
    "--extra-index-url",
    "--find-links",
    "-f",
    "--trusted-host",
    "--no-index",
)
GLOBAL_OPTIONS = (
    "--pre",
    "--prefer-binary",
    "--require-hashes",
    "--no-binary",
    "--only-binary",
    "--use-feature",
    "--config-settings",
)
# Options allowed after a requirement on the same line; they do not change what is required.
_PER_REQUIREMENT = re.compile(r"\s--(hash|config-settings|global-option|install-option)(=|\s+)\S+")
_COMMENT = re.compile(r"(^|\s+)#.*$")

Reader = Callable[[str], bytes | None]


@dataclass(frozen=True)
class Line:
    """One requirement as written, with the file and line it starts on; `constraint` for a `-c`
    file.

    `key` says where in the file when there is no line: a declared dependency read through the build
    backend (`setup.py` `install_requires`) has line 0.
    """

    text: str
    file: str
    line: int
    constraint: bool = False
    editable: bool = False
    key: str | None = None

    @property
    def requirement(self) -> Pep508:
        return Pep508(self.text)


@dataclass(frozen=True)
class Ignored:
    """An option line skipped on purpose (an index or a pip switch), kept to be reported."""

    option: str
    file: str
    line: int


@dataclass(frozen=True)
class Parsed:
    """Everything read from a set of files: requirements, skipped options, and each file's bytes in
    order."""

    lines: tuple[Line, ...]
    ignored: tuple[Ignored, ...]
    files: tuple[tuple[str, bytes], ...]


def parse_requirement_files(paths: tuple[str, ...], read: Reader, *, context: str) -> Parsed:
    """Read requirement files (paths relative to the tree root) and every `-r`/`-c` file they
    include.

    `read(path)` returns the bytes of a file in the tree or None when it does not exist. Each file
    is read once, in the order first met. `context` (e.g. "source verl at commit abc…") prefixes
    every message.
    """
    state = _State(read=read, context=context)
    for path in paths:
        state.parse(
            _normalise(path, context=context, file=path), constraint=False, included_from=None
        )
    return Parsed(tuple(state.lines), tuple(state.ignored), tuple(state.files))


def project_table(text: str, path: str, *, context: str) -> dict[str, Any] | None:
    """The `[project]` table of a pyproject.toml (`path`, of `context`); None when it has none.
    InputError when the file is not TOML."""
    try:
        with bounded_nesting(f"{context}: {path}"):
            data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        reason = f"is not valid TOML: {exc}"
        raise InputError(f"{context}: {path} {reason}", file=path, reason=reason) from exc
    project = data.get("project")
    return project if isinstance(project, dict) else None


def parse_pyproject(text: str, path: str, *, context: str) -> tuple[Line, ...]:
    """The PEP 621 `[project] dependencies` of a pyproject.toml, each with the line it is written
    on."""
    project = project_table(text, path, context=context)
    if project is None:
        reason = "has no [project] table, so it declares no PEP 621 dependencies"
        raise InputError(
            f"{context}: {path} {reason}",
            hint='list a requirements file instead of "pyproject" in the source\'s `requirements`',
            file=path,
            reason=reason,
        )
    if "dependencies" in project.get("dynamic", []):
        reason = "declares `dependencies` as dynamic; they are only known by running its build"
        raise InputError(
            f"{context}: {path} {reason}",
            file=path,
            reason=reason,
            hint='name the requirements file the build reads instead of "pyproject" in the '
            "source's `requirements`",
        )
    deps = project.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        reason = "[project] dependencies is not a list of strings"
        raise InputError(f"{context}: {path}: {reason}", file=path, reason=reason)
    source_lines = text.splitlines()
    lines = []
    for dep in deps:
        _validate(dep, context=context, file=path)
        lines.append(Line(text=_canonical(dep), file=path, line=_line_of(dep, source_lines)))
    return tuple(lines)


def _line_of(dep: str, source_lines: list[str]) -> int:
    """The first line after `dependencies` that quotes `dep` (tomllib keeps no positions)."""
    start = next(
        (i for i, s in enumerate(source_lines) if s.lstrip().startswith("dependencies")), 0
    )
    for quoted in (f'"{dep}"', f"'{dep}'"):
        for i in range(start, len(source_lines)):
            if quoted in source_lines[i]:
                return i + 1
    return start + 1


@dataclass
class _State:
    read: Reader
    context: str
    lines: list[Line] = field(default_factory=list)
    ignored: list[Ignored] = field(default_factory=list)
    files: list[tuple[str, bytes]] = field(default_factory=list)

    def parse(self, path: str, *, constraint: bool, included_from: str | None) -> None:
        if any(seen == path for seen, _ in self.files):
            return
        data = self.read(path)
        if data is None:
            where = f" (included from {included_from})" if included_from else ""
            raise ResolutionError(
                f"{self.context}: requirement file {path}{where} does not exist at that commit",
                hint="fix the path in the matrix's `requirements`, or pin a ref that has the file",
                file=path,
                reason="does not exist at that commit",
            )
        self.files.append((path, data))
        text = data.decode("utf-8", errors="replace")
        for number, logical in _logical_lines(text):
            where = f"{path}:{number}"
            if logical.startswith("-"):
                self._option(logical, path=path, number=number, constraint=constraint)
                continue
            req = _PER_REQUIREMENT.sub("", f" {logical}").strip()
            _validate(req, context=self.context, file=path, line=number)
            self.lines.append(Line(_canonical(req), path, number, constraint=constraint))

    def _option(self, logical: str, *, path: str, number: int, constraint: bool) -> None:
        where = f"{path}:{number}"
        option, _, value = logical.partition("=") if logical.startswith("--") else (logical, "", "")
        if not value:
            option, _, value = logical.partition(" ")
            if (
                option.startswith("-")
                and not option.startswith("--")
                and len(option) > 2
                and not value
            ):
                option, value = option[:2], option[2:]  # `-rfile.txt`
        value = value.strip()
        if option in ("-r", "--requirement", "-c", "--constraint"):
            if not value:
                reason = f"`{option}` names no file"
                raise InputError(
                    f"{self.context}: {where}: {reason}", file=path, line=number, reason=reason
                )
            included = _normalise(
                posixpath.join(posixpath.dirname(path), value),
                context=self.context,
                file=path,
                line=number,
            )
            self.parse(
                included,
                constraint=constraint or option in ("-c", "--constraint"),
                included_from=where,
            )
        elif option in ("-e", "--editable"):
            target = shlex.split(value)[0] if value else ""
            req = _editable_requirement(target)
            if req is None:
                reason = f"editable requirement `{target}` is not a git URL with #egg=<name>"
                raise InputError(
                    f"{self.context}: {where}: {reason}",
                    hint="declare local projects as sources in the matrix instead",
                    file=path,
                    line=number,
                    reason=reason,
                )
            self.lines.append(Line(req, path, number, constraint=constraint, editable=True))
        elif option in INDEX_OPTIONS or option in GLOBAL_OPTIONS:
            self.ignored.append(Ignored(option, path, number))
        else:
            reason = f"unknown requirement-file option `{option}`"
            raise InputError(
                f"{self.context}: {where}: {reason}", file=path, line=number, reason=reason
            )


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Non-empty lines without comments, continuations joined, each with its first physical line
    number."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        line = _COMMENT.sub("", raw)
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        logical = " ".join(part.strip() for part in pending).strip()
        pending = []
        if logical:
            out.append((start, logical))
    if pending and (logical := " ".join(p.strip() for p in pending).strip()):
        out.append((start, logical))
    return out


def _editable_requirement(target: str) -> str | None:
    """`-e git+URL#egg=name` as the PEP 508 line `name @ git+URL`; None for anything else."""
    if vcs_of(target) != "git":
        return None
    url, _, fragment = target.partition("#")
    params = dict(p.partition("=")[::2] for p in fragment.split("&") if p)
    name = params.get("egg")
    return f"{name} @ {url}" if name else None


def _normalise(path: str, *, context: str, file: str, line: int | None = None) -> str:
    """`path` normalised, refused (naming `file`, at `line`, that names it) outside the tree."""
    normal = posixpath.normpath(path)
    if normal.startswith("../") or normal == ".." or posixpath.isabs(normal):
        reason = f"requirement file {path} is outside the source tree"
        where = placed(file, line, None, reason)
        raise InputError(f"{context}: {where}", file=file, line=line, reason=reason)
    return normal


def _validate(text: str, *, context: str, file: str, line: int | None = None) -> None:
    try:
        Pep508(text)
    except InvalidRequirement as exc:
        reason = f"`{text}` is not a valid requirement: {exc}"
        raise InputError(
            f"{context}: {placed(file, line, None, reason)}",
            hint="pin a ref whose requirement files pip can read, or add an override in the matrix",
            file=file,
            line=line,
            reason=reason,
        ) from exc


def _canonical(text: str) -> str:
    """One spelling per requirement, so the same file always gives the same lock."""
    return str(Pep508(text))
