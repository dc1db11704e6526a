"""The envgen command line: each command parses, calls one core function, prints; the only place that exits."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import click

from envgen import __version__, interrupts
from envgen.errors import EnvgenError, InputError, VerificationError
from envgen.logs import setup_logging
from envgen.project import Project, cache_dir

INTERRUPTED, TERMINATED = 130, 143  # 128 + SIGINT, 128 + SIGTERM
_terminated: list[int] = []
_working: list[bool] = []  # inside `reported()`, where an interrupt is reported with what was written


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """SIGINT, and SIGTERM (a CI job cancelled, a supervisor stopping envgen) alike, stop the work."""
    if signum == signal.SIGTERM:
        _terminated.append(signum)
    if not _working:  # before or after the work (parsing options, printing): nothing is being written now
        written = interrupts.written()
        click.secho(interrupts.message(written), fg="red", err=True)
        sys.exit(TERMINATED if _terminated else INTERRUPTED)
    raise KeyboardInterrupt


@contextmanager
def reported() -> Iterator[None]:
    """Turn an EnvgenError into one red `error:` line (plus hint) on stderr and its exit code."""
    interrupts.reset()
    _working.append(True)
    try:
        yield
    except EnvgenError as exc:
        click.secho(f"error: {exc.message}", fg="red", err=True)
        if exc.hint:
            click.echo(f"  hint: {exc.hint}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.filename is None:  # not about a file (a socket, a pipe): a bug if it gets here
            raise
        # A file or directory of the project that cannot be read or written (permissions, a full disk).
        click.secho(f"error: cannot use {exc.filename}: {exc.strerror or exc}", fg="red", err=True)
        click.echo("  hint: check that you may read env-templates/ and channels/ and write locks/", err=True)
        sys.exit(InputError.exit_code)
    except KeyboardInterrupt:
        # Workers may be writing a lock right now: stop them and wait for a write in progress, then say what
        # is on disk (each env's files are from one run: the old ones, or the new ones).
        click.secho(interrupts.message(interrupts.interrupt()), fg="red", err=True)
        sys.exit(TERMINATED if _terminated else INTERRUPTED)
    finally:
        _working.pop()


def _env_names(ctx: click.Context, param: click.Parameter, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
    """Env arguments are names (`a5`), never paths: refused (exit 2) before any work."""
    from envgen.inputs.untrusted import env_name_problem

    for env in (value,) if isinstance(value, str) else value:
        problem = env_name_problem(env)
        if problem:
            raise click.BadParameter(f"{problem} (an env is named by its file in env-templates/ without .toml)")
    return value


quiet_option = click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors on stderr.")
json_option = click.option("--json", "as_json", is_flag=True, help="A machine-readable result on stdout.")
root_option = click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    envvar="ENVGEN_ROOT",
    show_default=True,
    help="Project directory holding env-templates/, channels/ and locks/.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="envgen")
def cli() -> None:
    """Compile version matrices (env-templates/*.toml) into pinned, verified conda-lock environments."""


def project(root: Path) -> Project:
    return Project(root.resolve())


@cli.command("lock")
@click.argument("envs", nargs=-1, callback=_env_names)
@root_option
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
@quiet_option
@json_option
def lock_command(
    envs: tuple[str, ...],
    root: Path,
    upgrade: bool,
    upgrade_packages: tuple[str, ...],
    update: tuple[str, ...],
    update_all: bool,
    force: bool,
    offline: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Lock ENV... (default: every env in env-templates/) into locks/<env>.{yml,sources.toml,install.sh}.

    A re-lock keeps every version and commit of the previous lock that the inputs still allow, and says
    per platform what moved and why.
    """
    from envgen.commands.lock import lock_envs, summarize, summary_lines
    from envgen.resolve.preferences import Upgrade

    if update_all and update:
        raise click.UsageError("--update-all moves every source: give it or --update SOURCE, not both")
    setup_logging(quiet)
    with reported():
        proj = project(root)
        results = lock_envs(
            proj,
            list(envs) or proj.envs(),
            update=True if update_all else update,
            force=force,
            offline=offline,
            upgrade=Upgrade.of(upgrade, upgrade_packages),
        )
    summaries = [summarize(r) for r in results]
    if as_json:
        click.echo(json.dumps(summaries, indent=2, sort_keys=True))
        return
    for line, pending in summary_lines(summaries):
        click.secho(line, fg="yellow" if pending else None, err=True)


@cli.command("show")
@click.argument("env", callback=_env_names)
@root_option
@json_option
def show_command(env: str, root: Path, as_json: bool) -> None:
    """Show the validated, normalised matrix of ENV (--json: a stable JSON document)."""
    from envgen.commands.show import render_json, render_text
    from envgen.inputs.matrix import load_env
    from envgen.lockio.store import read_lock

    with reported():
        proj = project(root)
        matrix = load_env(proj, env)
        # The lock adds what its transitive overrides contradict; a broken lock is `check`'s to report.
        try:
            lock = read_lock(proj, env)
        except EnvgenError:
            lock = None
    click.echo(render_json(matrix, lock) if as_json else render_text(matrix, lock), nl=False)


@cli.command("export")
@click.argument("env")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["requirements", "pylock", "nix", "cyclonedx"]),
    required=True,
    help="requirements.txt (pip, hashes), PEP 751 pylock.toml (uv), a Nix expression, a CycloneDX 1.6 SBOM.",
)
@click.option("--platform", help="The platform (requirements, pylock: default this host's; cyclonedx: default all).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE, not stdout.")
@root_option
def export_command(env: str, fmt: str, platform: str | None, output: Path | None, root: Path) -> None:
    """Write the lock of ENV in another format, from locks/ alone (nothing is resolved)."""
    from envgen.commands.export import export_lock, write_export

    with reported():
        text = export_lock(project(root), env, fmt, platform=platform)
        if output is not None:
            write_export(output, text)
    if output is None:
        click.echo(text, nl=False)
    else:
        click.echo(f"{env}: {fmt} written to {output}", err=True)


@cli.command("diff")
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
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--exit-code", is_flag=True, help="Exit with 1 when anything differs.")
@root_option
@quiet_option
def diff_command(
    old: str | None, new: str | None, rev: str | None, fmt: str, exit_code: bool, root: Path, quiet: bool
) -> None:
    """What changed between two locks: OLD NEW are lock files (locks/a5.yml) or REV:path (HEAD:locks/a5.yml)."""
    from envgen.lockdiff.render import render
    from envgen.lockdiff.revisions import diff_against_rev, diff_sides, read_side

    setup_logging(quiet)
    with reported():
        if rev is not None:
            if old or new:
                raise click.UsageError("give either OLD NEW or --git [REV], not both")
            diffs = diff_against_rev(project(root), rev)
        else:
            if not (old and new):
                raise click.UsageError("give OLD and NEW (lock paths or REV:path), or --git [REV]")
            diff = diff_sides(read_side(old, Path.cwd()), read_side(new, Path.cwd()))
            diffs = [] if diff.empty else [diff]
    click.echo(render(diffs, fmt), nl=False)
    if exit_code and diffs:
        sys.exit(1)


@cli.command("status")
@click.argument("envs", nargs=-1, callback=_env_names)
@root_option
@click.option("--outdated", is_flag=True, help="Also ask the default indexes for newer unpinned pip packages.")
@quiet_option
@json_option
def status_command(envs: tuple[str, ...], root: Path, outdated: bool, quiet: bool, as_json: bool) -> None:
    """Is each lock of ENV... fresh for its inputs, have its branches moved upstream, what is still pending.

    Exits 0 when every lock is fresh and every branch, tag or HEAD it pins still names the locked commit;
    1 when a lock is missing or stale, a ref moved, or a remote could not be asked.
    """
    from envgen.commands.status import render_status, status_env

    setup_logging(quiet)
    with reported():
        proj = project(root)
        reports = [status_env(proj, env, outdated=outdated) for env in (envs or proj.envs())]
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in reports], indent=2, sort_keys=True))
    else:
        click.echo(render_status(reports), nl=False)
    sys.exit(0 if all(r.ok for r in reports) else 1)


@cli.command("install")
@click.argument("env", callback=_env_names)
@click.option(
    "--prefix",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The env to create or update (a conda prefix, or a venv with --venv).",
)
@click.option("--venv", is_flag=True, help="A venv of this python instead of the lock's conda packages.")
@click.option("--profile", "profiles", multiple=True, metavar="NAME", help="An optional activation profile.")
@click.option("--skip-cann", is_flag=True, help="Skip the sources that need CANN (the env is then incomplete).")
@click.option("--installer", type=click.Choice(["pip", "uv"]), default="pip", show_default=True)
@click.option("--from-bundle", type=click.Path(dir_okay=False, path_type=Path), help="Offline, from this bundle.")
@root_option
@quiet_option
def install_command(
    env: str,
    prefix: Path,
    venv: bool,
    profiles: tuple[str, ...],
    skip_cann: bool,
    installer: str,
    from_bundle: Path | None,
    root: Path,
    quiet: bool,
) -> None:
    """Install the lock of ENV into --prefix: conda packages, hash-checked pip packages, then the recipe."""
    from envgen.commands.install import install_lock

    setup_logging(quiet)
    with reported():
        installed = install_lock(
            project(root),
            env,
            prefix,
            cache=cache_dir(),
            venv=venv,
            installer="uv" if installer == "uv" else "pip",
            profiles=profiles,
            skip_cann=skip_cann,
            bundle=from_bundle,
        )
    click.echo(f"{env}: installed into {installed}", err=True)


@cli.command("bundle")
@click.argument("env", callback=_env_names)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help=".tar or .tar.zst")
@click.option("--platform", "platforms", multiple=True, metavar="P", help="Only this platform (repeatable).")
@root_option
@quiet_option
def bundle_command(env: str, output: Path, platforms: tuple[str, ...], root: Path, quiet: bool) -> None:
    """Write every conda package, pip artifact and source commit the lock of ENV names into one archive."""
    from envgen.commands.bundle import bundle_env

    setup_logging(quiet)
    with reported():
        summary = bundle_env(project(root), env, output, platforms=platforms, cache=cache_dir())
    click.echo(summary.describe(env), err=True)


@cli.command("check")
@click.argument("env", callback=_env_names)
@click.option("--venv", is_flag=True, help="Throwaway env as a venv of this python (fixture channels have no CPython).")
@click.option("--require-npu", is_flag=True, help="Fail, rather than skip, what needs CANN or an NPU.")
@click.option("--keep", is_flag=True, help="Keep the throwaway env and print its path.")
@click.option("--no-solve", is_flag=True, help="Skip re-resolving the pip set (it needs the indexes).")
@click.option("--no-env", is_flag=True, help="Skip the throwaway env: static checks and the re-solve only.")
@click.option("--from-bundle", type=click.Path(dir_okay=False, path_type=Path), help="Offline, from this bundle.")
@click.option(
    "--installer",
    type=click.Choice(["pip", "uv"]),
    default="pip",
    show_default=True,
    help="Install the pip part with pip from the requirements.txt, or with uv from the PEP 751 pylock.",
)
@click.option("--require-env", is_flag=True, help="Exit 4 if the throwaway env is skipped (no part for this host).")
@root_option
@quiet_option
@json_option
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
    root: Path,
    quiet: bool,
    as_json: bool,
) -> None:
    """Verify the lock of ENV: static checks, a re-solve, a throwaway install with pip check and imports."""
    from envgen.commands.check import check_env
    from envgen.commands.check_report import render_json, render_report

    setup_logging(quiet)
    with reported():
        report = check_env(
            project(root),
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
    click.echo(render_json(report) if as_json else render_report(report), nl=False)
    if report.kept:
        click.echo(report.kept, err=True)
    if not report.ok:
        sys.exit(VerificationError.exit_code)


@cli.command("demo")
@click.option("--keep", is_flag=True, help="Keep the demo's directory (project, locks, repositories) and print it.")
def demo_command(keep: bool) -> None:
    """Run the whole flow offline on the bundled example (shipped in the package), served on 127.0.0.1.

    lock, check in a throwaway venv, a version bump, lock again, the diff in markdown, status after a branch
    moves upstream. Stops at the first step that fails, with its exit code; Ctrl-C stops the servers and
    removes the directory too.
    """
    from envgen.commands.demo import run_demo

    def say(line: str) -> None:
        click.secho(line, bold=line.startswith("$"), fg="cyan" if line.startswith("#") else None)

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    # A terminated demo (a CI job cancelled) cleans up like an interrupted one.
    signal.signal(signal.SIGTERM, interrupt)
    setup_logging(quiet=False)
    started = time.monotonic()
    with reported():
        try:
            result = run_demo(say, keep=keep)
        except KeyboardInterrupt:
            cleaned = "kept its directory" if keep else "removed its directory"
            click.secho(f"interrupted: the demo stopped its servers and {cleaned}", fg="red", err=True)
            sys.exit(130)
    click.echo(f"envgen demo: {result.commands} commands in {time.monotonic() - started:.0f} s", err=True)
    if result.kept:
        click.echo(result.kept)


INTERNAL_ERROR = 70  # sysexits' EX_SOFTWARE: a bug in envgen, not in its input


def main() -> None:
    # An index with `trusted_host` in channels/ skips certificate checks by choice: no warning per request.
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")  # urllib3's InsecureRequestWarning
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)
    try:
        cli(prog_name="envgen")
    except SystemExit as exc:
        if interrupts.cancelled.is_set():
            interrupts.leave(exc.code if isinstance(exc.code, int) else 1)
        # Done and reported: a signal from here on would only turn a true exit status into "killed".
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        raise
    except Exception as exc:
        # Every expected failure is an EnvgenError with its own exit code; anything else is a bug, reported in
        # one line rather than a traceback (ENVGEN_DEBUG=1 re-raises it for a developer).
        if os.environ.get("ENVGEN_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        click.secho(f"internal error: {type(exc).__name__}: {first}", fg="red", err=True)
        hint = f"this is a bug in envgen {__version__}: please file an issue in the envgen repository with the "
        click.echo(f"  {hint}command you ran and this message (ENVGEN_DEBUG=1 shows the traceback)", err=True)
        sys.exit(INTERNAL_ERROR)
