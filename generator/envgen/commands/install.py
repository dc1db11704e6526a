"""`envgen install`: the lock of an env installed into a prefix on this host."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from envgen.commands.install_bundle import install_from_bundle
from envgen.installer import Installer, install_env
from envgen.lockio.store import require_lock
from envgen.platforms import host_platform
from envgen.project import Project


def install_lock(
    project: Project,
    env: str,
    prefix: Path,
    *,
    cache: Path,
    venv: bool,
    installer: Installer,
    profiles: Sequence[str],
    skip_cann: bool,
    bundle: Path | None = None,
) -> Path:
    """Install the lock of `env` for this host's platform into `prefix`; returns the prefix's absolute path.

    With `bundle`, the lock and everything it names come from that bundle, with no network."""
    if bundle is not None:
        return install_from_bundle(
            project,
            env,
            bundle,
            prefix,
            cache=cache,
            venv=venv,
            installer=installer,
            profiles=profiles,
            skip_cann=skip_cann,
        )
    lock = require_lock(project, env)
    install_env(
        lock,
        project.install_sh(env),
        prefix,
        platform=host_platform(),
        venv=venv,
        cache=cache,
        installer=installer,
        profiles=profiles,
        skip_cann=skip_cann,
    )
    return prefix.absolute()
