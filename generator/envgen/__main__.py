"""`python -m envgen` and the `envgen` script: the command line, interruptible from its first
instant.

Importing the command line takes a moment (tens of milliseconds, more on a busy machine), and a
SIGINT or SIGTERM in it would print a KeyboardInterrupt traceback. So the first thing this module
does, before it imports anything, is to have such a signal end envgen with 130 or 143 and one line:
nothing can have been written yet. The handler is set through `_signal`, the C module the
interpreter loaded as it started (importing `signal` itself takes milliseconds: enum); the command
line then installs its own (`envgen.interrupts`). A signal before this module runs falls in the
interpreter's own start-up, where its default applies.
"""

import _signal  # type: ignore[import-not-found]  # no stub: the C half of `signal`, loaded already
import os  # loaded already too, by the interpreter's start-up (site)
import sys


def _not_ready(signum: int, _frame: object) -> None:
    """Say so and end at once. An exception raised here could land in a callback the import
    machinery runs (a module lock's weakref callback), which reports it as "Exception ignored" with
    a traceback and goes on importing; nothing is written yet, so nothing needs unwinding."""
    sys.stderr.write("interrupted: nothing was written (the previous lock files are unchanged)\n")
    sys.stderr.flush()
    os._exit(128 + signum)


for _signum in (_signal.SIGINT, _signal.SIGTERM):
    _signal.signal(_signum, _not_ready)


def run() -> None:
    from envgen.collector import for_a_command

    for_a_command()
    from envgen.cli import main

    main()


if __name__ == "__main__":
    run()
