"""The [system] part of `envgen show`: glibc, CANN (none for an env without it) and the NPU, as
the JSON document's `system` and as the text's first rows."""

from __future__ import annotations

from typing import Any

from envgen.model import Cann, Matrix
from envgen.npu import GENERATIONS


def system_document(matrix: Matrix) -> dict[str, Any]:
    return {
        "glibc": matrix.glibc,
        "cann": _cann(matrix.cann),
        "npu": _npu(matrix),
    }


def _cann(cann: Cann | None) -> dict[str, Any] | None:
    """CANN's version and scripts; None (null) for an env without CANN."""
    if cann is None:
        return None
    # `scripts`: the scripts sourced, in order (set_env holds them ':'-separated, as ASCEND_SET_ENV
    # does)
    return {
        "version": cann.version,
        "pending": cann.pending,
        "note": cann.note,
        "set_env": cann.set_env,
        "scripts": list(cann.scripts),
    }


def _npu(matrix: Matrix) -> dict[str, Any] | None:
    npu = matrix.npu
    if npu is None:
        return None
    generation = GENERATIONS[npu.generation]
    return {
        "generation": npu.generation,
        "title": generation.title,
        "soc_codes": [generation.soc_codes[0], generation.soc_codes[-1]],
        "device_names": list(generation.device_names),
        "soc_version": npu.soc_version,
        "device_type": generation.device_types[0],
        "build_info": npu.build_info,
    }


def system_rows(matrix: Matrix) -> list[tuple[str, str]]:
    """The rows above the sections: what it extends, its platforms, python, glibc, CANN (when the
    env has it) and NPU."""
    extends = " -> ".join(matrix.extends) + " (merged below)"
    return [
        *([("extends", extends)] if matrix.extends else []),
        ("platforms", ", ".join(matrix.platforms)),
        ("python", matrix.python),
        ("glibc", matrix.glibc),
        *_cann_rows(matrix.cann),
        *([("NPU", _npu_text(matrix))] if matrix.npu else []),
    ]


def _cann_rows(cann: Cann | None) -> list[tuple[str, str]]:
    if cann is None:
        return []
    text = (
        f"pending ({cann.note})"
        if cann.pending
        else cann.version + (f" ({cann.note})" if cann.note else "")
    )
    return [("CANN", text), ("CANN set_env", ", then ".join(cann.scripts))]


def _npu_text(matrix: Matrix) -> str:
    doc = _npu(matrix) or {}
    chip = f", built for {doc['soc_version']}" if doc["soc_version"] else ""
    where = doc["build_info"]
    recorded = f"; the build records device type {doc['device_type']} in {where}" if where else ""
    codes = "-".join(str(c) for c in dict.fromkeys(doc["soc_codes"]))
    names = " or ".join(doc["device_names"])
    return (
        f"{doc['generation']}: {doc['title']}, soc codes {codes}, device name "
        f"{names}{chip}{recorded}"
    )
