"""Ascend NPU generations as data, and the pure comparison of what a host reports with what an env
targets.

A new generation is a row of GENERATIONS: the `torch_npu.npu.get_soc_version()` codes it reports,
the substrings of `get_device_name()` that name it, the SOC_VERSION values vllm-ascend builds it
for, and the device type such a build records.
"""

from __future__ import annotations

import msgspec


class Generation(msgspec.Struct, frozen=True):
    """One hardware generation: what torch_npu reports on it and how builds name it.

    `chips` is vllm-ascend's own table of SOC_VERSION values for the generation (`setup.py`
    `gen_build_info()`; `vllm_ascend/device/hardware.py` on main); `chip_marker`, when set, names
    every chip containing it (vllm-ascend reads `"ascend950" in soc_version` as A5). `device_types`
    are what a build records as `__device_type__`, the current name first (vllm-ascend wrote
    `_910B`, `_910_93` and `_910_95` from 2025-11-26 until it renamed them on 2025-12-17).
    """

    name: str
    title: str
    soc_codes: range
    device_names: tuple[str, ...]
    chips: tuple[str, ...]
    chip_marker: str | None
    device_types: tuple[str, ...]

    def codes_text(self) -> str:
        first, last = self.soc_codes[0], self.soc_codes[-1]
        return str(first) if first == last else f"{first}-{last}"

    def has_chip(self, soc_version: str) -> bool:
        """Whether vllm-ascend builds `soc_version` for this generation, as written (its release
        branches compare the value case and all)."""
        marked = self.chip_marker is not None and self.chip_marker in soc_version
        return marked or soc_version in self.chips

    def chips_text(self) -> str:
        if self.chip_marker is not None:
            return f"any value containing {self.chip_marker}"
        return ", ".join(self.chips)


_A2_CHIPS = (
    "910b",
    "ascend910b1",
    "ascend910b2",
    "ascend910b2c",
    "ascend910b3",
    "ascend910b4",
    "ascend910b4-1",
)
_A3_CHIPS = (
    "910c",
    "ascend910_9391",
    "ascend910_9381",
    "ascend910_9372",
    "ascend910_9392",
    "ascend910_9382",
    "ascend910_9362",
)

GENERATIONS: dict[str, Generation] = {
    g.name: g
    for g in (
        Generation(
            name="a2",
            title="Atlas A2 (910B)",
            soc_codes=range(220, 226),
            device_names=("Ascend910B", "A2G"),
            chips=_A2_CHIPS,
            chip_marker=None,
            device_types=("A2", "_910B"),
        ),
        Generation(
            name="a3",
            title="Atlas A3 (910_93)",
            soc_codes=range(250, 256),
            device_names=("Ascend910_93",),
            chips=_A3_CHIPS,
            chip_marker=None,
            device_types=("A3", "_910_93"),
        ),
        Generation(
            name="a5",
            title="Ascend 950 (A5)",
            soc_codes=range(260, 261),
            device_names=("Ascend910_95", "Ascend950"),
            chips=(),
            chip_marker="ascend950",
            device_types=("A5", "_910_95"),
        ),
    )
}


# The build variable that chooses the chip a source is compiled for (vllm-ascend's setup reads it);
# a source setting it must agree with the matrix's system.npu.soc-version.
SOC_VARIABLE = "SOC_VERSION"
# What a vllm-ascend build writes into its build-info module (`gen_build_info()`): its device type
# since 2025-11-26; before, its chip, which vllm-ascend still reads when the device type is absent.
DEVICE_TYPE_ATTRIBUTE = "__device_type__"
LEGACY_SOC_ATTRIBUTE = "__soc_version__"


class Npu(msgspec.Struct, frozen=True):
    """The hardware a matrix targets ([system.npu]).

    `soc_version` is the chip the env's sources are built for (SOC_VERSION); `build_info` names the
    module where the built env records what it was built for (vllm-ascend:
    `vllm_ascend._build_info`).
    """

    generation: str
    soc_version: str | None = None
    build_info: str | None = None


class Probe(msgspec.Struct, frozen=True):
    """What the host reported: npu-smi's outcome and, from torch_npu in the env, devices, SOC code
    and name; and what the env's build recorded: its device type, or an older build's chip."""

    smi_error: str | None = None
    devices: int | None = None
    soc_code: int | None = None
    device_name: str | None = None
    torch_npu_error: str | None = None
    built_device_type: str | None = None
    built_soc: str | None = None
    built_error: str | None = None


