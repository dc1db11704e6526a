"""`envgen export`: one lock as requirements.txt, PEP 751 pylock, Nix or a CycloneDX SBOM, on
demand."""

from __future__ import annotations

from pathlib import Path

from envgen.collector import collector_paused
from envgen.errors import InputError
from envgen.lockio.store import require_lock, require_platforms
from envgen.model import Lock
from envgen.outputs import output_file
from envgen.platforms import host_platform
from envgen.project import Project

FORMATS = ("requirements", "pylock", "nix", "cyclonedx")


def _one_platform(lock: Lock, platform: str | None, host: str | None) -> str:
    """The platform a per-platform file is for: the one named, else this host's, else the lock's
    only one."""
    if platform is not None:
        require_platforms(lock, (platform,), hint="name one of the lock's platforms")
        return platform
    if len(lock.platforms) == 1:
        return lock.platforms[0]
    if host in lock.platforms:
        return host
    raise InputError(
        f"the lock of {lock.env} has several platforms ({', '.join(lock.platforms)}) "
        "and none is this host's",
        hint="choose one with --platform",
    )


def this_platform() -> str | None:
    """This host's platform, or None on a host envgen does not install on."""
    try:
        return host_platform()
    except InputError:
        return None


def export_lock(project: Project, env: str, fmt: str, *, platform: str | None = None) -> str:
    """The text of the lock of `env` in `fmt`: requirements and pylock for one platform (`platform`,
    else this host's, else the only one), cyclonedx for every platform or the one named, nix for
    every platform. Each format's renderer is imported when it is asked for (the matrix by the
    requirements file alone, for its comments)."""
    if fmt not in FORMATS:
        raise InputError(
            f"--format {fmt}: unknown format",
            hint=f"use one of: {', '.join(FORMATS)}",
            key="--format",
        )
    lock = require_lock(project, env)
    if fmt == "nix":
        from envgen.lockio.exports.nix import render_nix

        if platform is not None:
            raise InputError(
                "--platform: a Nix export holds every platform",
                hint="leave out --platform",
                key="--platform",
            )
        return render_nix(lock)
    if fmt == "cyclonedx":
        # Paused: the library and the SBOM's model (some 20 objects a component, all alive until
        # the text is out) gave the collector passes that freed nothing, about 0.05 s of CPU for a
        # real-sized lock.
        with collector_paused():
            from envgen.lockio.exports.sbom import render_cyclonedx

            if platform is not None:
                require_platforms(lock, (platform,), hint="name one of the lock's platforms")
            return render_cyclonedx(lock, None if platform is None else (platform,))
    chosen = _one_platform(lock, platform, this_platform())
    if fmt == "pylock":
        from envgen.lockio.exports.pylock import render_pylock

        return render_pylock(lock, chosen)
    from envgen.inputs.matrix import load_env
    from envgen.lockio.exports.requirements_txt import render_requirements

    return render_requirements(lock, chosen, load_env(project, env))


def write_export(project: Project, path: Path, text: str) -> None:
    """`text` into `path`, whole or not at all, where an output may go (outputs.py)."""
    with output_file(path, project) as handle:
        handle.write(text.encode("utf-8"))
