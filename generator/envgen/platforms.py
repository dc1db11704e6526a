"""The platforms envgen locks for: machine names, virtual packages, wheel tags, marker environments,
glibc floors.

Pure facts and functions of a conda platform name, so any host locks any platform the same way; only
`host_platform` looks at this machine.
"""

from __future__ import annotations

import platform as host
import sys
from typing import TYPE_CHECKING

from envgen.errors import InputError

if TYPE_CHECKING:
    from packaging.tags import Tag

    from envgen.model import Matrix

# conda subdir -> machine name used in wheel tags and `platform_machine` markers.
PLATFORMS: dict[str, str] = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}

# The kernel the lock assumes: Kylin V10's 4.19, the oldest of the Ascend host OSes (openEuler 22.03
# runs 5.10, Ubuntu 22.04 5.15), so nothing locked asks for a newer kernel than every host has.
LINUX_VERSION = "4.19"

# The oldest glibc floor (2.N) a matrix may name: neither uv nor the manylinux tags of aarch64 go
# below 2.17.
OLDEST_GLIBC = 17

# manylinux tags older than PEP 600 name these glibc versions.
_LEGACY_MANYLINUX = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}
# The oldest glibc each architecture has manylinux wheels for.
_OLDEST_WHEEL_GLIBC = {"x86_64": 5, "aarch64": 17}


def machine(platform: str) -> str:
    """The wheel-tag machine name of a conda platform (linux-64 -> x86_64)."""
    return PLATFORMS[platform]


def host_platform() -> str:
    """The conda platform of this machine (linux-64, linux-aarch64)."""
    name = host.machine()
    found = [p for p, m in PLATFORMS.items() if m == name and sys.platform == "linux"]
    if not found:
        raise InputError(
            f"this machine ({sys.platform} {name}) is none of the platforms envgen installs: "
            f"{', '.join(sorted(PLATFORMS))}",
            hint="install on a Linux x86_64 or aarch64 host",
        )
    return found[0]


def virtual_packages(matrix: Matrix, platform: str) -> tuple[str, ...]:
    """The virtual packages a lock of `matrix` for `platform` assumes, as `name=version=build`,
    sorted.

    Explicit rather than detected, so any host locks any platform the same way.
    """
    return glibc_virtual_packages(platform, matrix.glibc)


def glibc_virtual_packages(platform: str, glibc: str) -> tuple[str, ...]:
    """`virtual_packages` of a matrix whose glibc floor is `glibc` (what the no-op lock recomputes
    without loading the matrix)."""
    if platform not in PLATFORMS:
        raise InputError(
            f"cannot solve conda specs for platform {platform!r}: envgen knows "
            f"{', '.join(sorted(PLATFORMS))}",
            hint="list only known platforms in [env] platforms",
            platform=platform,
        )
    return (
        f"__archspec=1={PLATFORMS[platform]}",
        f"__glibc={glibc}=0",
        f"__linux={LINUX_VERSION}=0",
        "__unix=0=0",
    )


def _glibc_minor(glibc: str) -> int:
    major, _, minor = glibc.partition(".")
    if major != "2" or not minor.isdigit():
        raise ValueError(f"glibc floor {glibc!r} is not of the form 2.N")
    return int(minor)


def manylinux_platforms(platform: str, glibc: str) -> list[str]:
    """Platform tags a system of this arch and glibc installs, best first (legacy aliases
    included)."""
    arch = machine(platform)
    tags = []
    for minor in range(_glibc_minor(glibc), _OLDEST_WHEEL_GLIBC[arch] - 1, -1):
        tags.append(f"manylinux_2_{minor}_{arch}")
        legacy = _LEGACY_MANYLINUX.get((2, minor))
        if legacy:
            tags.append(f"{legacy}_{arch}")
    return tags


def platform_tags(platform: str, python_version: str, glibc: str) -> list[Tag]:
    """Every wheel tag CPython `python_version` on `platform` (glibc floor `glibc`) accepts, best
    first."""
    # Imported here: packaging.tags loads sysconfig and the host probes, which the matrix loader and
    # the no-op lock (both import this module) never need.
    from packaging.tags import compatible_tags, cpython_tags

    major, minor = (int(p) for p in python_version.split(".")[:2])
    interpreter = f"cp{major}{minor}"
    platforms = manylinux_platforms(platform, glibc)
    tags = list(cpython_tags((major, minor), abis=[interpreter], platforms=platforms))
    tags += compatible_tags((major, minor), interpreter=interpreter, platforms=platforms)
    return tags


def uv_python_platform(platform: str, glibc: str) -> str:
    """The `--python-platform` value uv accepts for this platform and glibc floor (never above the
    floor)."""
    minor = _glibc_minor(glibc)
    # uv 0.13 knows manylinux_2_17, 2_28 and 2_31 .. 2_40; take the highest not above the floor.
    known = [m for m in (OLDEST_GLIBC, 28, *range(31, 41)) if m <= minor]
    if not known:
        raise ValueError(
            f"glibc floor {glibc} is below manylinux_2_{OLDEST_GLIBC}, the oldest uv can target"
        )
    return f"{machine(platform)}-manylinux_2_{max(known)}"


def marker_environment(platform: str, python_version: str) -> dict[str, str]:
    """The PEP 508 marker environment of CPython `python_version` on Linux `platform`."""
    parts = python_version.split(".")
    full = ".".join((parts + ["0", "0"])[:3])
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": "posix",
        "platform_machine": machine(platform),
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": full,
        "python_version": ".".join(parts[:2]),
        "sys_platform": "linux",
    }
