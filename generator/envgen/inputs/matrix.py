"""env-templates/<env>.toml + channels/ -> a validated Matrix; every problem reported at once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508
from packaging.version import InvalidVersion, Version

from envgen.errors import InputError, MatrixError
from envgen.inputs.channels import read_channels
from envgen.inputs.extends import read_layered
from envgen.inputs.matrix_archives import ArchiveSectionReader
from envgen.inputs.matrix_audit import AuditSectionReader
from envgen.inputs.matrix_pip import PipSectionReader
from envgen.inputs.matrix_sections import MODULE
from envgen.inputs.matrix_sources import SourceSectionReader
from envgen.inputs.matrix_system import SystemSectionReader
from envgen.inputs.matrix_watch import WatchSectionReader
from envgen.inputs.toml_reader import (
    KeyPath,
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
from envgen.model import NEEDS, Channel, ImportCheck, Matrix, Override, Profile
from envgen.names import env_name_problem, is_project_name, name_problem, package_key
from envgen.platforms import PLATFORMS
from envgen.project import Project

SCHEMA = 1
_TOP_KEYS = (
    "schema",
    "env",
    "system",
    "conda",
    "pip",
    "sources",
    "install",
    "overrides",
    "activation",
    "checks",
    "watch",
    "archives",
    "audit",
)
_TOP_REQUIRED = ("schema", "env", "system", "pip")
_MAJOR_MINOR = re.compile(r"\d+\.\d+")


def load_matrix(path: Path, channels_dir: Path, *, conda_specs: bool = True) -> Matrix:
    """Read and validate the matrix at `path` against the channels in `channels_dir`.

    Without `conda_specs`, a matrix otherwise valid is returned with its conda specs not yet parsed
    by rattler (whose import is a fifth of what a re-lock does before uv starts): the caller checks
    them with `check_conda_specs` before using them.
    """
    if not path.is_file():
        envs = sorted(p.stem for p in path.parent.glob("*.toml")) if path.parent.is_dir() else []
        available = ", ".join(envs) if envs else f"none (no *.toml in {path.parent})"
        raise InputError(
            f"no matrix at {path}; available envs: {available}",
            hint=f"name one of the available envs, or create {path.name} (see docs/matrix.md)",
            file=str(path),
        )
    channels, channel_problems = read_channels(channels_dir)
    broken = {p.stem for p in channels_dir.glob("*.toml")} - set(channels)
    layered = read_layered(path)
    problems = layered.problems
    matrix = None
    reader = MatrixReader(problems, path, channels_dir, channels, broken)
    if not problems.items:
        matrix = reader.matrix(layered.data)
    if conda_specs or problems.items:  # a bad matrix is reported whole, its conda specs too
        reader.check_specs()
    # Channel files first, then the matrix top to bottom (keys without a line, i.e. missing ones,
    # first), then the files it extends, nearest first.
    rank = {str(p): i for i, p in enumerate((path, *layered.bases))}
    found = [
        *channel_problems,
        *sorted(problems.items, key=lambda p: (rank.get(p.file, 0), p.line or 0)),
    ]
    if found or matrix is None:
        raise MatrixError(found)
    # Which file wrote each key matters only when there are several files.
    key_files = tuple(problems.files.items()) if layered.bases else ()
    return msgspec.structs.replace(
        matrix, bases=tuple(str(p) for p in layered.bases), key_files=key_files
    )


def load_env(project: Project, env: str, *, conda_specs: bool = True) -> Matrix:
    """The matrix of `env` in `project`, its path relative to the project root (so nothing written
    depends on where the checkout lives); `conda_specs` as for `load_matrix`."""
    path = project.template(env)
    matrix = load_matrix(path, project.channels_dir, conda_specs=conda_specs)

    def relative(file: str) -> str:
        return Path(file).relative_to(project.root).as_posix()

    bases = tuple(map(relative, matrix.bases))
    key_files = tuple((key, relative(file)) for key, file in matrix.key_files)
    return msgspec.structs.replace(
        matrix, path=relative(str(path)), bases=bases, key_files=key_files
    )


def conda_spec_problem(spec: str) -> str | None:
    """Why `spec` is not a conda match spec as the solver reads it (rattler, strictly); None if it
    is one."""
    import rattler  # only where conda specs are checked: a re-lock checks them once uv has started

    try:
        rattler.MatchSpec(spec.strip(), strict=True)
    except Exception as exc:  # rattler raises its own exception classes, not exported by type
        return f"'{spec}' is not a conda match spec: {exc}"
    return None


def check_conda_specs(project: Project, env: str, matrix: Matrix) -> None:
    """The check `load_env(..., conda_specs=False)` left out: when a conda spec of `matrix` does not
    parse, the matrix is loaded again whole, which reports it (MatrixError, located)."""
    if any(conda_spec_problem(spec) for spec in matrix.conda_specs):
        load_env(project, env)


class MatrixReader(
    PipSectionReader,
    SourceSectionReader,
    SystemSectionReader,
    WatchSectionReader,
    ArchiveSectionReader,
    AuditSectionReader,
):
    """Walks the parsed TOML, records problems with key paths, and builds what is valid."""

    # the conda specs read, with their keys (`check_specs` parses them)
    specs: tuple[tuple[KeyPath, str], ...] = ()

    def matrix(self, data: dict[str, Any]) -> Matrix:
        check_keys(self.p, (), data, _TOP_KEYS, _TOP_REQUIRED)
        schema = data.get("schema")
        if "schema" in data and (type(schema) is not int or schema != SCHEMA):
            self.p.add(
                ("schema",), f"unsupported schema {schema!r}; this envgen reads schema = {SCHEMA}"
            )
        name, description, python, notes = self.env(data)
        glibc, cann = self.system(data)
        channels, specs = self.conda(data)
        packages = self.pip(data)
        sources = self.order(data, self.sources(data))
        npu = self.npu(data, sources)
        if cann is None and "system" in data:
            self.without_cann(data, sources)
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
            indexes=self.default_indexes
            + tuple(self.named_indexes[n] for n in sorted(self.named_indexes)),
            packages=packages,
            sources=sources,
            overrides=self.overrides(data),
            activation_env=activation_env,
            profiles=profiles,
            checks=self.checks(data),
            notes=notes,
            npu=npu,
            watch=self.watch(data, sources),
            archives=self.archives(data),
            links=self.links(data),
            exclusions=self.exclusions(data),
            audit_ignores=self.audit_ignores(data),
            has_conda="conda" in data,
        )

    def env(self, data: dict[str, Any]) -> tuple[str, str, str, tuple[tuple[str, str], ...]]:
        path: KeyPath = ("env",)
        table = self.section(
            data,
            path,
            ("name", "description", "platforms", "python", "notes"),
            ("name", "platforms", "python"),
        )
        if table is None:
            return self.path.stem, "", "", ()
        name = self.env_name((*path, "name"), table)
        self.platforms = self.env_platforms((*path, "platforms"), table)
        python = get_str(self.p, table, (*path, "python")) or ""
        if python and not _MAJOR_MINOR.fullmatch(python):
            self.p.add(
                (*path, "python"),
                f"'{python}' is not a major.minor Python version such as \"3.11\"",
            )
        notes: list[tuple[str, str]] = []
        for note, text in get_table(self.p, table, (*path, "notes")).items():
            if isinstance(text, str):
                notes.append((note, text))
            else:
                self.p.add((*path, "notes", note), f"expected a string, got {type_name(text)}")
        description = get_str(self.p, table, (*path, "description"), default="", empty=True) or ""
        return name or self.path.stem, description, python, tuple(sorted(notes))

    def env_name(self, path: KeyPath, table: dict[str, Any]) -> str | None:
        name = get_str(self.p, table, path)
        if name is not None and name != self.path.stem:
            rename = "rename one so they match"
            self.p.add(path, f"'{name}' differs from the file name {self.path.name}; {rename}")
        elif name is not None and (problem := env_name_problem(name)):
            self.p.add(path, problem)
        return name

    def env_platforms(self, path: KeyPath, table: dict[str, Any]) -> tuple[str, ...]:
        platforms: list[str] = []
        for key, platform in get_str_list(self.p, table, path):
            if platform not in PLATFORMS:
                hint = f"{did_you_mean(platform, PLATFORMS)} (known: {', '.join(PLATFORMS)})"
                self.p.add(key, f"unknown platform '{platform}'{hint}")
            elif platform in platforms:
                self.p.add(key, f"platform '{platform}' is listed twice")
            else:
                platforms.append(platform)
        if "platforms" in table and isinstance(table["platforms"], list) and not table["platforms"]:
            self.p.add(path, f"name at least one platform ({', '.join(PLATFORMS)})")
        return tuple(platforms)

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
        self.specs = tuple(get_str_list(self.p, table, (*path, "specs")))
        return tuple(channels), tuple(spec.strip() for _, spec in self.specs)

    def check_specs(self) -> None:
        """Each conda spec read, parsed as the solver parses it (rattler, strictly)."""
        for key, spec in self.specs:
            if problem := conda_spec_problem(spec):
                self.p.add(key, problem)

    def overrides(self, data: dict[str, Any]) -> tuple[Override, ...]:
        out: list[Override] = []
        for name, value in get_table(self.p, data, ("overrides",)).items():
            path: KeyPath = ("overrides", name)
            table = as_table(self.p, path, value)
            if table is None:
                continue
            check_keys(
                self.p, path, table, ("requirement", "reason", "transitive"), ("requirement",)
            )
            transitive = get_bool(self.p, table, (*path, "transitive"), default=False)
            text = get_str(self.p, table, (*path, "requirement"))
            reason = get_str(self.p, table, (*path, "reason"), empty=True)
            if reason is None or not reason.strip():
                self.p.add(
                    (*path, "reason"), "an override needs a reason: say why upstream is replaced"
                )
            if text is None:
                continue
            try:
                requirement = Pep508(text)
            except InvalidRequirement as exc:
                reason_text = str(exc).splitlines()[0]
                self.p.add(
                    (*path, "requirement"), f"'{text}' is not a PEP 508 requirement: {reason_text}"
                )
                continue
            if package_key(requirement.name) != package_key(name):
                self.p.add(
                    (*path, "requirement"),
                    f"requirement names '{requirement.name}', not '{name}'; an "
                    "override replaces its own name",
                )
            elif reason and reason.strip():
                out.append(
                    Override(
                        name=name,
                        requirement=str(requirement),
                        reason=reason,
                        transitive=transitive,
                    )
                )
        return tuple(sorted(out, key=lambda o: package_key(o.name)))

    def activation(
        self, data: dict[str, Any]
    ) -> tuple[tuple[tuple[str, str], ...], tuple[Profile, ...]]:
        path: KeyPath = ("activation",)
        table = self.section(data, path, ("env", "profiles")) or {}
        env = get_env(self.p, table, (*path, "env"))
        profiles: list[Profile] = []
        for name, value in get_table(self.p, table, (*path, "profiles")).items():
            profile_path: KeyPath = (*path, "profiles", name)
            profile = as_table(self.p, profile_path, value)
            if profile is None:
                continue
            if problem := name_problem(name, "profile name"):
                self.p.add(profile_path, problem)
                continue
            check_keys(
                self.p, profile_path, profile, ("description", "env"), ("description", "env")
            )
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
                ("checks", "imports"),
                f"expected an array of tables ([[checks.imports]]), got {type_name(value)}",
            )
            return ()
        out: list[ImportCheck] = []
        for position, item in enumerate(value):
            path: KeyPath = ("checks", "imports", position)
            check = as_table(self.p, path, item)
            if check is None:
                continue
            before = len(self.p.items)
            check_keys(
                self.p, path, check, ("module", "distribution", "version", "needs"), ("module",)
            )
            module = get_str(self.p, check, (*path, "module"))
            if module is not None and not MODULE.fullmatch(module):
                self.p.add((*path, "module"), f"'{module}' is not an importable module name")
            distribution = get_str(self.p, check, (*path, "distribution"))
            if distribution is not None and not is_project_name(distribution):
                self.p.add(
                    (*path, "distribution"), f"'{distribution}' is not a valid Python project name"
                )
            version = get_str(self.p, check, (*path, "version"))
            if version is not None:
                try:
                    Version(version)
                except InvalidVersion:
                    self.p.add((*path, "version"), f"'{version}' is not a PEP 440 version")
            needs = get_str(self.p, check, (*path, "needs"), default="none") or "none"
            if needs not in NEEDS:
                self.p.add(
                    (*path, "needs"),
                    f"'{needs}'{did_you_mean(needs, NEEDS)}; expected one of: {', '.join(NEEDS)}",
                )
            if len(self.p.items) == before and module is not None:
                out.append(
                    ImportCheck(
                        module=module, distribution=distribution, version=version, needs=needs
                    )
                )
        return tuple(out)
