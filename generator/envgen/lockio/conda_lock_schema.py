"""The schema of locks/<env>.yml: conda-lock's lockfile format, version 1, as envgen writes it.

The keys and types are those of conda-lock's v1 model (`conda_lock.lockfile.v1.models`, published
as `conda-lock-v1.schema.json`), narrowed to what envgen writes: one category (`main`), no
`source`, no time, git or input metadata, channels as mappings. Strict: an unknown key, a missing
one, a value of another type (a number where a string belongs), a conda entry without md5, an empty
URL or a package listed twice is refused, naming the key. conda-lock's own parser is what the tests
prove every shape envgen writes against (tests/unit/test_lockfile.py,
tests/integration/test_lockfile_condalock.py).
"""

from __future__ import annotations

from typing import Literal

import pydantic
from pydantic import BaseModel, ConfigDict


class Refused(ValueError):
    """A document that is not a version 1 lock as envgen writes it; the message names the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Hash(_Strict):
    md5: str | None = None
    sha256: str | None = None


class Package(_Strict):
    name: str
    version: str
    manager: Literal["conda", "pip"]
    platform: str
    dependencies: dict[str, str] = {}
    url: str = pydantic.Field(min_length=1)
    hash: Hash
    build: str | None = None
    category: Literal["main"] = "main"
    optional: Literal[False]

    @pydantic.model_validator(mode="after")
    def _conda_has_md5(self) -> Package:
        # conda-lock's own rule: its installer checks a conda file by md5
        if self.manager == "conda" and not self.hash.md5:
            raise ValueError("a conda package's hash needs an md5")
        return self


class Channel(_Strict):
    url: str
    used_env_vars: list[str]


class Metadata(_Strict):
    content_hash: dict[str, str]
    channels: list[Channel]
    platforms: list[str]
    sources: list[str]
    custom_metadata: dict[str, str] | None = None


class Lockfile(_Strict):
    version: Literal[1]
    metadata: Metadata
    package: list[Package]

    @pydantic.model_validator(mode="after")
    def _each_package_once(self) -> Lockfile:
        seen: set[tuple[str, str, str]] = set()
        for package in self.package:
            key = (package.manager, package.name, package.platform)
            if key in seen:
                raise ValueError(
                    f"package {package.name!r} ({package.manager}, {package.platform}) is listed "
                    "twice"
                )
            seen.add(key)
        return self


def validated(document: object) -> Lockfile:
    """`document` (a parsed YAML mapping) as a Lockfile; Refused names the first key at fault."""
    try:
        return Lockfile.model_validate(document)
    except pydantic.ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        more = exc.error_count() - 1
        others = f" (and {more} more)" if more else ""
        raise Refused(f"{where}: {first['msg']}{others}") from None
