"""The commands that make locks and say what changed: `lock`, `diff`, `status`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from envgen.cli.options import common_options, current_project, env_names, epilog, settings
from envgen.cli.output import Outcome
from envgen.cli.running import reporting

if TYPE_CHECKING:
    from envgen.commands.lock.command import Mode


@click.command(
    "lock",
    short_help="Lock envs: every artifact hashed, every source a commit.",
    epilog=epilog(
        "envgen lock",
        "envgen lock a5 --update vllm",
        "envgen lock --check                # exit 1 when a re-lock would change locks/",
        "envgen lock a5 --dry-run --upgrade-package torch",
    ),
)
@click.argument("envs", nargs=-1, callback=env_names)
@click.option(
    "--upgrade",
    is_flag=True,
    help="Move every package and source to the newest its inputs allow (ignore the lock).",
)
@click.option(
    "--upgrade-package",
    "upgrade_packages",
    multiple=True,
    metavar="NAME",
    help="Move this package (pip or conda) or source to the newest allowed; the rest stay.",
)
@click.option(
    "--update",
    multiple=True,
    metavar="SOURCE",
    help="Move this source to its ref's current commit.",
)
@click.option("--update-all", is_flag=True, help="Move every source to its ref's current commit.")
@click.option("--force", is_flag=True, help="Re-lock even when the inputs did not change.")
@click.option("--offline", is_flag=True, help="Resolve pip packages from the cache only.")
@click.option(
    "--no-preflight",
    is_flag=True,
    help="Skip asking every git remote, channel and index as the lock starts.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Exit 1 if a re-lock would change locks/.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="What a re-lock would move, and why (no write).",
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
    check: bool,
    dry_run: bool,
) -> Outcome:
    """Lock ENVS (default: every env in env-templates/) into
    locks/<env>.{yml,sources.toml,install.sh}.

    A re-lock keeps every version and commit of the previous lock that the inputs still allow, and
    says per platform what moved and why; with --check or --dry-run it writes nothing.
    """
    from envgen.commands.lock.command import lock_envs
    from envgen.commands.lock.report import summarize, summary_lines
    from envgen.resolve.movable import Movable

    if update_all and update:
        both = "--update-all moves every source"
        raise click.UsageError(f"{both}: give it or --update SOURCE, not both")
    moving = {
        "--upgrade": upgrade,
        "--upgrade-package NAME": bool(upgrade_packages),
        "--update SOURCE": bool(update),
        "--update-all": update_all,
        "--force": force,
    }
    mode = _mode(check, dry_run, [flag for flag, given in moving.items() if given])
    proj = current_project()
    results = lock_envs(
        proj,
        proj.known_envs(envs),
        update=Movable.sources(update_all, update),
        force=force,
        offline=offline,
        upgrade=Movable.packages(upgrade, upgrade_packages),
        preflight=not no_preflight,
        mode=mode,
    )
    summaries = [summarize(r) for r in results]
    outcome = Outcome(results=summaries)
    for line, pending in summary_lines(summaries):
        outcome.note(line, "yellow" if pending else None)
    stale = [s["env"] for s in summaries if s["status"] == "would-lock"]
    if mode == "check" and stale:
        outcome.exit_code = 1
        outcome.note(_check_failed(stale), "yellow")
    return outcome


def _mode(check: bool, dry_run: bool, moving: list[str]) -> Mode:
    """What the lock does with its re-locks' results; a usage error for flags that contradict."""
    if check and dry_run:
        raise click.UsageError(
            "give --check or --dry-run, not both: --check exits 1 when a re-lock would change "
            "locks/, --dry-run says what it would change"
        )
    if check and moving:
        flag = moving[0]
        raise click.UsageError(
            f"give --check or {flag.split()[0]}, not both: --check asks whether `envgen lock` "
            f"as it is would change locks/; to see what `envgen lock {flag}` would change, use "
            f"`envgen lock --dry-run {flag}`"
        )
    return "check" if check else "dry-run" if dry_run else "write"


def _check_failed(stale: list[str]) -> str:
    """The closing line of a --check that found locks to update."""
    which = "lock needs" if len(stale) == 1 else "locks need"
    return (
        f"{len(stale)} {which} to be updated, but --check was provided (nothing written): "
        f"run `envgen lock {' '.join(stale)}` to update {'it' if len(stale) == 1 else 'them'}"
    )


@click.command(
    "diff",
    short_help="What changed between two locks, or in locks/ since a commit.",
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
    help="Compare every lock in locks/ with the same file at REV (default HEAD).",
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
def diff_command(
    old: str | None,
    new: str | None,
    rev: str | None,
    fmt: str,
    exit_code: bool,
) -> Outcome:
    """What changed between two locks: OLD NEW are lock files (locks/a5.yml) or REV:path
    (HEAD:locks/a5.yml).

    With two files no project is needed; --git diffs the project's locks/ (unchanged ones are
    skipped).
    """
    from envgen.commands.diff_via import explain
    from envgen.lockdiff.render import diff_results, render
    from envgen.lockdiff.revisions import diff_against_rev, diff_sides, read_side

    flags = settings()
    if fmt == "json":
        flags.as_json = True
    if rev is not None:
        if old or new:
            raise click.UsageError("give either OLD NEW or --git [REV], not both")
        diffs = diff_against_rev(current_project(), rev, explain)
    else:
        if not (old and new):
            raise click.UsageError("give OLD and NEW (lock paths or REV:path), or --git [REV]")
        diff = diff_sides(read_side(old, Path.cwd()), read_side(new, Path.cwd()), explain)
        diffs = [] if diff.empty else [diff]
    text = render(diffs, "text" if fmt == "json" else fmt)
    code = 1 if diffs and exit_code else 0
    return Outcome(results=diff_results(diffs), text=text, exit_code=code)


@click.command(
    "status",
    short_help="Is each lock fresh, has any of its sources moved upstream.",
    epilog=epilog("envgen status --watch", "envgen status a5 --json -q"),
)
@click.argument("envs", nargs=-1, callback=env_names)
@click.option(
    "--outdated",
    is_flag=True,
    help="Also ask the default indexes for newer unpinned pip packages.",
)
@click.option("--watch", is_flag=True, help="Also ask upstream whether each matrix still holds.")
@common_options
@reporting("status")
def status_command(envs: tuple[str, ...], outdated: bool, watch: bool) -> Outcome:
    """Is each lock of ENVS fresh for its inputs, have its branches moved upstream, what is still
    pending.

    Exits 0 when every lock is fresh and every branch, tag or HEAD it pins still names the locked
    commit; 1 when a lock is missing or stale, a ref moved, a remote could not be asked, or --watch
    found the matrix no longer true; 3 when --watch could not ask a host; 4 when a lock's files
    were edited after `envgen lock` wrote them (tampered).
    """
    from envgen.commands.status.command import render_status, status_env, status_exit_code

    proj, cache = current_project(), None
    if watch:
        from envgen.commands.cache import claimed_cache  # the watch's cache: with --watch alone

        cache = claimed_cache()
    named = proj.known_envs(envs, locked=True)
    reports = [status_env(proj, env, outdated=outdated, watch=cache) for env in named]
    text, code = render_status(reports), status_exit_code(reports)
    return Outcome(results=[r.as_dict() for r in reports], text=text, exit_code=code)
