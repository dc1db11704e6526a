"""A source's declared dependencies at its locked tree: static PEP 621, else the build backend's PEP 517 metadata.

What `pip install -e .` installs besides the listed requirement files is the project's own `Requires-Dist`.
Static `[project] dependencies` are read from the tree; anything else (setup.py `install_requires`, dynamic
dependencies) is asked of the build backend through `prepare_metadata_for_build_wheel` in an isolated build
env, with the source's build variables, its build requirements installed by uv from the matrix's indexes.
Each answer, a failure included, is cached by (tree, variables, build settings): a re-lock never rebuilds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import logging
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import build
import uv
from build.env import DefaultIsolatedEnv
from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508

from envgen.errors import InputError, ToolError
from envgen.inputs.channels import IndexAccess
from envgen.inputs.files import bounded_nesting
from envgen.inputs.requirements import Line, parse_pyproject
from envgen.model import Source
from envgen.process import run, tail
from envgen.redact import redact_text
from envgen.resolve.uv_compile import render_uv_config, uv_environment

log = logging.getLogger(__name__)

# Bumped when what is cached changes shape or meaning, so an old entry is never misread.
CACHE_FORMAT = 1
INSTALL_TIMEOUT = 1800.0
# A backend's metadata hook (setup.py egg_info and the like) that runs longer than this is stuck.
HOOK_TIMEOUT = 900.0
_EXTRA = re.compile(r"\bextra\s*(==|!=|in\b|not\s+in\b)")

Reader = Callable[[str], bytes | None]
Exporter = Callable[[Path], None]


@dataclass(frozen=True)
class BuildSettings:
    """What a metadata build may use besides the tree: the indexes its build requirements come from, the cache."""

    indexes: tuple[IndexAccess, ...]
    cache: Path
    environ: Mapping[str, str]

    def for_source(self, source: Source) -> tuple[IndexAccess, ...]:
        """The default indexes, then the source's build index (usable for any build requirement)."""
        used = [i for i in self.indexes if not i.explicit]
        used += [dataclasses.replace(i, explicit=False) for i in self.indexes if i.name == source.build_index]
        return tuple(used)


@dataclass(frozen=True)
class Declared:
    """A source's declared requirements as lines; `fallback` says why they could not be read (none then)."""

    lines: tuple[Line, ...] = ()
    fallback: str | None = None


def declared_dependencies(
    source: Source, tree: str, read: Reader, export: Exporter, settings: BuildSettings
) -> Declared:
    """The declared install requirements of `source` at `tree` (its `git rev-parse HEAD^{tree}`)."""
    context = f"source {source.name} at tree {tree[:12]}"
    data = read("pyproject.toml")
    project = _project_table(data, context) if data is not None else None
    if data is not None and project is not None and "dependencies" not in project.get("dynamic", []):
        lines = parse_pyproject(data.decode("utf-8", errors="replace"), "pyproject.toml", context=context)
        return Declared(tuple(line for line in lines if not _needs_extra(line.requirement)))
    if data is None and read("setup.py") is None:
        return Declared(fallback="it has neither pyproject.toml nor setup.py")
    file, key = _label(project, data, read)
    requires, error = _cached_build(source, tree, export, settings)
    if error:
        return Declared(fallback=error)
    return Declared(tuple(Line(text=text, file=file, line=0, key=key) for text in requires))


