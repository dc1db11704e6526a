"""Ascend NPU generations as data, and the pure comparison of what a host reports with what an env targets.

A new generation is a row of GENERATIONS: the `torch_npu.npu.get_soc_version()` codes it reports, the
substrings of `get_device_name()` that name it, and the prefixes of the SOC_VERSION values builds use for it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Generation:
    """One hardware generation: what torch_npu reports on it and how builds name its chips."""

    name: str
    title: str
    soc_codes: range
    device_names: tuple[str, ...]
    soc_prefixes: tuple[str, ...]

    def codes_text(self) -> str:
        first, last = self.soc_codes[0], self.soc_codes[-1]
        return str(first) if first == last else f"{first}-{last}"


GENERATIONS: dict[str, Generation] = {
    g.name: g
    for g in (
        Generation("a2", "Atlas A2 (910B)", range(220, 226), ("Ascend910B", "A2G"), ("ascend910b",)),
        Generation("a3", "Atlas A3 (910_93)", range(250, 256), ("Ascend910_93",), ("ascend910_93",)),
        Generation(
            "a5", "Ascend 950 (A5)", range(260, 261), ("Ascend910_95", "Ascend950"), ("ascend950", "ascend910_95")
        ),
    )
}


# The build variable that chooses the chip a source is compiled for (vllm-ascend's setup reads it); a source
# setting it must agree with the matrix's system.npu.soc-version.
SOC_VARIABLE = "SOC_VERSION"


@dataclass(frozen=True)
class Npu:
    """The hardware a matrix targets ([system.npu]).

    `soc_version` is the chip the env's sources are built for (SOC_VERSION); `built_soc` names where the built
    env records it, as `module.attribute` (vllm-ascend: `vllm_ascend._build_info.__soc_version__`).
    """

    generation: str
    soc_version: str | None = None
    built_soc: str | None = None


@dataclass(frozen=True)
class Probe:
    """What the host reported: npu-smi's outcome and, from torch_npu in the env, devices, SOC code and name."""

    smi_error: str | None = None
    devices: int | None = None
    soc_code: int | None = None
    device_name: str | None = None
    torch_npu_error: str | None = None
    built_soc: str | None = None
    built_error: str | None = None


def soc_version_problem(generation: str, soc_version: str) -> str | None:
    """Why `soc_version` is not a chip of `generation`, or None."""
    gen = GENERATIONS[generation]
    if soc_version.lower().startswith(gen.soc_prefixes):
        return None
    wanted = " or ".join(f"{p}*" for p in gen.soc_prefixes)
    return f"'{soc_version}' is not a chip of {gen.title} (expected {wanted})"


def generation_of_code(code: int) -> Generation | None:
    return next((g for g in GENERATIONS.values() if code in g.soc_codes), None)


def generation_of_name(name: str) -> Generation | None:
    return next((g for g in GENERATIONS.values() if any(marker in name for marker in g.device_names)), None)


def compare_device(npu: Npu, probe: Probe) -> list[tuple[str, str | None, str]]:
    """(check, problem or None, detail) for the soc code and the device name torch_npu reported."""
    gen = GENERATIONS[npu.generation]
    found_gen = generation_of_code(probe.soc_code) if probe.soc_code is not None else None
    code_detail = f"{probe.soc_code}" + (f" ({found_gen.title})" if found_gen else "")
    expected_codes = f"{gen.codes_text()} ({gen.title})"
    out: list[tuple[str, str | None, str]] = [
        (
            "soc version",
            None if probe.soc_code in gen.soc_codes else f"expected {expected_codes}, found {code_detail}",
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
    """(problem or None, detail) for the chip the env's build recorded against `soc_version` (case aside, as
    vllm-ascend records it in upper case); a fact of the env, known with or without a device."""
    detail = f"{probe.built_soc} ({npu.built_soc})"
    if probe.built_error is not None:
        return f"cannot read {npu.built_soc}: {probe.built_error}", detail
    if (probe.built_soc or "").lower() != (npu.soc_version or "").lower():
        return f"expected a build for {npu.soc_version}, found {detail}", detail
    return None, detail
