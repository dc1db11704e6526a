"""The benchmarks' one timing rule: median wall time of each job, the jobs interleaved within each round so that
network and machine noise hit every job alike."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def interleaved_medians(jobs: dict[str, Callable[[], object]], repeats: int, *, warm: bool = False) -> dict[str, float]:
    """Median seconds of each job over `repeats` rounds; with `warm`, each job runs once untimed first so that
    every timed run finds warm caches."""
    if warm:
        for job in jobs.values():
            job()
    times: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(repeats):
        for name, job in jobs.items():
            start = time.perf_counter()
            job()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}
