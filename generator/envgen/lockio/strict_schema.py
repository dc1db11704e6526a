"""A parsed lock document read into its schema's msgspec Structs (lockio/sources_schema.py,
lockio/conda_lock_schema.py): strictly (no key beyond the schema's, no coercion: a TOML integer or
a YAML number is no string), then the string rules the schema's annotations carry (`Rule`) and the
rule over a whole row a Struct may hold (its `problem` method). Every refusal is a `Refusal`: the
key path it is at, in the document's own key names, and what is wrong there.
"""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import msgspec

KeyPath = tuple[str | int, ...]
Kind = Literal["unknown", "missing", "type", "invalid"]
_S = TypeVar("_S", bound=msgspec.Struct)
_Check = Callable[[Any, KeyPath], None]


@dataclass(frozen=True)
class Rule:
    """A string rule (an `inputs/untrusted.py` problem function) as an annotation of a field: its
    problem is the refusal of the string, once msgspec has converted the document."""

    problem: Callable[[str], str | None]


class Refusal(ValueError):
    """What the schema refuses, at `path`: an unknown key or a missing one (the path ends with it),
    a value of another type (`expected` is msgspec's name of the type, `found` the value), or an
    invalid one (a rule's problem, a literal or a length msgspec refused)."""

    def __init__(
        self, path: KeyPath, kind: Kind, message: str, expected: str = "", found: object = None
    ) -> None:
        super().__init__(message)
        self.path, self.kind, self.message = path, kind, message
        self.expected, self.found = expected, found


def converted(document: object, schema: type[_S]) -> _S:
    """`document` as a `schema`, each of its strings past its rules; Refusal names the first key
    at fault (msgspec stops at the first problem: within a table, an unknown key comes before a
    missing one, so a renamed key is named as unknown)."""
    try:
        value = msgspec.convert(document, schema, strict=True)
    except msgspec.ValidationError as exc:
        raise _refusal(str(exc), document) from None
    _walk(value, ())
    return value


# --- msgspec's message, "<what> - at `$.a[0].b`", as a Refusal -----------------------------------

_AT = re.compile(r"(?P<what>.*?)(?: - at (?P<on_key>`key` in )?`(?P<path>\$[^`]*)`)?", re.DOTALL)
_PART = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_TYPE = re.compile(r"Expected `(?P<expected>[^`]+)`, got `(?P<got>[^`]+)`")
_FIELD = re.compile(r"Object (?P<kind>contains unknown|missing required) field `(?P<key>[^`]+)`")
_NAMES: dict[type, str] = {
    str: "str",
    bool: "bool",
    int: "int",
    float: "float",
    list: "array",
    dict: "object",
    type(None): "null",
    datetime: "datetime",
    date: "date",
    time: "time",
}


def _refusal(message: str, document: object) -> Refusal:
    matched = _AT.fullmatch(message)
    assert matched is not None  # every text matches: the location is optional
    what, on_key = matched["what"], matched["on_key"] is not None
    parts = [m[1] if m[1] is not None else m[2] for m in _PART.finditer(matched["path"] or "")]
    typed = _TYPE.fullmatch(what)
    path, value = _resolved(document, parts, typed)
    field = _FIELD.fullmatch(what)
    if field:
        kind: Kind = "unknown" if field["kind"] == "contains unknown" else "missing"
        return Refusal((*path, field["key"]), kind, f"{kind} key" if kind == "unknown" else kind)
    if typed and not on_key:
        expected = typed["expected"].removesuffix(" | null")
        return Refusal(path, "type", what, expected, value)
    return Refusal(path, "invalid", f"a key: {what}" if on_key else what)


def _resolved(
    document: object, parts: list[str], typed: re.Match[str] | None
) -> tuple[KeyPath, object]:
    """msgspec's path parts as a key path, and the value found there. A value of a table is
    `[...]` in msgspec's path: the key is the table's first whose value is of the type msgspec
    got (those before it passed, so were of another)."""
    path: list[str | int] = []
    value = document
    for part in parts:
        if isinstance(value, dict) and part == "...":
            got = typed["got"] if typed else None
            key = next((k for k, v in value.items() if _NAMES.get(type(v)) == got), None)
            if key is None:
                break
            path.append(key)
            value = value[key]
        elif isinstance(value, dict) and part in value:
            path.append(part)
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            path.append(int(part))
            value = value[int(part)]
        else:
            break
    return tuple(path), value


# --- the rules: each Rule of the schema's annotations, each Struct's `problem` -------------------


def _walk(row: msgspec.Struct, path: KeyPath) -> None:
    for name, key, check in _checks(type(row)):
        check(getattr(row, name), (*path, key))
    problem = getattr(row, "problem", None)
    found = problem() if problem is not None else None
    if found:
        raise Refusal(path, "invalid", found)


@functools.cache
def _checks(schema: type[msgspec.Struct]) -> tuple[tuple[str, str, _Check], ...]:
    """(attribute, key, check) of each field of `schema` some rule applies to."""
    checks = ((f.name, f.encode_name, _check(f.type)) for f in msgspec.structs.fields(schema))
    return tuple((name, key, check) for name, key, check in checks if check is not None)


def _check(hint: Any) -> _Check | None:
    """What applies the rules of a field of type `hint` to its value; None where none applies."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        rules = [m.problem for m in hint.__metadata__ if isinstance(m, Rule)]
        return _ruled(rules, _check(args[0]))
    if origin is list:
        return _each(_check(args[0]))
    if origin is dict:
        return _table(_check(args[0]), _check(args[1]))
    if origin in (Union, types.UnionType):
        inner = [c for c in map(_check, (a for a in args if a is not type(None))) if c is not None]
        assert len(inner) <= 1, hint  # the schemas' unions are `X | None`
        return _unless_none(inner[0]) if inner else None
    ruled = isinstance(hint, type) and issubclass(hint, msgspec.Struct)
    return _walk if ruled and (_checks(hint) or hasattr(hint, "problem")) else None


def _ruled(rules: list[Callable[[str], str | None]], then: _Check | None) -> _Check | None:
    if not rules:
        return then

    def check(value: Any, path: KeyPath) -> None:
        for rule in rules:
            found = rule(value)
            if found:
                raise Refusal(path, "invalid", found)
        if then is not None:
            then(value, path)

    return check


def _each(item: _Check | None) -> _Check | None:
    if item is None:
        return None

    def check(values: list[Any], path: KeyPath) -> None:
        for index, value in enumerate(values):
            item(value, (*path, index))

    return check


def _table(key: _Check | None, item: _Check | None) -> _Check | None:
    if key is None and item is None:
        return None

    def check(table: dict[str, Any], path: KeyPath) -> None:
        for name, value in table.items():
            if key is not None:
                key(name, (*path, name))
            if item is not None:
                item(value, (*path, name))

    return check


def _unless_none(inner: _Check) -> _Check:
    def check(value: Any, path: KeyPath) -> None:
        if value is not None:
            inner(value, path)

    return check