def _project_table(data: bytes, context: str) -> dict[str, Any] | None:
    try:
        with bounded_nesting(f"{context}: pyproject.toml"):
            parsed = tomllib.loads(data.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{context}: pyproject.toml is not valid TOML: {exc}") from exc
    project = parsed.get("project")
    return project if isinstance(project, dict) else None


def _label(project: Mapping[str, object] | None, data: bytes | None, read: Reader) -> tuple[str, str]:
    """Where the backend's answer comes from, as an origin a person recognises (file, what in it)."""
    if project is not None and data is not None:
        named = _dynamic_files(tomllib.loads(data.decode("utf-8", errors="replace")))
        return "pyproject.toml", f"(dynamic, {', '.join(named)})" if named else "(dynamic)"
    if read("setup.py") is not None:
        return "setup.py", "install_requires"
    return "pyproject.toml", "(build backend metadata)"


def _dynamic_files(pyproject: Mapping[str, object]) -> list[str]:
    """The files setuptools reads dynamic dependencies from (`[tool.setuptools.dynamic] dependencies.file`)."""
    table: object = pyproject
    for key in ("tool", "setuptools", "dynamic", "dependencies", "file"):
        table = table.get(key) if isinstance(table, dict) else None
    if isinstance(table, str):
        return [table]
    return [str(f) for f in table] if isinstance(table, list) else []


def _cache_key(source: Source, tree: str, settings: BuildSettings) -> str:
    facts = {
        "format": CACHE_FORMAT,
        "tree": tree,
        "env": sorted(source.env),
        "build-isolation": source.build_isolation,
        "indexes": [[i.name, i.url] for i in settings.for_source(source)],
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        # Only when set: a source's key without a subdirectory or replacements stays what it was.
        **({"layout": _layout(source)} if source.subdirectory or source.replacements else {}),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def _layout(source: Source) -> list[object]:
    """Where the project lies and the files replaced: the same tree builds other metadata then."""
    return [source.subdirectory, [[r.source, r.target] for r in source.replacements]]


def _cached_build(
    source: Source, tree: str, export: Exporter, settings: BuildSettings
) -> tuple[tuple[str, ...], str | None]:
    """The backend's answer (requirements, or why there is none), built once per cache key."""
    path = settings.cache / "source-metadata" / f"{_cache_key(source, tree, settings)}.json"
    if path.exists():
        cached = json.loads(path.read_text())
        return tuple(cached.get("requires", ())), cached.get("error")
    log.info("source %s: reading its declared dependencies from the build backend (PEP 517)", source.name)
    with tempfile.TemporaryDirectory(prefix="envgen-metadata-") as tmp:
        srcdir = Path(tmp) / "src"
        export(srcdir)
        try:
            outcome: dict[str, Any] = {"requires": build_requires(srcdir, source, settings)}
        except (build.BuildException, build.BuildBackendException, subprocess.CalledProcessError, OSError) as exc:
            outcome = {"error": _why(exc, settings)}
        except ToolError as exc:
            # A hook that hung or a tool that could not start says nothing about the tree: not cached.
            return (), f"the metadata build did not complete: {exc.message}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".part", delete=False) as partial:
        partial.write(json.dumps(outcome, indent=1, sort_keys=True))
    Path(partial.name).replace(path)
    return tuple(outcome.get("requires", ())), outcome.get("error")


def build_requires(srcdir: Path, source: Source, settings: BuildSettings) -> list[str]:
    """`Requires-Dist` of the project in `srcdir` that apply without extras, canonically spelled."""

    def runner(cmd: Sequence[str], cwd: str | None = None, extra_environ: Mapping[str, str] | None = None) -> None:
        env = {**settings.environ, **(extra_environ or {}), **dict(source.env)}
        proc = run(cmd, cwd=cwd, env=env, timeout=HOOK_TIMEOUT, check=False)
        if proc.returncode != 0:
            # build turns this into a BuildBackendException carrying the backend's output.
            raise subprocess.CalledProcessError(proc.returncode, cmd, proc.stdout + proc.stderr)

    # The uv installer makes a venv without pip; build requirements are installed below, from the matrix's
    # indexes only (build's own installer would use the caller's pip configuration).
    with DefaultIsolatedEnv(installer="uv") as env:
        builder = build.ProjectBuilder.from_isolated_env(env, srcdir, runner=runner)
        _install(env.python_executable, builder.build_system_requires, source, settings)
        _install(env.python_executable, builder.get_requires_for_build("wheel"), source, settings)
        with tempfile.TemporaryDirectory(prefix="envgen-dist-info-") as out:
            metadata = importlib.metadata.PathDistribution(Path(builder.metadata_path(out))).metadata
            requires = metadata.get_all("Requires-Dist") or []
    return [str(r) for r in map(_requirement, requires) if r is not None and not _needs_extra(r)]


def _requirement(text: str) -> Pep508 | None:
    try:
        return Pep508(text)
    except InvalidRequirement:
        log.warning("ignored `Requires-Dist: %s`: not a PEP 508 requirement", text)
        return None


def _needs_extra(req: Pep508) -> bool:
    # An editable install requests no extras, so a requirement guarded by one never applies.
    return req.marker is not None and _EXTRA.search(str(req.marker)) is not None


def _install(python: str, requirements: Sequence[str] | set[str], source: Source, settings: BuildSettings) -> None:
    """Install build requirements into the isolated env with uv, from the matrix's indexes only."""
    if not requirements:
        return
    indexes = settings.for_source(source)
    with tempfile.TemporaryDirectory(prefix="envgen-build-reqs-") as tmp:
        config = Path(tmp) / "uv.toml"
        config.write_text(render_uv_config(indexes, ()))
        cmd = [uv.find_uv_bin(), "pip", "install", "--config-file", str(config), "--python", python, "--quiet"]
        cmd += ["--no-python-downloads", "--color", "never", "--", *sorted(requirements)]
        env = uv_environment(indexes, settings.cache, settings.environ)
        secrets = tuple(s for i in indexes for s in i.secrets)
        proc = run(cmd, env=env, timeout=INSTALL_TIMEOUT, check=False, secrets=secrets)
    if proc.returncode != 0:
        raise build.BuildException(
            f"installing its build requirements ({', '.join(sorted(requirements))}) failed: "
            f"{redact_text(tail(proc.stderr, 3), secrets)}"
        )


def _why(exc: BaseException, settings: BuildSettings) -> str:
    """One line saying why the metadata build failed: the backend's last words when it said any."""
    secrets = tuple(s for i in settings.indexes for s in i.secrets)
    inner = getattr(exc, "exception", exc)
    output = getattr(inner, "output", None) or getattr(inner, "stderr", None)
    if isinstance(output, bytes):
        output = output.decode("utf-8", errors="replace")
    lines = [line.strip() for line in (output or "").splitlines() if line.strip()]
    said = lines[-1] if lines else str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    return redact_text(f"the metadata build failed: {said}", secrets)
