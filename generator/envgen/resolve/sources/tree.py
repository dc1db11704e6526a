"""A source's tree as its install sees it: the project in its `subdirectory`, each declared file
replacement applied (SGLang's `python/pyproject_npu.toml` over `python/pyproject.toml`), and the
requirements of the extras it asks (`pip install -e "python[srt_npu]"`).

Reading the locked tree this way is what makes the lock count what the recipe will build: the
replaced file is the one read. Each path is checked against the tree at the locked commit: a
replacement reads a regular file of the source's own tree (not a symlink, not inside a submodule)
and writes over a regular file or a new one in a directory of that tree.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as Pep508

from envgen.commits import short_commit
from envgen.errors import InputError, placed
from envgen.inputs.requirements import Line, project_table
from envgen.model import Source
from envgen.names import package_key

Reader = Callable[[str], bytes | None]
Exporter = Callable[[Path], None]
# What `git ls-tree` says of a path: its mode and type.
Lister = Callable[[str], tuple[str, str] | None]

_FILE_MODES = ("100644", "100755")


@dataclass(frozen=True)
class InstalledTree:
    """The tree of one source at one commit, with its replacements applied and its project found."""

    source: Source
    read_blob: Reader
    export_tree: Exporter

    def read(self, path: str) -> bytes | None:
        """A file of the tree (a path from its root); a replaced one has its replacement's bytes."""
        for replacement in self.source.replacements:
            if path == replacement.target:
                return self.read_blob(replacement.source)
        return self.read_blob(path)

    def in_project(self, path: str) -> str:
        """`path` of the project (relative to its subdirectory) as a path from the tree's root."""
        return f"{self.source.subdirectory}/{path}" if self.source.subdirectory else path

    def origin(self, path: str) -> str:
        """Where a file of the project is read from, as a person finds it: the replacing file."""
        rooted = self.in_project(path)
        return next((r.source for r in self.source.replacements if r.target == rooted), rooted)

    def read_project(self, path: str) -> bytes | None:
        return self.read(self.in_project(path))

    def read_listed(self, path: str) -> bytes | None:
        """A listed requirement file (a path from the root); `pyproject.toml` is the project's."""
        return self.read_project(path) if path == "pyproject.toml" else self.read(path)

    def export(self, dest: Path) -> None:
        """The tree as plain files, replacements applied; `dest` is the project (a link into the
        exported tree when it lies in a subdirectory, so its parent's files stay beside it)."""
        if not self.source.subdirectory and not self.source.replacements:
            self.export_tree(dest)
            return
        tree = dest.with_name(f"{dest.name}.tree")
        self.export_tree(tree)
        for replacement in self.source.replacements:
            target = tree / replacement.target
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tree / replacement.source, target)
        if self.source.subdirectory:
            os.symlink(tree / self.source.subdirectory, dest, target_is_directory=True)
        else:
            os.replace(tree, dest)


def check_paths(source: Source, commit: str, listed: Lister) -> None:
    """The subdirectory must be a directory of the tree at `commit`, each replacement read a regular
    file of it and write over a regular file (or a new one) in one of its directories: InputError
    (exit 2) naming the key otherwise."""
    where = f"source {source.name} at commit {short_commit(commit)}"
    if source.subdirectory and _kind(listed, source.subdirectory) != "tree":
        raise InputError(
            f"{where}: subdirectory {source.subdirectory!r} is not a directory of its tree",
            hint=f"fix sources.{source.name}.subdirectory in the matrix",
            key=f"sources.{source.name}.subdirectory",
        )
    for i, replacement in enumerate(source.replacements):
        key = f"sources.{source.name}.replace[{i}]"
        if _kind(listed, replacement.source) != "file":
            raise InputError(
                f"{where}: {key}.from: {replacement.source!r} is not a regular file of its own "
                "tree (a symbolic link, a directory, a submodule's file or none)",
                hint="name a file the source's tree holds",
                key=f"{key}.from",
            )
        parent = replacement.target.rpartition("/")[0]
        target = _kind(listed, replacement.target)
        if (parent and _kind(listed, parent) != "tree") or target not in ("file", None):
            raise InputError(
                f"{where}: {key}.to: {replacement.target!r} is not a regular file, or a new "
                "one, in a directory of its own tree",
                hint="name a path of the source's tree no symbolic link or submodule leads through",
                key=f"{key}.to",
            )


