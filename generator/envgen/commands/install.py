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
from envgen.errors import EnvgenError, InputError
from envgen.inputs.credentials import lock_credentials
from envgen.inputs.matrix import load_env
from envgen.installer import Installer, install_env
from envgen.lockio.integrity import require_intact
from envgen.model import Matrix
from envgen.platforms import host_platform
from envgen.project import Project
from envgen.scratch import children_scratch

log = logging.getLogger(__name__)


def _matrix(project: Project, env: str) -> Matrix | None:
    """The matrix of `env`, for its git sources' credentials only: one that does not load is not needed to
    install the lock, which then goes without them."""
    try:
        return load_env(project, env)
    except InputError as exc:
        log.warning("the matrix of %s does not load, so its sources' credentials are not used: %s", env, exc.message)
        return None


def _undone(prefix: Path, fresh: bool, existed: bool) -> str | None:
    """Undo an install into `prefix` that did not finish; what is there now (None: nothing new)."""
    if not fresh:
        return f"{prefix} held an env before and is left as far as the install got: run it again"
    if not prefix.exists() or (existed and not any(prefix.iterdir())):
        return None
    shutil.rmtree(prefix, ignore_errors=True)
    if existed:
        prefix.mkdir(exist_ok=True)
    return f"the partly installed {prefix} was removed{' (emptied)' if existed else ''}"


@contextmanager
def removed_unless_installed(prefix: Path) -> Iterator[None]:
    """An install into a new (or empty) prefix that does not finish (an error, Ctrl-C, SIGTERM)
    removes what it put there: half an env would look installed. A prefix that held an env before
    is never removed: every check that can fail before it is touched runs first (the lock's
    integrity, a bundle's members, the python, the profiles, every artifact located), but what
    fails after that leaves it as far as the install got, and the message says so."""
    fresh = not prefix.exists() or (prefix.is_dir() and not any(prefix.iterdir()))
    existed = prefix.exists()
    try:
        yield
    except (KeyboardInterrupt, interrupts.Interrupted):
        note = _undone(prefix, fresh, existed)
        interrupts.cleaned(note or f"nothing was installed into {prefix}")
        raise
    except EnvgenError as exc:
        note = _undone(prefix, fresh, existed)
        if note is not None:
            exc.hint = f"{exc.hint}; {note}" if exc.hint else note
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
    """Install the lock of `env` for this host's platform into `prefix`; returns its absolute path.

    With `bundle`, everything the lock names comes from that bundle, with no network (trusted
    through the project's lock, or `lock_sha256`). A tampered lock (lockio/integrity.py) is refused
    with exit 4 before anything is installed; an install that fails or is interrupted removes a new
    prefix. The children's temporary files are in one scratch directory, removed at the end (an
    interrupt kills them mid-work)."""
    with children_scratch("envgen-install-"), removed_unless_installed(prefix.absolute()):
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
