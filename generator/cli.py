"""The envgen command line: each command parses, calls one core function, prints; the only place that exits."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from generator import __version__
from generator.errors import EnvgenError
from generator.paths import Project


@contextmanager
def reported() -> Iterator[None]:
    """Turn an EnvgenError into one red `error:` line (plus hint) on stderr and its exit code."""
    try:
        yield
    except EnvgenError as exc:
        click.secho(f"error: {exc.message}", fg="red", err=True)
        if exc.hint:
            click.echo(f"  hint: {exc.hint}", err=True)
        sys.exit(exc.exit_code)


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


def main() -> None:
    cli(prog_name="envgen")
