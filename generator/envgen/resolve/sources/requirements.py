"""The requirements a git source's tree declares: its requirement files read, digested, git
requirements split off."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

from envgen.errors import InputError, ResolutionError
from envgen.inputs.requirements import Line, parse_pyproject, parse_requirement_files
from envgen.inputs.untrusted import git_url_problem, ref_problem
from envgen.model import PYPROJECT, Origin, Source, TracedRequirement
from envgen.names import package_key, vcs_of
from envgen.redact import redact_url, strip_credentials

logger = logging.getLogger(__name__)


def read_requirements(
    source: Source, read: Callable[[str], bytes | None], commit: str
) -> tuple[tuple[Line, ...], tuple[tuple[str, bytes], ...]]:
    """Every requirement line of the files `source.requirements` names, and the files read, in
    order."""
    context = f"source {source.name} at commit {commit}"
    lines: list[Line] = []
    files: dict[str, bytes] = {}
    for entry in source.requirements:
        if entry == PYPROJECT:
            data = read("pyproject.toml")
            if data is None:
                raise ResolutionError(
                    f"{context}: pyproject.toml does not exist, so its [project] "
                    "dependencies cannot be read",
                    hint='name a requirements file instead of "pyproject" in the source\'s '
                    "`requirements`",
                    file="pyproject.toml",
                )
            files.setdefault("pyproject.toml", data)
            lines.extend(
                parse_pyproject(
                    data.decode("utf-8", errors="replace"), "pyproject.toml", context=context
                )
            )
            continue
        parsed = parse_requirement_files((entry,), read, context=context)
        for option in parsed.ignored:
            logger.warning(
                "%s: %s:%d: `%s` ignored: indexes and pip options come only from the "
                "matrix and channels/",
                context,
                option.file,
                option.line,
                option.option,
            )
        lines.extend(parsed.lines)
        for path, data in parsed.files:
            files.setdefault(path, data)
    unique = tuple(dict.fromkeys(lines))
    return unique, tuple(files.items())


def digest_files(files: tuple[tuple[str, bytes], ...]) -> str:
    """sha256 over each file's path and bytes, in the order read."""
    h = hashlib.sha256()
    for path, data in files:
        h.update(f"{path}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def split_requirements(
    source: Source, lines: tuple[Line, ...], matrix_names: frozenset[str]
) -> tuple[tuple[TracedRequirement, ...], tuple[Source, ...]]:
    """Plain requirements, and the git requirements turned into sources (unless the matrix has that
    source)."""
    requirements: list[TracedRequirement] = []
    discovered: list[Source] = []
    for line in lines:
        req = line.requirement
        origin = Origin(file=line.file, line=line.line or None, key=line.key, source=source.name)
        if not req.url or line.constraint:
            requirements.append(TracedRequirement(line.text, origin, constraint=line.constraint))
            continue
        vcs = vcs_of(req.url)
        if vcs is None:
            requirements.append(TracedRequirement(line.text, origin))
            continue
        where = f"source {source.name}: {line.file}:{line.line}"
        if vcs != "git":
            raise InputError(
                f"{where}: `{line.text}` is a {vcs} requirement; only git sources are supported",
                hint="declare it as a source in the matrix with a git URL, or add an override",
                file=line.file,
                line=line.line,
                package=source.name,
            )
        name = package_key(req.name)
        if name in matrix_names:
            logger.info("%s: %s is satisfied by the matrix's source of that name", where, req.name)
            continue
        if req.extras or req.marker:
            logger.warning(
                "%s: extras and markers of `%s` are not applied: git sources install without deps",
                where,
                line.text,
            )
        url, ref = _split_vcs_url(req.url, where=where)
        discovered.append(
            Source(
                name=name,
                url=url,
                ref=ref,
                distribution=req.name,
                editable=False,
                origin=f"{source.name}:{line.file}:{line.line}",
            )
        )
    return tuple(requirements), tuple(discovered)


def _split_vcs_url(vcs_url: str, *, where: str) -> tuple[str, str]:
    """`git+https://host/repo.git@ref#egg=x` as (`https://host/repo.git`, `ref`); no `@ref` means
    HEAD."""
    parts = urlsplit(vcs_url.removeprefix("git+"))
    fragment = dict(p.partition("=")[::2] for p in parts.fragment.split("&") if p)
    if "subdirectory" in fragment:
        raise InputError(
            f"{where}: `{redact_url(vcs_url)}` installs from a subdirectory, which git "
            "sources do not support",
            hint="declare the project as a source in the matrix and install it by hand, or "
            "add an override",
        )
    path, at, ref = parts.path.rpartition("@")
    if not at:
        path, ref = parts.path, "HEAD"
    url = strip_credentials(urlunsplit((parts.scheme, parts.netloc, path, parts.query, "")))
    problem = git_url_problem(url) or ref_problem(ref)
    if problem:
        raise InputError(
            f"{where}: `{redact_url(vcs_url)}`: {problem}",
            hint="fix the requirement upstream, or add an override",
        )
    return url, ref
