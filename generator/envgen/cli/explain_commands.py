"""The commands that explain a lock from locks/ alone: `why` a package is in it, and the `tree`
of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from envgen.cli.options import common_options, current_project, env_names, epilog, settings
from envgen.cli.output import Outcome
from envgen.cli.running import reporting
from envgen.lockgraph.walk import MAX_DEPTH

if TYPE_CHECKING:
    from envgen.commands.explain.command import Explained

PLATFORM_HELP = "Only this platform of the lock (default: every one)."


@click.command(
    "why",
    short_help="Why a package is in a lock: every path from its roots to it.",
    epilog=epilog("envgen why a5 transformers", "envgen why a5 numpy --platform linux-64 --json"),
)
@click.argument("env", callback=env_names)
@click.argument("package")
@click.option("--platform", metavar="P", help=PLATFORM_HELP)
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    metavar="N",
    default=10,
    show_default=True,
    help="Show at most N paths per platform.",
)
@common_options
@reporting("why")
def why_command(env: str, package: str, platform: str | None, limit: int) -> Outcome:
    """Every path from the roots of the lock of ENV (matrix pins, sources' requirements, overrides,
    archives, the conda part) down to PACKAGE, shortest first, with the requirement at each hop.

    Exits 1 when no platform of the lock holds PACKAGE, naming the nearest names it does hold.
    """
    from envgen.commands.explain.command import why_env

    proj = current_project()
    proj.known_envs([env], locked=True)
    found = why_env(proj, env, package, platform=platform, limit=limit, as_json=settings().as_json)
    return _outcome(found)


@click.command(
    "tree",
    short_help="A lock as a tree from its roots, or up from one package.",
    epilog=epilog(
        "envgen tree a5 --platform linux-aarch64 --depth 2", "envgen tree a5 --invert numpy"
    ),
)
@click.argument("env", callback=env_names)
@click.option("--platform", metavar="P", help=PLATFORM_HELP)
@click.option(
    "--depth",
    type=click.IntRange(0, MAX_DEPTH),
    metavar="N",
    default=MAX_DEPTH,
    show_default=True,
    help="Show N levels below each root (above PACKAGE with --invert).",
)
@click.option("--invert", metavar="PACKAGE", help="Walk up from PACKAGE to the roots instead.")
@common_options
@reporting("tree")
def tree_command(env: str, platform: str | None, depth: int, invert: str | None) -> Outcome:
    """The lock of ENV as a tree per platform: the conda part, then the pip part from its roots,
    each package with its version, its index when not the default one, and the requirement that
    brings it (overridden ones marked).

    Exits 1 when --invert names a package no platform of the lock holds.
    """
    from envgen.commands.explain.command import tree_env

    proj = current_project()
    proj.known_envs([env], locked=True)
    found = tree_env(
        proj, env, platform=platform, depth=depth, invert=invert, as_json=settings().as_json
    )
    return _outcome(found)


@click.command(
    "audit",
    short_help="Known vulnerabilities of a lock's pip packages (PyPI).",
    epilog=epilog("envgen audit a5", "envgen audit a5 --platform linux-aarch64 --markdown"),
)
@click.argument("env", callback=env_names)
@click.option("--platform", metavar="P", help=PLATFORM_HELP)
@click.option("--markdown", is_flag=True, help="A markdown table, for a pull request.")
@common_options
@reporting("audit")
def audit_command(env: str, platform: str | None, markdown: bool) -> Outcome:
    """The known vulnerabilities of every pinned pip package of the lock of ENV, from the PyPI JSON
    API (ENVGEN_AUDIT_URL; answers cached for a day): each with its aliases, the smallest fixed
    version and the path that brought the package in. The matrix's [audit.ignore] (ID = "reason")
    lists accepted ones, shown as ignored.

    Exits 1 when there is a finding no ignore covers, 3 when the service cannot be asked.
    """
    from envgen.commands.explain.audit import audit_env

    proj = current_project()
    proj.known_envs([env], locked=True)
    found = audit_env(proj, env, platform=platform, markdown=markdown)
    return _outcome(found)


def _outcome(found: Explained) -> Outcome:
    """What `why`, `tree` and `audit` found, as the command prints it (notes in yellow)."""
    outcome = Outcome(results=found.results, text=found.text, exit_code=found.exit_code)
    for note in found.notes:
        outcome.note(note, "yellow")
    return outcome
