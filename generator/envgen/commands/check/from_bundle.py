"""`envgen check --from-bundle`: check's throwaway env installed from a bundle with no network, the
bundle opened and trusted as `install --from-bundle` opens it (commands/install/from_bundle.py)."""

from __future__ import annotations

from pathlib import Path

from envgen.commands.check.options import CheckOptions
from envgen.commands.check.report import OK, SKIPPED, CheckReport, Step, step_of
from envgen.commands.check.throwaway import throwaway_steps
from envgen.commands.install.from_bundle import opened_bundle
from envgen.commands.lock.freshness import freshness
from envgen.installer.tools import installer_named
from envgen.platforms import host_platform
from envgen.project import Project
from envgen.resolve.settings import Settings


def check_from_bundle(
    project: Project, env: str, bundle: Path, options: CheckOptions, settings: Settings
) -> CheckReport:
    """`check`'s throwaway env, installed from `bundle` with no network: the installed set, pip
    check, imports; skipped when the project's lock it is trusted through (or
    `options.lock_sha256`) is stale (unless `options.frozen`); every tool runs in `settings`."""
    platform = host_platform()
    frozen = options.frozen
    trusted = options.lock_sha256
    with opened_bundle(project, env, bundle, platform, trusted, settings.git) as opened:
        matched = f"{opened.members} members match the lock and bundle.json"
        steps = [Step("bundle: members", OK, matched)]
        fresh = None if frozen or not opened.project_lock else freshness(project, env, opened.lock)
        stale = fresh.reasons if fresh is not None else ()
        if stale:
            fix = f"re-lock with `envgen lock {env}`, or check the lock as it is with --frozen"
            steps.append(step_of("static: input hash", [f"{r}: {fix}" for r in stale]))
            steps.append(Step("env: install", SKIPPED, "the lock is stale"))
            return CheckReport(env, platform, tuple(steps), None)
        installer = installer_named(options.installer, settings)
        env_steps, kept = throwaway_steps(
            opened.lock, opened.source, installer, options, platform=platform, settings=settings
        )
    return CheckReport(env, platform, tuple(steps + env_steps), kept)
