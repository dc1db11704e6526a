"""The envgen command line: each command parses, calls one core function and returns an Outcome; console.py
turns it into output and the exit code (the only place that prints or exits)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from envgen.console import (
    Outcome,
    common_options,
    current_project,
    download_display,
    env_names,
    epilog,
    guarded,
    reporting,
    settings,
    version_option,
)
from envgen.errors import EnvgenError


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=epilog("envgen init", "envgen lock"))
@version_option
@common_options
def cli() -> None:
    """Compile version matrices (env-templates/*.toml) into pinned, verified conda-lock environments.

    Every command works from any directory inside a project (the nearest directory, upward, holding
    env-templates/ and channels/), takes -q, -v, --color and --json, and exits with the codes below.
    """


@cli.command("init", epilog=epilog("envgen init", "envgen init my-stack && cd my-stack && envgen show example"))
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
@common_options
@reporting("init")
def init_command(directory: Path) -> Outcome:
    """Start a project in DIRECTORY (default: here): an example matrix, its channels, a .gitignore entry.

    Existing files are left alone; a directory already inside a project is refused.
    """
    from envgen.commands.init import init_project

    created = init_project(directory)
    outcome = Outcome(results=[{"root": str(directory.resolve()), "created": [str(p) for p in created]}])
    for path in created:
        outcome.note(f"created {path}")
    outcome.note(f"next: `envgen show example`, then `envgen lock example` in {directory}")
    return outcome


@cli.command(
    "lock", epilog=epilog("envgen lock", "envgen lock a5 --update vllm", "envgen lock a5 --upgrade-package torch")
)
@click.argument("envs", nargs=-1, callback=env_names)
@click.option(
    "--upgrade", is_flag=True, help="Move every package and source to the newest its inputs allow (ignore the lock)."
)
@click.option(
    "--upgrade-package",
    "upgrade_packages",
    multiple=True,
    metavar="NAME",
    help="Move this package (pip or conda) or source to the newest allowed; the others stay where possible.",
)
@click.option("--update", multiple=True, metavar="SOURCE", help="Move this source to its ref's current commit.")
@click.option("--update-all", is_flag=True, help="Move every source to its ref's current commit.")
@click.option("--force", is_flag=True, help="Re-lock even when the inputs did not change.")
@click.option("--offline", is_flag=True, help="Resolve pip packages from the cache only.")
@click.option(
    "--no-preflight",
    is_flag=True,
    help="Skip asking every git remote, channel and index as the lock starts (unreachable ones: exit 3).",
)
@common_options
@reporting("lock")
def lock_command(
    envs: tuple[str, ...],
    upgrade: bool,
    upgrade_packages: tuple[str, ...],
    update: tuple[str, ...],
    update_all: bool,
    force: bool,
    offline: bool,
    no_preflight: bool,
) -> Outcome:
    """Lock ENV... (default: every env in env-templates/) into locks/<env>.{yml,sources.toml,install.sh}.

    A re-lock keeps every version and commit of the previous lock that the inputs still allow, and says
    per platform what moved and why.
    """
    from envgen.commands.lock import lock_envs, summarize, summary_lines
    from envgen.resolve.upgrade import Upgrade

    if update_all and update:
        raise click.UsageError("--update-all moves every source: give it or --update SOURCE, not both")
    proj = current_project()
    results = lock_envs(
        proj,
        proj.known_envs(envs),
        update=True if update_all else update,
        force=force,
        offline=offline,
        upgrade=Upgrade.of(upgrade, upgrade_packages),
        preflight=not no_preflight,
    )
    summaries = [summarize(r) for r in results]
    outcome = Outcome(results=summaries)
    for line, pending in summary_lines(summaries):
        outcome.note(line, "yellow" if pending else None)
    return outcome


@cli.command("show", epilog=epilog("envgen show a5", "envgen show a5 --json"))
@click.argument("env", callback=env_names)
@common_options
@reporting("show")
def show_command(env: str) -> Outcome:
    """Show the validated, normalised matrix of ENV (--json: a stable JSON document)."""
    import json

    from envgen.commands.show import render_json, render_text
    from envgen.inputs.matrix import load_env
    from envgen.lockio.store import read_lock

    proj = current_project()
    proj.known_envs([env])
    matrix = load_env(proj, env)
    # The lock adds what its transitive overrides contradict; a broken lock is `check`'s to report.
    try:
        lock = read_lock(proj, env)
    except EnvgenError:
        lock = None
    return Outcome(results=[json.loads(render_json(matrix, lock))], text=render_text(matrix, lock))


@cli.command(
    "export",
    epilog=epilog(
        "envgen export a5 --format requirements --platform linux-aarch64", "envgen export a5 --format nix -o a5.nix"
    ),
)
@click.argument("env", callback=env_names)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["requirements", "pylock", "nix", "cyclonedx"]),
    required=True,
    help="requirements.txt (pip, hashes), PEP 751 pylock.toml (uv), a Nix expression, a CycloneDX 1.6 SBOM.",
)
@click.option("--platform", help="The platform (requirements, pylock: default this host's; cyclonedx: default all).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE, not stdout.")
@common_options
@reporting("export")
def export_command(env: str, fmt: str, platform: str | None, output: Path | None) -> Outcome:
    """Write the lock of ENV in another format, from locks/ alone (nothing is resolved)."""
    from envgen.commands.export import export_lock, write_export

    proj = current_project()
    proj.known_envs([env], locked=True)
    text = export_lock(proj, env, fmt, platform=platform)
    if output is None:
        return Outcome(results=[{"env": env, "format": fmt, "output": None, "text": text}], text=text)
    write_export(output, text)
    outcome = Outcome(results=[{"env": env, "format": fmt, "output": str(output)}])
    outcome.note(f"{env}: {fmt} written to {output}")
    return outcome


@cli.command(
    "diff",
    epilog=epilog(
        "envgen diff --git                         # locks/ against HEAD",
        "envgen diff --git origin/main --format markdown",
        "envgen diff old/a5.yml locks/a5.yml --exit-code   # exit 1 when they differ",
    ),
)
@click.argument("old", required=False)
@click.argument("new", required=False)
@click.option(
    "--git",
    "rev",
    is_flag=False,
    flag_value="HEAD",
    default=None,
    metavar="REV",
    help="Compare every lock in locks/ with the same file at REV (default HEAD); unchanged ones are skipped.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="text for a terminal, markdown for a pull request; json is --json.",
)
@click.option("--exit-code", is_flag=True, help="Exit with 1 when anything differs.")
@common_options
@reporting("diff")
def diff_command(old: str | None, new: str | None, rev: str | None, fmt: str, exit_code: bool) -> Outcome:
    """What changed between two locks: OLD NEW are lock files (locks/a5.yml) or REV:path (HEAD:locks/a5.yml).

    With two files no project is needed; --git diffs the project's locks/.
    """
    from envgen.lockdiff.render import diff_results, render
    from envgen.lockdiff.revisions import diff_against_rev, diff_sides, read_side

    flags = settings()
    if fmt == "json":
        flags.as_json = True
    if rev is not None:
        if old or new:
            raise click.UsageError("give either OLD NEW or --git [REV], not both")
        diffs = diff_against_rev(current_project(), rev)
    else:
        if not (old and new):
            raise click.UsageError("give OLD and NEW (lock paths or REV:path), or --git [REV]")
        diff = diff_sides(read_side(old, Path.cwd()), read_side(new, Path.cwd()))
        diffs = [] if diff.empty else [diff]
    text = render(diffs, "text" if fmt == "json" else fmt)
    return Outcome(results=diff_results(diffs), text=text, exit_code=1 if diffs and exit_code else 0)


@cli.command("status", epilog=epilog("envgen status --watch", "envgen status a5 --json -q"))
@click.argument("envs", nargs=-1, callback=env_names)
@click.option("--outdated", is_flag=True, help="Also ask the default indexes for newer unpinned pip packages.")
@click.option("--watch", is_flag=True, help="Also ask upstream whether each matrix still holds.")
@common_options
@reporting("status")
def status_command(envs: tuple[str, ...], outdated: bool, watch: bool) -> Outcome:
    """Is each lock of ENV... fresh for its inputs, have its branches moved upstream, what is still pending.

    Exits 0 when every lock is fresh and every branch, tag or HEAD it pins still names the locked commit;
    1 when a lock is missing (no lock yet) or stale, a ref moved, a remote could not be asked, or
    --watch found the matrix no longer true; 3 when --watch could not ask a host; 4 when a lock's
    files were edited after `envgen lock` wrote them (tampered).
    """
    from envgen.commands.status import render_status, status_env, status_exit_code
    from envgen.project import cache_dir

    proj, cache = current_project(), cache_dir() if watch else None
    named = proj.known_envs(envs, locked=True)
    reports = [status_env(proj, env, outdated=outdated, watch=cache) for env in named]
    text, code = render_status(reports), status_exit_code(reports)
    return Outcome(results=[r.as_dict() for r in reports], text=text, exit_code=code)


# install and check install the pip part the same two ways.
INSTALLER = click.option(
    "--installer",
    type=click.Choice(["pip", "uv"]),
    default="pip",
    show_default=True,
    help="Install the pip part with pip (requirements.txt, --require-hashes) or with uv (the PEP 751 pylock).",
)


@cli.command(
    "install",
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
@click.option("--venv", is_flag=True, help="A venv of this python instead of the lock's conda packages.")
@click.option("--profile", "profiles", multiple=True, metavar="NAME", help="An optional activation profile.")
@click.option("--skip-cann", is_flag=True, help="Skip the sources that need CANN (the env is then incomplete).")
@INSTALLER
@click.option(
    "--from-bundle",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Install offline from this bundle (envgen bundle), every member verified first.",
)
@common_options
@reporting("install")
def install_command(
    env: str,
    prefix: Path,
    venv: bool,
    profiles: tuple[str, ...],
    skip_cann: bool,
    installer: str,
    from_bundle: Path | None,
) -> Outcome:
    """Install the lock of ENV into --prefix: conda packages, hash-checked pip packages, then the recipe."""
    from envgen.commands.install import install_lock
    from envgen.project import cache_dir

    proj = current_project(required=from_bundle is None)
    if from_bundle is None:  # a bundle brings its own lock
        proj.known_envs([env], locked=True)
    installed = install_lock(
        proj,
        env,
        prefix,
        cache=cache_dir(),
        venv=venv,
        installer="uv" if installer == "uv" else "pip",
        profiles=profiles,
        skip_cann=skip_cann,
        bundle=from_bundle,
    )
    outcome = Outcome(results=[{"env": env, "prefix": str(installed), "profiles": list(profiles)}])
    outcome.note(f"{env}: installed into {installed}")
    return outcome


@cli.command(
    "bundle",
    epilog=epilog(
        "envgen bundle a5 --platform linux-aarch64 -o a5-aarch64.tar.zst",
        "envgen install a5 --from-bundle a5-aarch64.tar.zst --prefix /opt/envs/verl-a5",
    ),
)
@click.argument("env", callback=env_names)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help=".tar or .tar.zst")
@click.option("--platform", "platforms", multiple=True, metavar="P", help="Only this platform (repeatable).")
@common_options
@reporting("bundle")
def bundle_command(env: str, output: Path, platforms: tuple[str, ...]) -> Outcome:
    """Write every conda package, pip artifact and source commit the lock of ENV names into one archive."""
    from envgen.commands.bundle import bundle_env
    from envgen.project import cache_dir

    proj = current_project()
    proj.known_envs([env], locked=True)
    display = download_display(settings())
    summary = bundle_env(proj, env, output, platforms=platforms, cache=cache_dir(), display=display)
    result = {"env": env, "path": str(summary.path), "files": summary.files, "size": summary.size}
    outcome = Outcome(results=[result | {"downloaded": summary.downloaded, "seconds": round(summary.seconds, 1)}])
    outcome.note(summary.describe(env))
    return outcome


@cli.command(
    "check",
    epilog=epilog("envgen check a5", "envgen check a5 --venv --installer uv", "envgen check a5 --no-env --json"),
)
@click.argument("env", callback=env_names)
@click.option("--venv", is_flag=True, help="Throwaway env as a venv of this python instead of the lock's conda python.")
@click.option("--require-npu", is_flag=True, help="Fail, rather than skip, what needs CANN or an NPU.")
@click.option("--keep", is_flag=True, help="Keep the throwaway env and print its path.")
@click.option("--no-solve", is_flag=True, help="Skip re-resolving the pip set (it needs the indexes).")
@click.option("--no-env", is_flag=True, help="Skip the throwaway env: static checks and the re-solve only.")
@click.option("--from-bundle", type=click.Path(dir_okay=False, path_type=Path), help="Offline, from this bundle.")
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
    installer: str,
    require_env: bool,
    from_bundle: Path | None,
) -> Outcome:
    """Verify the lock of ENV: static checks, a re-solve, a throwaway install with pip check and imports."""
    from envgen.commands.check import check_env
    from envgen.commands.check_report import render_report
    from envgen.project import cache_dir

    proj = current_project(required=from_bundle is None)
    if from_bundle is None:  # a bundle brings its own lock
        proj.known_envs([env])
    report = check_env(
        proj,
        env,
        cache=cache_dir(),
        venv=venv,
        require_npu=require_npu,
        keep=keep,
        solve=not no_solve,
        throwaway=not no_env,
        installer="uv" if installer == "uv" else "pip",
        require_env=require_env,
        bundle=from_bundle,
    )
    outcome = Outcome(results=[report.as_dict()], text=render_report(report), exit_code=report.exit_code)
    if report.kept:
        outcome.note(report.kept)
    return outcome


@cli.command("demo", epilog=epilog("envgen demo", "envgen demo --keep", "envgen demo --serve /tmp/envgen-demo-x1y2"))
@click.option("--keep", is_flag=True, help="Keep the demo's directory (project, locks, repositories) and print it.")
@click.option(
    "--serve",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    metavar="DIR",
    help="Serve a directory --keep kept again, until Ctrl-C, and print what to set to lock, check, diff in it.",
)
@common_options
@reporting("demo")
def demo_command(keep: bool, serve: Path | None) -> Outcome:
    """Run the whole flow offline on the bundled example (shipped in the package), served on 127.0.0.1.

    lock, check in a throwaway venv, a version bump, lock again, the diff in markdown, status after a branch
    moves upstream, a bundle, and an install from it with every server stopped. Stops at the first step that
    fails, with its exit code; Ctrl-C stops the servers and removes the directory too. Needs no project.
    """
    import time

    from envgen.commands.demo import run_demo, serve_kept
    from envgen.console import banners, paint

    flags = settings()
    say = banners(flags)

    # A terminated demo (a CI job cancelled) cleans up like an interrupted one: SIGTERM raises KeyboardInterrupt.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if serve is not None:
        if keep:
            raise click.UsageError("--serve serves a directory an earlier --keep kept: give one of them")
        return Outcome(results=[serve_kept(say, serve)])
    started = time.monotonic()
    try:
        result = run_demo(say, keep=keep)
    except KeyboardInterrupt:
        cleaned = "kept its directory" if keep else "removed its directory"
        sys.stderr.write(paint(f"interrupted: the demo stopped its servers and {cleaned}", flags, sys.stderr, "red"))
        sys.exit(130)
    kept = str(result.kept) if result.kept else None
    outcome = Outcome(results=[{"commands": result.commands, "kept": kept}], text=f"{kept}\n" if kept else "")
    outcome.note(f"envgen demo: {result.commands} commands in {time.monotonic() - started:.0f} s")
    return outcome


def main() -> None:
    guarded(lambda: cli(prog_name="envgen"))
