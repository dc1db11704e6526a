"""Hypothesis strategies that turn a valid input file into a hostile one.

Each strategy draws a `Mutation`: its kind (the figure a fuzz report counts) and a function of the
original bytes. Kinds: `truncate`, `bytes` (random bytes replace, or go into, a span), `unicode`
(any text, controls and all, into a string value or anywhere), `encoding` (the file in UTF-16 or
behind a BOM), `nesting` (arrays, tables or flow mappings thousands deep), `huge` (a string value of
up to 4 MiB, a file of many lines or keys), `structure` (a parsed document with a key dropped, a
value of another type, an unknown key, a key renamed) and `payload` (a string that runs `touch
<marker>` if a shell or git ever takes it as code or an option, in one string value or in all of
them, replacing or appended). Payloads name the marker as `@MARKER@`, which `with_marker` replaces
by the case's path.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tomli_w
import yaml
from hypothesis import strategies as st

from tests.support import budget

PLACEHOLDER = "@MARKER@"
PAYLOADS = [
    "$(touch @MARKER@)",
    "`touch @MARKER@`",
    ";touch @MARKER@",
    "; touch @MARKER@ #",
    "&& touch @MARKER@",
    "| touch @MARKER@",
    "\ntouch @MARKER@\n",
    "'; touch @MARKER@; '",
    '"; touch @MARKER@; "',
    "$(touch${IFS}@MARKER@)",
    "--upload-pack=touch @MARKER@",
    "--upload-pack=touch${IFS}@MARKER@",
    "-c core.sshCommand=touch @MARKER@",
    "--config=core.fsmonitor=touch @MARKER@",
    "ext::sh -c touch% @MARKER@",
    "https://h.example/x.git;touch @MARKER@",
    "x\nEOF\ntouch @MARKER@\n",
    "}; touch @MARKER@; {",
    "-oProxyCommand=touch @MARKER@",
    "../../../../@MARKER@",
]
_DEPTHS = st.sampled_from([64, 1_000, 100_000])
# every code point but surrogates: controls, NUL, RTL marks, line separators
_ANY_TEXT = st.text(max_size=40)
# Up to 256 KiB in `make test`; a long run (ENVGEN_FUZZ_SCALE > 1) also tries 1 and 4 MiB.
_HUGE = st.sampled_from(
    [4_096, 65_536, 256 << 10] + ([1 << 20, 4 << 20] if budget.LONG_RUN else [])
)
_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.booleans(),
    st.just([]),
    st.just({}),
    st.lists(st.text(max_size=8), max_size=3),
    st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=2),
)


@dataclass(frozen=True)
class Mutation:
    kind: str
    apply: Callable[[bytes], bytes]
    note: str = ""


def with_marker(data: bytes, marker: str) -> bytes:
    return data.replace(PLACEHOLDER.encode(), marker.encode())


# --- documents: TOML or YAML parsed, changed, written back
# ---------------------------------------------------


@dataclass(frozen=True)
class Format:
    name: str
    load: Callable[[str], Any]
    dump: Callable[[Any], str]
    nest: Callable[[int], str]  # a value nested `depth` deep


TOML = Format(
    "toml",
    tomllib.loads,
    tomli_w.dumps,
    lambda depth: "nested = " + "[" * depth + "1" + "]" * depth + "\n",
)
YAML = Format(
    "yaml",
    yaml.safe_load,
    lambda doc: yaml.safe_dump(doc, sort_keys=False, allow_unicode=True),
    lambda depth: "nested: " + "[" * depth + "1" + "]" * depth + "\n",
)
SHELL = Format("shell", lambda text: None, lambda doc: "", lambda depth: "x=" + "$(" * depth + "\n")

Path_ = tuple[Any, ...]


def leaves(doc: Any, path: Path_ = ()) -> list[Path_]:
    """The path of every string value (and every table key, as (..., key, KEY)) in a parsed
    document."""
    found: list[Path_] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += [(*path, key, KEY)] if isinstance(key, str) else []
            found += leaves(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found += leaves(value, (*path, i))
    elif isinstance(doc, str):
        found.append(path)
    return found


KEY = object()  # a path ending in KEY names the key itself


def containers(doc: Any, path: Path_ = ()) -> list[Path_]:
    """The path of every table and array in a parsed document, the document itself first."""
    found = [path] if isinstance(doc, dict | list) else []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    )
    for key, value in items:
        found += containers(value, (*path, key))
    return found


def _at(doc: Any, path: Path_) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def set_leaf(doc: Any, path: Path_, make: Callable[[str], Any]) -> None:
    """Replace the string (or key) at `path` by `make(old)`."""
    if path and path[-1] is KEY:
        parent, key = _at(doc, path[:-2]), path[-2]
        new = make(key)
        if isinstance(new, str) and new not in parent:
            parent[new] = parent.pop(key)
        return
    parent = _at(doc, path[:-1])
    parent[path[-1]] = make(parent[path[-1]])


def _document(fmt: Format, data: bytes, change: Callable[[Any], None]) -> bytes:
    """`data` parsed, changed and written back; unchanged when it does not parse (already mutated
    elsewhere)."""
    try:
        doc = fmt.load(data.decode())
        # paths drawn on the original may be gone from a file an earlier mutation changed
        change(doc)
        return fmt.dump(doc).encode("utf-8", "surrogatepass")
    except Exception:  # not parseable, a path no longer there, a value the writer cannot express
        return data


@st.composite
def payload_mutation(draw: st.DrawFn, fmt: Format, original: bytes) -> Mutation:
    payload = draw(st.sampled_from(PAYLOADS))
    append = draw(st.booleans())
    make = (lambda old: old + payload) if append else (lambda old: payload)
    if fmt is SHELL:
        lines = original.split(b"\n")
        at = draw(st.integers(0, len(lines)))
        return Mutation(
            "payload",
            lambda data: b"\n".join([*lines[:at], payload.encode(), *lines[at:]]),
            payload,
        )
    paths = leaves(fmt.load(original.decode()))
    # Deepest first (reversed document order), so a renamed key never hides the values under it.
    chosen = paths[::-1] if draw(st.booleans()) else [draw(st.sampled_from(paths))]

    def change(doc: Any) -> None:
        for path in chosen:
            set_leaf(doc, path, make)

    where = (
        "every string" if len(chosen) > 1 else "/".join(str(p) for p in chosen[0] if p is not KEY)
    )
    return Mutation("payload", lambda data: _document(fmt, data, change), f"{payload!r} in {where}")


@st.composite
def structure_mutation(draw: st.DrawFn, fmt: Format, original: bytes) -> Mutation:
    doc = fmt.load(original.decode())
    path = draw(st.sampled_from(containers(doc)))
    target = _at(doc, path)
    keys = list(target) if isinstance(target, dict) else list(range(len(target)))
    action = draw(st.sampled_from(["drop", "retype", "add", "rename"] if keys else ["add"]))
    key = draw(st.sampled_from(keys)) if keys else None
    value = draw(_VALUES)
    new_key = draw(st.one_of(st.text(min_size=1, max_size=12), st.sampled_from(PAYLOADS)))

    def change(doc: Any) -> None:
        here = _at(doc, path)
        if action == "drop":
            del here[key]
        elif action == "retype":
            here[key] = value
        elif action == "add" and isinstance(here, dict):
            here[new_key] = value
        elif action == "add":
            here.append(value)
        elif isinstance(here, dict) and new_key not in here:
            here[new_key] = here.pop(key)

    return Mutation(
        "structure", lambda data: _document(fmt, data, change), f"{action} at {path}/{key}"
    )


@st.composite
def unicode_mutation(draw: st.DrawFn, fmt: Format, original: bytes) -> Mutation:
    text = draw(_ANY_TEXT)
    if fmt is not SHELL and draw(st.booleans()):
        path = draw(st.sampled_from(leaves(fmt.load(original.decode()))))
        return Mutation(
            "unicode",
            lambda data: _document(fmt, data, lambda doc: set_leaf(doc, path, lambda _: text)),
        )
    at = draw(st.integers(0, len(original)))
    return Mutation(
        "unicode", lambda data: data[:at] + text.encode("utf-8") + data[at:], repr(text)
    )


@st.composite
def huge_mutation(draw: st.DrawFn, fmt: Format, original: bytes) -> Mutation:
    size = draw(_HUGE)
    if fmt is not SHELL and draw(st.booleans()):
        path = draw(st.sampled_from(leaves(fmt.load(original.decode()))))
        big = draw(st.sampled_from(["x", "é", "a/", "\\", "$"])) * size
        change = lambda doc: set_leaf(doc, path, lambda old: old + big)  # noqa: E731
        return Mutation("huge", lambda data: _document(fmt, data, change), f"{size} at {path}")
    line = draw(st.sampled_from([b"\n", b"#" * 80 + b"\n", b"x = 1\n", b"many"]))
    if line == b"many":  # distinct keys: valid TOML (in a table of its own), a long YAML mapping
        many = b"".join(
            b"k%d = 1\n" % i if fmt is TOML else b"k%d: 1\n" % i for i in range(size // 8)
        )
        return Mutation(
            "huge",
            lambda data: data + (b"\n[many]\n" if fmt is TOML else b"\n") + many,
            "many keys",
        )
    return Mutation(
        "huge", lambda data: data + line * (size // len(line)), f"{size} bytes appended"
    )


@st.composite
def raw_mutation(draw: st.DrawFn, fmt: Format, original: bytes) -> Mutation:
    kind = draw(st.sampled_from(["truncate", "bytes", "nesting", "encoding"]))
    n = len(original)
    if kind == "truncate":
        at = draw(st.integers(0, max(0, n - 1)))
        return Mutation(kind, lambda data: data[:at], f"at {at}")
    if kind == "bytes":
        start = draw(st.integers(0, n))
        end = draw(st.integers(start, min(n, start + 64)))
        noise = draw(st.binary(max_size=64))
        return Mutation(
            kind, lambda data: data[:start] + noise + data[end:], f"{noise!r} at {start}:{end}"
        )
    if kind == "nesting":
        depth = draw(_DEPTHS)
        style = draw(st.sampled_from(["append", "prepend", "replace"]))
        deep = fmt.nest(depth).encode()
        if style == "append":
            return Mutation(kind, lambda data: data + b"\n" + deep, f"{depth} deep, appended")
        if style == "prepend":
            return Mutation(kind, lambda data: deep + data, f"{depth} deep, first")
        return Mutation(kind, lambda data: deep, f"{depth} deep, alone")
    encoding = draw(st.sampled_from(["utf-16", "utf-32", "bom"]))
    if encoding == "bom":
        return Mutation(kind, lambda data: b"\xef\xbb\xbf" + data, encoding)
    return Mutation(kind, lambda data: data.decode("utf-8", "replace").encode(encoding), encoding)


def mutations(fmt: Format, original: bytes) -> st.SearchStrategy[Mutation]:
    """One mutation of `original` (a valid file of format `fmt`), of any kind."""
    return st.one_of(
        raw_mutation(fmt, original),
        unicode_mutation(fmt, original),
        huge_mutation(fmt, original),
        structure_mutation(fmt, original) if fmt is not SHELL else raw_mutation(fmt, original),
        payload_mutation(fmt, original),
    )


def mutated(fmt: Format, original: bytes) -> st.SearchStrategy[tuple[list[Mutation], bytes]]:
    """One to three mutations applied in turn: the mutations and the resulting bytes."""

    @st.composite
    def draw_all(draw: st.DrawFn) -> tuple[list[Mutation], bytes]:
        chosen = draw(st.lists(mutations(fmt, original), min_size=1, max_size=3))
        data = original
        for mutation in chosen:
            data = mutation.apply(data)
        return chosen, data

    return draw_all()