def soc_version_problem(generation: str, soc_version: str) -> str | None:
    """Why vllm-ascend would not build `soc_version` for `generation`, or None."""
    gen = GENERATIONS[generation]
    if gen.has_chip(soc_version):
        return None
    if gen.has_chip(soc_version.lower()):
        lower = soc_version.lower()
        return f"write '{lower}': vllm-ascend's release branches compare the chip as written"
    chips = f"vllm-ascend builds it for {gen.chips_text()}"
    found = generation_of_soc(soc_version)
    if found is not None:
        return f"'{soc_version}' is a chip of {found.title}, not of {gen.title} ({chips})"
    return f"'{soc_version}' is not a chip of {gen.title} ({chips})"


def generation_of_code(code: int) -> Generation | None:
    return next((g for g in GENERATIONS.values() if code in g.soc_codes), None)


def generation_of_name(name: str) -> Generation | None:
    return next(
        (g for g in GENERATIONS.values() if any(marker in name for marker in g.device_names)), None
    )


def generation_of_soc(soc_version: str) -> Generation | None:
    """The generation of a chip, case aside: older builds recorded SOC_VERSION as the user wrote it
    (their default was `ASCEND910B1`)."""
    return next((g for g in GENERATIONS.values() if g.has_chip(soc_version.lower())), None)


def generation_of_device_type(device_type: str) -> Generation | None:
    return next((g for g in GENERATIONS.values() if device_type in g.device_types), None)


def compare_device(npu: Npu, probe: Probe) -> list[tuple[str, str | None, str]]:
    """(check, problem or None, detail) for the soc code and the device name torch_npu reported."""
    gen = GENERATIONS[npu.generation]
    found_gen = generation_of_code(probe.soc_code) if probe.soc_code is not None else None
    code_detail = f"{probe.soc_code}" + (f" ({found_gen.title})" if found_gen else "")
    expected_codes = f"{gen.codes_text()} ({gen.title})"
    out: list[tuple[str, str | None, str]] = [
        (
            "soc version",
            None
            if probe.soc_code in gen.soc_codes
            else f"expected {expected_codes}, found {code_detail}",
            f"{code_detail}, within {gen.codes_text()}",
        )
    ]
    name = probe.device_name or ""
    named = generation_of_name(name)
    markers = " or ".join(gen.device_names)
    name_problem = None
    if not any(marker in name for marker in gen.device_names):
        also = f" ({named.title})" if named else ""
        name_problem = f"expected a name containing {markers}, found '{name}'{also}"
    out.append(("device name", name_problem, name))
    return out


def compare_build(npu: Npu, probe: Probe) -> tuple[str | None, str]:
    """(problem or None, detail) for what the env's build recorded: its device type against the
    env's generation or, from a build that records only its chip, that chip against `soc_version`
    (without one, against the generation's chips). A fact of the env, known with or without a
    device."""
    module = npu.build_info or ""
    if probe.built_error is not None:
        return f"cannot read {module}: {probe.built_error}", module
    if probe.built_device_type is not None:
        where = f"{module}.{DEVICE_TYPE_ATTRIBUTE}"
        return _compare_device_type(npu, probe.built_device_type, where)
    if probe.built_soc is not None:
        return _compare_soc(npu, probe.built_soc, f"{module}.{LEGACY_SOC_ATTRIBUTE}")
    neither = f"neither {DEVICE_TYPE_ATTRIBUTE} nor {LEGACY_SOC_ATTRIBUTE}"
    return f"expected {module} to record what it was built for, found {neither}", module


def _compare_device_type(npu: Npu, found: str, where: str) -> tuple[str | None, str]:
    gen = GENERATIONS[npu.generation]
    found_gen = generation_of_device_type(found)
    detail = f"{found}{_title(found_gen)} ({where})"
    if found_gen is gen:
        return None, detail
    return f"expected a build for {gen.device_types[0]} ({gen.title}), found {detail}", detail


def _compare_soc(npu: Npu, found: str, where: str) -> tuple[str | None, str]:
    gen = GENERATIONS[npu.generation]
    detail = f"{found}{_title(generation_of_soc(found))} ({where})"
    if npu.soc_version is not None:
        if found.lower() == npu.soc_version.lower():
            return None, detail
        return f"expected a build for {npu.soc_version}, found {detail}", detail
    if generation_of_soc(found) is gen:
        return None, detail
    return f"expected a build for a chip of {gen.title}, found {detail}", detail


def _title(gen: Generation | None) -> str:
    return f" ({gen.title})" if gen is not None else ""
