"""The NPU steps of `envgen check`: is this host the hardware the env targets, and was the env built
for its chip?

Run in the throwaway env after the imports: `npu-smi info` on the host, then torch_npu in the env
reports its devices, `get_soc_version()` and `get_device_name()`, and what the build recorded is
read from the module the matrix names (`[system.npu] build-info`): its device type, or an older
build's chip. What each generation reports is data (envgen.npu.GENERATIONS). Without `npu-smi` the
steps are skipped with that reason; `--require-npu` makes them fail.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from shlex import quote

from envgen.commands.check.report import FAILED, OK, SKIPPED, Step
from envgen.errors import ToolError
from envgen.installer.interpreter import run_interpreter
from envgen.installer.tools import tool_environment
from envgen.npu import (
    DEVICE_TYPE_ATTRIBUTE,
    GENERATIONS,
    LEGACY_SOC_ATTRIBUTE,
    Npu,
    Probe,
    compare_build,
    compare_device,
)
from envgen.process import run, tail
from envgen.redact import redact_text
from envgen.resolve.settings import Settings

SMI_TIMEOUT = 60
STEPS = ("npu-smi", "device", "soc version", "device name", "built for")

# Runs in the env's python: what torch_npu reports, and what the build recorded (argv: the
# build-info module, then the attribute of the device type and that of an older build's chip).
_PROBE = r"""
import importlib, json, sys
out = {}
try:
    import torch_npu
    out["devices"] = int(torch_npu.npu.device_count())
    if out["devices"]:
        out["soc_code"] = int(torch_npu.npu.get_soc_version())
        out["device_name"] = str(torch_npu.npu.get_device_name(0))
except BaseException as exc:
    out["torch_npu_error"] = f"{type(exc).__name__}: {exc}"
module, device_type, soc = sys.argv[1:4]
if module:
    try:
        info = importlib.import_module(module)
        for key, attribute in (("built_device_type", device_type), ("built_soc", soc)):
            if hasattr(info, attribute):
                out[key] = str(getattr(info, attribute))
    except BaseException as exc:
        out["built_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def npu_steps(
    npu: Npu | None, prefix: Path, activation: str, settings: Settings, *, require_npu: bool
) -> list[Step]:
    """The NPU steps for an env targeting `npu` (none when the matrix names no hardware), asked in
    `settings`."""
    if npu is None:
        return []
    names = npu_step_names(npu)
    smi = shutil.which("npu-smi")
    if smi is None:
        reason = (
            "no NPU on this host (npu-smi is not on PATH); the env targets "
            f"{GENERATIONS[npu.generation].title}"
        )
        return [Step(name, FAILED if require_npu else SKIPPED, reason) for name in names]
    probe = _probe(npu, smi, prefix, activation, tool_environment(settings))
    return _steps(npu, probe, names)


def npu_step_names(npu: Npu | None) -> list[str]:
    """The names of the NPU steps an env targeting `npu` gets, in order (none without a target)."""
    if npu is None:
        return []
    steps = STEPS if npu.build_info else STEPS[:-1]
    return [f"npu: {step}" for step in steps]


def _probe(npu: Npu, smi: str, prefix: Path, activation: str, environ: dict[str, str]) -> Probe:
    """Ask npu-smi on the host and torch_npu in the env, each run in `environ`."""
    smi_error = None
    try:
        proc = run([smi, "info"], env=environ, check=False, timeout=SMI_TIMEOUT)
    # it hung, or vanished since `which` found it: a failed step, not a failed check
    except ToolError as exc:
        smi_error = exc.message
    else:
        if proc.returncode != 0:
            smi_error = (
                f"`npu-smi info` exited {proc.returncode}: "
                f"{redact_text(tail(proc.stderr or proc.stdout, 3))}"
            )
    script = f'{activation}; exec {quote(str(prefix / "bin" / "python"))} -c "$0" "$@"'
    argv = [npu.build_info or "", DEVICE_TYPE_ATTRIBUTE, LEGACY_SOC_ATTRIBUTE]
    probe = ["sh", "-c", script, _PROBE, *argv]
    proc = run_interpreter(probe, env=environ, check=False)
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        said = redact_text(tail(proc.stderr or proc.stdout, 5))
        found = {"torch_npu_error": f"the probe did not run: {said}"}
    fields = (
        "devices",
        "soc_code",
        "device_name",
        "torch_npu_error",
        "built_device_type",
        "built_soc",
        "built_error",
    )
    return Probe(smi_error=smi_error, **{k: found[k] for k in fields if k in found})


def _steps(npu: Npu, probe: Probe, names: list[str]) -> list[Step]:
    smi, device, soc, name, *built = names
    steps = [
        Step(smi, FAILED, probe.smi_error)
        if probe.smi_error
        else Step(smi, OK, "npu-smi info lists the NPUs")
    ]
    if probe.torch_npu_error is not None or not probe.devices:
        found = probe.torch_npu_error or "torch_npu sees no NPU device"
        steps.append(Step(device, FAILED, f"expected at least one NPU, found none: {found}"))
        steps += [
            Step(soc, SKIPPED, "no NPU device to ask"),
            Step(name, SKIPPED, "no NPU device to ask"),
        ]
    else:
        steps.append(
            Step(device, OK, f"{probe.devices} NPU device{'s' if probe.devices != 1 else ''}")
        )
        for step, (_, problem, detail) in zip((soc, name), compare_device(npu, probe), strict=True):
            steps.append(Step(step, FAILED, problem) if problem else Step(step, OK, detail))
    for step in built:
        problem, detail = compare_build(npu, probe)
        steps.append(Step(step, FAILED, problem) if problem else Step(step, OK, detail))
    return steps
