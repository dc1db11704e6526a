"""`envgen bundle`: every byte the lock of an env names for some platforms, in one verified
archive."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.filesize import decimal

import envgen
from envgen import interrupts
from envgen.bundle.archive import file_sha256, write_archive
from envgen.bundle.downloads import Display, fetch_all
from envgen.bundle.gitpacks import pack_source
from envgen.bundle.manifest import (
    Manifest,
    Member,
    archived_wheels,
    render_manifest,
    requirements_path,
    wanted_artifacts,
)
from envgen.commands.install.bundle_trust import lock_sha256
from envgen.inputs.credentials import lock_credentials
from envgen.lockio.exports.requirements_txt import render_find_links
from envgen.lockio.integrity import require_intact
from envgen.lockio.store import read_files, require_platforms
from envgen.model import Lock
from envgen.outputs import checked_output
from envgen.project import Project
from envgen.resolve.archives.members import archive_wheels
from envgen.resolve.pypi.index_client import IndexClient
from envgen.resolve.settings import Settings
from envgen.scratch import scratch_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BundleSummary:
    path: Path
    files: int
    size: int
    downloaded: int
    seconds: float
    lock_sha256: str
    artifacts: int  # the lock's artifacts it holds, `downloaded` of them fetched now

    @property
    def fetched(self) -> str:
        """Where its artifacts came from, in words."""
        many = "s" if self.artifacts != 1 else ""
        if self.downloaded == 0:
            return f"{self.artifacts} artifact{many}, all from the cache"
        if self.downloaded == self.artifacts:
            return f"{self.artifacts} artifact{many}, all downloaded"
        cached = self.artifacts - self.downloaded
        return f"{self.artifacts} artifacts: {self.downloaded} downloaded, {cached} from the cache"

    def describe(self, env: str) -> str:
        return (
            f"{env}: {self.path}: {self.files} files, {self.size} bytes ({decimal(self.size)}) "
            f"({self.fetched}) in {self.seconds:.1f}s\n"
            f"{env}: for --from-bundle without a checkout: --lock-sha256 {self.lock_sha256}"
        )


def _platforms(lock: Lock, chosen: Sequence[str]) -> tuple[str, ...]:
    require_platforms(lock, chosen, hint="choose --platform among the lock's platforms")
    return tuple(dict.fromkeys(chosen)) or lock.platforms


def bundle_env(
    project: Project,
    env: str,
    out: Path,
    *,
    platforms: Sequence[str],
    cache: Path,
    display: Display | None = None,
) -> BundleSummary:
    """Write the bundle of `env` for `platforms` (default: all of the lock's) to `out`, all or
    nothing.

    `display` shows the downloads (default: a log line per file)."""
    try:
        return _bundle(project, env, out, platforms=platforms, cache=cache, display=display)
    except (KeyboardInterrupt, interrupts.Interrupted):
        interrupts.cleaned(
            f"no bundle was written at {out} (nor a part file); what was downloaded "
            "and verified stays in the "
            "cache, and the next run resumes from it"
        )
        raise


def _bundle(
    project: Project,
    env: str,
    out: Path,
    *,
    platforms: Sequence[str],
    cache: Path,
    display: Display | None,
) -> BundleSummary:
    started = time.monotonic()
    checked_output(out, project)  # before any download: a path -o must not replace is bad input
    # A tampered lock (lockio/integrity.py) is refused (exit 4): a bundle would carry it to the
    # cluster.
    lock = require_intact(project, env)
    content_hash = lock_sha256(read_files(project, env))
    chosen = _platforms(lock, platforms)
    wanted = wanted_artifacts(lock, chosen)
    # What the downloads and git run in, read once.
    settings = Settings.live(os.environ, cache=cache)
    found = lock_credentials(lock, project.channels_dir, None, settings.variables)
    indexes = [settings.access(i) for i in lock.indexes]
    with IndexClient(indexes, settings.limits, credentials=found.pip + found.conda) as client:
        paths, downloaded = fetch_all(client, wanted, cache, display=display)
        artifacts = len(paths)  # one per sha256: a file two platforms name is fetched once
        wheels = archived_wheels(lock, chosen)
        for archive in (a for p in chosen for a in lock.archives_for(p)):
            log.info("archive %s (%s): taking its wheels out", archive.name, archive.platform)
            paths |= archive_wheels(client, archive, cache=cache)
    lock_files = (project.lock_yml(env), project.sources_toml(env), project.install_sh(env))
    with scratch_dir("envgen-bundle-") as scratch:
        # The lock's files first: a reader trusts the lock before any artifact streams.
        files = [(f"locks/{path.name}", path, "") for path in lock_files]
        for platform in chosen:  # what the recipe's --bundle installs with pip, without envgen
            requirements = scratch / requirements_path(platform)
            requirements.parent.mkdir(parents=True, exist_ok=True)
            requirements.write_text(render_find_links(lock, platform), encoding="utf-8")
            files.append((requirements_path(platform), requirements, ""))
        files += [(w.path, paths[w.sha256], w.sha256) for w in (*wanted, *wheels)]
        packs = []
        for locked in lock.sources:
            log.info("source %s: bundling commit %s", locked.source.name, locked.commit)
            for pack in pack_source(cache, locked, scratch, settings.git):
                packs.append(pack)
                files.append((pack.path, scratch / pack.path, ""))
        # Files made here (git bundles) or read from locks/ are hashed now; the artifacts are hashed
        # as archived.
        files = [(name, path, sha or file_sha256(path)) for name, path, sha in files]
        urls = {w.path: w.url for w in (*wanted, *wheels)}
        sizes = [(name, sha, path.stat().st_size) for name, path, sha in files]
        members = [Member(name, sha, size, urls.get(name, "")) for name, sha, size in sizes]
        manifest = Manifest(
            env, lock.input_hash, chosen, envgen.__version__, tuple(members), tuple(packs)
        )
        log.info("writing %s (%d files)", out, len(files) + 1)
        write_archive(out, project, files, render_manifest(manifest))
    seconds = time.monotonic() - started
    size = out.stat().st_size
    return BundleSummary(out, len(files) + 1, size, downloaded, seconds, content_hash, artifacts)
