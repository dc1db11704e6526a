"""The data of the install steps an env takes besides its packages and sources (frozen, no I/O): a
file of a source's tree replaced before it builds, wheels taken from release archives, links made in
site-packages, and packages the lock leaves out on purpose. `model.py` holds them in a Matrix and a
Lock."""

from __future__ import annotations

import msgspec


class Replacement(msgspec.Struct, frozen=True):
    """A file of a source's own tree copied over another before it builds (SGLang's
    `python/pyproject_npu.toml` over `python/pyproject.toml`): both paths relative to the tree's
    root."""

    source: str
    target: str


class Archive(msgspec.Struct, frozen=True):
    """Wheels that come inside a release archive (sgl-kernel-npu's zip): its URL per platform, the
    sha256 the matrix pins for it there (optional: else the lock pins what it downloaded), and the
    distributions whose wheels are taken from it."""

    name: str
    urls: tuple[tuple[str, str], ...]
    wheels: tuple[str, ...]
    sha256: tuple[tuple[str, str], ...] = ()
    note: str | None = None
    # The other hosts its URLs may redirect to (host names, lower-cased): none but their own else.
    redirect_hosts: tuple[str, ...] = ()

    def url_for(self, platform: str) -> str | None:
        return dict(self.urls).get(platform)

    def sha256_for(self, platform: str) -> str | None:
        return dict(self.sha256).get(platform)


class Link(msgspec.Struct, frozen=True):
    """A symbolic link made in the env after everything is installed: `target` (relative to
    site-packages; one `*` may stand for a part of its file name, matching exactly one file)
    linked into `directory` (relative to site-packages, "" for site-packages itself) under its
    own file name, as `cd DIRECTORY && ln -s TARGET` does."""

    target: str
    reason: str
    directory: str = ""


class Exclusion(msgspec.Struct, frozen=True):
    """A package the lock leaves out on purpose although something requires it (`timm`, which the
    SGLang route uninstalls), on the platforms named (all when empty), with its reason."""

    name: str
    reason: str
    platforms: tuple[str, ...] = ()

    def applies(self, platform: str) -> bool:
        return not self.platforms or platform in self.platforms


class ArchiveMember(msgspec.Struct, frozen=True):
    """A wheel taken from a locked archive: its path in the archive, its distribution and version,
    its sha256, and the requirements its metadata declares on the archive's platform (evaluated
    there, without extras)."""

    path: str
    name: str
    version: str
    sha256: str
    requires: tuple[str, ...] = ()

    @property
    def filename(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class LockedArchive(msgspec.Struct, frozen=True):
    """An archive of the matrix as locked for one platform: the URL, the archive's sha256, the
    wheels taken from it, and the other hosts the URL may redirect to (the matrix's)."""

    name: str
    platform: str
    url: str
    sha256: str
    members: tuple[ArchiveMember, ...]
    redirect_hosts: tuple[str, ...] = ()
