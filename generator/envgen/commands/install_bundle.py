"""`envgen install --from-bundle`: the lock a bundle carries installed with no network, after verifying it all."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from envgen.bundle.archive import unpack_verified
from envgen.bundle.gitpacks import make_mirror, mirror_git_environment
from envgen.bundle.manifest import check_fits
from envgen.installer import Installer, install_env
from envgen.lockio.input_hashes import recorded_state
from envgen.lockio.store import parse_lock
from envgen.platforms import host_platform
from envgen.project import Project
from envgen.scratch import scratch_dir

log = logging.getLogger(__name__)


def install_from_bundle(
    project: Project,
    env: str,
    bundle: Path,
    prefix: Path,
    *,
    cache: Path,
    venv: bool,
    installer: Installer,
    profiles: Sequence[str],
    skip_cann: bool,
) -> Path:
    """Install the lock inside `bundle` for this host into `prefix`; returns the prefix's absolute path.

    Every member is checked against the bundle's manifest first (exit 4 naming the one that differs); a bundle
    of another env, platform or (when the project has a lock of `env`) another lock is refused (exit 2).
    """
    platform = host_platform()
    with scratch_dir("envgen-from-bundle-") as scratch:
        unpacked = scratch / "bundle"
        log.info("verifying %s", bundle)
        manifest = unpack_verified(bundle, unpacked)
        recorded = recorded_state(project, env)
        check_fits(manifest, env, platform, recorded[0] if recorded else None)
        locks = unpacked / "locks"
        yml, sources = locks / f"{env}.yml", locks / f"{env}.sources.toml"
        lock = parse_lock(
            yml.read_text(encoding="utf-8"),
            sources.read_text(encoding="utf-8"),
            f"{bundle}:locks/{yml.name}",
            f"{bundle}:locks/{sources.name}",
        )
        local = {m.sha256: unpacked / m.path for m in manifest.members if m.url}
        mirrors = []
        for number, pack in enumerate(manifest.git):
            mirror = scratch / "mirrors" / f"{number}.git"
            make_mirror(pack, unpacked / pack.path, mirror)
            mirrors.append((pack, mirror))
        log.info("verified %d members; installing %s for %s with no network", len(manifest.members), env, platform)
        install_env(
            lock,
            locks / f"{env}.install.sh",
            prefix,
            platform=platform,
            venv=venv,
            cache=cache,
            installer=installer,
            profiles=profiles,
            skip_cann=skip_cann,
            local=local,
            recipe_environ=mirror_git_environment(mirrors, os.environ),
        )
    return prefix.absolute()
