"""`envgen demo`: the whole flow on the bundled example, and a kept demo served again."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from envgen import interrupts
from envgen.cli.exit_codes import INTERRUPTED
from envgen.cli.options import common_options, epilog, settings
from envgen.cli.output import Outcome, banners, paint
from envgen.cli.running import reporting


@click.command(
    "demo",
    short_help="Run the whole flow offline, on a bundled example.",
    epilog=epilog("envgen demo", "envgen demo --keep", "envgen demo --serve /tmp/envgen-demo-x1y2"),
)
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the demo's directory (project, locks, repositories) and print it.",
)
@click.option(
    "--serve",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    metavar="DIR",
    help="Serve a directory --keep kept again, until Ctrl-C, and print what to set to use it.",
)
@common_options
@reporting("demo")
def demo_command(keep: bool, serve: Path | None) -> Outcome:
    """Run the whole flow offline on the bundled example (shipped in the package), served on
    127.0.0.1.

    lock; check in a throwaway conda prefix; the researchers' path (a conda prefix from the lock,
    then the recipe); a version bump, lock again, the diff in markdown; status after a branch
    moves upstream; a bundle, and an install from it with every server stopped. Stops at the
    first step that fails, with its exit code; Ctrl-C stops the servers and removes the directory
    too. Needs no project, and a python 3.11.
    """
    from envgen.commands.demo import run_demo, serve_kept

    flags = settings()
    say = banners(flags)

    # A terminated demo (a CI job cancelled) cleans up like an interrupted one: SIGTERM raises
    # KeyboardInterrupt.
    interrupts.terminate_as_interrupt()
    if serve is not None:
        if keep:
            serves = "--serve serves a directory an earlier --keep kept"
            raise click.UsageError(f"{serves}: give one of them")
        return Outcome(results=[serve_kept(say, serve)])
    started = time.monotonic()
    try:
        result = run_demo(say, keep=keep)
    except KeyboardInterrupt:
        cleaned = "kept its directory" if keep else "removed its directory"
        message = f"interrupted: the demo stopped its servers and {cleaned}"
        sys.stderr.write(paint(message, flags, sys.stderr, "red"))
        sys.exit(INTERRUPTED)
    kept = str(result.kept) if result.kept else None
    text = f"{kept}\n" if kept else ""
    outcome = Outcome(results=[{"commands": result.commands, "kept": kept}], text=text)
    outcome.note(f"envgen demo: {result.commands} commands in {time.monotonic() - started:.0f} s")
    return outcome
