"""Read a TOML input file and collect its problems, each with line and dotted key path."""

from __future__ import annotations

import bisect
import re
import tomllib
from collections.abc import Collection, Iterable
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from envgen.errors import Problem
from envgen.inputs.files import bounded_nesting, read_input_text
from envgen.inputs.untrusted import control_problem, variable_problem

KeyPath = tuple[str | int, ...]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SYNTAX_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")
_SYNTAX_END = re.compile(r"\(at end of document\)")
_BASIC_STRING = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)
_LITERAL_STRING = re.compile(r"'([^']*)'")
# Keys holding prose, which may span lines; every other string must be free of control characters.
_PROSE_KEYS = frozenset({"description", "note", "reason"})


def string_problem(path: KeyPath, value: str) -> str | None:
    """Why the string at `path` is unusable (a control character outside prose), or None."""
    prose = str(path[-1]) in _PROSE_KEYS or (len(path) > 1 and path[-2] == "notes")
    return control_problem(value, prose=prose)


def format_key(path: KeyPath) -> str:
    """`("sources", "vllm", "ref")` -> `sources.vllm.ref`; list positions as `[i]`; odd names
    quoted."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = part if _BARE_KEY.fullmatch(part) else f'"{part}"'
            out += f".{name}" if out else name
    return out


class Problems:
    """The problems found in one file; keys are located on the lines the file defines them.

    `files` names, for keys written in another file (a matrix merged with the one it extends), that
    file; every other key is located in `file`.
    """

    def __init__(
        self,
        file: str,
        lines: dict[KeyPath, int] | None = None,
        files: dict[KeyPath, str] | None = None,
    ) -> None:
        self.file = file
        self.lines = lines or {}
        self.files = files or {}
        self.items: list[Problem] = []

    def where(self, path: KeyPath) -> tuple[str, int | None]:
        """The file and line defining `path`, or the nearest enclosing key or table that is written
        down."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return self.files.get(path[:end], self.file), line
        return self.file, None

    def line_of(self, path: KeyPath) -> int | None:
        return self.where(path)[1]

    def add(self, path: KeyPath, message: str) -> None:
        file, line = self.where(path)
        self.items.append(Problem(file, format_key(path), message, line))


def read_toml(path: Path) -> tuple[dict[str, Any], Problems]:
    """Parse `path`; on a syntax error the data is empty and the one problem carries the parser's
    line."""
    text = read_input_text(path, hint="check the file exists and is UTF-8 text")
    problems = Problems(str(path))
    try:
        with bounded_nesting(str(path)):
            data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problems.items.append(syntax_problem(str(path), text, exc))
        return {}, problems
    with bounded_nesting(str(path)):
        problems.lines = key_lines(text)
    return data, problems


def syntax_problem(file: str, text: str, exc: tomllib.TOMLDecodeError) -> Problem:
    """tomllib's error on `text` (the file `file`) as a problem on the line it names."""
    said = str(exc)
    match = _SYNTAX_LINE.search(said)
    at_end = text.count("\n") + 1 if _SYNTAX_END.search(said) else None
    line = int(match.group(1)) if match else at_end
    said = _SYNTAX_END.sub("(at the end of the file)", said)
    message = _SYNTAX_LINE.sub(r"(column \2)", said).strip()
    return Problem(file, "", f"TOML syntax error: {message}", line)


def key_lines(text: str) -> dict[KeyPath, int]:
    """The line (1-based) on which each key, table header and array element of valid TOML `text`
    starts."""
    return _LineScanner(text).scan()


