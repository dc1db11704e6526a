"""Python's cyclic garbage collector run less often by a command, and paused while a command builds
many long-lived objects at once, what was built handed to its oldest generation when it resumes.

A re-lock: its imports (conda-lock's whole command line comes with its models) and parsed locks
leave over a hundred thousand objects for the collector to track, and its hundreds of passes over
them took a tenth of envgen's own CPU in a re-lock of the A5 lock, some of it while the lock is
written; a re-lock leaves little cyclic garbage (its peak memory is the same either way)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# A young-generation pass per 50,000 new objects instead of 700, a full pass after 200 of them.
THRESHOLDS = (50_000, 20, 10)


def for_a_command() -> None:
    """The collector's thresholds for a whole command, set before the command line is imported.
    With Python's own (a pass per 700 new objects, a full one per 100 passes) the imports alone
    made 38 passes, and reading a real-sized lock 20 to 140 more, over objects that all live as
    long as the command: 4 ms of `envgen --version`'s 76, up to 25 ms of `status`'s 210. With
    these a read-only command makes next to none, and a long one (an install, the demo's servers)
    still collects its young cycles within every 50,000 objects."""
    gc.set_threshold(*THRESHOLDS)


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector paused for the block: what the block builds stays alive until it ends, so the
    collector's passes over it (and over all the command imported and read before) would free
    little and cost much. It resumes as it was."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # What the block made goes to the oldest generation at once (freeze, then unfreeze):
        # resumed with it all in the youngest, the collector would scan it all at the next
        # allocation, while the command is still reporting.
        gc.freeze()
        gc.unfreeze()
        if paused:
            gc.enable()
