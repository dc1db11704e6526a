"""A source's declared dependencies at its locked tree: static PEP 621, else the build backend's PEP
517 metadata.

What `pip install -e .` installs besides the listed requirement files is the project's own
`Requires-Dist`. Static `[project] dependencies` are read from the tree; anything else (setup.py
`install_requires`, dynamic dependencies) is asked of the build backend through
`prepare_metadata_for_build_wheel` in an isolated build env, with the source's build variables, its
build requirements installed by uv from the matrix's indexes (a package the matrix takes from an
index on this host's platform, from that index: torch from the CPU index). The tree comes from `git
archive`, without git's metadata: setuptools-scm is told the version the locked ref states. Each
answer, a failure included, is cached by (tree, variables, build settings): a re-lock never
rebuilds.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import build
import msgspec
from build.env import DefaultIsolatedEnv
from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508
from packaging.version import InvalidVersion, Version

from envgen import atomic, interrupts, network
from envgen.commits import is_full_commit, short_commit
from envgen.errors import InputError, ToolError
from envgen.inputs.channels import IndexAccess
from envgen.inputs.requirements import (
    Line,
    parse_pyproject,
    parse_requirement_files,
    project_table,
)
from envgen.inputs.untrusted import one_line
from envgen.model import Origin, Source, TracedRequirement
from envgen.names import package_key
from envgen.process import run, tail
from envgen.redact import redact_text
from envgen.resolve.pypi.uv_compile import (
    INPUTS_PROJECT,
    Inputs,
    render_pyproject,
    render_uv_config,
    uv_environment,
)
from envgen.resolve.pypi.uv_pylock import needs_extra
from envgen.resolve.sources.backend_warnings import BACKEND_WARNINGS
from envgen.scratch import scratch_dir

log = logging.getLogger(__name__)

# Bumped when what is cached changes shape or meaning, so an old entry is never misread
# (2: setuptools-scm is told the ref's version: a version it could not find is no failure now;
# 3: keyed by the indexes' names, not their URLs).
CACHE_FORMAT = 3
ENTRY = "source-metadata"  # its directory in envgen's cache (project.CACHE_ENTRIES)
INSTALL_TIMEOUT = 1800.0
# A backend's metadata hook (setup.py egg_info and the like) that runs longer than this is stuck.
HOOK_TIMEOUT = 900.0
_TRACEBACK = "Traceback (most recent call last):"
_PRETEND = "SETUPTOOLS_SCM_PRETEND_VERSION"

Reader = Callable[[str], bytes | None]
Exporter = Callable[[Path], None]


@dataclass(frozen=True)
class BuildSettings:
    """What a metadata build may use besides the tree: the indexes its build requirements come from,
    the cache."""

    indexes: tuple[IndexAccess, ...]
    cache: Path
    environ: Mapping[str, str]
    limits: network.Limits
    # The packages the matrix takes from an index on this host's platform (canonical name, index).
    index_for: tuple[tuple[str, str], ...] = ()
    # The uv that installs the build requirements (Settings.uv).
    uv: str = "uv"

    def for_source(self, source: Source) -> tuple[IndexAccess, ...]:
        """The default indexes, then the source's build index (usable for any build requirement),
        then the explicit indexes a package is taken from (only for those packages)."""
        used = [i for i in self.indexes if not i.explicit]
        used += [
            msgspec.structs.replace(i, explicit=False)
            for i in self.indexes
            if i.name == source.build_index
        ]
        chosen = {index for _, index in self.index_for} - {i.name for i in used}
        return (*used, *(i for i in self.indexes if i.name in chosen))


@dataclass(frozen=True)
class Declared:
    """A source's declared requirements as lines; `fallback` says why they could not be read (none
    then)."""

    lines: tuple[Line, ...] = ()
    fallback: str | None = None


def declared_dependencies(
    source: Source,
    tree: str,
    read: Reader,
    export: Exporter,
    settings: BuildSettings,
    *,
    commit: str,
) -> Declared:
    """The declared install requirements of `source` at `tree` (its `git rev-parse HEAD^{tree}`),
    the tree of the locked `commit`."""
    context = f"source {source.name} at tree {short_commit(tree)}"
    data = read("pyproject.toml")
    text = None if data is None else data.decode("utf-8", errors="replace")
    project = None if text is None else project_table(text, "pyproject.toml", context=context)
    if (
        text is not None
        and project is not None
        and "dependencies" not in project.get("dynamic", [])
    ):
        lines = parse_pyproject(text, "pyproject.toml", context=context)
        # An editable install requests no extras, so a requirement guarded by one never applies.
        return Declared(tuple(line for line in lines if not needs_extra(line.requirement)))
    if data is None and read("setup.py") is None:
        return Declared(fallback="it has neither pyproject.toml nor setup.py")
    version = stated_version(source.ref, commit)
    requires, error = _cached_build(source, tree, export, settings, version)
    if error:
        return Declared(fallback=error)
    return Declared(_declared_lines(requires, data, read, context))


def _declared_lines(
    requires: Sequence[str],
    pyproject: bytes | None,
    read: Reader,
    context: str,
) -> tuple[Line, ...]:
    """The backend's requirements with where each is declared, as a person would look for it: the
    file `[tool.setuptools.dynamic]` reads dependencies from (and the line, when found there), else
    setup.py's `install_requires`, else the backend's metadata."""
    toml = pyproject.decode("utf-8", errors="replace") if pyproject is not None else ""
    named = _dynamic_files(tomllib.loads(toml))
    if named:
        written = _lines_in(named, read, context)
        found = ((text, *written.get(text, (named[0], 0))) for text in requires)
        return tuple(Line(text, file, line, key="(dynamic)") for text, file, line in found)
    file, key = "pyproject.toml", "(build backend metadata)"
    if read("setup.py") is not None:
        file, key = "setup.py", "install_requires"
    return tuple(Line(text=text, file=file, line=0, key=key) for text in requires)


def _lines_in(files: Sequence[str], read: Reader, context: str) -> dict[str, tuple[str, int]]:
    """Each requirement of `files` (canonically spelled) with the first file and line holding it;
    a file that does not read as requirements gives none (the label is only a pointer)."""
    found: dict[str, tuple[str, int]] = {}
    for name in files:
        try:
            lines = parse_requirement_files((name,), read, context=context).lines
        except InputError:
            continue
        for line in lines:
            found.setdefault(line.text, (line.file, line.line))
    return found


def _dynamic_files(pyproject: Mapping[str, object]) -> list[str]:
    """The files setuptools reads dynamic dependencies from (`[tool.setuptools.dynamic]
    dependencies.file`)."""
    table: object = pyproject
    for key in ("tool", "setuptools", "dynamic", "dependencies", "file"):
        table = table.get(key) if isinstance(table, dict) else None
    if isinstance(table, str):
        return [table]
    return [str(f) for f in table] if isinstance(table, list) else []


def stated_version(ref: str, commit: str) -> str:
    """The version `ref` states, for a build that would read it from git: a tag or branch whose last
    part ends in one (`v0.23.0`, `releases/v0.23.0`, `core_r0.12.0`), else the commit's
    (`0+g646ed520c63e`)."""
    found = None if is_full_commit(ref) else re.search(r"\d.*$", ref.rsplit("/", 1)[-1])
    if found:
        try:
            return str(Version(found.group(0)))
        except InvalidVersion:
            pass
    return f"0+g{short_commit(commit)}"


def _scm_environment(source: Source, version: str) -> dict[str, str]:
    """setuptools-scm's version for the tree `git archive` gives (no .git to read one from): the
    per-distribution form for a build that knows its name, the plain one for a setup.py asking
    setuptools-scm itself (vLLM's `get_version()`); only the source's own hooks run with them."""
    dist = package_key(source.distribution).replace("-", "_").upper()
    return {_PRETEND: version, f"{_PRETEND}_FOR_{dist}": version}


def _cache_key(source: Source, tree: str, settings: BuildSettings, version: str) -> str:
    facts = {
        "format": CACHE_FORMAT,
        "tree": tree,
        "env": sorted(source.env),
        "build-isolation": source.build_isolation,
        # Which indexes, by name; not where they are served (as uv keys a source's built metadata
        # by the source, not by the mirror its build requirements came from): a mirror or a port
        # that changed rebuilds nothing.
        "indexes": [i.name for i in settings.for_source(source)],
        "index-for": [list(choice) for choice in settings.index_for],
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "scm-version": version,
        # Only when set: a source's key without a subdirectory or replacements stays what it was.
        **({"layout": _layout(source)} if source.subdirectory or source.replacements else {}),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def _layout(source: Source) -> list[object]:
    """Where the project lies and the files replaced: the same tree builds other metadata then."""
    return [source.subdirectory, [[r.source, r.target] for r in source.replacements]]


def _cached_build(
    source: Source, tree: str, export: Exporter, settings: BuildSettings, version: str
) -> tuple[tuple[str, ...], str | None]:
    """The backend's answer (requirements, or why there is none), built once per cache key."""
    key = _cache_key(source, tree, settings, version)
    path = settings.cache / ENTRY / f"{key}.json"
    if path.exists():
        cached = json.loads(path.read_text())
        return tuple(cached.get("requires", ())), cached.get("error")
    log.info(
        "source %s: reading its declared dependencies from the build backend (PEP 517)", source.name
    )
    with scratch_dir("envgen-metadata-") as tmp:
        srcdir = tmp / "src"
        export(srcdir)
        try:
            try:
                requires = build_requires(srcdir, source, settings, version)
            except build.BuildBackendException as exc:
                # build wraps what the hook's runner raised: a hook that hung (TimedOut), a tool
                # that could not start, an interrupt; those are the runner's, not the tree's.
                if isinstance(exc.exception, ToolError | interrupts.Interrupted):
                    raise exc.exception from exc
                raise
            outcome: dict[str, Any] = {"requires": requires}
        except (
            build.BuildException,
            build.BuildBackendException,
            subprocess.CalledProcessError,
            OSError,
        ) as exc:
            # A build an interrupt ended says nothing of the tree either: recorded as a failure,
            # every later lock would go without the source's declared dependencies.
            interrupts.check()
            # The temporary tree's path would make the recorded reason differ from run to run.
            outcome = {"error": _why(exc, settings).replace(str(srcdir), "<tree>")}
        except ToolError as exc:
            # A hook that hung or a tool that could not start says nothing about the tree: not
            # cached.
            return (), f"the metadata build did not complete: {exc.message}"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_file(path, json.dumps(outcome, indent=1, sort_keys=True).encode())
    return tuple(outcome.get("requires", ())), outcome.get("error")


def build_requires(
    srcdir: Path,
    source: Source,
    settings: BuildSettings,
    version: str,
) -> list[str]:
    """`Requires-Dist` of the project in `srcdir` that apply without extras, canonically spelled; a
    setuptools-scm build is given `version`."""
    scm = _scm_environment(source, version)

    def runner(
        cmd: Sequence[str], cwd: str | None = None, extra_environ: Mapping[str, str] | None = None
    ) -> None:
        env = {**settings.environ, **(extra_environ or {}), **scm, **dict(source.env)}
        proc = run(cmd, cwd=cwd, env=env, timeout=HOOK_TIMEOUT, check=False)
        if proc.returncode != 0:
            # build turns this into a BuildBackendException carrying the backend's output.
            raise subprocess.CalledProcessError(proc.returncode, cmd, proc.stdout + proc.stderr)

    # The uv installer makes a venv without pip; build requirements are installed below, from the
    # matrix's indexes only (build's own installer would use the caller's pip configuration).
    with BACKEND_WARNINGS.logged(source.name), DefaultIsolatedEnv(installer="uv") as env:
        builder = build.ProjectBuilder.from_isolated_env(env, srcdir, runner=runner)
        _install(env.python_executable, builder.build_system_requires, source, settings)
        _install(env.python_executable, builder.get_requires_for_build("wheel"), source, settings)
        with scratch_dir("envgen-dist-info-") as out:
            metadata = importlib.metadata.PathDistribution(
                Path(builder.metadata_path(out))
            ).metadata
            requires = metadata.get_all("Requires-Dist") or []
    # No extra is requested: a requirement guarded by one never applies.
    return [str(r) for r in map(_requirement, requires) if r is not None and not needs_extra(r)]


def _requirement(text: str) -> Pep508 | None:
    try:
        return Pep508(text)
    except InvalidRequirement:
        log.warning("ignored `Requires-Dist: %s`: not a PEP 508 requirement", text)
        return None


def _install(
    python: str, requirements: Sequence[str] | set[str], source: Source, settings: BuildSettings
) -> None:
    """Install build requirements into the isolated env with uv, from the matrix's indexes only; a
    package the matrix takes from an index on this platform comes from there (a CPU torch, not
    CUDA's)."""
    if not requirements:
        return
    indexes = settings.for_source(source)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    origin = Origin(file="pyproject.toml", key="build-system.requires", source=source.name)
    listed = tuple(TracedRequirement(r, origin) for r in sorted(requirements))
    wanted = Inputs(listed, index_for=settings.index_for)
    with scratch_dir("envgen-build-reqs-") as tmp:
        config, project = tmp / "uv.toml", tmp / "pyproject.toml"
        config.write_text(render_uv_config(indexes, ()))
        project.write_text(render_pyproject(wanted, indexes, version))
        cmd = [
            settings.uv,
            "pip",
            "install",
            "--config-file",
            str(config),
            "--python",
            python,
            "--quiet",
        ]
        cmd += ["--no-python-downloads", "--color", "never", "-r", str(project)]
        env = uv_environment(indexes, settings.cache, settings.environ, settings.limits)
        secrets = tuple(s for i in indexes for s in i.secrets)
        proc = run(cmd, env=env, timeout=INSTALL_TIMEOUT, check=False, secrets=secrets)
    if proc.returncode != 0:
        raise _install_failed(proc.stderr, requirements, source, settings, secrets)


def _install_failed(
    stderr: str,
    requirements: Collection[str],
    source: Source,
    settings: BuildSettings,
    secrets: tuple[str, ...],
) -> build.BuildException:
    """Why the build requirements did not install, on one line as the lock records it, naming the
    pins that applied (uv calls the generated project by its name)."""
    said = one_line(redact_text(tail(stderr, 3), secrets))
    said = said.replace(INPUTS_PROJECT, f"{source.name}'s build")
    names = {_name_of(r) for r in requirements}
    taken = ", ".join(f"{name} from {index}" for name, index in settings.index_for if name in names)
    taken = f" ({taken}, as the matrix takes it on this platform)" if taken else ""
    what = f"installing its build requirements ({', '.join(sorted(requirements))}){taken}"
    return build.BuildException(f"{what} failed: {said}")


def _name_of(requirement: str) -> str | None:
    try:
        return package_key(Pep508(requirement).name)
    except InvalidRequirement:
        return None


def _why(exc: BaseException, settings: BuildSettings) -> str:
    """One line saying why the metadata build failed: the exception the backend raised, else its
    last words."""
    secrets = tuple(s for i in settings.indexes for s in i.secrets)
    inner = getattr(exc, "exception", exc)
    output = getattr(inner, "output", None) or getattr(inner, "stderr", None)
    if isinstance(output, bytes):
        output = output.decode("utf-8", errors="replace")
    lines = [line.rstrip() for line in (output or "").splitlines() if line.strip()]
    said = _raised(lines) or (lines[-1].strip() if lines else "")
    said = said or (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
    return redact_text(f"the metadata build failed: {said}", secrets)


def _raised(lines: Sequence[str]) -> str | None:
    """The exception line of the last Python traceback in `lines` (the first unindented line after
    its frames), not the notes its message may go on with."""
    starts = [i for i, line in enumerate(lines) if line.startswith(_TRACEBACK)]
    if not starts:
        return None
    return next((line for line in lines[starts[-1] + 1 :] if not line[0].isspace()), None)
