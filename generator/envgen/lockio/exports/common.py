"""What every export shares: index URLs safe to write, the index of an entry, the origins of a
package (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508

from envgen.model import Index, Lock, Matrix, PipEntry
from envgen.names import package_key
from envgen.redact import strip_credentials, written_url
from envgen.urls import same_host


def bare_url(url: str) -> str:
    """`url` without any userinfo (a PEP 751 lock or an SBOM records no credentials, not even
    references)."""
    return strip_credentials(url)


def entry_index(lock: Lock, entry: PipEntry) -> Index | None:
    """The index an entry was locked from (None for a wheel the matrix names by URL)."""
    return next((i for i in lock.indexes if i.name == entry.index), None)


def direct_url(lock: Lock, entry: PipEntry) -> str:
    """The URL a requirements file names an artifact by, with its index's `${VAR}` credentials when
    it has any."""
    index = entry_index(lock, entry)
    if index is None or not same_host(entry.url, index.url):  # the index's credentials apply to it
        return entry.url
    written = urlsplit(written_url(index.url))
    if not written.username:
        return entry.url
    return entry.url.replace("://", f"://{written.netloc.rpartition('@')[0]}@", 1)


def origins(lock: Lock, matrix: Matrix | None, platform: str) -> dict[str, tuple[str, ...]]:
    """Per canonical package name, why it is in the lock for `platform`: the matrix key, a source's
    file and line, or the locked packages that depend on it; each list sorted."""
    found: dict[str, set[str]] = {}

    def add(name: str, why: str) -> None:
        found.setdefault(package_key(name), set()).add(why)

    if matrix is not None:
        for package in matrix.packages:
            add(package.name, str(matrix.origin("pip", "packages", package.name)))
    for locked in lock.sources:
        for req in locked.requirements:
            name = _requirement_name(req.text)
            if name and not req.constraint:
                add(name, str(req.origin))
    for entry in lock.pip_for(platform):
        for dependency, _ in entry.depends:
            add(dependency, entry.name)
    return {name: tuple(sorted(whys)) for name, whys in found.items()}


def _requirement_name(text: str) -> str | None:
    try:
        return Pep508(text).name
    except InvalidRequirement:
        return None


def trusted_hosts(lock: Lock, entries: Sequence[PipEntry]) -> tuple[str, ...]:
    """The trusted hosts of the indexes `entries` come from, sorted."""
    used = {e.index for e in entries}
    return tuple(
        sorted({i.trusted_host for i in lock.indexes if i.trusted_host and i.name in used})
    )


def header(lock: Lock, what: str, comment: str = "#") -> list[str]:
    """The first lines of every derived file: where it comes from and the input hash it belongs
    to."""
    return [
        f"{comment} {what}",
        f"{comment} Derived by `envgen lock {lock.env}` from locks/{lock.env}.yml and "
        f"locks/{lock.env}.sources.toml:"
        " do not edit.",
        f"{comment} envgen-input-hash: {lock.input_hash}",
    ]
