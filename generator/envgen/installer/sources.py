"""Where an install's artifacts come from: the lock's own indexes and channels (`IndexSource`), or
files already on this host and verified (`LocalSource`: a bundle's, unpacked)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import msgspec

from envgen.credentials import NO_LOCK_CREDENTIALS, LockCredentials
from envgen.errors import InputError, VerificationError
from envgen.inputs.files import read_input_text
from envgen.installer.core import CondaPart, Installer, PipPart, Recipe
from envgen.lockio.exports.common import trusted_hosts
from envgen.lockio.exports.derived import installable
from envgen.lockio.store import read_files, repair_hint
from envgen.model import CondaEntry, Lock, PipEntry
from envgen.project import Project
from envgen.resolve.archives.members import bundled_wheels, fetched_wheels
from envgen.resolve.settings import Settings

_E = TypeVar("_E", CondaEntry, PipEntry)


@dataclass(frozen=True)
class IndexSource:
    """The project's lock installed from the channels and indexes it names, each sent the lock's
    credentials for its own host. The pip part comes from the lock's derived file its installer
    reads (the requirements.txt, the pylock), once what the tool reads of it is what the lock
    renders; the recipe's git runs in the variables of `settings`; release archives are fetched
    into its cache, within its network limits."""

    project: Project
    credentials: LockCredentials = NO_LOCK_CREDENTIALS
    settings: Settings = field(kw_only=True)

    def recipe(self, lock: Lock) -> Recipe:
        texts = read_files(self.project, lock.env)
        path = self.project.install_sh(lock.env)
        if texts.recipe is None:
            why = texts.unreadable.message if texts.unreadable is not None else "it is missing"
            raise InputError(
                f"cannot read the recipe {path}: {why}",
                hint=repair_hint(lock.env),
                file=str(path),
                reason=why,
            )
        return Recipe(path, texts.recipe, self.settings.variables, self.credentials.git)

    def conda(self, lock: Lock, platform: str) -> CondaPart:
        return CondaPart(lock.conda_for(platform), self.credentials.conda)

    def pip(self, lock: Lock, platform: str, installer: Installer) -> PipPart | None:
        entries = lock.pip_for(platform)
        if not entries:
            return None
        name = installer.derived_file(lock.env, platform)
        requirements = installable(self.project.locks_dir, lock, name)
        trusted = trusted_hosts(lock, entries)
        return PipPart(requirements, entries, trusted=trusted, credentials=self.credentials.pip)

    def archives(self, lock: Lock, platform: str) -> AbstractContextManager[Path | None]:
        return fetched_wheels(lock, platform, self.settings.cache, self.settings.limits)


@dataclass(frozen=True)
class LocalSource:
    """Artifacts already on this host and verified against the lock (a bundle's, unpacked): no
    index or channel is asked. `files` holds every artifact by sha256; the pip part of a platform
    is installed from `requirements[platform]` (`name==version --hash` lines) with `find_links`;
    the recipe's git runs in `environ` (a bundle's sends it to its mirrors). `what` names it in
    messages."""

    recipe_path: Path
    files: Mapping[str, Path]
    requirements: Mapping[str, Path]
    find_links: Path
    environ: Mapping[str, str]
    what: str = "the bundle"

    def recipe(self, lock: Lock) -> Recipe:
        text = read_input_text(self.recipe_path, hint=f"make {self.what} again from this lock")
        return Recipe(self.recipe_path, text, self.environ)

    def conda(self, lock: Lock, platform: str) -> CondaPart:
        entries = self._located(lock.conda_for(platform))
        return CondaPart(tuple(msgspec.structs.replace(e, url=self._uri(e)) for e in entries))

    def pip(self, lock: Lock, platform: str, installer: Installer) -> PipPart | None:
        del installer  # pip and uv read the same file here: a pylock names URLs, not local files
        entries = self._located(lock.pip_for(platform))
        if not entries:
            return None
        return PipPart(self.requirements[platform], entries, find_links=self.find_links)

    def archives(self, lock: Lock, platform: str) -> AbstractContextManager[Path | None]:
        return bundled_wheels(lock, platform, self.files)

    def _located(self, entries: Sequence[_E]) -> tuple[_E, ...]:
        """`entries`, every one with its file here; one lacking is a VerificationError naming it
        (a bundle carries every artifact locked), before anything is installed."""
        lacking = [e for e in entries if e.sha256 not in self.files]
        missing = [f"{e.name} {e.version} ({e.platform})" for e in lacking]
        if missing:
            more = f" and {len(missing) - 1} more" if missing[1:] else ""
            raise VerificationError(
                f"{self.what} holds no file for {missing[0]}{more}",
                hint=f"make {self.what} again from this lock (nothing was installed)",
            )
        return tuple(entries)

    def _uri(self, entry: CondaEntry) -> str:
        return self.files[entry.sha256].absolute().as_uri()
