"""What a string from a matrix or a lock may be before it reaches git or the recipe.

Matrices and locks arrive in pull requests and are executed on clusters, so every string in them is
untrusted: a git URL, commit or ref must not be readable as an option or a transport command, and a
name the recipe prints must not end a line. Each rule lives here once; the matrix loader and the
lock parser both apply it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urlsplit

from envgen.commits import is_abbreviated_commit, is_full_commit
from envgen.digests import is_sha256
from envgen.names import env_name_problem, name_problem
from envgen.redact import redact_text

if TYPE_CHECKING:
    from envgen.model import (
        CondaEntry,
        Env,
        Exclusion,
        Link,
        Lock,
        LockedArchive,
        LockedSource,
        PipEntry,
        Submodule,
    )

# `git check-ref-format` rules: no control characters, space, ~ ^ : ? * [ or backslash; no `..`,
# `@{` or `//`; no component starting with `.` or ending with `.lock`; not starting or ending with
# `/`, not ending with `.`, not `@`. A leading `-` (git's `--branch` rule) would read as an option.
_BAD_REF = re.compile(r"[\x00-\x20~^:?*\[\\\x7f]|\.\.|@\{|//|^[/.-]|/\.|[/.]$|\.lock(/|$)|^@$")
_GIT_SCHEMES = ("https", "http", "ssh", "file")
# `user@host:path`, git's scp-like ssh form.
_SCP = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9][A-Za-z0-9.-]*:[^-].*")
_HOST = re.compile(r"[A-Za-z0-9.-]+(:[0-9]+)?")
# A host name alone (an IPv4 address is one): dot-separated labels of letters, digits and inner `-`.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A locked version or conda build string: what conda and PEP 440 write, never whitespace or a
# leading `-`.
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_-]*")
_BUILD = re.compile(r"[A-Za-z0-9_.+-]*")
_MD5 = re.compile(r"[0-9a-f]{32}")
# A component of a path inside a source tree or an env: a plain file or directory name, never
# hidden, an option (`-x`) or a way out (`..`).
_PATH_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*")
# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
# Any whitespace str.isspace() knows (re's \s is the same class), searched in C: a lock has hundreds
# of URLs.
_SPACE = re.compile(r"\s")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def control_problem(text: str, *, prose: bool = False) -> str | None:
    """Why `text` may not appear in a recipe or a git command line (a control character), or None.

    Prose (a description, a note, a reason) may hold newlines and tabs: the recipe prints it on one
    line.
    """
    found = _CONTROL.search(text.replace("\n", " ").replace("\t", " ") if prose else text)
    return f"must not contain control characters (found {found.group()!r})" if found else None


def one_line(text: str) -> str:
    """Prose on one line, for a comment of a generated file: every line break pip, sh or Python
    splits on (newline, CR, vertical tab, form feed, the file separators, U+2028) and every run of
    blanks become one space, so nothing after it starts a line of its own."""
    return " ".join(text.split())


def variable_problem(name: str) -> str | None:
    """Why `name` is not a shell variable name, or None."""
    if _VARIABLE.fullmatch(name):
        return None
    return f"{name!r} is not a variable name (letters, digits and '_', not starting with a digit)"


def commit_problem(sha: str) -> str | None:
    """Why `sha` is not a full 40-hex commit, or None."""
    return None if is_full_commit(sha) else f"{sha!r} is not a full 40-hex commit"


def submodule_path_problem(path: str) -> str | None:
    """Why `path` is not a submodule path inside its repository (relative, no `..`, `.` or `.git`
    component, no backslash or control character), or None: the recipe checks out and verifies what
    is under it."""
    # An empty component also catches "", a leading or trailing "/" and "//".
    if "\\" in path or _CONTROL.search(path) or {"", ".", "..", ".git"} & set(path.split("/")):
        return (
            f"{path!r} is not a relative path inside the repository (no '..', '.', '.git' "
            "or empty component)"
        )
    return None


def tree_path_problem(path: str, *, pattern: bool = False) -> str | None:
    """Why `path` is not a relative path inside a source tree or an env (plain names joined by
    `/`: no `..`, no leading `/` or `-`, no hidden name), or None. With `pattern`, its last name may
    hold one `*` (a link's target: `deep_ep/deep_ep_cpp*.so`); the recipe expands it there and
    nowhere else."""
    parts = path.split("/")
    last = parts[-1].replace("*", "x", 1) if pattern else parts[-1]
    if all(_PATH_PART.fullmatch(part) for part in (*parts[:-1], last)):
        return None
    star = " (one '*' in its last name)" if pattern else ""
    return (
        f"{path!r} is not a relative path inside the tree: names of letters, digits, '.', '_', '+' "
        f"or '-' joined by '/'{star}, none empty, hidden, '..' or starting with '-'"
    )


def archive_url_problem(url: str) -> str | None:
    """Why `url` is not an archive's URL (https:// or http://, a host, no credentials: it is written
    into the lock and the recipe as it is), or None."""
    if _SPACE.search(url) or _CONTROL.search(url):
        return f"{_shown(url)} must be a URL without whitespace or control characters"
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in ("https", "http"):
        return f"{_shown(url)} is not an https:// or http:// URL"
    parts = _split(url)
    if isinstance(parts, str):
        return parts
    if not parts.hostname or not parts.path.strip("/"):
        return f"{_shown(url)} names no host or no file"
    if parts.username is not None or parts.password is not None:
        return f"{_shown(url)} carries credentials; an archive is fetched without any"
    return None


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


def ref_pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is not a release-ref pattern, or None: a branch or tag name whose one `*`
    stands for a version (`releases/v*`). It is matched against the names a remote lists, never
    given to git."""
    if pattern.count("*") != 1:
        return f"{pattern!r} must hold exactly one '*', where the version is (releases/v*)"
    if pattern.startswith("refs/"):
        return f"{pattern!r}: give the branch or tag name without refs/ (releases/v*)"
    if ref_problem(pattern.replace("*", "0")) or pattern.replace("*", "0") == "HEAD":
        return f"{pattern!r} is not a git branch or tag name with a '*' in it (releases/v*)"
    return None


