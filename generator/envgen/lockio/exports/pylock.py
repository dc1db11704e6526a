"""Lock → locks/pylock.<env>-<platform>.toml, a PEP 751 lock of one platform's pip artifacts, and back (pure)."""

from __future__ import annotations

import tomllib
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from posixpath import basename
from typing import Any
from urllib.parse import unquote, urlsplit

import tomlkit
from packaging.utils import canonicalize_name

from envgen.errors import InputError
from envgen.inputs.files import bounded_nesting
from envgen.lockio.exports.common import bare_url, entry_index, header
from envgen.lockio.exports.names import pylock_name
from envgen.model import Lock, PipEntry
from envgen.platforms import PLATFORMS

LOCK_VERSION = "1.0"


def environment_marker(platform: str) -> str:
    """The PEP 508 environment of a conda platform (the pip stage resolved for exactly this)."""
    return f"sys_platform == 'linux' and platform_machine == '{PLATFORMS[platform]}'"


def _filename(url: str) -> str:
    return unquote(basename(urlsplit(url).path))


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


def render_pylock(lock: Lock, platform: str) -> str:
    """One platform's pip artifacts as PEP 751 (lock-version 1.0): per package its version, the index it came
    from, and the one file the lock chose with its URL and sha256. The git sources are the recipe's job."""
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


# --- reading one back -------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class LockedFile:
    """One file a pylock installs: package name, version, URL and sha256."""

    name: str
    version: str
    url: str
    sha256: str


def _files(package: dict[str, Any]) -> list[dict[str, Any]]:
    files = list(package.get("wheels", []))
    files += [package[k] for k in ("sdist", "archive") if k in package]
    return files


def parse_pylock(text: str, where: str) -> tuple[LockedFile, ...]:
    """The files a pylock names, sorted; InputError when it is not TOML or not a lock-version 1.0 file."""
    try:
        with bounded_nesting(where):
            data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML: {exc}", hint="re-run `envgen lock`") from exc
    if data.get("lock-version") != LOCK_VERSION:
        raise InputError(f"{where}: lock-version: expected {LOCK_VERSION!r}", hint="re-run `envgen lock`")
    files: list[LockedFile] = []
    for i, package in enumerate(data.get("packages", [])):
        try:
            for file in _files(package):
                sha256 = file["hashes"]["sha256"]
                files.append(LockedFile(canonicalize_name(package["name"]), package["version"], file["url"], sha256))
        except (KeyError, TypeError) as exc:
            raise InputError(f"{where}: packages[{i}]: missing {exc}", hint="re-run `envgen lock`") from exc
    return tuple(sorted(files))


def expected_pylock(lock: Lock, platform: str) -> tuple[LockedFile, ...]:
    """What the pylock of `platform` must name: the yml's artifacts and hashes, nothing else."""
    return tuple(
        sorted(
            LockedFile(canonicalize_name(e.name), e.version, bare_url(e.url), e.sha256) for e in lock.pip_for(platform)
        )
    )
