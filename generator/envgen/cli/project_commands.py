"""The commands on a project's inputs: `init` starts one, `show` shows a matrix as read."""

from __future__ import annotations

from pathlib import Path

import click

from envgen.cli.options import common_options, current_project, env_names, epilog
from envgen.cli.output import Outcome
from envgen.cli.running import reporting
from envgen.errors import EnvgenError


@click.command(
    "init",
    short_help="Start a project: an example matrix and its channels.",
    epilog=epilog(
        "envgen init",
        "envgen init my-stack && cd my-stack && envgen show example",
        "envgen init --no-conda my-stack",
    ),
)
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
@click.option(
    "--no-conda",
    is_flag=True,
    help="An example without [conda]: pip only, installed into a venv.",
)
@common_options
@reporting("init")
def init_command(directory: Path, no_conda: bool) -> Outcome:
    """Start a project in DIRECTORY (default: here): an example matrix, its channels, a .gitignore
    entry.

    Existing files are left alone; a directory already inside a project is refused.
    """
    from envgen.commands.init import init_project

    created = init_project(directory, conda=not no_conda)
    root = str(directory.resolve())
    outcome = Outcome(results=[{"root": root, "created": [str(p) for p in created]}])
    for path in created:
        outcome.note(f"created {path}")
    outcome.note(f"next: `envgen show example`, then `envgen lock example` in {directory}")
    if no_conda:
        outcome.note(
            "then `envgen install example --prefix DIR --venv` (a python 3.11 runs envgen)"
        )
    return outcome


@click.command(
    "show",
    short_help="Show an env's matrix, validated and normalised.",
    epilog=epilog("envgen show a5", "envgen show a5 --json"),
)
@click.argument("env", callback=env_names)
@common_options
@reporting("show")
def show_command(env: str) -> Outcome:
    """Show the validated, normalised matrix of ENV (--json: a stable JSON document)."""
    import json

    from envgen.commands.show import render_json, render_text
    from envgen.inputs.matrix import load_env
    from envgen.lockio.store import read_sealed_sources

    proj = current_project()
    proj.known_envs([env])
    matrix = load_env(proj, env)
    # The lock adds what its transitive overrides contradict, which its sources.toml records (its
    # packages, the yml, are not read); a broken or unsealed lock is `check`'s to report.
    try:
        sources = read_sealed_sources(proj, env)
    except EnvgenError:
        sources = None
    lock = None if sources is None else sources.lock
    document = json.loads(render_json(matrix, lock))
    return Outcome(results=[document], text=render_text(matrix, lock))
