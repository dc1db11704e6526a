"""locks/pylock.<env>-<platform>.toml is written without tomlkit, byte for byte as tomlkit wrote the same document
(the layout every existing lock has, which `envgen check` compares derived files against)."""

from __future__ import annotations

import string
import tomllib
from collections.abc import Set as AbstractSet
from typing import Any

import tomlkit
from envgen.lockio.exports.common import bare_url, entry_index, header
from envgen.lockio.exports.names import pylock_name
from envgen.lockio.exports.pylock import (
    LOCK_VERSION,
    _filename,
    environment_marker,
    expected_pylock,
    parse_pylock,
    render_pylock,
)
from envgen.model import Index, Lock, PipEntry
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.utils import canonicalize_name

from tests.support.builders import conda_entry, make_lock, sample_lock

# --- the document as tomlkit built it (the renderer before it wrote text itself) --------------------------------


def _inline(items: dict[str, Any]) -> tomlkit.items.InlineTable:
    table = tomlkit.inline_table()
    table.update(items)
    return table


def _array(items: list[tomlkit.items.InlineTable]) -> tomlkit.items.Array:
    array = tomlkit.array()
    array.extend(items)
    return array


def _package(lock: Lock, entry: PipEntry, names: AbstractSet[str]) -> tomlkit.items.Table:
    package = tomlkit.table()
    package.update({"name": canonicalize_name(entry.name), "version": entry.version})
    depends = sorted({canonicalize_name(d) for d, _ in entry.depends} & names)
    if depends:
        package["dependencies"] = _array([_inline({"name": name}) for name in depends])
    index = entry_index(lock, entry)
    hashes = _inline({"sha256": entry.sha256})
    if index is None:
        package["archive"] = _inline({"url": bare_url(entry.url), "hashes": hashes})
        return package
    package["index"] = bare_url(index.url)
    file = _inline({"name": _filename(entry.url), "url": bare_url(entry.url), "hashes": hashes})
    if entry.sdist:
        package["sdist"] = file
    else:
        package["wheels"] = _array([file])
    return package


def tomlkit_pylock(lock: Lock, platform: str) -> str:
    doc = tomlkit.document()
    title = f"The pip packages of env {lock.env} for {platform} as a PEP 751 lock."
    for line in header(lock, title):
        doc.add(tomlkit.comment(line.removeprefix("# ")))
    doc.add(tomlkit.comment(f"Install: uv pip install -r locks/{pylock_name(lock.env, platform)}"))
    if lock.sources:
        doc.add(tomlkit.comment(f'then the git sources: sh locks/{lock.env}.install.sh --prefix "$VIRTUAL_ENV"'))
    doc["lock-version"] = LOCK_VERSION
    doc["environments"] = [environment_marker(platform)]
    python = lock.python_for(platform)
    if python:
        doc["requires-python"] = f"=={'.'.join(python.split('.')[:2])}.*"
    doc["created-by"] = "envgen"
    entries = sorted(lock.pip_for(platform), key=lambda e: canonicalize_name(e.name))
    names = {canonicalize_name(e.name) for e in entries}
    packages = tomlkit.aot()
    for entry in entries:
        packages.append(_package(lock, entry, names))
    doc["packages"] = packages
    doc["tool"] = {"envgen": {"env": lock.env, "platform": platform, "input-hash": lock.input_hash}}
    return tomlkit.dumps(doc)


# --- generated locks ----------------------------------------------------------------------------------------------

PLATFORM = "linux-64"
_NAME = st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=12)
# Any text at all where the lock holds a string: quotes, backslashes, control characters, unicode.
_ANY = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=16)
_URL = st.one_of(_ANY, st.builds(lambda n, f: f"https://u:p@files.example.org/{n}/{f}", _NAME, _ANY))


@st.composite
def pip_entries(draw: st.DrawFn, indexes: tuple[str, ...]) -> PipEntry:
    return PipEntry(
        name=draw(_NAME),
        version=draw(_ANY),
        platform=draw(st.sampled_from([PLATFORM, "linux-aarch64"])),
        url=draw(_URL),
        sha256=draw(_ANY),
        depends=tuple((d, ">=1") for d in draw(st.lists(_NAME, max_size=3))),
        index=draw(st.sampled_from((None, *indexes))),
        sdist=draw(st.booleans()),
    )


@st.composite
def locks(draw: st.DrawFn) -> Lock:
    indexes = tuple(Index(name, draw(_URL)) for name in draw(st.lists(_NAME, max_size=3, unique=True)))
    python = draw(st.one_of(st.none(), st.sampled_from(["3.11.9", "3.12.1"])))
    return make_lock(
        draw(_NAME),
        platforms=(PLATFORM, "linux-aarch64"),
        input_hash=draw(st.text("0123456789abcdef", min_size=64, max_size=64)),
        pip=tuple(draw(st.lists(pip_entries(tuple(i.name for i in indexes)), max_size=8))),
        conda=(conda_entry("python", python, PLATFORM),) if python else (),
        indexes=indexes,
    )


@settings(max_examples=300, deadline=None)
@given(lock=locks())
def test_the_pylock_text_is_tomlkits_byte_for_byte(lock: Lock) -> None:
    text = render_pylock(lock, PLATFORM)
    assert text == tomlkit_pylock(lock, PLATFORM)
    tomllib.loads(text)  # and TOML (tomlkit's output always was)


def test_the_sample_lock_reads_back() -> None:
    lock = sample_lock()
    for platform in lock.platforms:
        text = render_pylock(lock, platform)
        assert text == tomlkit_pylock(lock, platform)
        assert parse_pylock(text, "p") == expected_pylock(lock, platform)
