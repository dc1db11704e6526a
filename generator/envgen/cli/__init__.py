"""The envgen command line: one click group, its commands by job in the modules beside this one.

Each command parses, calls one core function and returns an Outcome; `running.reporting` turns it
into output and the exit code. This package is the only place that prints or exits."""

from __future__ import annotations

import click

from envgen.cli.cache_commands import cache_group
from envgen.cli.demo_command import demo_command
from envgen.cli.env_commands import bundle_command, check_command, export_command, install_command
from envgen.cli.explain_commands import audit_command, tree_command, why_command
from envgen.cli.help_command import help_command
from envgen.cli.lock_commands import diff_command, lock_command, status_command
from envgen.cli.options import common_options, epilog, version_option
from envgen.cli.project_commands import init_command, show_command
from envgen.cli.running import guarded


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=epilog("envgen init", "envgen lock"),
)
@version_option
@common_options
def cli() -> None:
    """Compile version matrices (env-templates/*.toml) into pinned, verified conda-lock
    environments.

    Every command works from within a project (the nearest directory upward holding
    env-templates/ and channels/) and takes -q, -v, --color and --json.
    """


for command in (
    init_command,
    show_command,
    lock_command,
    status_command,
    diff_command,
    why_command,
    tree_command,
    audit_command,
    check_command,
    install_command,
    bundle_command,
    export_command,
    demo_command,
    cache_group,
    help_command,
):
    cli.add_command(command)


def main() -> None:
    guarded(lambda: cli(prog_name="envgen"))
