"""locks/pylock.<env>-<platform>.toml is written without tomlkit, byte for byte as tomlkit wrote the same document
(the layout every existing lock has, which `envgen check` compares derived files against)."""

from __future__ import annotations

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
from envgen.model import Lock, PipEntry
from hypothesis import given, settings
from packaging.utils import canonicalize_name

from tests.support.builders import sample_lock
from tests.support.lock_strategies import PLATFORMS, locks

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


PLATFORM = PLATFORMS[0]


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
