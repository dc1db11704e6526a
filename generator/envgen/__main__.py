"""`python -m envgen` and the `envgen` script: the command line, interruptible from its first instant."""

import signal
import sys
from types import FrameType


def _early_signal(signum: int, frame: FrameType | None) -> None:
    # Until envgen.cli installs its own handlers (importing it takes a moment), nothing can have been written.
    sys.stderr.write("interrupted: nothing was written (the previous lock files are unchanged)\n")
    raise SystemExit(128 + signum)


def run() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _early_signal)
    from envgen.cli import main

    main()


if __name__ == "__main__":
    run()
