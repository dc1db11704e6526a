"""The [pip] section of a matrix: default indexes and packages with their pins, markers and
indexes."""

from __future__ import annotations

from typing import Any

from packaging.markers import InvalidMarker, Marker
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envgen.digests import is_sha256
from envgen.inputs.matrix_sections import SectionReader, dict_or_empty
from envgen.inputs.toml_reader import (
    KeyPath,
    as_table,
    check_keys,
    did_you_mean,
    get_str,
    get_str_list,
    get_table,
    type_name,
)
from envgen.model import (
    Exclusion,
    Index,
    PipPackage,
)
from envgen.names import is_project_name, package_key

_PACKAGE_KEYS = ("version", "extras", "marker", "index", "pending", "url", "sha256")
Excluded = Exclusion | None


class PipSectionReader(SectionReader):
    """[pip] and its [pip.packages.<name>] tables."""

    def pip(self, data: dict[str, Any]) -> tuple[PipPackage, ...]:
        path: KeyPath = ("pip",)
        table = self.section(data, path, ("indexes", "packages", "exclude"), ("indexes",))
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
                    f"index '{name}' is explicit (explicit = true in "
                    f"{self.channels_dir / (name + '.toml')}): "
                    f'it serves only packages that name it; set index = "{name}" on '
                    "those packages instead",
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
        return tuple(sorted(packages, key=lambda p: package_key(p.name)))

    def exclusions(self, data: dict[str, Any]) -> tuple[Exclusion, ...]:
        """[pip.exclude.<name>]: packages the lock leaves out on purpose, each with its reason, on
        the platforms it names (all by default); never one the matrix itself asks for."""
        pip = data.get("pip")
        table = pip if isinstance(pip, dict) else {}
        asked = {package_key(n) for n in dict_or_empty(table.get("packages"))}
        for name, source in dict_or_empty(data.get("sources")).items():
            written = source.get("distribution") if isinstance(source, dict) else None
            asked.add(package_key(written if isinstance(written, str) and written else name))
        out: list[Exclusion] = []
        seen: dict[str, str] = {}  # one exclusion per canonical name
        for name, value in get_table(self.p, table, ("pip", "exclude")).items():
            path: KeyPath = ("pip", "exclude", name)
            if not self.claim(seen, name, path, f"pip.exclude entry '{name}'"):
                continue
            exclusion = self.exclusion(path, name, value, asked)
            if exclusion is not None:
                out.append(exclusion)
        return tuple(sorted(out, key=lambda e: package_key(e.name)))

    def exclusion(
        self,
        path: KeyPath,
        name: str,
        value: object,
        asked: set[str],
    ) -> Excluded:
        entry = as_table(self.p, path, value)
        if entry is None:
            return None
        before = len(self.p.items)
        check_keys(self.p, path, entry, ("reason", "platforms"), ("reason",))
        if not is_project_name(name):
            self.p.add(path, f"'{name}' is not a valid Python project name (PEP 508)")
        elif package_key(name) in asked:
            what = f"the matrix asks for {name} (a pip package or a source)"
            self.p.add(path, f"{what}: it cannot be left out")
        reason = get_str(self.p, entry, (*path, "reason"), empty=True)
        if reason is not None and not reason.strip():
            self.p.add((*path, "reason"), "say why the lock leaves it out")
        platforms = []
        for key, platform in get_str_list(self.p, entry, (*path, "platforms")):
            if platform not in self.platforms:
                known = ", ".join(self.platforms) or "none valid"
                self.p.add(key, f"'{platform}' is not a platform of this env ({known})")
            platforms.append(platform)
        if len(self.p.items) > before or not reason:
            return None
        return Exclusion(name, reason, tuple(p for p in self.platforms if p in platforms))

    def package(self, path: KeyPath, name: str, value: object) -> PipPackage | None:
        table = as_table(self.p, path, value)
        if table is None:
            return None
        before = len(self.p.items)
        check_keys(self.p, path, table, _PACKAGE_KEYS)
        if not is_project_name(name):
            self.p.add(path, f"'{name}' is not a valid Python project name (PEP 508)")
        specifier = self.specifier((*path, "version"), table)
        extras = self.extras((*path, "extras"), table)
        marker = self.marker((*path, "marker"), table)
        index = self.package_index((*path, "index"), table)
        pending = get_str(self.p, table, (*path, "pending"), empty=True)
        if pending is not None and not pending.strip():
            self.p.add(
                (*path, "pending"), 'pending without a note: say why and when (pending = "...")'
            )
        url = get_str(self.p, table, (*path, "url"))
        sha256 = get_str(self.p, table, (*path, "sha256"))
        if sha256 is not None and not is_sha256(sha256, any_case=True):
            self.p.add((*path, "sha256"), f"'{sha256}' is not a sha256 (64 hex digits)")
        self.key_conflicts(path, table)
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

    def specifier(self, path: KeyPath, table: dict[str, Any]) -> str:
        version = get_str(self.p, table, path)
        if version is None:
            return ""
        try:
            return str(SpecifierSet(version))
        except InvalidSpecifier:
            hint = f" (did you mean '=={version.strip()}'?)" if _looks_like_version(version) else ""
            self.p.add(path, f"'{version}' is not a PEP 440 specifier set{hint}")
            return ""

    def extras(self, path: KeyPath, table: dict[str, Any]) -> list[str]:
        extras: list[str] = []
        for key, extra in get_str_list(self.p, table, path):
            if is_project_name(extra):
                extras.append(extra)
            else:
                self.p.add(key, f"'{extra}' is not a valid extra name")
        return extras

    def key_conflicts(self, path: KeyPath, table: dict[str, Any]) -> None:
        """The keys a package may not give together: url without sha256, pending with a pin, url
        with a version or index."""
        if ("url" in table) != ("sha256" in table):
            given = "url" if "url" in table else "sha256"
            self.p.add((*path, given), "url and sha256 go together: give both or neither")
        pending = "a pending package has only a note; remove this key or `pending`"
        if "pending" in table:
            for excluded in ("version", "url", "sha256", "index", "extras"):
                if excluded in table:
                    self.p.add((*path, excluded), pending)
        by_url = "a package locked by url takes no version or index; remove one"
        if "url" in table:
            for excluded in ("version", "index"):
                if excluded in table:
                    self.p.add((*path, excluded), by_url)

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
        """platform -> index name: a string applies to every platform of the env, a table to those
        it names."""
        value = table.get("index")
        if value is None:
            return ()
        if isinstance(value, str):
            index = self.pip_index(path, value)
            return (
                tuple((platform, index.name) for platform in sorted(self.platforms))
                if index
                else ()
            )
        if not isinstance(value, dict):
            self.p.add(
                path,
                f"expected an index name or a table platform -> index name, got {type_name(value)}",
            )
            return ()
        out: list[tuple[str, str]] = []
        for platform, name in value.items():
            if platform not in self.platforms:
                known = ", ".join(self.platforms) or "none valid"
                self.p.add(
                    (*path, platform),
                    f"'{platform}' is not a platform of this "
                    f"env{did_you_mean(platform, self.platforms)} "
                    f"(env.platforms: {known})",
                )
                continue
            index = self.pip_index((*path, platform), name)
            if index is not None:
                out.append((platform, index.name))
        return tuple(sorted(out))


def _looks_like_version(text: str) -> bool:
    try:
        Version(text.strip())
    except InvalidVersion:
        return False
    return True
