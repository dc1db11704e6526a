"""The envgen command line: one click group, its commands by job in the modules beside this one,
imported as they are looked up.

Each command parses, calls one core function and returns an Outcome; `running.reporting` turns it
into output and the exit code. This package is the only place that prints or exits."""

from __future__ import annotations

import importlib

import click

from envgen.cli.options import common_options, epilog, version_option
from envgen.cli.running import guarded

# Each command's name, and the module and attribute that define it: a command's module (and what it
# imports at its top) is imported only when that command runs, or when help lists the commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("project_commands", "init_command"),
    "show": ("project_commands", "show_command"),
    "lock": ("lock_commands", "lock_command"),
    "status": ("lock_commands", "status_command"),
    "diff": ("lock_commands", "diff_command"),
    "why": ("explain_commands", "why_command"),
    "tree": ("explain_commands", "tree_command"),
    "audit": ("explain_commands", "audit_command"),
    "check": ("env_commands", "check_command"),
    "install": ("env_commands", "install_command"),
    "bundle": ("env_commands", "bundle_command"),
    "export": ("env_commands", "export_command"),
    "demo": ("demo_command", "demo_command"),
    "cache": ("cache_commands", "cache_group"),
    "help": ("help_command", "help_command"),
}


class LazyGroup(click.Group):
    """A click group whose commands are imported by name when looked up (click's documented
    lazy-loading pattern): `envgen show` imports no other command's module."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute = COMMANDS[cmd_name]
            command = getattr(importlib.import_module(f"envgen.cli.{module}"), attribute)
            assert isinstance(command, click.Command) and command.name == cmd_name
            self.add_command(command)
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=LazyGroup,
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


def main() -> None:
    guarded(lambda: cli(prog_name="envgen"))