class _LineScanner:
    """A small lexer over TOML that tracks key paths, enough to point at lines (the text already
    parsed)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.lines: dict[KeyPath, int] = {}
        self.array_tables: dict[KeyPath, int] = {}
        # Line ends, for a binary search: counting from the start at each key was quadratic in the
        # text.
        self.newlines = [match.start() for match in re.finditer("\n", text)]

    def line(self) -> int:
        return bisect.bisect_left(self.newlines, self.pos) + 1

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos : self.pos + n]

    def skip_space(self, newlines: bool) -> None:
        chars = " \t\r\n" if newlines else " \t\r"
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in chars:
                self.pos += 1
            elif char == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            else:
                return

    def scan(self) -> dict[KeyPath, int]:
        prefix: KeyPath = ()
        while True:
            self.skip_space(newlines=True)
            if self.pos >= len(self.text):
                return self.lines
            line = self.line()
            if self.peek(2) == "[[":
                self.pos += 2
                name = self.dotted_key("]")
                self.pos += 2
                table = (*self.resolved(name[:-1]), name[-1])
                index = self.array_tables.get(table, 0)
                self.array_tables[table] = index + 1
                prefix = (*table, index)
                for end in range(1, len(table) + 1):
                    self.lines.setdefault(table[:end], line)
                self.lines[prefix] = line
            elif self.peek() == "[":
                self.pos += 1
                prefix = self.resolved(self.dotted_key("]"))
                self.pos += 1
                for end in range(1, len(prefix) + 1):
                    self.lines.setdefault(prefix[:end], line)
            else:
                self.key_value(prefix)

    def resolved(self, name: tuple[str, ...]) -> KeyPath:
        """The key path a table header names: through an array of tables, its last element so far
        (as `[sources.env]` after a `[[sources]]` is that source's)."""
        path: KeyPath = ()
        for part in name:
            path = (*path, part)
            if path in self.array_tables:
                path = (*path, self.array_tables[path] - 1)
        return path

    def key_value(self, prefix: KeyPath) -> None:
        line = self.line()
        key = (*prefix, *self.dotted_key("="))
        for end in range(len(prefix) + 1, len(key) + 1):
            self.lines.setdefault(key[:end], line)
        self.pos += 1
        self.value(key)

    def dotted_key(self, stop: str) -> tuple[str, ...]:
        parts: list[str] = []
        while True:
            self.skip_space(newlines=False)
            char = self.peek()
            if char in "\"'":
                parts.append(self.string())
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                parts.append(match.group(0) if match else "")
                self.pos = match.end() if match else self.pos + 1
            self.skip_space(newlines=False)
            if self.peek() == ".":
                self.pos += 1
                continue
            if self.peek() == stop:
                return tuple(parts)
            # Only valid TOML reaches here; anything else would be skipped over.
            self.pos += 1

    def string(self) -> str:
        quote = self.peek()
        if self.peek(3) == quote * 3:
            end = self.text.find(quote * 3, self.pos + 3)
            while self.text[end + 3 : end + 4] == quote:
                end += 1
            value = self.text[self.pos + 3 : end]
            self.pos = end + 3
            return value
        found = (_BASIC_STRING if quote == '"' else _LITERAL_STRING).match(self.text, self.pos)
        assert found is not None  # the text parsed as TOML
        self.pos = found.end()
        return found.group(1)

    def value(self, path: KeyPath) -> None:
        self.skip_space(newlines=False)
        char = self.peek()
        if char in "\"'":
            self.string()
        elif char == "[":
            self.array(path)
        elif char == "{":
            self.inline_table(path)
        else:
            while self.pos < len(self.text) and self.text[self.pos] not in ",]}\n#":
                self.pos += 1

    def array(self, path: KeyPath) -> None:
        self.pos += 1
        index = 0
        while True:
            self.skip_space(newlines=True)
            if self.peek() == "]":
                self.pos += 1
                return
            self.lines.setdefault((*path, index), self.line())
            self.value((*path, index))
            self.skip_space(newlines=True)
            if self.peek() == ",":
                self.pos += 1
                index += 1

    def inline_table(self, path: KeyPath) -> None:
        self.pos += 1
        while True:
            self.skip_space(newlines=False)
            if self.peek() == "}":
                self.pos += 1
                return
            if self.peek() == ",":
                self.pos += 1
                continue
            self.key_value(path)


# --- typed access: each helper records a problem and returns None (or the default) on a wrong value
# ----------


def type_name(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, datetime | date | time):
        return "a date/time"
    return type(value).__name__


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the closest choice, or nothing."""
    import difflib  # imported here: only a misspelt name needs it

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def check_keys(
    problems: Problems,
    path: KeyPath,
    table: dict[str, Any],
    allowed: Collection[str],
    required: Collection[str] = (),
) -> None:
    """Report keys of `table` not in `allowed` (with a did-you-mean) and `required` keys it
    lacks."""
    for key in table:
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            problems.add(
                (*path, key), f"unknown key{did_you_mean(key, allowed)} (known keys: {known})"
            )
    for key in required:
        if key not in table:
            problems.add((*path, key), "missing required key")


def as_table(problems: Problems, path: KeyPath, value: object) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    problems.add(path, f"expected a table, got {type_name(value)}")
    return None


def get_table(problems: Problems, table: dict[str, Any], path: KeyPath) -> dict[str, Any]:
    """The sub-table at the last key of `path` ({} when absent or wrong)."""
    value = table.get(str(path[-1]))
    if value is None:
        return {}
    return as_table(problems, path, value) or {}


def get_str(
    problems: Problems,
    table: dict[str, Any],
    path: KeyPath,
    default: str | None = None,
    empty: bool = False,
) -> str | None:
    value = table.get(str(path[-1]))
    if value is None:
        return default
    if not isinstance(value, str):
        problems.add(path, f"expected a string, got {type_name(value)}")
        return None
    if not empty and not value.strip():
        problems.add(path, "must not be empty")
        return None
    problem = string_problem(path, value)
    if problem:
        problems.add(path, problem)
        return None
    return value


def get_bool(problems: Problems, table: dict[str, Any], path: KeyPath, default: bool) -> bool:
    value = table.get(str(path[-1]))
    if value is None:
        return default
    if not isinstance(value, bool):
        problems.add(path, f"expected true or false, got {type_name(value)}")
        return default
    return value


def get_str_list(
    problems: Problems, table: dict[str, Any], path: KeyPath
) -> list[tuple[KeyPath, str]]:
    """The strings of an array with the key path of each; wrong elements are reported and left
    out."""
    value = table.get(str(path[-1]))
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(path, f"expected an array of strings, got {type_name(value)}")
        return []
    out: list[tuple[KeyPath, str]] = []
    for index, item in enumerate(value):
        if isinstance(item, str) and item.strip():
            if problem := string_problem((*path, index), item):
                problems.add((*path, index), problem)
            else:
                out.append(((*path, index), item))
        else:
            what = "an empty string" if isinstance(item, str) else type_name(item)
            problems.add((*path, index), f"expected a non-empty string, got {what}")
    return out


def get_env(
    problems: Problems, table: dict[str, Any], path: KeyPath
) -> tuple[tuple[str, str], ...]:
    """A table of environment variables (NAME -> string value), sorted by name."""
    value = table.get(str(path[-1]))
    if value is None:
        return ()
    env = as_table(problems, path, value)
    if env is None:
        return ()
    out: list[tuple[str, str]] = []
    for name, item in env.items():
        if variable_problem(name):
            problems.add(
                (*path, name), "not a valid environment variable name (letters, digits, _)"
            )
        elif not isinstance(item, str):
            problems.add((*path, name), f"expected a string value, got {type_name(item)}")
        elif problem := string_problem((*path, name), item):
            problems.add((*path, name), problem)
        else:
            out.append((name, item))
    return tuple(sorted(out))
