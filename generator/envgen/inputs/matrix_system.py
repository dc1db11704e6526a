"""The [system] section of a matrix: the glibc floor, CANN (its version and environment scripts)
and [system.npu], the hardware targeted."""

from __future__ import annotations

import re
from typing import Any

from packaging.version import InvalidVersion, Version

from envgen.inputs.matrix_sections import MODULE, SectionReader, dict_or_empty
from envgen.inputs.toml_reader import KeyPath, did_you_mean, get_str, get_str_list
from envgen.model import CANN_SCRIPT_SEPARATOR, DEFAULT_CANN_SET_ENV, Cann, Source
from envgen.npu import (
    DEVICE_TYPE_ATTRIBUTE,
    GENERATIONS,
    LEGACY_SOC_ATTRIBUTE,
    SOC_VARIABLE,
    Npu,
    soc_version_problem,
)
from envgen.platforms import OLDEST_GLIBC

PENDING = "pending"
_GLIBC = re.compile(r"2\.\d+")
# [system.npu]: where a build records what it was built for; the key it replaced is refused by name.
BUILD_INFO = "build-info"
_RETIRED_BUILT_SOC = "built-soc"
_VLLM_ASCEND_BUILD_INFO = "vllm_ascend._build_info"


class SystemSectionReader(SectionReader):
    """[system]: `glibc`, `[system.cann]` (optional) and `[system.npu]`."""

    def system(self, data: dict[str, Any]) -> tuple[str, Cann | None]:
        """The glibc floor and CANN; None for CANN when the matrix has no [system.cann] (an env
        without CANN: nothing of it is locked or written)."""
        path: KeyPath = ("system",)
        table = self.section(data, path, ("glibc", "cann", "npu"), ("glibc",))
        if table is None:
            return "", None
        glibc = get_str(self.p, table, (*path, "glibc")) or ""
        if glibc and not _GLIBC.fullmatch(glibc):
            self.p.add((*path, "glibc"), f"'{glibc}' is not a glibc version such as \"2.28\"")
        elif glibc and int(glibc.partition(".")[2]) < OLDEST_GLIBC:
            # Neither uv nor the manylinux tags of aarch64 go below 2.17 (manylinux2014).
            self.p.add(
                (*path, "glibc"),
                f"'{glibc}' is below 2.{OLDEST_GLIBC}, the oldest floor envgen can lock for",
            )
        cann_path: KeyPath = (*path, "cann")
        if "cann" not in table:
            return glibc, None
        cann = self.section(table, cann_path, ("version", "note", "set_env"), ("version",)) or {}
        version = get_str(self.p, cann, (*cann_path, "version")) or PENDING
        if version != PENDING:
            try:
                Version(version)
            except InvalidVersion:
                self.p.add(
                    (*cann_path, "version"), f"'{version}' is neither a version nor \"{PENDING}\""
                )
        note = get_str(self.p, cann, (*cann_path, "note"))
        if version == PENDING and "version" in cann and note is None and "note" not in cann:
            self.p.add(
                (*cann_path, "note"), 'pending without a note: say why and when (note = "...")'
            )
        return glibc, Cann(
            version=version, set_env=self.set_env(cann, (*cann_path, "set_env")), note=note
        )

    def without_cann(
        self, data: dict[str, Any], sources: list[Source] | tuple[Source, ...]
    ) -> None:
        """An env without [system.cann] asks for nothing of CANN: no source needing it, no import
        check needing CANN or an NPU, no [system.npu]."""
        why = "this env has no [system.cann]: add one, or leave this out"
        system = dict_or_empty(data.get("system"))
        if "npu" in system:
            self.p.add(("system", "npu"), f"an NPU needs CANN; {why}")
        for source in sources:
            if source.needs_cann:
                self.p.add(("sources", source.name, "needs-cann"), f"needs CANN, but {why}")
        checks = dict_or_empty(data.get("checks")).get("imports")
        for position, check in enumerate(checks if isinstance(checks, list) else []):
            needs = check.get("needs") if isinstance(check, dict) else None
            if needs in ("cann", "npu"):
                self.p.add(("checks", "imports", position, "needs"), f"needs {needs}, but {why}")

    def set_env(self, cann: dict[str, Any], path: KeyPath) -> str:
        """CANN's environment scripts, one path or an array sourced in order, joined as
        ASCEND_SET_ENV is."""
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
                self.p.add(
                    key, f"'{script}' must be an absolute path without '{CANN_SCRIPT_SEPARATOR}'"
                )
        return CANN_SCRIPT_SEPARATOR.join(script for _, script in scripts) or DEFAULT_CANN_SET_ENV

    def npu(self, data: dict[str, Any], sources: list[Source] | tuple[Source, ...]) -> Npu | None:
        """[system.npu]: the generation targeted (a row of npu.GENERATIONS), its chip and where a
        build records what it was built for."""
        path: KeyPath = ("system", "npu")
        system = self.without_retired_built_soc(dict_or_empty(data.get("system")), path)
        keys = ("generation", "soc-version", BUILD_INFO)
        table = self.section(system, path, keys, ("generation",))
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
                    f"builds for '{built}' while system.npu.soc-version is '{soc}': "
                    "make them the same chip",
                )
        build_info = get_str(self.p, table, (*path, BUILD_INFO))
        if build_info is not None and not MODULE.fullmatch(build_info):
            problem = f"'{build_info}' is not a module name ({_VLLM_ASCEND_BUILD_INFO})"
            self.p.add((*path, BUILD_INFO), problem)
            build_info = None
        if generation is None:
            return None
        return Npu(generation=generation, soc_version=soc, build_info=build_info)

    def without_retired_built_soc(self, system: dict[str, Any], path: KeyPath) -> dict[str, Any]:
        """[system] with `built-soc` taken out of its npu table and refused, saying what to write:
        it named an attribute vllm-ascend no longer writes."""
        npu = system.get(str(path[-1]))
        if not isinstance(npu, dict) or _RETIRED_BUILT_SOC not in npu:
            return system
        value = npu[_RETIRED_BUILT_SOC]
        module = value.rpartition(".")[0] if isinstance(value, str) else ""
        module = module if MODULE.fullmatch(module) else _VLLM_ASCEND_BUILD_INFO
        self.p.add(
            (*path, _RETIRED_BUILT_SOC),
            f"vllm-ascend builds record their device type ({DEVICE_TYPE_ATTRIBUTE}) since "
            f'2025-11-26, not their chip: write {BUILD_INFO} = "{module}" instead, the module '
            f"they record it in (an older build's {LEGACY_SOC_ATTRIBUTE} is read from there too)",
        )
        rest = {key: v for key, v in npu.items() if key != _RETIRED_BUILT_SOC}
        return {**system, str(path[-1]): rest}