def git_url_problem(url: str) -> str | None:
    """Why `url` is not a git URL envgen fetches from, or None.

    Accepted: https://, http://, ssh:// and file:// URLs with a host (file:// may omit it),
    `user@host:path`, and local paths. Nothing may start with `-` (git would read an option) or name
    another transport (`ext::<command>` runs a command).
    """
    if not url or any(char.isspace() for char in url) or _CONTROL.search(url):
        return f"{_shown(url)} must be a non-empty URL without whitespace or control characters"
    expected = (
        "expected an https://, http://, ssh:// or file:// URL, user@host:path, or a local path"
    )
    if url.startswith("-"):
        return f"{_shown(url)} starts with '-'; {expected}"
    if "://" in url:
        parts = _split(url)
        if isinstance(parts, str):
            return f"{parts}; {expected}"
        if parts.scheme.lower() not in _GIT_SCHEMES:
            return f"{_shown(url)}: scheme {parts.scheme!r} is not allowed; {expected}"
        host = parts.hostname or ""
        if (
            (parts.scheme.lower() != "file" and not host)
            or host.startswith("-")
            or not parts.path.strip("/")
        ):
            return f"{_shown(url)} names no host or no repository path; {expected}"
        return None
    if "::" not in url and _SCP.fullmatch(url):
        return None
    if "::" in url or ":" in url.split("/", 1)[0]:
        return (
            f"{_shown(url)} is neither a URL git fetches over a known transport nor a "
            f"local path; {expected}"
        )
    return None


def entry_problems(entry: CondaEntry | PipEntry) -> list[str]:
    """Every string of a locked artifact that may not reach pip's requirements lines or an export,
    as `field: why`: the installer writes `name @ url --hash=sha256:...` from them, so a newline or
    a leading `-` would add an option line (another index, an editable install) that no lock diff
    shows as such."""
    # imported here: the no-op lock imports this module, not the model
    from envgen.model import CondaEntry

    checks = {
        "name": name_problem(entry.name, "package name"),
        "version": None
        if _VERSION.fullmatch(entry.version)
        else f"{entry.version!r} is not a version",
        "url": _artifact_url_problem(entry.url),
        "sha256": None if is_sha256(entry.sha256) else f"{entry.sha256!r} is not a 64-hex sha256",
    }
    if isinstance(entry, CondaEntry):
        checks["build"] = (
            None
            if _BUILD.fullmatch(entry.build)
            else f"{entry.build!r} is not a conda build string"
        )
        checks["md5"] = None if _MD5.fullmatch(entry.md5) else f"{entry.md5!r} is not a 32-hex md5"
    return [f"{field}: {problem}" for field, problem in checks.items() if problem]


