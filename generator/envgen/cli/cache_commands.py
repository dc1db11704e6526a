"""`envgen cache dir` and `envgen cache clean`: where envgen's cache is, and emptying it."""

from __future__ import annotations

import click

from envgen.cli.options import common_options, epilog
from envgen.cli.output import Outcome
from envgen.cli.running import reporting


@click.group(
    "cache",
    short_help="Where envgen's cache is; removing what it holds.",
    epilog=epilog("envgen cache dir", "envgen cache clean"),
)
def cache_group() -> None:
    """envgen's cache: git repositories, conda and pip packages, package metadata and uv's cache,
    shared by every project. It is $ENVGEN_CACHE_DIR, else the user cache directory
    (~/.cache/envgen on Linux)."""


@cache_group.command("dir", epilog=epilog("envgen cache dir"))
@common_options
@reporting("cache dir")
def cache_dir_command() -> Outcome:
    """Print the cache directory (it need not exist yet)."""
    from envgen.project import cache_dir

    path = cache_dir()
    return Outcome(results=[{"path": str(path), "exists": path.is_dir()}], text=f"{path}\n")


@cache_group.command("clean", epilog=epilog("envgen cache clean", "envgen cache clean --json"))
@common_options
@reporting("cache clean")
def cache_clean_command() -> Outcome:
    """Remove what envgen cached, and say what was removed.

    Only envgen's own entries of the cache directory go, and only when it holds nothing else: a
    cache directory that is a symbolic link, or one holding anything envgen does not put there,
    is refused (exit 2) with nothing removed. Links inside it are removed as links, never followed.
    The next lock or install fetches again what it needs.
    """
    from envgen.commands.cache import clean_cache
    from envgen.project import cache_dir

    removed = clean_cache(cache_dir())
    entries = [{"name": name, "bytes": size} for name, size in removed.entries]
    result = {"path": str(removed.path), "removed": entries, "bytes": removed.size}
    outcome = Outcome(results=[result])
    for name, size in removed.entries:
        outcome.note(f"removed {removed.path / name} ({_size(size)})")
    if removed.entries:
        outcome.note(f"envgen cache: removed {_size(removed.size)} from {removed.path}")
    else:
        outcome.note(f"envgen cache: nothing to remove in {removed.path}")
    return outcome


def _size(size: int) -> str:
    from rich.filesize import decimal

    return decimal(size)
