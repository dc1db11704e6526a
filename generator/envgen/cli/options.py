"""What every command takes on the command line: the output flags (-q, -v, --color, --json,
--root) stored in one Settings, env names checked on the way in, the options install and check
share, the end of every --help, and the project an invocation works in."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click

import envgen

if TYPE_CHECKING:
    from envgen.project import Project


@dataclass
class Settings:
    """The output flags of one invocation."""

    root: Path | None = None
    quiet: bool = False
    verbose: int = 0
    color: str = "auto"
    as_json: bool = False

    def colored(self, stream: TextIO) -> bool:
        """--color always/never win; with auto, NO_COLOR (any value) then FORCE_COLOR, then: is it a
        terminal."""
        if self.color != "auto":
            return self.color == "always"
        if os.environ.get("NO_COLOR"):
            return False
        if os.environ.get("FORCE_COLOR"):
            return True
        return stream.isatty()


def settings() -> Settings:
    return click.get_current_context().find_root().ensure_object(Settings)


def _store(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None and value != param.get_default(ctx):
            setattr(ctx.find_root().ensure_object(Settings), name, value)

    return callback


def env_names(
    ctx: click.Context,
    param: click.Parameter,
    value: str | tuple[str, ...],
) -> str | tuple[str, ...]:
    """Env arguments are names (`a5`), never paths: refused (exit 2) before any work."""
    from envgen.names import env_name_problem

    for env in (value,) if isinstance(value, str) else value:
        problem = env_name_problem(env)
        if problem:
            hint = "an env is named by its file in env-templates/ without .toml"
            raise click.BadParameter(f"{problem} ({hint})")
    return value


# The same flags on every command (and before it: `envgen -q lock`), stored in one Settings.
_COMMON = (
    click.option(
        "--root",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        envvar="ENVGEN_ROOT",
        expose_value=False,
        callback=_store("root"),
        help="The project, or a directory inside it (default: here; ENVGEN_ROOT).",
    ),
    click.option(
        "-q",
        "--quiet",
        is_flag=True,
        expose_value=False,
        callback=_store("quiet"),
        help="Only errors on stderr.",
    ),
    click.option(
        "-v",
        "--verbose",
        count=True,
        expose_value=False,
        callback=_store("verbose"),
        help="Debug logs on stderr (-vv: the libraries' too).",
    ),
    click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        expose_value=False,
        callback=_store("color"),
        help="Colour (auto: on a terminal, unless NO_COLOR).",
    ),
    click.option(
        "--json",
        is_flag=True,
        expose_value=False,
        callback=_store("as_json"),
        help="One JSON document on stdout (docs/cli-json.md).",
    ),
)


def common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_COMMON):
        func = option(func)
    return func


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    # envgen.__version__ is read only here (importlib.metadata would cost every command's start-up),
    # and is "0.0.0" from a source tree never installed, where click's own lookup by package name
    # fails.
    if value and not ctx.resilient_parsing:
        click.echo(f"envgen, version {envgen.__version__}")
        ctx.exit()


version_option = click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)

# install and check install the pip part the same two ways.
INSTALLER = click.option(
    "--installer",
    type=click.Choice(["pip", "uv"]),
    default="pip",
    show_default=True,
    help="pip (requirements.txt, --require-hashes) or uv (the PEP 751 pylock).",
)

# Where every --help ends: the exit codes and the environment are a topic each, not repeated.
_TOPICS = "Exit codes: `envgen help exit-codes`; variables: `envgen help environment`."


def epilog(*examples: str) -> str:
    """The end of a command's --help: its examples (`\\b`: click keeps their lines), then where the
    exit codes and the environment variables are."""
    lines = "\n".join(f"  {example}" for example in examples)
    return f"\b\nExamples:\n{lines}\n\n{_TOPICS}"


# install and check take a bundle the same way: trusted through the project's lock, or the hash.
_FROM = "Offline, from this bundle (envgen bundle), each member checked against the lock."
_LOCK_SHA256 = (
    "With --from-bundle and no lock of ENV under --root (no checkout): the content hash of the "
    "lock the bundle must carry, as `envgen bundle` printed it. Required then, checked when given."
)
_BUNDLE = (
    click.option("--from-bundle", type=click.Path(dir_okay=False, path_type=Path), help=_FROM),
    click.option("--lock-sha256", metavar="HASH", help=_LOCK_SHA256),
)


def bundle_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_BUNDLE):
        func = option(func)
    return func


def bundle_project(
    env: str,
    bundle: Path | None,
    lock_sha256: str | None,
    *,
    locked: bool,
) -> Project:
    """The project of `install` or `check`; with a bundle, which brings its lock, none is needed."""
    if lock_sha256 is not None and bundle is None:
        raise click.UsageError("--lock-sha256 goes with --from-bundle")
    project = current_project(required=bundle is None)
    if bundle is None:
        project.known_envs([env], locked=locked)
    return project


def current_project(*, required: bool = True) -> Project:
    """The project of this invocation: found upward from --root (or the current directory).

    Not `required` (a bundle brings its own lock): without one, that directory stands for a project
    with no locks.
    """
    from envgen.project import Project, find_project, is_project

    start = (settings().root or Path.cwd()).resolve()
    if not required and not any(is_project(d) for d in (start, *start.parents)):
        return Project(start)
    return find_project(start)
