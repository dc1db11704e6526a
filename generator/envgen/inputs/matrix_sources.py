"""The [sources.<name>] and [install] sections of a matrix: git sources, their refs and
cherry-picks, install order."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from envgen.commits import is_full_commit
from envgen.inputs.matrix_sections import SectionReader, dict_or_empty
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
from envgen.inputs.untrusted import git_url_problem, ref_problem, tree_path_problem
from envgen.model import (
    DEPENDENCY_MODES,
    METADATA,
    NONE,
    PYPROJECT,
    Link,
    Replacement,
    Source,
)
from envgen.names import is_project_name, name_problem, package_key

INSTALL_MODES = ("editable", "plain")

_SOURCE_KEYS = (
    "url",
    "ref",
    "distribution",
    "install",
    "pythonpath",
    "env",
    "build-isolation",
    "submodules",
    "submodules-reason",
    "needs-cann",
    "build-index",
    "requirements",
    "cherry-picks",
    "dependencies",
    "dependencies-reason",
    "subdirectory",
    "extras",
    "replace",
)
_LINK_KEYS = ("target", "directory", "reason")
Replaced = tuple[Replacement, ...]


class SourceSectionReader(SectionReader):
    """[sources.<name>], [install] order, and names that would collide after normalisation."""

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
        if problem := name_problem(name, "source name"):
            self.p.add(path, problem)
        url, ref = self.location(path, table)
        distribution = get_str(self.p, table, (*path, "distribution"), default=name) or name
        if not is_project_name(distribution):
            self.p.add(
                (*path, "distribution"), f"'{distribution}' is not a valid Python project name"
            )
        install = get_str(self.p, table, (*path, "install"), default="editable")
        if install is not None and install not in INSTALL_MODES:
            self.p.add(
                (*path, "install"),
                f"'{install}'{did_you_mean(install, INSTALL_MODES)}; expected one of: "
                f"{', '.join(INSTALL_MODES)}",
            )
        build_index = None
        if "build-index" in table:
            index = self.pip_index((*path, "build-index"), table["build-index"])
            build_index = index.name if index else None
        requirements = self.requirement_files(path, table)
        picks = self.cherry_picks(path, table)
        dependencies, dependencies_reason = self.dependencies(path, table, requirements)
        pythonpath = get_bool(self.p, table, (*path, "pythonpath"), default=False)
        build_isolation = get_bool(self.p, table, (*path, "build-isolation"), default=True)
        needs_cann = get_bool(self.p, table, (*path, "needs-cann"), default=False)
        submodules, submodules_reason = self.submodules(path, table)
        env = get_env(self.p, table, (*path, "env"))
        subdirectory, extras, replacements = self.layout(path, table)
        if len(self.p.items) > before or url is None or ref is None:
            return None
        return Source(
            name=name,
            url=url,
            ref=ref.lower() if is_full_commit(ref) else ref,
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
            submodules_reason=submodules_reason,
            dependencies=dependencies,
            dependencies_reason=dependencies_reason,
            subdirectory=subdirectory,
            extras=extras,
            replacements=replacements,
        )

    def layout(self, path: KeyPath, table: dict[str, Any]) -> tuple[str, tuple[str, ...], Replaced]:
        """Where the project lies in the tree, the extras its install asks, the files copied over
        others before it builds; every path relative and inside the tree."""
        subdirectory = get_str(self.p, table, (*path, "subdirectory")) or ""
        if subdirectory and (problem := tree_path_problem(subdirectory)):
            self.p.add((*path, "subdirectory"), problem)
        extras: list[str] = []
        for key, extra in get_str_list(self.p, table, (*path, "extras")):
            if problem := name_problem(extra, "extra"):
                self.p.add(key, problem)
            elif package_key(extra) in map(package_key, extras):
                self.p.add(key, f"extra '{extra}' is listed twice")
            else:
                extras.append(extra)
        return subdirectory, tuple(sorted(extras)), self.replacements(path, table)

    def replacements(self, path: KeyPath, table: dict[str, Any]) -> tuple[Replacement, ...]:
        """`replace = [{ from = "...", to = "..." }]`, applied in order; a target named once."""
        value = table.get("replace", [])
        if not isinstance(value, list):
            self.p.add((*path, "replace"), f"expected an array of tables, got {type_name(value)}")
            return ()
        out: list[Replacement] = []
        for i, item in enumerate(value):
            key: KeyPath = (*path, "replace", i)
            entry = as_table(self.p, key, item)
            if entry is None:
                continue
            check_keys(self.p, key, entry, ("from", "to"), ("from", "to"))
            paths = [get_str(self.p, entry, (*key, field)) for field in ("from", "to")]
            for field, found in zip(("from", "to"), paths, strict=True):
                if found is not None and (problem := tree_path_problem(found)):
                    self.p.add((*key, field), problem)
                    return ()
            source, target = paths
            if source is None or target is None:
                continue
            if source == target or target in (r.target for r in out):
                self.p.add((*key, "to"), f"'{target}' is replaced twice, or by itself")
                continue
            out.append(Replacement(source, target))
        return tuple(out)

    def location(self, path: KeyPath, table: dict[str, Any]) -> tuple[str | None, str | None]:
        """The source's git URL and ref, each checked as one that cannot reach git as an option."""
        url = get_str(self.p, table, (*path, "url"))
        url_problem = git_url_problem(url) if url is not None else None
        if url_problem:
            self.p.add((*path, "url"), url_problem)
        ref = get_str(self.p, table, (*path, "ref"))
        problem = ref_problem(ref) if ref is not None else None
        if problem:
            self.p.add((*path, "ref"), problem)
        return url, ref

    def requirement_files(self, path: KeyPath, table: dict[str, Any]) -> list[str]:
        """Relative paths inside the source tree (or PYPROJECT), each once."""
        requirements: list[str] = []
        for key, file in get_str_list(self.p, table, (*path, "requirements")):
            posix = PurePosixPath(file)
            if file != PYPROJECT and (posix.is_absolute() or ".." in posix.parts or "\\" in file):
                self.p.add(
                    key,
                    f"'{file}' must be a relative path inside the source tree, or \"{PYPROJECT}\"",
                )
            elif file in requirements:
                self.p.add(key, f"'{file}' is listed twice")
            else:
                requirements.append(file)
        return requirements

    def cherry_picks(self, path: KeyPath, table: dict[str, Any]) -> list[str]:
        """Full commits, lower-cased, each once, in the order they are applied."""
        picks: list[str] = []
        for key, sha in get_str_list(self.p, table, (*path, "cherry-picks")):
            if not is_full_commit(sha):
                self.p.add(
                    key,
                    f"'{sha}' is not a full 40-hex commit; cherry-picks name commits by full sha",
                )
            elif sha.lower() in picks:
                self.p.add(key, f"commit {sha} is cherry-picked twice")
            else:
                picks.append(sha.lower())
        return picks

    def submodules(self, path: KeyPath, table: dict[str, Any]) -> tuple[bool, str | None]:
        """Check out the submodules (the default) or not, which needs `submodules-reason`."""
        wanted = get_bool(self.p, table, (*path, "submodules"), default=True)
        reason = get_str(self.p, table, (*path, "submodules-reason"), empty=True)
        if not wanted and (reason is None or not reason.strip()):
            self.p.add(
                (*path, "submodules"),
                "false needs `submodules-reason`: say why the source installs without "
                "its submodules",
            )
        elif wanted and reason is not None:
            self.p.add((*path, "submodules-reason"), "only submodules = false takes a reason")
        return wanted, reason if not wanted else None

    def dependencies(
        self, path: KeyPath, table: dict[str, Any], requirements: list[str]
    ) -> tuple[str, str | None]:
        """Which requirements of a source count: metadata (default), files, or none with its
        reason."""
        mode = get_str(self.p, table, (*path, "dependencies"), default=METADATA) or METADATA
        if mode not in DEPENDENCY_MODES:
            self.p.add(
                (*path, "dependencies"),
                f"'{mode}'{did_you_mean(mode, DEPENDENCY_MODES)}; expected one of: "
                f"{', '.join(DEPENDENCY_MODES)}",
            )
        reason = get_str(self.p, table, (*path, "dependencies-reason"), empty=True)
        if mode == NONE and (reason is None or not reason.strip()):
            self.p.add(
                (*path, "dependencies"),
                '"none" needs `dependencies-reason`: say why nothing the source '
                "declares is honoured",
            )
        elif mode != NONE and reason is not None:
            self.p.add((*path, "dependencies-reason"), 'only dependencies = "none" takes a reason')
        if mode == NONE and requirements:
            self.p.add(
                (*path, "requirements"),
                'dependencies = "none" counts no requirement file; remove '
                '`requirements` or use "files"',
            )
        return mode, reason if mode == NONE else None

    def order(self, data: dict[str, Any], sources: list[Source]) -> tuple[Source, ...]:
        """Sources named in install.order first, in that order, then the others in declaration
        order."""
        path: KeyPath = ("install",)
        table = self.section(data, path, ("order", "links")) or {}
        declared = list(dict_or_empty(data.get("sources")))
        named: list[str] = []
        for key, name in get_str_list(self.p, table, (*path, "order")):
            if name not in declared:
                self.p.add(
                    key,
                    f"unknown source '{name}'{did_you_mean(name, declared)}; sources: "
                    f"{', '.join(declared) or 'none'}",
                )
            elif name in named:
                self.p.add(key, f"source '{name}' is named twice")
            else:
                named.append(name)
        rank = {name: i for i, name in enumerate(named)}
        return tuple(
            sorted(sources, key=lambda s: (rank.get(s.name, len(rank)), declared.index(s.name)))
        )

    def links(self, data: dict[str, Any]) -> tuple[Link, ...]:
        """[[install.links]]: links made inside site-packages after the install, in this order."""
        install = dict_or_empty(data.get("install"))
        value = install.get("links", [])
        if not isinstance(value, list):
            self.p.add(("install", "links"), f"expected an array of tables, got {type_name(value)}")
            return ()
        out: list[Link] = []
        for i, item in enumerate(value):
            path: KeyPath = ("install", "links", i)
            table = as_table(self.p, path, item)
            if table is None:
                continue
            before = len(self.p.items)
            check_keys(self.p, path, table, _LINK_KEYS, ("target", "reason"))
            target = get_str(self.p, table, (*path, "target"))
            if target is not None and (problem := tree_path_problem(target, pattern=True)):
                self.p.add((*path, "target"), f"{problem}; relative to site-packages")
            directory = get_str(self.p, table, (*path, "directory")) or ""
            if directory and (problem := tree_path_problem(directory)):
                self.p.add((*path, "directory"), f"{problem}; relative to site-packages")
            reason = get_str(self.p, table, (*path, "reason"), empty=True)
            if reason is not None and not reason.strip():
                self.p.add((*path, "reason"), "say why the link is made")
            if len(self.p.items) == before and target is not None and reason:
                out.append(Link(target=target, reason=reason, directory=directory))
        return tuple(out)

    def check_names(self, data: dict[str, Any]) -> None:
        """Names equal after PEP 503 normalisation would fight over one distribution: report the
        later one."""
        pip = dict_or_empty(data.get("pip"))
        packages = dict_or_empty(pip.get("packages"))
        sources = dict_or_empty(data.get("sources"))
        seen: dict[str, str] = {}
        names: dict[str, str] = {}
        for name, table in sources.items():
            if not self.claim(names, name, ("sources", name), f"source '{name}'"):
                continue
            written = table.get("distribution") if isinstance(table, dict) else None
            distribution = written if isinstance(written, str) and written else name
            key: KeyPath = ("sources", name, "distribution") if written else ("sources", name)
            self.claim(
                seen, distribution, key, f"the distribution '{distribution}' of source '{name}'"
            )
        for name in packages:
            self.claim(seen, name, ("pip", "packages", name), f"pip package '{name}'")
