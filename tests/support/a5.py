"""The A5 PyPI set against PyPI itself: env-templates/a5.toml's pins plus the names verl's
requirements-npu.txt adds.

Used by the opt-in network test and the PyPI benchmark; GitHub is not needed, so the git sources
stay out.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from envgen.inputs.matrix import load_matrix
from envgen.model import Index, Matrix, PipPackage

REPO = Path(__file__).resolve().parents[2]
PYPI = "https://pypi.org/simple"

# What verl's requirements-npu.txt adds that PyPI serves (TransferQueue comes from git,
# triton-ascend from its own index).
VERL_NPU: tuple[PipPackage, ...] = (
    PipPackage("ray", extras=("default",)),
    PipPackage("tensordict"),
    PipPackage("torchdata"),
    PipPackage("qwen-vl-utils"),
)


def a5_pypi_matrix(
    platforms: tuple[str, ...] = ("linux-aarch64",), index_url: str = PYPI
) -> Matrix:
    """a5.toml's PyPI packages on `platforms` (not pending, not pinned to another index there) and
    verl's NPU set, on one index."""
    a5 = load_matrix(REPO / "env-templates" / "a5.toml", REPO / "channels")
    on_pypi = (
        p for p in a5.packages if not p.pending and not any(p.index_for(x) for x in platforms)
    )
    from_pypi = tuple(msgspec.structs.replace(p, index=()) for p in on_pypi)
    return msgspec.structs.replace(
        a5,
        platforms=platforms,
        channels=(),
        conda_specs=(),
        indexes=(Index("pypi", index_url),),
        packages=from_pypi + VERL_NPU,
        sources=(),
        overrides=(),
    )
