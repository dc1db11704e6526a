"""The suite's Hypothesis budget, in one place.

`make test` runs each property at the fixed count written beside it (`examples(N)`), so a run costs
the same every time; `make fuzz` runs them at ENVGEN_FUZZ_SCALE times as many (20 by default,
`ARGS="--scale N"`). A property with no count of its own runs the profile's 50. The properties are
the same in both: only how many examples each tries differs."""

from __future__ import annotations

import os

from hypothesis import settings

SCALE = int(os.environ.get("ENVGEN_FUZZ_SCALE", "1"))
# A long run also tries what is too slow for every `make test` (tests/support/mutations.py's sizes).
LONG_RUN = SCALE > 1


def examples(count: int) -> int:
    """`count` examples in `make test`, SCALE times as many in a long run."""
    return count * SCALE


PROFILE = "envgen"
settings.register_profile(PROFILE, max_examples=examples(50), deadline=None)
