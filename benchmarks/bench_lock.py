"""Time `envgen lock` on the bundled example: a full lock (cold and warm caches) and a no-op
re-lock.

Usage: python benchmarks/bench_lock.py [--repeat N] The no-op figure is the wall time of the real
CLI (`python -m envgen lock demo`), process start included.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from envgen.example.project import ENV, serve_example


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="envgen-bench-") as tmp,
        serve_example(Path(tmp) / "world") as example,
    ):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "CONDA_"))}
        env.update(GIT_CONFIG_GLOBAL=str(example.gitconfig), GIT_CONFIG_NOSYSTEM="1")
        lock = [sys.executable, "-m", "envgen", "lock", ENV, "--root", str(example.root), "-q"]
        cold, warm = [], []
        for i in range(args.repeat):
            cold_env = {**env, "ENVGEN_CACHE_DIR": str(Path(tmp) / f"cache-{i}")}
            cold.append(wall([*lock, "--force"], cold_env))
        env["ENVGEN_CACHE_DIR"] = str(Path(tmp) / "cache-0")
        warm = [wall([*lock, "--force"], env) for _ in range(args.repeat)]
        noop = [wall(lock, env) for _ in range(args.repeat)]
        version = [
            wall([sys.executable, "-m", "envgen", "--version"], env) for _ in range(args.repeat)
        ]
    print(f"full lock, cold caches : median {statistics.median(cold):.2f} s  (n={args.repeat})")
    print(f"full lock, warm caches : median {statistics.median(warm):.2f} s  (n={args.repeat})")
    print(f"no-op re-lock (CLI)    : median {statistics.median(noop):.3f} s  (target < 0.5 s)")
    print(
        f"`envgen --version`     : median {statistics.median(version):.3f} s  (process start floor)"
    )


if __name__ == "__main__":
    main()