def url_word_problem(url: str) -> str | None:
    """Why `url` is not one index or artifact URL (written as one word of a pip option line), or
    None."""
    if _SPACE.search(url) or _CONTROL.search(url):
        return (
            f"{_shown(url)} must be an https://, http:// or file:// URL without whitespace "
            "or control characters"
        )
    return index_url_problem(url)


def input_hash_problem(digest: str) -> str | None:
    """Why `digest` is not an input hash (64 hex digits; every derived file's header and the Nix dev
    shell's shell command carry it), or None."""
    return None if is_sha256(digest) else f"{digest!r} is not a 64-hex sha256"


def requirement_problem(text: str) -> str | None:
    """Why `text` is not a PEP 508 requirement (packaging's parser says), or None."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(text)
    except InvalidRequirement as exc:
        return f"{_shown(text)} is not a PEP 508 requirement ({str(exc).splitlines()[0]})"
    return None


def _artifact_url_problem(url: str) -> str | None:
    if url.startswith("${"):
        return f"{_shown(url)} is not an https://, http:// or file:// URL"
    return url_word_problem(url)


def _env_problems(key: str, env: Env) -> Iterator[str]:
    for name, value in env:
        if problem := variable_problem(name) or control_problem(value):
            yield f"{key}.{name}: {problem}"


def _source_problems(key: str, locked: LockedSource) -> Iterator[str]:
    src = locked.source
    checks = {
        "name": name_problem(src.name, "source name"),
        "url": git_url_problem(src.url),
        "ref": ref_problem(src.ref),
        "commit": commit_problem(locked.commit),
        "tree": commit_problem(locked.tree) if locked.tree else None,
        "picked": next(filter(None, map(commit_problem, locked.picked)), None),
        "cherry-picks": next(filter(None, map(commit_problem, src.cherry_picks)), None),
        "distribution": control_problem(src.distribution),
        "origin": control_problem(src.origin or ""),
        "build-index": control_problem(src.build_index or ""),
    }
    yield from (f"{key}.{field}: {problem}" for field, problem in checks.items() if problem)
    yield from _env_problems(f"{key}.env", src.env)
    if src.subdirectory and (problem := tree_path_problem(src.subdirectory)):
        yield f"{key}.subdirectory: {problem}"
    for extra in src.extras:
        if problem := name_problem(extra, "extra"):
            yield f"{key}.extras: {problem}"
    for i, replacement in enumerate(src.replacements):
        for field, path in (("from", replacement.source), ("to", replacement.target)):
            if problem := tree_path_problem(path):
                yield f"{key}.replace[{i}].{field}: {problem}"
    for i, sub in enumerate(locked.submodules):
        yield from _submodule_problems(f"{key}.submodules[{i}]", sub)
    paths = [sub.path for sub in locked.submodules]
    if len(set(paths)) != len(paths):
        yield f"{key}.submodules: a path is recorded twice"


def _submodule_problems(key: str, sub: Submodule) -> Iterator[str]:
    checks = {
        "path": submodule_path_problem(sub.path),
        "url": git_url_problem(sub.url),
        "commit": commit_problem(sub.commit),
    }
    yield from (f"{key}.{field}: {problem}" for field, problem in checks.items() if problem)


def _archive_problems(key: str, archive: LockedArchive) -> Iterator[str]:
    checks = {
        "name": name_problem(archive.name, "archive name"),
        "platform": control_problem(archive.platform),
        "url": archive_url_problem(archive.url),
        "sha256": _sha256_problem(archive.sha256),
        "redirect-hosts": next(
            filter(None, map(redirect_host_problem, archive.redirect_hosts)), None
        ),
    }
    yield from (f"{key}.{field}: {problem}" for field, problem in checks.items() if problem)
    for i, member in enumerate(archive.members):
        where = f"{key}.members[{i}]"
        found = {
            "path": tree_path_problem(member.path),
            "name": name_problem(member.name, "distribution"),
            "version": _version_problem(member.version),
            "sha256": _sha256_problem(member.sha256),
            "requires": next(filter(None, map(control_problem, member.requires)), None),
        }
        if not member.path.endswith(".whl"):
            found["path"] = found["path"] or f"{member.path!r} is not a wheel"
        yield from (f"{where}.{field}: {problem}" for field, problem in found.items() if problem)


def _version_problem(version: str) -> str | None:
    return None if _VERSION.fullmatch(version) else f"{version!r} is not a version"


def _sha256_problem(sha256: str) -> str | None:
    return None if is_sha256(sha256) else f"{sha256!r} is not a sha256"


def _link_problems(key: str, link: Link) -> Iterator[str]:
    checks = {
        "target": tree_path_problem(link.target, pattern=True),
        "directory": tree_path_problem(link.directory) if link.directory else None,
        "reason": control_problem(link.reason, prose=True),
    }
    yield from (f"{key}.{field}: {problem}" for field, problem in checks.items() if problem)


def _exclusion_problems(key: str, exclusion: Exclusion) -> Iterator[str]:
    checks = {
        "name": name_problem(exclusion.name, "package name"),
        "reason": control_problem(exclusion.reason, prose=True),
        "platforms": next(filter(None, map(control_problem, exclusion.platforms)), None),
    }
    yield from (f"{key}.{field}: {problem}" for field, problem in checks.items() if problem)


def lock_problems(lock: Lock) -> list[str]:
    """Every string of `lock` that may not reach git or the recipe, as `key: why` in sources.toml's
    terms.

    The sources.toml parser refuses a lock with any (it may have been edited in a pull request), and
    the recipe renderer refuses to render one, so no path from a file to install.sh skips the rules.
    """
    found = [f"env: {p}" for p in [env_name_problem(lock.env)] if p]
    found += [f"input-hash: {p}" for p in [input_hash_problem(lock.input_hash)] if p]
    for i, locked in enumerate(lock.sources):
        found += _source_problems(f"sources[{i}]", locked)
    found += _env_problems("activation.env", lock.activation_env)
    for i, profile in enumerate(lock.profiles):
        key = f"activation.profiles[{i}]"
        found += [f"{key}.name: {p}" for p in [name_problem(profile.name, "profile name")] if p]
        found += [
            f"{key}.description: {p}"
            for p in [control_problem(profile.description, prose=True)]
            if p
        ]
        found += _env_problems(f"{key}.env", profile.env)
    for i, archive in enumerate(lock.archives):
        found += _archive_problems(f"archives[{i}]", archive)
    for i, link in enumerate(lock.links):
        found += _link_problems(f"links[{i}]", link)
    for i, exclusion in enumerate(lock.exclusions):
        found += _exclusion_problems(f"excluded[{i}]", exclusion)
    if lock.cann is not None and (problem := control_problem(lock.cann.set_env)):
        found.append(f"cann.set-env: {problem}")
    for i, index in enumerate(lock.indexes):
        # The requirements export writes `--index-url URL` and `--trusted-host HOST`: one word each.
        checks = {
            "name": control_problem(index.name),
            "url": url_word_problem(index.url),
            "trusted-host": host_problem(index.trusted_host) if index.trusted_host else None,
        }
        found += [
            f"indexes[{i}].{field}: {problem}" for field, problem in checks.items() if problem
        ]
    return found


def host_problem(host: str) -> str | None:
    """Why `host` is not a host name or host:port (pip's --trusted-host), or None."""
    return None if _HOST.fullmatch(host) else f"{host!r} is not a host name (host or host:port)"


def redirect_host_problem(host: str) -> str | None:
    """Why `host` is not a host name an archive may be redirected to (no scheme, port, path or
    option: `objects.githubusercontent.com`), or None."""
    if len(host) <= 253 and _HOST_NAME.fullmatch(host):
        return None
    return f"{host!r} is not a host name (letters, digits, '-' and '.': no scheme, port or path)"


_INDEX_SCHEMES = ("https", "http", "file")


def index_url_problem(url: str) -> str | None:
    """Why `url` cannot be a conda channel or pip index URL (https, http or file), or None.

    A URL starting with a `${VAR}` reference takes its scheme from the environment when used.
    """
    if url.startswith("${"):
        return None
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in _INDEX_SCHEMES or not rest.strip("/"):
        return f"{_shown(url)} is not an https://, http:// or file:// URL"
    parts = _split(url)
    if isinstance(parts, str):
        return parts
    if scheme.lower() != "file" and not parts.hostname:
        return f"{_shown(url)} names no host"
    return None


def _split(url: str) -> SplitResult | str:
    """`url` split into its parts, or why it cannot be (a bad IPv6 bracket, a port that is no
    number, port 0): every later use (a request, git, a redaction) splits it."""
    try:
        parts = urlsplit(url)
        if parts.port == 0:  # reading the port is what checks it
            return f"{_shown(url)} names port 0"
    except ValueError as exc:
        return f"{_shown(url)} is not a valid URL ({exc})"
    return parts


def _shown(url: str) -> str:
    """`url` quoted for a message, without its credentials."""
    return repr(redact_text(url))
