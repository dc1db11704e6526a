"""The schema of locks/<env>.yml: conda-lock's lockfile format, version 1, as envgen writes it.

The keys and types are those of conda-lock's v1 model (`conda_lock.lockfile.v1.models`, published
as `conda-lock-v1.schema.json`), narrowed to what envgen writes: one category (`main`), no
`source`, no time, git or input metadata, channels as mappings. Strict (msgspec Structs read by
lockio/strict_schema.py): an unknown key, a missing one, a value of another type (a number where a
string belongs), a conda entry without md5, an empty URL or a package listed twice is refused,
naming the key. conda-lock's own parser is what the tests prove every shape envgen writes against
(tests/unit/test_lockfile.py, tests/integration/test_lockfile_condalock.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from envgen.lockio.strict_schema import Refusal, converted


class Refused(ValueError):
    """A document that is not a version 1 lock as envgen writes it; the message names the key."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A mapping of the document: its keys and no other. (Each subclass says `frozen=True` again,
    as msgspec would not need: mypy reads the class arguments of each dataclass-like class.)"""


class Hash(_Strict, frozen=True):
    md5: str | None = None
    sha256: str | None = None


# keyword-only: required keys follow optional ones
class Package(_Strict, frozen=True, kw_only=True):
    name: str
    version: str
    manager: Literal["conda", "pip"]
    platform: str
    dependencies: dict[str, str] = {}
    url: Annotated[str, msgspec.Meta(min_length=1)]
    hash: Hash
    build: str | None = None
    category: Literal["main"] = "main"
    optional: Literal[False]

    def problem(self) -> str | None:
        """conda-lock's own rule (lockio/strict_schema.py applies it): its installer checks a conda
        file by md5."""
        if self.manager == "conda" and not self.hash.md5:
            return "a conda package's hash needs an md5"
        return None


class Channel(_Strict, frozen=True):
    url: str
    used_env_vars: list[str]


class Metadata(_Strict, frozen=True):
    content_hash: dict[str, str]
    channels: list[Channel]
    platforms: list[str]
    sources: list[str]
    custom_metadata: dict[str, str] | None = None


class Lockfile(_Strict, frozen=True):
    version: Literal[1]
    metadata: Metadata
    package: list[Package]

    def problem(self) -> str | None:
        """Each package once (lockio/strict_schema.py applies it)."""
        seen: set[tuple[str, str, str]] = set()
        for package in self.package:
            key = (package.manager, package.name, package.platform)
            if key in seen:
                return (
                    f"package {package.name!r} ({package.manager}, {package.platform}) is listed "
                    "twice"
                )
            seen.add(key)
        return None


def validated(document: object) -> Lockfile:
    """`document` (a parsed YAML mapping) as a Lockfile; Refused names the first key at fault."""
    try:
        return converted(document, Lockfile)
    except Refusal as refusal:
        where = ".".join(str(part) for part in refusal.path) or "the document"
        raise Refused(f"{where}: {refusal.message}") from None
