"""`envgen install`: the lock of an env installed into a prefix on this host."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from shlex import quote

from envgen import interrupts
from envgen.commands.install.from_bundle import install_from_bundle
from envgen.commands.install.options import Installed, InstallOptions
from envgen.commands.lock.freshness import require_fresh
from envgen.errors import EnvgenError, InputError
from envgen.inputs.credentials import lock_credentials
from envgen.inputs.matrix import load_env
from envgen.installer.core import Request, check_request, install
from envgen.installer.destinations import conda_activation, destination, venv_activation
from envgen.installer.sources import IndexSource
from envgen.installer.tools import installer_named
from envgen.lockio.integrity import require_intact
from envgen.model import Lock, Matrix
from envgen.platforms import host_platform
from envgen.project import Project
from envgen.resolve.settings import Settings
from envgen.scratch import children_scratch

log = logging.getLogger(__name__)


def _matrix(project: Project, env: str, lock: Lock, *, frozen: bool) -> Matrix | None:
    """The matrix of `env`, once the lock is fresh (StaleError, exit 1, when not). With `frozen`
    the lock is installed as it is: its matrix serves its git sources' credentials only, and one
    that does not load is not needed, the install then going without them."""
    if not frozen:
        return require_fresh(project, env, lock, "install")
    try:
        return load_env(project, env)
    except InputError as exc:
        log.warning(
            "the matrix of %s does not load, so its sources' credentials are not used: %s",
            env,
            exc.message,
        )
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
        if note is None:
            raise
        raise exc.with_hint(f"{exc.hint}; {note}" if exc.hint else note) from exc


def install_lock(project: Project, env: str, options: InstallOptions) -> Installed:
    """Install the lock of `env` for this host's platform into `options.prefix`; returns its
    absolute path and the lock installed.

    A tampered lock (lockio/integrity.py) is refused with exit 4, a stale one
    (commands/lock/freshness.py) with exit 1 unless `options.frozen`, both before anything is
    installed. With `options.bundle`, everything the lock names comes from that bundle, with no
    network (trusted through the project's lock, or `options.lock_sha256`). An install that fails
    or is interrupted removes a new prefix. The children's temporary files are in one scratch
    directory, removed at the end (an interrupt kills them mid-work)."""
    # What every tool and the recipe run in: the process's variables as each starts (the scratch
    # TMPDIR below), within the network limits read once here.
    settings = Settings.live(os.environ, cache=options.cache)
    prefix = options.prefix
    with children_scratch("envgen-install-"), removed_unless_installed(prefix.absolute()):
        if options.bundle is not None:
            return install_from_bundle(project, env, options.bundle, options, settings)
        tool = installer_named(options.installer, settings)
        # Refused before the prefix is touched when the lock's files are not as `envgen lock`
        # wrote them, or (unless frozen) when its inputs changed since.
        lock = require_intact(project, env)
        request = Request(lock, host_platform(), options.profiles, options.skip_cann)
        check_request(request)  # bad input before the lock's freshness is asked
        matrix = _matrix(project, env, lock, frozen=options.frozen)
        credentials = lock_credentials(lock, project.channels_dir, matrix, settings.variables)
        source = IndexSource(project, credentials, settings=settings)
        install(
            request,
            source,
            destination(prefix, venv=options.venv, settings=settings, compiled=tool.runs_env_pip),
            tool,
        )
        return Installed(prefix.absolute(), lock)


def how_to_use(env: str, prefix: Path, *, venv: bool, cann: bool = True) -> list[str]:
    """What `install` ends with: the env's python works as it is (the sources with pythonpath =
    true too, through the .pth file the recipe writes); activation adds the env's variables (CANN
    unless the env has none, the profiles), with conda or by sourcing one line."""
    python = prefix / "bin" / "python"
    lines = [
        f"  {python} imports every source of the env (pythonpath ones too) with nothing activated",
    ]
    if venv:
        return [
            *lines,
            f"  for the env's variables too, activate it: {venv_activation(prefix)}",
        ]
    return [
        *lines,
        f"  for the env's variables ({'CANN, ' * cann}profiles) too, activate it: "
        f"conda activate {quote(str(prefix))}",
        f"  or, without conda: {conda_activation(prefix, env)}",
    ]
