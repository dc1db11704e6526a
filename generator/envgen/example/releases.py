"""Release archives of wheels, shaped as sgl-kernel-npu publishes them: per machine one zip holding
several wheels (and a note), the same bytes every time."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

from envgen import atomic
from envgen.example.wheels import FixtureDist, build_wheel
from envgen.scratch import scratch_dir

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# The demo's release: a kernel wheel and an expert-parallel wheel whose extension the install links.
KERNELS = "demo-kernels"
KERNELS_VERSION = "2026.02.01"
MACHINES = {"linux-aarch64": "aarch64", "linux-64": "x86_64"}


def kernel_dists(machine: str) -> tuple[FixtureDist, ...]:
    """The wheels of the demo's release for one machine (cp311, manylinux_2_28)."""
    tag = f"cp311-cp311-manylinux_2_28_{machine}"
    extension = f"demo_ep/demo_ep_cpp.cpython-311-{machine}-linux-gnu.so"
    return (
        FixtureDist("demo-kernel-npu", "1.0.0", tags=(tag,), requires=("demo-torch>=2.10",)),
        FixtureDist(
            "demo-ep",
            "1.0.0",
            tags=(tag,),
            files=((extension, "a stand-in for a compiled module\n"),),
        ),
    )


def archive_name(machine: str) -> str:
    return f"{KERNELS}-{KERNELS_VERSION}-torch2.10.0-py311-{machine}.zip"


def build_release(dest: Path, name: str, dists: Sequence[FixtureDist]) -> Path:
    """A zip `name` in `dest` holding one wheel of each of `dists` (its first tag) and a README."""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / name
    with scratch_dir("envgen-release-") as tmp:
        wheels = [build_wheel(dist, dist.tags[0], tmp) for dist in dists]
        with atomic.part_file(path) as part:
            with zipfile.ZipFile(part.handle, "w", compression=zipfile.ZIP_STORED) as zf:
                zf.writestr(zipfile.ZipInfo("README.md", date_time=_ZIP_TIME), f"# {name}\n")
                for wheel in sorted(wheels):
                    zf.writestr(
                        zipfile.ZipInfo(wheel.name, date_time=_ZIP_TIME), wheel.read_bytes()
                    )
            part.place(path)
    return path


def build_releases(dest: Path) -> dict[str, Path]:
    """The demo's release archive for every machine, by conda platform."""
    return {
        platform: build_release(dest, archive_name(machine), kernel_dists(machine))
        for platform, machine in MACHINES.items()
    }
