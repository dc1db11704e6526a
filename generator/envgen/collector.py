"""Python's cyclic garbage collector paused while a command builds many long-lived objects at once,
and what was built handed to its oldest generation when it resumes. A re-lock: its imports
(conda-lock's whole command line comes with its models) and parsed locks leave over a hundred
thousand objects for the collector to track, and its hundreds of passes over them took a tenth of
envgen's own CPU in a re-lock of the A5 lock, some of it while the lock is written; a re-lock
leaves little cyclic garbage (its peak memory is the same either way)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


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
