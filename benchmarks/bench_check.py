"""Time the pip part of an install with uv and with pip (cold and warm cache), and a whole `envgen
check`.

    .venv/bin/python benchmarks/bench_check.py         # the bundled example, on 127.0.0.1
    .venv/bin/python benchmarks/bench_check.py --pypi  # also a real PyPI set (transformers, deps)

Each figure is the wall time of one run into a fresh venv; `--repeat N` takes the median of N runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from envgen.commands.check.command import CheckOptions, check_env
from envgen.commands.lock.command import lock_env
from envgen.example.project import serve_example
from envgen.installer.core import PipPart
from envgen.installer.tools import INSTALLER_NAMES, installer_named
from envgen.lockio.exports.requirements_txt import hashed_requirement
from envgen.lockio.store import read_lock
from envgen.model import Cann, Index, Matrix, PipEntry, PipPackage
from envgen.platforms import host_platform
from envgen.project import Project
from envgen.resolve.pypi.stage import lock_pypi
from envgen.resolve.resolvers import Resolvers
from envgen.resolve.settings import Settings

PYPI_PACKAGES = (PipPackage("transformers", "==4.57.6"),)


def _median(run: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fresh_venv(where: Path) -> Path:
    shutil.rmtree(where, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True)
    return where


def time_pip_part(entries: Sequence[PipEntry], work: Path, repeat: int) -> list[tuple[str, float]]:
    """(label, seconds) for each installer, with a cold then a warm cache; venv creation is not
    timed."""
    rows = []
    requirements = work / "requirements.txt"
    lines = (hashed_requirement(f"{e.name} @ {e.url}", e.sha256) for e in entries)
    requirements.write_text("".join(f"{line}\n" for line in lines))
    part = PipPart(requirements, tuple(entries))
    for name in INSTALLER_NAMES:
        for state in ("cold", "warm"):
            cache = work / f"cache-{name}"

            def once(name: str = name, state: str = state, cache: Path = cache) -> float:
                if state == "cold":
                    shutil.rmtree(cache, ignore_errors=True)
                prefix = _fresh_venv(work / "env")
                start = time.perf_counter()
                settings = Settings.live(os.environ, cache=cache)
                tool = installer_named("uv" if name == "uv" else "pip", settings)
                tool.install(prefix / "bin" / "python", part)
                return time.perf_counter() - start

            if state == "warm":
                once(state="cold")
            rows.append((f"{name:<3} {state}", statistics.median(once() for _ in range(repeat))))
    return rows


def pypi_entries(platform: str, work: Path) -> tuple[PipEntry, ...]:
    """A real pip set resolved from PyPI for this host, through the same code `envgen lock` runs."""
    matrix = Matrix(
        name="bench",
        description="benchmark set",
        path="bench.toml",
        platforms=(platform,),
        python="3.11",
        glibc="2.28",
        cann=Cann("pending", "/usr/local/Ascend/cann/set_env.sh"),
        channels=(),
        conda_specs=(),
        indexes=(Index("pypi", "https://pypi.org/simple"),),
        packages=PYPI_PACKAGES,
        sources=(),
    )
    version = ".".join(map(str, sys.version_info[:3]))
    settings = Settings.read(os.environ, cache=work / "lock-cache")
    real = Resolvers.real(settings)
    return lock_pypi(
        matrix, platform, version, (), settings, runner=real.uv, reader=real.indexes
    ).entries


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--pypi", action="store_true", help="also time a real PyPI set (needs the network)"
    )
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    platform = host_platform()
    work = Path(tempfile.mkdtemp(prefix="envgen-bench-"))
    os.environ["ENVGEN_CACHE_DIR"] = str(work / "envgen-cache")
    for name in [n for n in os.environ if n.startswith(("PIP_", "UV_"))]:
        del os.environ[name]
    try:
        with serve_example(work / "example") as example:
            os.environ["GIT_CONFIG_GLOBAL"] = str(example.gitconfig)
            project = Project(example.root)
            lock_env(project, "demo", cache=work / "envgen-cache")
            lock = read_lock(project, "demo")
            assert lock is not None
            entries = lock.pip_for(platform)
            print(f"example: {len(entries)} wheels for {platform}")
            for label, seconds in time_pip_part(entries, work, args.repeat):
                print(f"  pip part  {label}: {seconds:6.2f} s")
            for solve in (False, True):

                def check(solve: bool = solve) -> None:
                    options = CheckOptions(work / "envgen-cache", venv=True, solve=solve)
                    report = check_env(project, "demo", options)
                    assert report.ok, report

                print(
                    f"  envgen check --venv{'' if solve else ' --no-solve'}: "
                    f"{_median(check, args.repeat):6.2f} s"
                )
        if args.pypi:
            entries = pypi_entries(platform, work)
            size = sum(1 for _ in entries)
            print(
                f"PyPI: {size} wheels for {platform} "
                f"({', '.join(p.requirement for p in PYPI_PACKAGES)} and deps)"
            )
            for label, seconds in time_pip_part(entries, work, args.repeat):
                print(f"  pip part  {label}: {seconds:6.2f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
