"""env-templates/<env>.toml + channels/ -> a validated Matrix; every problem reported at once."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

import rattler
from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envgen.errors import InputError, MatrixError
from envgen.inputs.channels import read_channels
from envgen.inputs.extends import read_layered
from envgen.inputs.toml_reader import (
    KeyPath,
    Problems,
    as_table,
    check_keys,
    did_you_mean,
    get_bool,
    get_env,
    get_str,
    get_str_list,
    get_table,
    type_name,
)
from envgen.inputs.untrusted import FULL_SHA, git_url_problem, ref_problem
from envgen.model import (
    CANN_SCRIPT_SEPARATOR,
    DEFAULT_CANN_SET_ENV,
    DEPENDENCY_MODES,
    METADATA,
    NEEDS,
    NONE,
    PYPROJECT,
    Cann,
    Channel,
    ImportCheck,
    Index,
    Matrix,
    Override,
    PipPackage,
    Profile,
    Source,
)
from envgen.npu import GENERATIONS, SOC_VARIABLE, Npu, soc_version_problem
from envgen.platforms import OLDEST_GLIBC, PLATFORMS
from envgen.project import Project

SCHEMA = 1
PENDING = "pending"
INSTALL_MODES = ("editable", "plain")

_TOP_KEYS = ("schema", "env", "system", "conda", "pip", "sources", "install", "overrides", "activation", "checks")
_TOP_REQUIRED = ("schema", "env", "system", "conda", "pip")
_PACKAGE_KEYS = ("version", "extras", "marker", "index", "pending", "url", "sha256")
_SOURCE_KEYS = (
    "url",
    "ref",
    "distribution",
    "install",
    "pythonpath",
    "env",
    "build-isolation",
    "submodules",
    "needs-cann",
    "build-index",
    "requirements",
    "cherry-picks",
    "dependencies",
    "dependencies-reason",
)
_PROJECT_NAME = re.compile(r"([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])", re.IGNORECASE)
_SOURCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_MAJOR_MINOR = re.compile(r"\d+\.\d+")
_GLIBC = re.compile(r"2\.\d+")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


def load_matrix(path: Path, channels_dir: Path) -> Matrix:
    """Read and validate the matrix at `path` against the channels in `channels_dir`."""
    if not path.is_file():
        envs = sorted(p.stem for p in path.parent.glob("*.toml")) if path.parent.is_dir() else []
        available = ", ".join(envs) if envs else f"none (no *.toml in {path.parent})"
        raise InputError(
            f"no matrix at {path}; available envs: {available}",
            hint=f"name one of the available envs, or create {path.name} (see docs/matrix.md)",
        )
    channels, channel_problems = read_channels(channels_dir)
    broken = {p.stem for p in channels_dir.glob("*.toml")} - set(channels)
    layered = read_layered(path)
    problems = layered.problems
    matrix = None
    if not problems.items:
        matrix = _Reader(problems, path, channels_dir, channels, broken).matrix(layered.data)
    # Channel files first, then the matrix top to bottom (keys without a line, i.e. missing ones, first), then
    # the files it extends, nearest first.
    rank = {str(p): i for i, p in enumerate((path, *layered.bases))}
    found = [*channel_problems, *sorted(problems.items, key=lambda p: (rank.get(p.file, 0), p.line or 0))]
    if found or matrix is None:
        raise MatrixError(found)
    return replace(matrix, bases=tuple(str(p) for p in layered.bases))


def load_env(project: Project, env: str) -> Matrix:
    """The matrix of `env` in `project`, its path relative to the project root (so nothing written depends on
    where the checkout lives)."""
    path = project.template(env)
    matrix = load_matrix(path, project.channels_dir)
    bases = tuple(Path(p).relative_to(project.root).as_posix() for p in matrix.bases)
    return replace(matrix, path=path.relative_to(project.root).as_posix(), bases=bases)


class _Reader:
    """Walks the parsed TOML, records problems with key paths, and builds what is valid."""

    def __init__(
        self,
        problems: Problems,
        path: Path,
        channels_dir: Path,
        channels: dict[str, Channel | Index],
        broken: set[str],
    ) -> None:
        self.p = problems
        self.path = path
        self.channels_dir = channels_dir
        self.channels = channels
        self.broken = broken
        self.platforms: tuple[str, ...] = ()
        self.default_indexes: tuple[Index, ...] = ()
        self.named_indexes: dict[str, Index] = {}

    def section(
        self, data: dict[str, Any], path: KeyPath, allowed: tuple[str, ...], required: tuple[str, ...] = ()
    ) -> dict[str, Any] | None:
        """The table at `path` with its keys checked; None when absent (the parent reports a required one)."""
        if str(path[-1]) not in data:
            return None
        table = as_table(self.p, path, data[str(path[-1])])
        if table is not None:
            check_keys(self.p, path, table, allowed, required)
        return table

    def matrix(self, data: dict[str, Any]) -> Matrix:
        check_keys(self.p, (), data, _TOP_KEYS, _TOP_REQUIRED)
        schema = data.get("schema")
        if "schema" in data and (type(schema) is not int or schema != SCHEMA):
            self.p.add(("schema",), f"unsupported schema {schema!r}; this envgen reads schema = {SCHEMA}")
        name, description, python, notes = self.env(data)
        glibc, cann = self.system(data)
        channels, specs = self.conda(data)
        packages = self.pip(data)
        sources = self.order(data, self.sources(data))
        npu = self.npu(data, sources)
        self.check_names(data)
        activation_env, profiles = self.activation(data)
        return Matrix(
            name=name,
            description=description,
            path=str(self.path),
            platforms=self.platforms,
            python=python,
            glibc=glibc,
            cann=cann,
            channels=channels,
            conda_specs=specs,
            indexes=self.default_indexes + tuple(self.named_indexes[n] for n in sorted(self.named_indexes)),
            packages=packages,
            sources=sources,
            overrides=self.overrides(data),
            activation_env=activation_env,
            profiles=profiles,
            checks=self.checks(data),
            notes=notes,
            npu=npu,
        )

    # --- [env] and [system] ---------------------------------------------------------------------------

    def env(self, data: dict[str, Any]) -> tuple[str, str, str, tuple[tuple[str, str], ...]]:
        path: KeyPath = ("env",)
        table = self.section(
            data, path, ("name", "description", "platforms", "python", "notes"), ("name", "platforms", "python")
        )
        if table is None:
            return self.path.stem, "", "", ()
        name = get_str(self.p, table, (*path, "name"))
        if name is not None and name != self.path.stem:
            self.p.add(
                (*path, "name"),
                f"'{name}' differs from the file name {self.path.name}; rename one so they match",
            )
        platforms: list[str] = []
        for key, platform in get_str_list(self.p, table, (*path, "platforms")):
            if platform not in PLATFORMS:
                known = ", ".join(PLATFORMS)
                self.p.add(key, f"unknown platform '{platform}'{did_you_mean(platform, PLATFORMS)} (known: {known})")
            elif platform in platforms:
                self.p.add(key, f"platform '{platform}' is listed twice")
            else:
                platforms.append(platform)
        if "platforms" in table and isinstance(table["platforms"], list) and not table["platforms"]:
            self.p.add((*path, "platforms"), f"name at least one platform ({', '.join(PLATFORMS)})")
        self.platforms = tuple(platforms)
        python = get_str(self.p, table, (*path, "python")) or ""
        if python and not _MAJOR_MINOR.fullmatch(python):
            self.p.add((*path, "python"), f"'{python}' is not a major.minor Python version such as \"3.11\"")
        notes: list[tuple[str, str]] = []
        for note, text in get_table(self.p, table, (*path, "notes")).items():
            if isinstance(text, str):
                notes.append((note, text))
            else:
                self.p.add((*path, "notes", note), f"expected a string, got {type_name(text)}")
        description = get_str(self.p, table, (*path, "description"), default="", empty=True) or ""
        return name or self.path.stem, description, python, tuple(sorted(notes))

    def system(self, data: dict[str, Any]) -> tuple[str, Cann]:
        path: KeyPath = ("system",)
        table = self.section(data, path, ("glibc", "cann", "npu"), ("glibc", "cann"))
        if table is None:
            return "", Cann(version=PENDING, set_env=DEFAULT_CANN_SET_ENV)
        glibc = get_str(self.p, table, (*path, "glibc")) or ""
        if glibc and not _GLIBC.fullmatch(glibc):
            self.p.add((*path, "glibc"), f"'{glibc}' is not a glibc version such as \"2.28\"")
        elif glibc and int(glibc.partition(".")[2]) < OLDEST_GLIBC:
            # Neither uv nor the manylinux tags of aarch64 go below 2.17 (manylinux2014).
            self.p.add((*path, "glibc"), f"'{glibc}' is below 2.{OLDEST_GLIBC}, the oldest floor envgen can lock for")
        cann_path: KeyPath = (*path, "cann")
        cann = self.section(table, cann_path, ("version", "note", "set_env"), ("version",)) or {}
        version = get_str(self.p, cann, (*cann_path, "version")) or PENDING
        if version != PENDING:
            try:
                Version(version)
            except InvalidVersion:
                self.p.add((*cann_path, "version"), f"'{version}' is neither a version nor \"{PENDING}\"")
        note = get_str(self.p, cann, (*cann_path, "note"))
        if version == PENDING and "version" in cann and note is None and "note" not in cann:
            self.p.add((*cann_path, "note"), 'pending without a note: say why and when (note = "...")')
        return glibc, Cann(version=version, set_env=self.set_env(cann, (*cann_path, "set_env")), note=note)

    def set_env(self, cann: dict[str, Any], path: KeyPath) -> str:
        """CANN's environment scripts, one path or an array sourced in order, joined as ASCEND_SET_ENV is."""
        value = cann.get("set_env")
        if isinstance(value, list):
            scripts = get_str_list(self.p, cann, path)
            if not value:
                self.p.add(path, "name at least one script, or leave set_env out for the default")
        else:
            script = get_str(self.p, cann, path, default=DEFAULT_CANN_SET_ENV)
            scripts = [(path, script)] if script is not None else []
        for key, script in scripts:
            if CANN_SCRIPT_SEPARATOR in script or not script.startswith("/"):
                self.p.add(key, f"'{script}' must be an absolute path without '{CANN_SCRIPT_SEPARATOR}'")
        return CANN_SCRIPT_SEPARATOR.join(script for _, script in scripts) or DEFAULT_CANN_SET_ENV

    def npu(self, data: dict[str, Any], sources: list[Source] | tuple[Source, ...]) -> Npu | None:
        """[system.npu]: the generation targeted (a row of npu.GENERATIONS), its chip and where a build records it."""
        path: KeyPath = ("system", "npu")
        table = self.section(
            _dict(data.get("system")), path, ("generation", "soc-version", "built-soc"), ("generation",)
        )
        if table is None:
            return None
        generation = get_str(self.p, table, (*path, "generation"))
        if generation is not None and generation not in GENERATIONS:
            known = ", ".join(GENERATIONS)
            self.p.add(
                (*path, "generation"),
                f"unknown generation '{generation}'{did_you_mean(generation, GENERATIONS)} "
                f"(known: {known}; a new one is a row of GENERATIONS in envgen/npu.py)",
            )
            generation = None
        soc = get_str(self.p, table, (*path, "soc-version"))
        problem = soc_version_problem(generation, soc) if soc and generation else None
        if problem:
            self.p.add((*path, "soc-version"), problem)
        for source in sources:
            built = dict(source.env).get(SOC_VARIABLE)
            if built is not None and soc is not None and built != soc:
                self.p.add(
                    ("sources", source.name, "env", SOC_VARIABLE),
                    f"builds for '{built}' while system.npu.soc-version is '{soc}': make them the same chip",
                )
        built_soc = get_str(self.p, table, (*path, "built-soc"))
        if built_soc is not None and not (_MODULE.fullmatch(built_soc) and "." in built_soc):
            self.p.add(
                (*path, "built-soc"), f"'{built_soc}' is not module.attribute (vllm_ascend._build_info.__soc_version__)"
            )
            built_soc = None
        if built_soc is not None and soc is None:
            self.p.add((*path, "built-soc"), "needs soc-version: the chip the build is compared with")
        if generation is None:
            return None
        return Npu(generation=generation, soc_version=soc, built_soc=built_soc)

    # --- channels and indexes -------------------------------------------------------------------------

    def named(self, path: KeyPath, name: str, kind: str) -> Channel | Index | None:
        """The channel file `name` of `kind` ("conda" or "pip"), or None with a problem recorded."""
        if name in self.broken:
            return None  # its own file's problems are already reported
        what = "conda channel" if kind == "conda" else "pip index"
        wanted = Channel if kind == "conda" else Index
        same_kind = sorted(n for n, c in self.channels.items() if isinstance(c, wanted))
        found = self.channels.get(name)
        if found is None:
            plural = f"{what}es" if kind == "pip" else f"{what}s"
            self.p.add(
                path,
                f"unknown {what} '{name}' (no {self.channels_dir / (name + '.toml')})"
                f"{did_you_mean(name, same_kind)}; known {plural}: {', '.join(same_kind) or 'none'}",
            )
            return None
        if not isinstance(found, wanted):
            other = "pip" if kind == "conda" else "conda"
            self.p.add(path, f"'{name}' is kind = \"{other}\" in {self.channels_dir / (name + '.toml')}, not a {what}")
            return None
        return found

    def conda(self, data: dict[str, Any]) -> tuple[tuple[Channel, ...], tuple[str, ...]]:
        path: KeyPath = ("conda",)
        table = self.section(data, path, ("channels", "specs"), ("channels",))
        if table is None:
            return (), ()
        channels: list[Channel] = []
        for key, name in get_str_list(self.p, table, (*path, "channels")):
            channel = self.named(key, name, "conda")
            if isinstance(channel, Channel):
                if channel in channels:
                    self.p.add(key, f"channel '{name}' is listed twice")
                channels.append(channel)
        if isinstance(table.get("channels"), list) and not table["channels"]:
            self.p.add((*path, "channels"), "name at least one conda channel")
        specs: list[str] = []
        for key, spec in get_str_list(self.p, table, (*path, "specs")):
            try:
                rattler.MatchSpec(spec.strip())
            except Exception as exc:  # rattler raises its own exception classes, not exported by type
                self.p.add(key, f"'{spec}' is not a conda match spec: {exc}")
            else:
                specs.append(spec.strip())
        return tuple(channels), tuple(specs)

    def pip(self, data: dict[str, Any]) -> tuple[PipPackage, ...]:
        path: KeyPath = ("pip",)
        table = self.section(data, path, ("indexes", "packages"), ("indexes",))
        if table is None:
            return ()
        indexes: list[Index] = []
        for key, name in get_str_list(self.p, table, (*path, "indexes")):
            index = self.named(key, name, "pip")
            if not isinstance(index, Index):
                continue
            if index.explicit:
                self.p.add(
                    key,
                    f"index '{name}' is explicit (explicit = true in {self.channels_dir / (name + '.toml')}): "
                    f'it serves only packages that name it; set index = "{name}" on those packages instead',
                )
            elif index in indexes:
                self.p.add(key, f"index '{name}' is listed twice")
            else:
                indexes.append(index)
        if isinstance(table.get("indexes"), list) and not table["indexes"]:
            self.p.add((*path, "indexes"), 'name at least one default pip index (e.g. "pypi")')
        self.default_indexes = tuple(indexes)
        packages: list[PipPackage] = []
        for name, value in get_table(self.p, table, (*path, "packages")).items():
            package = self.package((*path, "packages", name), name, value)
            if package is not None:
                packages.append(package)
        return tuple(sorted(packages, key=lambda p: canonicalize_name(p.name)))

    def pip_index(self, path: KeyPath, value: object) -> Index | None:
        """A pip index a package or a build names: it must be explicit or one of pip.indexes."""
        if not isinstance(value, str) or not value:
            self.p.add(path, f"expected an index name, got {type_name(value)}")
            return None
        index = self.named(path, value, "pip")
        if not isinstance(index, Index):
            return None
        if not index.explicit and index not in self.default_indexes:
            self.p.add(
                path,
                f"index '{value}' is neither explicit nor in pip.indexes; set explicit = true in "
                f"{self.channels_dir / (value + '.toml')} or list it in pip.indexes",
            )
            return None
        if index.explicit:
            self.named_indexes[index.name] = index
        return index

    # --- [pip.packages.<name>] ------------------------------------------------------------------------

    def package(self, path: KeyPath, name: str, value: object) -> PipPackage | None:
        table = as_table(self.p, path, value)
        if table is None:
            return None
        before = len(self.p.items)
        check_keys(self.p, path, table, _PACKAGE_KEYS)
        if not _PROJECT_NAME.fullmatch(name):
            self.p.add(path, f"'{name}' is not a valid Python project name (PEP 508)")
        specifier = ""
        version = get_str(self.p, table, (*path, "version"))
        if version is not None:
            try:
                specifier = str(SpecifierSet(version))
            except InvalidSpecifier:
                hint = f" (did you mean '=={version.strip()}'?)" if _looks_like_version(version) else ""
                self.p.add((*path, "version"), f"'{version}' is not a PEP 440 specifier set{hint}")
        extras: list[str] = []
        for key, extra in get_str_list(self.p, table, (*path, "extras")):
            if _PROJECT_NAME.fullmatch(extra):
                extras.append(extra)
            else:
                self.p.add(key, f"'{extra}' is not a valid extra name")
        marker = self.marker((*path, "marker"), table)
        index = self.package_index((*path, "index"), table)
        pending = get_str(self.p, table, (*path, "pending"), empty=True)
        if pending is not None and not pending.strip():
            self.p.add((*path, "pending"), 'pending without a note: say why and when (pending = "...")')
        url = get_str(self.p, table, (*path, "url"))
        sha256 = get_str(self.p, table, (*path, "sha256"))
        if sha256 is not None and not _SHA256.fullmatch(sha256):
            self.p.add((*path, "sha256"), f"'{sha256}' is not a sha256 (64 hex digits)")
        if ("url" in table) != ("sha256" in table):
            given = "url" if "url" in table else "sha256"
            self.p.add((*path, given), "url and sha256 go together: give both or neither")
        if "pending" in table:
            for excluded in ("version", "url", "sha256", "index", "extras"):
                if excluded in table:
                    self.p.add((*path, excluded), "a pending package has only a note; remove this key or `pending`")
        if "url" in table:
            for excluded in ("version", "index"):
                if excluded in table:
                    self.p.add((*path, excluded), "a package locked by url takes no version or index; remove one")
        if len(self.p.items) > before:
            return None
        return PipPackage(
            name=name,
            specifier=specifier,
            extras=tuple(sorted(set(extras))),
            marker=marker,
            index=index,
            pending=pending,
            url=url,
            sha256=sha256.lower() if sha256 else None,
        )

    def marker(self, path: KeyPath, table: dict[str, Any]) -> str | None:
        text = get_str(self.p, table, path)
        if text is None:
            return None
        try:
            return str(Marker(text))
        except InvalidMarker as exc:
            self.p.add(path, f"'{text}' is not a PEP 508 marker: {str(exc).splitlines()[0]}")
            return None

    def package_index(self, path: KeyPath, table: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        """platform -> index name: a string applies to every platform of the env, a table to those it names."""
        value = table.get("index")
        if value is None:
            return ()
        if isinstance(value, str):
            index = self.pip_index(path, value)
            return tuple((platform, index.name) for platform in sorted(self.platforms)) if index else ()
        if not isinstance(value, dict):
            self.p.add(path, f"expected an index name or a table platform -> index name, got {type_name(value)}")
            return ()
        out: list[tuple[str, str]] = []
        for platform, name in value.items():
            if platform not in self.platforms:
                known = ", ".join(self.platforms) or "none valid"
                self.p.add(
                    (*path, platform),
                    f"'{platform}' is not a platform of this env{did_you_mean(platform, self.platforms)} "
                    f"(env.platforms: {known})",
                )
                continue
            index = self.pip_index((*path, platform), name)
            if index is not None:
                out.append((platform, index.name))
        return tuple(sorted(out))

    # --- [sources.<name>] and [install] ---------------------------------------------------------------

    def sources(self, data: dict[str, Any]) -> list[Source]:
        out: list[Source] = []
        for name, value in get_table(self.p, data, ("sources",)).items():
            source = self.source(("sources", name), name, value)
            if source is not None:
                out.append(source)
        return out

    def source(self, path: KeyPath, name: str, value: object) -> Source | None:
        table = as_table(self.p, path, value)
        if table is None:
            return None
        before = len(self.p.items)
        check_keys(self.p, path, table, _SOURCE_KEYS, ("url", "ref"))
        if not _SOURCE_NAME.fullmatch(name):
            self.p.add(path, f"source name '{name}' must be letters, digits, '.', '_' or '-'")
        url = get_str(self.p, table, (*path, "url"))
        url_problem = git_url_problem(url) if url is not None else None
        if url_problem:
            self.p.add((*path, "url"), url_problem)
        ref = get_str(self.p, table, (*path, "ref"))
        problem = ref_problem(ref) if ref is not None else None
        if problem:
            self.p.add((*path, "ref"), problem)
        distribution = get_str(self.p, table, (*path, "distribution"), default=name) or name
        if not _PROJECT_NAME.fullmatch(distribution):
            self.p.add((*path, "distribution"), f"'{distribution}' is not a valid Python project name")
        install = get_str(self.p, table, (*path, "install"), default="editable")
        if install is not None and install not in INSTALL_MODES:
            self.p.add(
                (*path, "install"),
                f"'{install}'{did_you_mean(install, INSTALL_MODES)}; expected one of: {', '.join(INSTALL_MODES)}",
            )
        build_index = None
        if "build-index" in table:
            index = self.pip_index((*path, "build-index"), table["build-index"])
            build_index = index.name if index else None
        requirements: list[str] = []
        for key, file in get_str_list(self.p, table, (*path, "requirements")):
            posix = PurePosixPath(file)
            if file != PYPROJECT and (posix.is_absolute() or ".." in posix.parts or "\\" in file):
                self.p.add(key, f"'{file}' must be a relative path inside the source tree, or \"{PYPROJECT}\"")
            elif file in requirements:
                self.p.add(key, f"'{file}' is listed twice")
            else:
                requirements.append(file)
        picks: list[str] = []
        for key, sha in get_str_list(self.p, table, (*path, "cherry-picks")):
            if not FULL_SHA.fullmatch(sha):
                self.p.add(key, f"'{sha}' is not a full 40-hex commit; cherry-picks name commits by full sha")
            elif sha.lower() in picks:
                self.p.add(key, f"commit {sha} is cherry-picked twice")
            else:
                picks.append(sha.lower())
        dependencies, dependencies_reason = self.dependencies(path, table, requirements)
        pythonpath = get_bool(self.p, table, (*path, "pythonpath"), default=False)
        build_isolation = get_bool(self.p, table, (*path, "build-isolation"), default=True)
        needs_cann = get_bool(self.p, table, (*path, "needs-cann"), default=False)
        submodules = get_bool(self.p, table, (*path, "submodules"), default=False)
        env = get_env(self.p, table, (*path, "env"))
        if len(self.p.items) > before or url is None or ref is None:
            return None
        return Source(
            name=name,
            url=url,
            ref=ref.lower() if FULL_SHA.fullmatch(ref) else ref,
            distribution=distribution,
            cherry_picks=tuple(picks),
            editable=install == "editable",
            pythonpath=pythonpath,
            env=env,
            build_isolation=build_isolation,
            needs_cann=needs_cann,
            build_index=build_index,
            requirements=tuple(requirements),
            submodules=submodules,
            dependencies=dependencies,
            dependencies_reason=dependencies_reason,
        )

    def dependencies(self, path: KeyPath, table: dict[str, Any], requirements: list[str]) -> tuple[str, str | None]:
        """Which requirements of a source count: metadata (default), files, or none with its reason."""
        mode = get_str(self.p, table, (*path, "dependencies"), default=METADATA) or METADATA
        if mode not in DEPENDENCY_MODES:
            self.p.add(
                (*path, "dependencies"),
                f"'{mode}'{did_you_mean(mode, DEPENDENCY_MODES)}; expected one of: {', '.join(DEPENDENCY_MODES)}",
            )
        reason = get_str(self.p, table, (*path, "dependencies-reason"), empty=True)
        if mode == NONE and (reason is None or not reason.strip()):
            self.p.add(
                (*path, "dependencies"),
                '"none" needs `dependencies-reason`: say why nothing the source declares is honoured',
            )
        elif mode != NONE and reason is not None:
            self.p.add((*path, "dependencies-reason"), 'only dependencies = "none" takes a reason')
        if mode == NONE and requirements:
            self.p.add(
                (*path, "requirements"),
                'dependencies = "none" counts no requirement file; remove `requirements` or use "files"',
            )
        return mode, reason if mode == NONE else None

    def order(self, data: dict[str, Any], sources: list[Source]) -> tuple[Source, ...]:
        """Sources named in install.order first, in that order, then the others in declaration order."""
        path: KeyPath = ("install",)
        table = self.section(data, path, ("order",)) or {}
        declared = list(_dict(data.get("sources")))
        named: list[str] = []
        for key, name in get_str_list(self.p, table, (*path, "order")):
            if name not in declared:
                self.p.add(
                    key,
                    f"unknown source '{name}'{did_you_mean(name, declared)}; sources: {', '.join(declared) or 'none'}",
                )
            elif name in named:
                self.p.add(key, f"source '{name}' is named twice")
            else:
                named.append(name)
        rank = {name: i for i, name in enumerate(named)}
        return tuple(sorted(sources, key=lambda s: (rank.get(s.name, len(rank)), declared.index(s.name))))

    def check_names(self, data: dict[str, Any]) -> None:
        """Names equal after PEP 503 normalisation would fight over one distribution: report the later one."""
        pip = _dict(data.get("pip"))
        packages = _dict(pip.get("packages"))
        sources = _dict(data.get("sources"))
        seen: dict[str, str] = {}
        names: dict[str, str] = {}
        for name, table in sources.items():
            if not self.claim(names, name, ("sources", name), f"source '{name}'"):
                continue
            written = table.get("distribution") if isinstance(table, dict) else None
            distribution = written if isinstance(written, str) and written else name
            key: KeyPath = ("sources", name, "distribution") if written else ("sources", name)
            self.claim(seen, distribution, key, f"the distribution '{distribution}' of source '{name}'")
        for name in packages:
            self.claim(seen, name, ("pip", "packages", name), f"pip package '{name}'")

    def claim(self, seen: dict[str, str], name: str, path: KeyPath, what: str) -> bool:
        """Record `name` as taken by `what`; False (and a problem) when another entry took it already."""
        normal = canonicalize_name(name)
        if normal in seen:
            self.p.add(path, f"{what} is the same name as {seen[normal]} after normalisation ('{normal}')")
            return False
        seen[normal] = what
        return True

    # --- [overrides], [activation], [checks] ----------------------------------------------------------

    def overrides(self, data: dict[str, Any]) -> tuple[Override, ...]:
        out: list[Override] = []
        for name, value in get_table(self.p, data, ("overrides",)).items():
            path: KeyPath = ("overrides", name)
            table = as_table(self.p, path, value)
            if table is None:
                continue
            check_keys(self.p, path, table, ("requirement", "reason"), ("requirement",))
            text = get_str(self.p, table, (*path, "requirement"))
            reason = get_str(self.p, table, (*path, "reason"), empty=True)
            if reason is None or not reason.strip():
                self.p.add((*path, "reason"), "an override needs a reason: say why upstream is replaced")
            if text is None:
                continue
            try:
                requirement = Requirement(text)
            except InvalidRequirement as exc:
                reason_text = str(exc).splitlines()[0]
                self.p.add((*path, "requirement"), f"'{text}' is not a PEP 508 requirement: {reason_text}")
                continue
            if canonicalize_name(requirement.name) != canonicalize_name(name):
                self.p.add(
                    (*path, "requirement"),
                    f"requirement names '{requirement.name}', not '{name}'; an override replaces its own name",
                )
            elif reason and reason.strip():
                out.append(Override(name=name, requirement=str(requirement), reason=reason))
        return tuple(sorted(out, key=lambda o: canonicalize_name(o.name)))

    def activation(self, data: dict[str, Any]) -> tuple[tuple[tuple[str, str], ...], tuple[Profile, ...]]:
        path: KeyPath = ("activation",)
        table = self.section(data, path, ("env", "profiles")) or {}
        env = get_env(self.p, table, (*path, "env"))
        profiles: list[Profile] = []
        for name, value in get_table(self.p, table, (*path, "profiles")).items():
            profile_path: KeyPath = (*path, "profiles", name)
            profile = as_table(self.p, profile_path, value)
            if profile is None:
                continue
            check_keys(self.p, profile_path, profile, ("description", "env"), ("description", "env"))
            description = get_str(self.p, profile, (*profile_path, "description"))
            variables = get_env(self.p, profile, (*profile_path, "env"))
            if description is not None and variables:
                profiles.append(Profile(name=name, description=description, env=variables))
        return env, tuple(sorted(profiles, key=lambda p: p.name))

    def checks(self, data: dict[str, Any]) -> tuple[ImportCheck, ...]:
        table = self.section(data, ("checks",), ("imports",)) or {}
        value = table.get("imports", [])
        if not isinstance(value, list):
            self.p.add(
                ("checks", "imports"), f"expected an array of tables ([[checks.imports]]), got {type_name(value)}"
            )
            return ()
        out: list[ImportCheck] = []
        for position, item in enumerate(value):
            path: KeyPath = ("checks", "imports", position)
            check = as_table(self.p, path, item)
            if check is None:
                continue
            before = len(self.p.items)
            check_keys(self.p, path, check, ("module", "distribution", "version", "needs"), ("module",))
            module = get_str(self.p, check, (*path, "module"))
            if module is not None and not _MODULE.fullmatch(module):
                self.p.add((*path, "module"), f"'{module}' is not an importable module name")
            distribution = get_str(self.p, check, (*path, "distribution"))
            if distribution is not None and not _PROJECT_NAME.fullmatch(distribution):
                self.p.add((*path, "distribution"), f"'{distribution}' is not a valid Python project name")
            version = get_str(self.p, check, (*path, "version"))
            if version is not None:
                try:
                    Version(version)
                except InvalidVersion:
                    self.p.add((*path, "version"), f"'{version}' is not a PEP 440 version")
            needs = get_str(self.p, check, (*path, "needs"), default="none") or "none"
            if needs not in NEEDS:
                self.p.add(
                    (*path, "needs"), f"'{needs}'{did_you_mean(needs, NEEDS)}; expected one of: {', '.join(NEEDS)}"
                )
            if len(self.p.items) == before and module is not None:
                out.append(ImportCheck(module=module, distribution=distribution, version=version, needs=needs))
        return tuple(out)


def _looks_like_version(text: str) -> bool:
    try:
        Version(text.strip())
    except InvalidVersion:
        return False
    return True


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
