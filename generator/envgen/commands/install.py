"""`envgen install`: the lock of an env installed into a prefix on this host."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from envgen import interrupts
from envgen.commands.install_bundle import install_from_bundle
from envgen.errors import InputError
from envgen.inputs.credentials import lock_credentials
from envgen.inputs.matrix import load_env
from envgen.installer import Installer, install_env
from envgen.lockio.integrity import require_intact
from envgen.model import Matrix
from envgen.platforms import host_platform
from envgen.project import Project

log = logging.getLogger(__name__)


def _matrix(project: Project, env: str) -> Matrix | None:
    """The matrix of `env`, for its git sources' credentials only: one that does not load is not needed to
    install the lock, which then goes without them."""
    try:
        return load_env(project, env)
    except InputError as exc:
        log.warning("the matrix of %s does not load, so its sources' credentials are not used: %s", env, exc.message)
        return None


@contextmanager
def removed_if_interrupted(prefix: Path) -> Iterator[None]:
    """An install into a new (or empty) prefix that is interrupted (Ctrl-C, SIGTERM) removes what it put there:
    half an env would look installed. A prefix that held an env before is left for the next run to finish."""
    fresh = not prefix.exists() or (prefix.is_dir() and not any(prefix.iterdir()))
    existed = prefix.exists()
    try:
        yield
    except (KeyboardInterrupt, interrupts.Interrupted):
        if not fresh:
            interrupts.cleaned(f"{prefix} held an env before and is left as it is: run the install again")
            raise
        shutil.rmtree(prefix, ignore_errors=True)
        if existed:
            prefix.mkdir(exist_ok=True)
        interrupts.cleaned(f"the partly installed {prefix} was removed{' (emptied)' if existed else ''}")
        raise


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
    lock_sha256: str | None = None,
) -> Path:
    """Install the lock of `env` for this host's platform into `prefix`; returns the prefix's absolute path.

    With `bundle`, everything the lock names comes from that bundle, with no network (trusted through the
    project's lock, or `lock_sha256`). Interrupted, a new
    prefix is removed. A tampered lock (lockio/integrity.py) is refused with exit 4 before anything is
    installed."""
    with removed_if_interrupted(prefix.absolute()):
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
                lock_sha256=lock_sha256,
            )
        # Refused before the prefix is touched when the lock's files are not as `envgen lock` wrote them.
        lock = require_intact(project, env)
        credentials = lock_credentials(lock, project.channels_dir, _matrix(project, env), os.environ)
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
            credentials=credentials,
        )
        return prefix.absolute()
