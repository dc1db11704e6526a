"""Time `envgen bundle` on the bundled example (cold and warm cache) and an install from the bundle,
with every server stopped, against a networked install of the same lock, and the recipe's `--bundle`
(no envgen).

    .venv/bin/python benchmarks/bench_bundle.py [--platform P] [--zstd]

Each figure is the wall time of one run; installs go into a fresh venv (its creation is timed too,
alike).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from envgen.commands.install.bundle import bundle_env
from envgen.commands.install.command import install_lock
from envgen.commands.install.options import InstallOptions
from envgen.commands.lock.command import lock_env
from envgen.example.project import serve_example
from envgen.platforms import host_platform
from envgen.project import Project

T = TypeVar("T")


def _timed(label: str, rows: list[tuple[str, str]], run: Callable[[], T]) -> T:
    start = time.perf_counter()
    result = run()
    rows.append((label, f"{time.perf_counter() - start:.2f} s"))
    return result


def _install(project: Project, prefix: Path, cache: Path, bundle: Path | None = None) -> Path:
    options = InstallOptions(prefix, cache, venv=True, installer="pip", bundle=bundle)
    return install_lock(project, "demo", options).prefix


def _recipe(project: Project, work: Path, bundle: Path) -> None:
    """What a cluster without envgen runs: a venv, then the recipe with --bundle (pip part and
    sources)."""
    prefix = work / "recipe-env"
    subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=True)
    recipe = project.install_sh("demo")
    subprocess.run(
        ["sh", str(recipe), "--prefix", str(prefix), "--bundle", str(bundle)],
        check=True,
        capture_output=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--platform", default=host_platform())
    parser.add_argument("--zstd", action="store_true", help="write a .tar.zst rather than a .tar")
    args = parser.parse_args()
    platforms = (args.platform,)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="envgen-bench-bundle-") as tmp:
        work = Path(tmp)
        cache = work / "envgen-cache"
        os.environ["ENVGEN_CACHE_DIR"] = str(cache)
        for name in [n for n in os.environ if n.startswith(("PIP_", "UV_"))]:
            del os.environ[name]
        out = work / ("demo.tar.zst" if args.zstd else "demo.tar")
        with serve_example(work / "example") as example:
            os.environ["GIT_CONFIG_GLOBAL"] = str(example.gitconfig)
            project = Project(example.root)
            lock_env(project, "demo", cache=cache)
            _timed(
                "networked install (venv)",
                rows,
                lambda: _install(project, work / "net-env", work / "net-cache"),
            )
            _timed(
                "bundle, cold cache",
                rows,
                lambda: bundle_env(project, "demo", out, platforms=platforms, cache=cache),
            )
        # Nothing is served any more, and git sees no mapping to the example's repositories.
        os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
        out.unlink()
        summary = _timed(
            "bundle, warm cache (servers stopped)",
            rows,
            lambda: bundle_env(project, "demo", out, platforms=platforms, cache=cache),
        )
        rows.append(("bundle", summary.describe("demo")))
        _timed(
            "install from the bundle (servers stopped, venv)",
            rows,
            lambda: _install(project, work / "offline-env", work / "off-cache", out),
        )
        _timed(
            "recipe --bundle, no envgen (servers stopped, venv)",
            rows,
            lambda: _recipe(project, work, out),
        )
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


if __name__ == "__main__":
    main()
