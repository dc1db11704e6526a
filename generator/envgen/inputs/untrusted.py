"""What a string from a matrix or a lock may be before it reaches git or the recipe.

Matrices and locks arrive in pull requests and are executed on clusters, so every string in them is untrusted:
a git URL, commit or ref must not be readable as an option or a transport command, and a name the recipe
prints must not end a line. Each rule lives here once; the matrix loader and the lock parser both apply it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from envgen.commits import is_abbreviated_commit, is_full_commit

# `git check-ref-format` rules: no control characters, space, ~ ^ : ? * [ or backslash; no `..`, `@{` or
# `//`; no component starting with `.` or ending with `.lock`; not starting or ending with `/`, not ending
# with `.`, not `@`. A leading `-` (git's `--branch` rule) would read as an option.
_BAD_REF = re.compile(r"[\x00-\x20~^:?*\[\\\x7f]|\.\.|@\{|//|^[/.-]|/\.|[/.]$|\.lock(/|$)|^@$")
_GIT_SCHEMES = ("https", "http", "ssh", "file")
# `user@host:path`, git's scp-like ssh form.
_SCP = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9][A-Za-z0-9.-]*:[^-].*")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def control_problem(text: str) -> str | None:
    """Why `text` may not appear in a recipe or a git command line (a control character), or None."""
    found = _CONTROL.search(text)
    return f"must not contain control characters (found {found.group()!r})" if found else None


def name_problem(name: str, what: str) -> str | None:
    """Why `name` (an env, source or profile name) is not a plain name, or None."""
    if _NAME.fullmatch(name):
        return None
    return f"{what} {name!r} must start with a letter or digit and hold only letters, digits, '.', '_' or '-'"


def variable_problem(name: str) -> str | None:
    """Why `name` is not a shell variable name, or None."""
    if _VARIABLE.fullmatch(name):
        return None
    return f"{name!r} is not a variable name (letters, digits and '_', not starting with a digit)"


def commit_problem(sha: str) -> str | None:
    """Why `sha` is not a full 40-hex commit, or None."""
    return None if is_full_commit(sha) else f"{sha!r} is not a full 40-hex commit"


def ref_problem(ref: str) -> str | None:
    """Why `ref` is not a usable git ref (branch, tag, HEAD or full commit), or None."""
    if is_full_commit(ref) or ref == "HEAD":
        return None
    if is_abbreviated_commit(ref):
        return (
            f"'{ref}' looks like an abbreviated commit ({len(ref)} hex digits); "
            "write the full 40-hex commit (git rev-parse <short>)"
        )
    if not ref or _BAD_REF.search(ref):
        return f"{ref!r} is not a valid git ref (branch, tag, HEAD or a full 40-hex commit)"
    return None


def git_url_problem(url: str) -> str | None:
    """Why `url` is not a git URL envgen fetches from, or None.

    Accepted: https://, http://, ssh:// and file:// URLs with a host (file:// may omit it), `user@host:path`,
    and local paths. Nothing may start with `-` (git would read an option) or name another transport
    (`ext::<command>` runs a command).
    """
    if not url or any(char.isspace() for char in url) or _CONTROL.search(url):
        return f"{url!r} must be a non-empty URL without whitespace or control characters"
    expected = "expected an https://, http://, ssh:// or file:// URL, user@host:path, or a local path"
    if url.startswith("-"):
        return f"{url!r} starts with '-'; {expected}"
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme.lower() not in _GIT_SCHEMES:
            return f"{url!r}: scheme {parts.scheme!r} is not allowed; {expected}"
        host = parts.hostname or ""
        if (parts.scheme.lower() != "file" and not host) or host.startswith("-") or not parts.path.strip("/"):
            return f"{url!r} names no host or no repository path; {expected}"
        return None
    if "::" not in url and _SCP.fullmatch(url):
        return None
    if "::" in url or ":" in url.split("/", 1)[0]:
        return f"{url!r} is neither a URL git fetches over a known transport nor a local path; {expected}"
    return None
