"""The [archives.<name>] section of a matrix: wheels that come inside a release archive (a zip or a
tar of wheels, as sgl-kernel-npu publishes them), its URL and sha256 per platform."""

from __future__ import annotations

from typing import Any

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
from envgen.inputs.untrusted import archive_url_problem, name_problem, redirect_host_problem
from envgen.model import Archive
from envgen.names import is_project_name, package_key

_KEYS = ("url", "sha256", "wheels", "redirect-hosts", "note")
PerPlatform = tuple[tuple[str, str], ...]


class ArchiveSectionReader(SectionReader):
    """[archives.<name>] tables; their wheels checked against the names the matrix uses else."""

    def archives(self, data: dict[str, Any]) -> tuple[Archive, ...]:
        out: list[Archive] = []
        taken = _names_taken(data)
        for name, value in get_table(self.p, data, ("archives",)).items():
            archive = self.archive(("archives", name), name, value, taken)
            if archive is not None:
                out.append(archive)
        return tuple(out)

    def archive(
        self,
        path: KeyPath,
        name: str,
        value: object,
        taken: dict[str, str],
    ) -> Archive | None:
        table = as_table(self.p, path, value)
        if table is None:
            return None
        before = len(self.p.items)
        check_keys(self.p, path, table, _KEYS, ("url", "wheels"))
        if problem := name_problem(name, "archive name"):
            self.p.add(path, problem)
        urls = self.per_platform((*path, "url"), table, archive_url_problem)
        shas = self.per_platform((*path, "sha256"), table, _sha256_problem)
        for platform, _ in shas:
            if platform not in dict(urls):
                key = (*path, "sha256", platform)
                self.p.add(key, f"no url for {platform} to check it against")
        wheels = self.wheels(path, table, taken, name)
        hosts = self.redirect_hosts((*path, "redirect-hosts"), table)
        note = get_str(self.p, table, (*path, "note"), empty=True)
        if len(self.p.items) > before:
            return None
        lowered = tuple((platform, sha.lower()) for platform, sha in shas)
        return Archive(name, urls, wheels, lowered, note, redirect_hosts=hosts)

    def redirect_hosts(self, path: KeyPath, table: dict[str, Any]) -> tuple[str, ...]:
        """The other hosts the archive's URLs may redirect to: host names, each once."""
        hosts: list[str] = []
        for key, host in get_str_list(self.p, table, path):
            if problem := redirect_host_problem(host):
                self.p.add(key, problem)
            elif host.lower() in hosts:
                self.p.add(key, f"'{host}' is listed twice")
            else:
                hosts.append(host.lower())
        return tuple(hosts)

    def per_platform(self, path: KeyPath, table: dict[str, Any], problem: Any) -> PerPlatform:
        """A string for every platform of the env, or a table platform -> string for those named."""
        value = table.get(str(path[-1]))
        if value is None:
            return ()
        if isinstance(value, str):
            found = problem(value)
            if found:
                self.p.add(path, found)
                return ()
            return tuple((platform, value) for platform in self.platforms)
        if not isinstance(value, dict):
            got = type_name(value)
            self.p.add(path, f"expected a string or a table platform -> string, got {got}")
            return ()
        out: list[tuple[str, str]] = []
        for platform in value:
            key: KeyPath = (*path, platform)
            if platform not in self.platforms:
                known = ", ".join(self.platforms) or "none valid"
                hint = did_you_mean(platform, self.platforms)
                self.p.add(
                    key,
                    f"'{platform}' is not a platform of this env{hint} (env.platforms: {known})",
                )
                continue
            text = get_str(self.p, value, key)
            if text is not None and (found := problem(text)):
                self.p.add(key, found)
            elif text is not None:
                out.append((platform, text))
        return tuple(sorted(out, key=lambda pair: self.platforms.index(pair[0])))

    def wheels(
        self,
        path: KeyPath,
        table: dict[str, Any],
        taken: dict[str, str],
        archive: str,
    ) -> tuple[str, ...]:
        """The distributions whose wheels are taken from the archive, each a name nothing else
        claims."""
        names: list[str] = []
        listed = get_str_list(self.p, table, (*path, "wheels"))
        if "wheels" in table and not listed and isinstance(table["wheels"], list):
            what = "name at least one distribution whose wheel the archive holds"
            self.p.add((*path, "wheels"), what)
        for key, name in listed:
            normal = package_key(name) if is_project_name(name) else ""
            if not normal:
                self.p.add(key, f"'{name}' is not a valid Python project name (PEP 508)")
            elif normal in {package_key(n) for n in names}:
                self.p.add(key, f"'{name}' is listed twice")
            elif taken.get(normal, f"archive {archive}") != f"archive {archive}":
                self.p.add(key, f"'{name}' is also {taken[normal]}: one name comes from one place")
            else:
                names.append(name)
        return tuple(names)


def _names_taken(data: dict[str, Any]) -> dict[str, str]:
    """Every distribution name the matrix already places (canonical name -> where), the archives'
    wheels included (the first archive naming one claims it)."""
    pip = dict_or_empty(data.get("pip"))
    taken: dict[str, str] = {}
    for name in dict_or_empty(pip.get("packages")):
        taken.setdefault(package_key(name), f"pip package '{name}'")
    for name in dict_or_empty(pip.get("exclude")):
        taken.setdefault(package_key(name), f"left out (pip.exclude.{name})")
    for name, table in dict_or_empty(data.get("sources")).items():
        written = dict_or_empty(table).get("distribution")
        distribution = written if isinstance(written, str) and written else name
        taken.setdefault(package_key(distribution), f"the distribution of source '{name}'")
    for name, table in dict_or_empty(data.get("archives")).items():
        wheels = dict_or_empty(table).get("wheels")
        for wheel in wheels if isinstance(wheels, list) else []:
            if isinstance(wheel, str) and is_project_name(wheel):
                taken.setdefault(package_key(wheel), f"archive {name}")
    return taken


def _sha256_problem(value: str) -> str | None:
    return None if is_sha256(value, any_case=True) else f"'{value}' is not a sha256 (64 hex digits)"
