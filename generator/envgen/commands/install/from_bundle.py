"""`envgen install|check --from-bundle`: the lock a bundle carries, installed with no network once
verified."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from envgen.bundle.archive import extract_members, read_head
from envgen.bundle.gitpacks import make_mirror, mirror_git_environment
from envgen.bundle.manifest import (
    Expected,
    Member,
    archived_wheels,
    check_fits,
    expected_members,
    lock_paths,
    requirements_path,
    wanted_artifacts,
)
from envgen.commands.install.bundle_trust import (
    TrustRoot,
    bundle_lock_texts,
    trust_root,
    trusted_lock,
)
from envgen.commands.install.options import Installed, InstallOptions
from envgen.commands.lock.freshness import require_fresh
from envgen.errors import VerificationError
from envgen.installer.core import Request, check_request, install
from envgen.installer.destinations import destination
from envgen.installer.sources import LocalSource
from envgen.installer.tools import installer_named
from envgen.lockio.store import LockTexts
from envgen.model import Lock
from envgen.platforms import host_platform
from envgen.project import Project
from envgen.resolve.git.remote import GitEnv
from envgen.resolve.settings import Settings
from envgen.scratch import scratch_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpenedBundle:
    """A verified bundle, unpacked: its lock, the source of its artifacts (its recipe, its files by
    sha256, git sent to its mirrors), and how many members it has."""

    lock: Lock
    source: LocalSource
    members: int
    project_lock: bool  # trusted through the project's lock (not only a --lock-sha256)


def _lock_members(texts: LockTexts) -> dict[str, Member]:
    """The trusted lock's three files as the members a bundle must carry."""
    found = zip(lock_paths(texts.env), (texts.yml, texts.sources, texts.recipe), strict=True)
    data = {path: (text or "").encode() for path, text in found}
    return {p: Member(p, hashlib.sha256(raw).hexdigest(), len(raw)) for p, raw in data.items()}


def _verified(
    bundle: Path,
    unpacked: Path,
    env: str,
    platform: str,
    root: TrustRoot,
) -> tuple[Lock, Expected]:
    """Unpack `bundle` into `unpacked`, each member checked against the trusted lock as it
    streams."""
    head = read_head(bundle, unpacked, lock_paths(env))
    check_fits(head.manifest, env, platform)
    bundled = bundle_lock_texts(env, bundle, head.texts)
    lock = trusted_lock(root, bundled)
    if lock.input_hash != head.manifest.input_hash:
        listed = head.manifest.input_hash
        raise VerificationError(
            f"{bundle}: its lock has input hash {lock.input_hash}, its bundle.json says {listed}",
            hint="the bundle was altered: make it again",
        )
    expected = expected_members(lock, head.manifest, _lock_members(bundled))
    if expected.problems:
        listed = "\n  ".join(expected.problems)
        raise VerificationError(
            f"{bundle}: bundle.json does not list what the lock names:\n  {listed}",
            hint="the bundle was altered, or made from another lock: make it again",
        )
    extract_members(bundle, unpacked, expected.members, done=head.texts.keys())
    return lock, expected


@contextmanager
def opened_bundle(
    project: Project, env: str, bundle: Path, platform: str, lock_sha256: str | None, git: GitEnv
) -> Iterator[OpenedBundle]:
    """Unpack `bundle` into a scratch directory (removed afterwards), checked before any use.

    The trust root is the project's lock of `env` (bundle_trust.py), or `lock_sha256` where there
    is none: a bundle of another lock, env or platform is refused (exit 2); each member is checked
    against the hashes that lock names as it streams (exit 4 naming the one that differs), and
    nothing the lock does not name is unpacked."""
    root = trust_root(project, env, lock_sha256)
    with scratch_dir("envgen-from-bundle-") as scratch:
        unpacked = scratch / "bundle"
        log.info("verifying %s", bundle)
        lock, expected = _verified(bundle, unpacked, env, platform, root)
        mirrors = []
        for number, pack in enumerate(expected.git):
            mirror = scratch / "mirrors" / f"{number}.git"
            make_mirror(pack, unpacked / pack.path, mirror, git)
            mirrors.append((pack, mirror))
        log.info("verified %d members of %s", len(expected.members), bundle)
        source = LocalSource(
            unpacked / lock_paths(env)[2],
            {
                w.sha256: unpacked / w.path
                for w in (*wanted_artifacts(lock, (platform,)), *archived_wheels(lock, (platform,)))
            },
            {platform: unpacked / requirements_path(platform)},
            unpacked / "pip",
            mirror_git_environment(mirrors, os.environ),
            what=f"the bundle {bundle}",
        )
        yield OpenedBundle(lock, source, len(expected.members), root.project is not None)


def install_from_bundle(
    project: Project, env: str, bundle: Path, options: InstallOptions, settings: Settings
) -> Installed:
    """Install the lock of `env` from `bundle` for this host into `options.prefix`, with no
    network; returns the prefix and the bundle's lock. The bundle is trusted through the project's
    lock (refused when stale, unless `options.frozen`) or `options.lock_sha256`. Every tool runs in
    `settings`."""
    platform = host_platform()
    prefix = options.prefix
    installer = installer_named(options.installer, settings)
    with opened_bundle(project, env, bundle, platform, options.lock_sha256, settings.git) as opened:
        request = Request(opened.lock, platform, options.profiles, options.skip_cann)
        check_request(request)
        if not options.frozen and opened.project_lock:  # a bundle of a stale lock is stale too
            require_fresh(project, env, opened.lock, "install")
        log.info("installing %s for %s from %s with no network", env, platform, bundle)
        install(
            request,
            opened.source,
            destination(
                prefix, venv=options.venv, settings=settings, compiled=installer.runs_env_pip
            ),
            installer,
        )
    return Installed(prefix.absolute(), opened.lock)