def _kind(listed: Lister, path: str) -> str | None:
    """ "file", "tree", "other" (a link, a submodule) or None for a path the tree does not hold; a
    path under a link or a submodule is "other"."""
    parts = path.split("/")
    for depth in range(1, len(parts)):
        parent = listed("/".join(parts[:depth]))
        if parent is None:
            return None
        if _kind_of(parent) != "tree":
            return "other"
    return _kind_of(listed(path))


def _kind_of(entry: tuple[str, str] | None) -> str | None:
    if entry is None:
        return None
    mode, kind = entry
    if kind == "tree":
        return "tree"
    return "file" if kind == "blob" and mode in _FILE_MODES else "other"


def extras_lines(tree: InstalledTree, context: str) -> tuple[Line, ...]:
    """The requirements the source's extras add: its static `[project.optional-dependencies]` of
    each extra asked, and of the extras those name of the project itself (`sglang[diffusion]`)."""
    source = tree.source
    if not source.extras:
        return ()
    data = tree.read_project("pyproject.toml")
    optional = _optional_dependencies(data, context) if data is not None else None
    if optional is None:
        raise InputError(
            f"{context}: asks extras {', '.join(source.extras)}, but its pyproject.toml has no "
            "static [project.optional-dependencies] to read them from (envgen reads extras only "
            "there)",
            hint="list their requirements in a file of `requirements`, or set "
            f'dependencies = "files" on sources.{source.name}',
            file="pyproject.toml",
            package=source.name,
        )
    file = tree.origin("pyproject.toml")
    text = (data or b"").decode("utf-8", errors="replace").splitlines()
    lines: list[Line] = []
    wanted, seen = [package_key(e) for e in source.extras], set()
    while wanted:
        extra = wanted.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        for dep in optional.get(extra, ()):
            requirement = _requirement(dep, context, file, f"optional-dependencies.{extra}")
            if package_key(requirement.name) == package_key(source.distribution):
                wanted += [package_key(e) for e in requirement.extras]
                continue
            lines.append(Line(text=str(requirement), file=file, line=_line_of(dep, text)))
    return tuple(dict.fromkeys(lines))


def _optional_dependencies(data: bytes, context: str) -> dict[str, list[str]] | None:
    text = data.decode("utf-8", errors="replace")
    project = project_table(text, "pyproject.toml", context=context)
    if project is None or "optional-dependencies" in project.get("dynamic", []):
        return None
    table = project.get("optional-dependencies", {})
    if not isinstance(table, dict) or not all(
        isinstance(deps, list) and all(isinstance(d, str) for d in deps) for deps in table.values()
    ):
        reason = "is not a table of lists"
        raise InputError(
            f"{context}: [project.optional-dependencies] {reason}",
            file="pyproject.toml",
            key="project.optional-dependencies",
            reason=reason,
        )
    return {package_key(name): deps for name, deps in table.items()}


def _requirement(text: str, context: str, file: str, key: str) -> Pep508:
    try:
        return Pep508(text)
    except InvalidRequirement as exc:
        reason = f"{text!r} is not a PEP 508 requirement: {exc}"
        where = placed(file, None, key, reason)
        raise InputError(f"{context}: {where}", file=file, key=key, reason=reason) from exc


def _line_of(dep: str, lines: list[str]) -> int:
    quoted = (f'"{dep}"', f"'{dep}'")
    return next((i + 1 for i, line in enumerate(lines) if any(q in line for q in quoted)), 0)


def relabelled(tree: InstalledTree, lines: tuple[Line, ...]) -> tuple[Line, ...]:
    """The declared lines with the file they were read from as the tree holds it (`pyproject.toml`
    of a subdirectory project replaced by another file: that file)."""
    if not tree.source.subdirectory and not tree.source.replacements:
        return lines
    return tuple(dataclasses.replace(line, file=tree.origin(line.file)) for line in lines)
