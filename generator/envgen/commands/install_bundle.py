"""`envgen install|check --from-bundle`: the lock a bundle carries, installed with no network once verified."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from envgen.bundle.archive import unpack_verified
from envgen.bundle.gitpacks import make_mirror, mirror_git_environment
from envgen.bundle.manifest import check_fits
from envgen.commands.check_report import OK, CheckReport, Step
from envgen.commands.check_throwaway import throwaway_steps
from envgen.errors import VerificationError
from envgen.installer import Installer, install_env
from envgen.lockio.integrity import LockTexts, integrity_problems, missing_files, tampered
from envgen.lockio.store import parse_lock_parts, read_files, recorded_inputs
from envgen.model import Lock
from envgen.platforms import host_platform
from envgen.project import Project
from envgen.resolve.git_remote import GitEnv
from envgen.scratch import scratch_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpenedBundle:
    """A verified bundle, unpacked: its lock and recipe, its artifacts by sha256, git sent to its mirrors."""

    lock: Lock
    recipe: Path
    local: dict[str, Path]
    recipe_environ: dict[str, str]
    members: int


def _intact_lock(locks: Path, env: str, bundle: Path) -> Lock:
    """The lock a bundle carries, if its three files pass the integrity check (lockio/integrity.py): the
    members match the manifest, but a bundle made from a tampered lock would carry the tampering along."""
    paths = [locks / f"{env}{suffix}" for suffix in (".yml", ".sources.toml", ".install.sh")]
    names = (f"{bundle}:locks/{paths[0].name}", f"{bundle}:locks/{paths[1].name}", f"{bundle}:locks/{paths[2].name}")
    yml, sources, recipe = (p.read_text(encoding="utf-8") if p.is_file() else None for p in paths)
    texts = LockTexts(env, yml, sources, recipe, names)
    if yml is None or sources is None:
        raise tampered(missing_files(texts) or [f"{bundle} carries no lock of {env}"], env)
    lock, parts = parse_lock_parts(yml, sources, names[0], names[1])
    problems = integrity_problems(texts, lock, parts)
    if problems:
        raise tampered(problems, env)
    return lock


@contextmanager
def opened_bundle(project: Project, env: str, bundle: Path, platform: str) -> Iterator[OpenedBundle]:
    """Unpack `bundle` into a scratch directory (removed afterwards) and check it before anything uses it.

    Every member is checked against the bundle's manifest (exit 4 naming the one that differs); a bundle of
    another env, platform or (when the project has a lock of `env`) another lock is refused (exit 2).
    """
    with scratch_dir("envgen-from-bundle-") as scratch:
        unpacked = scratch / "bundle"
        log.info("verifying %s", bundle)
        manifest = unpack_verified(bundle, unpacked)
        recorded = recorded_inputs(read_files(project, env))
        check_fits(manifest, env, platform, recorded.input_hash if recorded else None)
        locks = unpacked / "locks"
        lock = _intact_lock(locks, env, bundle)
        if lock.input_hash != manifest.input_hash:
            raise VerificationError(
                f"{bundle}: its lock has input hash {lock.input_hash}, its bundle.json says {manifest.input_hash}",
                hint="the bundle was altered: make it again",
            )
        mirrors = []
        for number, pack in enumerate(manifest.git):
            mirror = scratch / "mirrors" / f"{number}.git"
            make_mirror(pack, unpacked / pack.path, mirror, GitEnv.read(os.environ))
            mirrors.append((pack, mirror))
        log.info("verified %d members of %s", len(manifest.members), bundle)
        yield OpenedBundle(
            lock,
            locks / f"{env}.install.sh",
            {m.sha256: unpacked / m.path for m in manifest.members if m.url},
            mirror_git_environment(mirrors, os.environ),
            len(manifest.members),
        )


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
    """Install the lock inside `bundle` for this host into `prefix`, with no network; returns the prefix."""
    platform = host_platform()
    with opened_bundle(project, env, bundle, platform) as opened:
        log.info("installing %s for %s from %s with no network", env, platform, bundle)
        install_env(
            opened.lock,
            opened.recipe,
            prefix,
            platform=platform,
            venv=venv,
            cache=cache,
            installer=installer,
            profiles=profiles,
            skip_cann=skip_cann,
            local=opened.local,
            recipe_environ=opened.recipe_environ,
        )
    return prefix.absolute()


def check_from_bundle(
    project: Project, env: str, bundle: Path, *, cache: Path, venv: bool, require_npu: bool, keep: bool
) -> CheckReport:
    """`check`'s throwaway env, installed from `bundle` with no network: the installed set, pip check, imports."""
    platform = host_platform()
    with opened_bundle(project, env, bundle, platform) as opened:
        steps = [Step("bundle: members", OK, f"{opened.members} members match bundle.json")]
        install = functools.partial(install_env, local=opened.local, recipe_environ=opened.recipe_environ)
        env_steps, kept = throwaway_steps(
            opened.lock,
            opened.recipe,
            platform=platform,
            venv=venv,
            cache=cache,
            require_npu=require_npu,
            keep=keep,
            install=install,
        )
    return CheckReport(env, platform, tuple(steps + env_steps), kept)
