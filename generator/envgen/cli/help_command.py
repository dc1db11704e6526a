"""`envgen help TOPIC`: what every command shares, in one place each: the exit codes and the
environment variables envgen reads (docs/cli.md holds the same tables)."""

from __future__ import annotations

import click

from envgen import network
from envgen.cli.exit_codes import exit_code_table
from envgen.cli.options import common_options, epilog
from envgen.cli.output import Outcome
from envgen.cli.running import reporting
from envgen.model import DEFAULT_CANN_SET_ENV

# (variable, default, what it does), as `envgen help environment` and docs/cli.md show them.
ENVIRONMENT: tuple[tuple[str, str, str], ...] = (
    ("ENVGEN_ROOT", "the current directory", "where to look for the project, as --root"),
    (
        "ENVGEN_CACHE_DIR",
        "the user cache directory, ~/.cache/envgen on Linux",
        "the cache directory (`envgen cache dir` prints it, `envgen cache clean` empties it)",
    ),
    ("ENVGEN_DEBUG", "unset", "when set, an internal error (exit 70) shows its traceback"),
    *((name, network.seconds(field), what) for field, name, what in network.VARIABLES),
    (
        "ENVGEN_AUDIT_URL",
        "https://pypi.org",
        "the PyPI JSON API `envgen audit` asks (a mirror serving /pypi/NAME/VERSION/json)",
    ),
    ("NO_COLOR", "unset", "when set, no colour with --color auto"),
    ("FORCE_COLOR", "unset", "when set, colour with --color auto off a terminal too"),
    (
        "ASCEND_SET_ENV",
        f"the lock's [system.cann] set-env, else {DEFAULT_CANN_SET_ENV}",
        "CANN's set_env.sh for check's CANN steps and the recipe (several: separated by ':')",
    ),
)

TOPICS = ("exit-codes", "environment")


def environment_table() -> str:
    """The variables as `envgen help environment` prints them: one line each."""
    lines = []
    for name, default, what in ENVIRONMENT:
        shown = "" if default == "unset" else f" (default {default})"
        lines.append(f"{name}{shown}: {what}\n")
    return "".join(lines)


@click.command(
    "help",
    short_help="Exit codes, and the environment variables envgen reads.",
    epilog=epilog("envgen help exit-codes", "envgen help environment"),
)
@click.argument("topic", type=click.Choice(TOPICS), required=False)
@common_options
@reporting("help")
def help_command(topic: str | None) -> Outcome:
    """Print TOPIC: exit-codes (what each exit code of every command means) or environment (the
    variables envgen reads, with their defaults). Without a topic, envgen's own --help."""
    if topic is None:
        context = click.get_current_context()
        root = context.find_root()
        text = root.command.get_help(root)
        return Outcome(results=[{"topic": None, "topics": list(TOPICS)}], text=text + "\n")
    if topic == "exit-codes":
        from envgen.cli.exit_codes import EXIT_CODES

        rows = [{"code": code, "meaning": meaning} for code, meaning in EXIT_CODES]
        return Outcome(results=[{"topic": topic, "exit_codes": rows}], text=exit_code_table())
    rows = [{"name": n, "default": d, "meaning": w} for n, d, w in ENVIRONMENT]
    return Outcome(results=[{"topic": topic, "variables": rows}], text=environment_table())
