"""The commands that use a lock: `check` proves it, `install` makes an env of it, `bundle` packs
everything it names, `export` writes it in another format."""

from __future__ import annotations

from pathlib import Path

import click

from envgen.cli.options import (
    INSTALLER,
    bundle_options,
    bundle_project,
    common_options,
    current_project,
    env_names,
    epilog,
    settings,
)
from envgen.cli.output import Outcome, download_display
from envgen.cli.running import reporting


@click.command(
    "install",
    short_help="Install a lock into a conda prefix (or a venv).",
    epilog=epilog(
        "envgen install a5 --prefix /opt/envs/verl-a5",
        "envgen install a5 --prefix .venv-a5 --venv --installer uv --profile checkpoint-engine",
    ),
)
@click.argument("env", callback=env_names)
@click.option(
    "--prefix",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The env to create or update (a conda prefix, or a venv with --venv).",
)
@click.option(
    "--venv",
    is_flag=True,
    help="A venv of this python instead of the lock's conda part.",
)
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    metavar="NAME",
    help="An optional activation profile.",
)
@click.option(
    "--skip-cann",
    is_flag=True,
    help="Skip the sources that need CANN (the env is then incomplete).",
)
@click.option(
    "--frozen",
    is_flag=True,
    help="Install the lock as it is, even when stale (never a tampered one).",
)
@INSTALLER
@bundle_options
@common_options
@reporting("install")
def install_command(
    env: str,
    prefix: Path,
    venv: bool,
    profiles: tuple[str, ...],
    skip_cann: bool,
    frozen: bool,
    installer: str,
    from_bundle: Path | None,
    lock_sha256: str | None,
) -> Outcome:
    """Install the lock of ENV into --prefix: conda packages, hash-checked pip packages, then the
    recipe."""
    from envgen.commands.cache import claimed_cache
    from envgen.commands.install.command import how_to_use, install_lock
    from envgen.commands.install.options import InstallOptions

    proj = bundle_project(env, from_bundle, lock_sha256, locked=True)
    options = InstallOptions(
        prefix,
        claimed_cache(),
        venv=venv,
        installer="uv" if installer == "uv" else "pip",
        profiles=profiles,
        skip_cann=skip_cann,
        bundle=from_bundle,
        lock_sha256=lock_sha256,
        frozen=frozen,
    )
    installed = install_lock(proj, env, options)
    result = {"env": env, "prefix": str(installed.prefix), "profiles": list(profiles)}
    outcome = Outcome(results=[result])
    outcome.note(f"{env}: installed into {installed.prefix}")
    cann = installed.lock.cann is not None
    for line in how_to_use(env, installed.prefix, venv=venv, cann=cann):
        outcome.note(line)
    return outcome


@click.command(
    "bundle",
    short_help="One archive of everything a lock names, for offline use.",
    epilog=epilog(
        "envgen bundle a5 --platform linux-aarch64 -o a5-aarch64.tar.zst",
        "envgen install a5 --from-bundle a5-aarch64.tar.zst --prefix /opt/envs/verl-a5",
    ),
)
@click.argument("env", callback=env_names)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help=".tar or .tar.zst",
)
@click.option(
    "--platform",
    "platforms",
    multiple=True,
    metavar="P",
    help="Only this platform (repeatable).",
)
@common_options
@reporting("bundle")
def bundle_command(env: str, output: Path, platforms: tuple[str, ...]) -> Outcome:
    """Write every conda package, pip artifact and source commit the lock of ENV names into one
    archive."""
    from envgen.commands.cache import claimed_cache
    from envgen.commands.install.bundle import bundle_env

    proj = current_project()
    proj.known_envs([env], locked=True)
    display = download_display(settings())
    summary = bundle_env(
        proj,
        env,
        output,
        platforms=platforms,
        cache=claimed_cache(),
        display=display,
    )
    result = {"env": env, "path": str(summary.path), "files": summary.files, "size": summary.size}
    result |= {"artifacts": summary.artifacts, "downloaded": summary.downloaded}
    result |= {"seconds": round(summary.seconds, 1)}
    outcome = Outcome(results=[result | {"lock_sha256": summary.lock_sha256}])
    outcome.note(summary.describe(env))
    return outcome


