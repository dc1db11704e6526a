"""TOML text written directly, in tomlkit's layout: the lock files tomlkit wrote before keep their bytes (tests
render generated locks both ways), many times faster than building tomlkit items, and without importing it (pure).

The layout: a comment, the document's values, then each table as `[name]` and each array of tables as
`[[name]]` per element, each after a blank line; in a table its values come before its tables; in an element of an
array of tables its inline tables come after its other values; a table holding nothing but tables (a super table)
has no header line of its own; arrays and inline tables on one line, `, ` between items."""

from __future__ import annotations

import re
from typing import Any

# What a TOML basic string escapes: control characters, the quote and the backslash (the short forms where TOML
# 1.0 has them, \uXXXX for the others: tomlkit writes ESC so too, as TOML 1.0 has no \e). Every string is a
# basic string: tomlkit never chooses a literal or multi-line one for a value it is given.
_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
_TO_ESCAPE = re.compile(r'[\x00-\x1f\x7f"\\]')
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class Inline(dict[str, Any]):
    """A table written inline (`{a = "b"}`) where a dict would be a table of its own."""


def string(text: str) -> str:
    """`text` as a TOML basic string."""
    return '"' + _TO_ESCAPE.sub(lambda m: _ESCAPES.get(m[0]) or f"\\u{ord(m[0]):04x}", text) + '"'


def key(name: str) -> str:
    """`name` as a TOML key: bare when it can be (ASCII letters, digits, `-`, `_`), else a basic string."""
    return name if _BARE_KEY.fullmatch(name) else string(name)


def value(item: Any) -> str:
    """A string, boolean, integer, array (list or tuple) or inline table (dict) as TOML text on one line."""
    if isinstance(item, str):
        return string(item)
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, dict):
        return "{" + ", ".join(f"{key(k)} = {value(v)}" for k, v in item.items()) + "}"
    if isinstance(item, list | tuple):
        return "[" + ", ".join(value(v) for v in item) + "]"
    raise TypeError(f"no TOML value for {type(item).__name__}")


def _nested(item: Any) -> bool:
    """Whether `item` is written under a header of its own: a table, or a non-empty array of tables."""
    if isinstance(item, dict):
        return not isinstance(item, Inline)
    return isinstance(item, list) and bool(item) and all(isinstance(v, dict) for v in item)


def _body(lines: list[str], path: str, table: dict[str, Any], element: bool) -> None:
    """The lines of `table` (named `path`, '' for the document) after its header: values first, then tables."""
    entries = list(table.items())
    if element:  # tomlkit puts an element's dict-valued keys last (its inline tables among its values)
        entries.sort(key=lambda entry: isinstance(entry[1], dict))
    nested = []
    for name, item in entries:
        if _nested(item):
            nested.append((f"{path}.{key(name)}" if path else key(name), item))
        else:
            lines.append(f"{key(name)} = {value(item)}")
    for name, item in nested:
        if isinstance(item, list):
            for child in item:
                lines += ["", f"[[{name}]]"]
                _body(lines, name, child, element=True)
            continue
        if not (item and all(_nested(v) for v in item.values())):  # else a super table, with no header
            lines += ["", f"[{name}]"]
        _body(lines, name, item, element=False)


def document(comment: str, top: dict[str, Any]) -> str:
    """A TOML document: `# comment`, then `top` (a dict is a table, an Inline an inline table, a non-empty list
    of dicts an array of tables)."""
    lines = [f"# {comment}"]
    _body(lines, "", top, element=False)
    return "\n".join(lines) + "\n"
