"""Lock → locks/pylock.<env>-<platform>.toml, a PEP 751 lock of one platform's pip artifacts, and
back (pure)."""

from __future__ import annotations

import tomllib
from collections.abc import Set as AbstractSet
from posixpath import basename
from typing import Any
from urllib.parse import unquote, urlsplit

import msgspec
import tomli_w

from envgen.digests import short_digest
from envgen.errors import InputError
from envgen.inputs.files import bounded_nesting
from envgen.lockio.exports.common import bare_url, entry_index, header
from envgen.lockio.exports.names import pylock_name
from envgen.model import Lock, PipEntry
from envgen.names import package_key
from envgen.platforms import PLATFORMS

LOCK_VERSION = "1.0"


def environment_marker(platform: str) -> str:
    """The PEP 508 environment of a conda platform (the pip stage resolved for exactly this)."""
    return f"sys_platform == 'linux' and platform_machine == '{PLATFORMS[platform]}'"


def _filename(url: str) -> str:
    return unquote(basename(urlsplit(url).path))


def _package(lock: Lock, entry: PipEntry, names: AbstractSet[str]) -> dict[str, Any]:
    package: dict[str, Any] = {"name": package_key(entry.name), "version": entry.version}
    depends = sorted({package_key(d) for d, _ in entry.depends} & names)
    if depends:
        package["dependencies"] = [{"name": name} for name in depends]
    index = entry_index(lock, entry)
    hashes = {"sha256": entry.sha256}
    if index is None:
        return package | {"archive": {"url": bare_url(entry.url), "hashes": hashes}}
    package["index"] = bare_url(index.url)
    file = {"name": _filename(entry.url), "url": bare_url(entry.url), "hashes": hashes}
    return package | ({"sdist": file} if entry.sdist else {"wheels": [file]})


def render_pylock(lock: Lock, platform: str) -> str:
    """One platform's pip artifacts as PEP 751 (lock-version 1.0): per package its version, the
    index it came from, and the one file the lock chose with its URL and sha256. The git sources are
    the recipe's job."""
    lines = header(lock, f"The pip packages of env {lock.env} for {platform} as a PEP 751 lock.")
    lines.append(f"# Install: uv pip install -r locks/{pylock_name(lock.env, platform)}")
    if lock.sources:
        recipe = f"locks/{lock.env}.install.sh"
        lines.append(f'# then the git sources: sh {recipe} --prefix "$VIRTUAL_ENV"')
    document: dict[str, Any] = {
        "lock-version": LOCK_VERSION,
        "environments": [environment_marker(platform)],
    }
    python = lock.python_for(platform)
    if python:
        document["requires-python"] = f"=={'.'.join(python.split('.')[:2])}.*"
    document["created-by"] = "envgen"
    entries = sorted(lock.pip_for(platform), key=lambda e: package_key(e.name))
    names = {package_key(e.name) for e in entries}
    document["packages"] = [_package(lock, entry, names) for entry in entries]
    tool: dict[str, Any] = {"env": lock.env, "platform": platform, "input-hash": lock.input_hash}
    tool |= _steps(lock, platform)
    document["tool"] = {"envgen": tool}
    return "\n".join(lines) + "\n" + tomli_w.dumps(document)


def _steps(lock: Lock, platform: str) -> dict[str, Any]:
    """What PEP 751 has no place for, under [tool.envgen]: the wheels the recipe takes from release
    archives (a package's `archive` is one project's source, not a zip of wheels), and the packages
    the lock leaves out on purpose."""
    steps: dict[str, Any] = {}
    archives = lock.archives_for(platform)
    if archives:
        steps["archives"] = [
            {
                "name": a.name,
                "url": a.url,
                "hashes": {"sha256": a.sha256},
                "wheels": [
                    {
                        "name": m.name,
                        "version": m.version,
                        "path": m.path,
                        "hashes": {"sha256": m.sha256},
                    }
                    for m in a.members
                ],
            }
            for a in archives
        ]
    left = [{"name": e.name, "reason": e.reason} for e in lock.exclusions if e.applies(platform)]
    if left:
        steps["excluded"] = left
    return steps


# --- reading one back
# -------------------------------------------------------------------------------------


class LockedFile(msgspec.Struct, frozen=True, order=True):
    """One file a pylock installs: package name, version, URL and sha256."""

    name: str
    version: str
    url: str
    sha256: str

    @property
    def detail(self) -> str:
        """The file in words, without its package's name: version, file name, sha256 (12 digits)."""
        return f"{self.version} {_filename(self.url)}, sha256 {short_digest(self.sha256)}"


def _files(package: dict[str, Any]) -> list[dict[str, Any]]:
    files = list(package.get("wheels", []))
    files += [package[k] for k in ("sdist", "archive") if k in package]
    return files


def uv_reads(text: str, where: str = "the pylock") -> dict[str, Any]:
    """What uv reads of a pylock: its TOML document (comments aside); InputError when it is not
    TOML."""
    try:
        with bounded_nesting(where):
            return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(
            file=where, reason=f"not valid TOML: {exc}", hint="re-run `envgen lock`"
        ) from exc


def parse_pylock(text: str, where: str) -> tuple[LockedFile, ...]:
    """The files a pylock names, sorted; InputError when it is not TOML or not a lock-version 1.0
    file."""
    data = uv_reads(text, where)
    if data.get("lock-version") != LOCK_VERSION:
        raise InputError(
            file=where,
            key="lock-version",
            reason=f"expected {LOCK_VERSION!r}",
            hint="re-run `envgen lock`",
        )
    files: list[LockedFile] = []
    for i, package in enumerate(data.get("packages", [])):
        try:
            for file in _files(package):
                sha256 = file["hashes"]["sha256"]
                files.append(
                    LockedFile(
                        package_key(package["name"]), package["version"], file["url"], sha256
                    )
                )
        except (KeyError, TypeError) as exc:
            raise InputError(
                file=where,
                key=f"packages[{i}]",
                reason=f"missing {exc}",
                hint="re-run `envgen lock`",
            ) from exc
    return tuple(sorted(files))


def expected_pylock(lock: Lock, platform: str) -> tuple[LockedFile, ...]:
    """What the pylock of `platform` must name: the yml's artifacts and hashes, nothing else."""
    return tuple(
        sorted(
            LockedFile(package_key(e.name), e.version, bare_url(e.url), e.sha256)
            for e in lock.pip_for(platform)
        )
    )
