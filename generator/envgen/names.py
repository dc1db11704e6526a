"""Names: one spelling of a package across pip and conda, what an env, source, profile or
channel name may be, what a Python project name may be, and which version control a requirement's
URL names (pure; light, every command imports it)."""

from __future__ import annotations

import functools
import re
from urllib.parse import urlsplit

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_PROJECT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?", re.ASCII)


# Kept: a lock's names come back thousands of times (each package, each dependency of each) as its
# derived files are rendered and compared.
@functools.lru_cache(maxsize=8192)
def package_key(name: str) -> str:
    """One spelling per package across pip (PEP 503) and conda (lower case) names."""
    # Imported here: packaging.utils loads packaging.tags and sysconfig, which a no-op lock never
    # needs.
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def is_plain_name(name: str) -> bool:
    """Whether `name` may name an env, a source, a profile or a channel: a letter or digit, then
    letters, digits, '.', '_' or '-' (a file name under env-templates/, channels/ and locks/, never
    a path)."""
    return _NAME.fullmatch(name) is not None


def is_project_name(name: str) -> bool:
    """Whether `name` is a valid Python project name: PEP 508's rule, ASCII letters and digits only,
    the whole string (packaging's own check accepted a trailing newline and non-ASCII letters in
    some of the releases pyproject.toml allows)."""
    return _PROJECT.fullmatch(name) is not None


def name_problem(name: str, what: str) -> str | None:
    """Why `name` (an env, source or profile name) is not a plain name, or None."""
    if is_plain_name(name):
        return None
    rule = "must start with a letter or digit and hold only letters, digits, '.', '_' or '-'"
    return f"{what} {name!r} {rule}"


def env_name_problem(env: str) -> str | None:
    """Why `env` cannot name an env (it is a file name under env-templates/ and locks/, not a path),
    or None."""
    return name_problem(env, "env name")


def vcs_of(url: str | None) -> str | None:
    """The version control a requirement's URL names (`git` for `git+https://…`), None for a plain
    URL or none: a VCS requirement is a source, locked by commit, never given to uv."""
    vcs, plus, _ = urlsplit(url or "").scheme.partition("+")
    return vcs if plus else None