@click.command(
    "check",
    short_help="Prove a lock: static checks, a re-solve, a throwaway env.",
    epilog=epilog(
        "envgen check a5",
        "envgen check a5 --venv --installer uv",
        "envgen check a5 --no-env --json",
    ),
)
@click.argument("env", callback=env_names)
@click.option(
    "--venv",
    is_flag=True,
    help="Throwaway env as a venv of this python instead of the lock's conda part.",
)
@click.option(
    "--require-npu",
    is_flag=True,
    help="Fail, not skip, what needs CANN or an NPU.",
)
@click.option("--keep", is_flag=True, help="Keep the throwaway env and print its path.")
@click.option(
    "--no-solve",
    is_flag=True,
    help="Skip re-resolving the pip set (it needs the indexes).",
)
@click.option(
    "--no-env",
    is_flag=True,
    help="Skip the throwaway env: static checks and the re-solve only.",
)
@click.option(
    "--frozen",
    is_flag=True,
    help="Check the lock as it is, even when stale.",
)
@bundle_options
@INSTALLER
@click.option(
    "--require-env",
    is_flag=True,
    help="Fail (exit 4) when the throwaway env is skipped (no part of the lock for this host).",
)
@common_options
@reporting("check")
def check_command(
    env: str,
    venv: bool,
    require_npu: bool,
    keep: bool,
    no_solve: bool,
    no_env: bool,
    frozen: bool,
    installer: str,
    require_env: bool,
    from_bundle: Path | None,
    lock_sha256: str | None,
) -> Outcome:
    """Verify the lock of ENV: static checks, a re-solve, a throwaway install with pip check and
    imports."""
    from envgen.commands.cache import claimed_cache
    from envgen.commands.check.command import CheckOptions, check_env
    from envgen.commands.check.report import render_report

    proj = bundle_project(env, from_bundle, lock_sha256, locked=False)
    options = CheckOptions(
        claimed_cache(),
        venv=venv,
        installer="uv" if installer == "uv" else "pip",
        keep=keep,
        require_npu=require_npu,
        solve=not no_solve,
        throwaway=not no_env,
        require_env=require_env,
        bundle=from_bundle,
        lock_sha256=lock_sha256,
        frozen=frozen,
    )
    report = check_env(proj, env, options)
    text = render_report(report)
    outcome = Outcome(results=[report.as_dict()], text=text, exit_code=report.exit_code)
    if report.kept:
        outcome.note(report.kept)
    return outcome


@click.command(
    "export",
    short_help="Write a lock as requirements.txt, pylock, Nix or an SBOM.",
    epilog=epilog(
        "envgen export a5 --format requirements --platform linux-aarch64",
        "envgen export a5 --format nix -o a5.nix",
    ),
)
@click.argument("env", callback=env_names)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["requirements", "pylock", "nix", "cyclonedx"]),
    required=True,
    help="requirements.txt (pip, hashes), PEP 751 pylock.toml (uv), Nix, a CycloneDX 1.6 SBOM.",
)
@click.option(
    "--platform",
    help="The platform (requirements, pylock: default this host's; cyclonedx: default all).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE, not stdout.",
)
@common_options
@reporting("export")
def export_command(env: str, fmt: str, platform: str | None, output: Path | None) -> Outcome:
    """Write the lock of ENV in another format, from locks/ alone (nothing is resolved)."""
    from envgen.commands.export import export_lock, write_export

    proj = current_project()
    proj.known_envs([env], locked=True)
    text = export_lock(proj, env, fmt, platform=platform)
    if output is None:
        result = {"env": env, "format": fmt, "output": None, "text": text}
        return Outcome(results=[result], text=text)
    write_export(proj, output, text)
    outcome = Outcome(results=[{"env": env, "format": fmt, "output": str(output)}])
    outcome.note(f"{env}: {fmt} written to {output}")
    return outcome
