"""The benchmarks' one timing rule: median wall time of each job, the jobs interleaved within each
round so that network and machine noise hit every job alike."""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Timed:
    """A job's median wall seconds, and the median CPU seconds (user + system) of the child
    processes it ran and waited for: a whole-process job's own CPU, its children's included."""

    wall: float
    cpu: float


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


Jobs = dict[str, Callable[[], object]]


def interleaved_runs(jobs: Jobs, repeats: int, *, warm: bool = False) -> dict[str, Timed]:
    """Median wall and child-CPU seconds of each job over `repeats` rounds; with `warm`, each job
    runs once untimed first so that every timed run finds warm caches."""
    if warm:
        for job in jobs.values():
            job()
    walls: dict[str, list[float]] = {name: [] for name in jobs}
    cpus: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(repeats):
        for name, job in jobs.items():
            cpu, start = _children_cpu(), time.perf_counter()
            job()
            walls[name].append(time.perf_counter() - start)
            cpus[name].append(_children_cpu() - cpu)
    median = statistics.median
    return {name: Timed(median(walls[name]), median(cpus[name])) for name in jobs}


def interleaved_medians(jobs: Jobs, repeats: int, *, warm: bool = False) -> dict[str, float]:
    """Median wall seconds of each job over `repeats` rounds (see `interleaved_runs`)."""
    return {name: timed.wall for name, timed in interleaved_runs(jobs, repeats, warm=warm).items()}
