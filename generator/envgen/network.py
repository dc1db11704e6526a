"""How long envgen waits on the network: the one home of every connect and read timeout, retry count
and budget.

Each limit is an environment variable with a documented default (`VARIABLES`, in docs/cli.md and
`envgen help environment`). Every client envgen uses gets the same limits in its own terms: requests
(`resolve/pypi/index_client.py`), uv (`UV_HTTP_*`), pip (`--timeout`, `--retries`), git
(`GIT_HTTP_LOW_SPEED_*`), rattler (its client's timeout, which bounds a whole request). A child
process also gets the budget as its timeout, and an asynchronous library call runs through
`run_bounded`: cancelled at the budget, and promptly on Ctrl-C.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from envgen import interrupts
from envgen.errors import EnvgenError, InputError

T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """Seconds (`retries`: a count, `download`: bytes) envgen gives the network; see VARIABLES for
    what each bounds."""

    connect: float = 10.0
    read: float = 30.0
    conda: float = 60.0
    retries: int = 1
    budget: float = 900.0
    download: int = 16 << 30


DEFAULTS = Limits()

# (field, variable, what it bounds): docs/cli.md's table and `envgen help environment` show this.
VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("connect", "ENVGEN_CONNECT_TIMEOUT", "opening a connection to an index (requests, uv)"),
    (
        "read",
        "ENVGEN_READ_TIMEOUT",
        "waiting for data from an index (requests, uv, pip) or a git remote",
    ),
    (
        "conda",
        "ENVGEN_CONDA_TIMEOUT",
        "one whole request to a conda channel (rattler bounds whole requests only)",
    ),
    (
        "retries",
        "ENVGEN_RETRIES",
        "retries of a request refused, reset or timed out, after a short backoff",
    ),
    (
        "budget",
        "ENVGEN_NETWORK_BUDGET",
        "one network step in all: a platform's conda solve, a uv, pip or git run, a download",
    ),
    (
        "download",
        "ENVGEN_DOWNLOAD_LIMIT",
        "bytes of one download envgen makes itself (a release archive), refused past it",
    ),
)

# The fields counted in whole units, not seconds.
_COUNTS = ("retries", "download")


def variable(field: str) -> str:
    """The environment variable that sets `field` of Limits."""
    return next(name for f, name, _ in VARIABLES if f == field)


def limits(environ: Mapping[str, str] | None = None) -> Limits:
    """The limits in effect: each variable that is set, else its default; a malformed value is bad
    input."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for field, name, _ in VARIABLES:
        text = environ.get(name, "").strip()
        if not text:
            continue
        try:
            value = int(text) if field in _COUNTS else float(text)
        except ValueError:
            value = -1
        if not _allowed(field, value):
            kind = _KINDS.get(field, "a number of seconds above 0")
            raise InputError(
                f"{name}={text!r} is not {kind}",
                hint=f"unset it for the default, {seconds(field)}",
                key=name,
            )
        values[field] = value
    return Limits(**values)


_KINDS = {"retries": "a count of 0 or more", "download": "a number of bytes above 0"}


def _allowed(field: str, value: float) -> bool:
    if field == "download":
        return 0 < value < 1 << 50
    return 0 <= value < 1e6 and (field == "retries" or value > 0)


def seconds(field: str, current: Limits | None = None) -> str:
    """`field`'s value as a message shows it: `30 s`, `2.5 s`, `2` for retries, `17179869184 bytes`
    for the download limit."""
    value = getattr(current or DEFAULTS, field)
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return {"retries": shown, "download": f"{shown} bytes"}.get(field, f"{shown} s")


def _whole(value: float) -> str:
    # uv, pip and git read whole seconds; rounding up never makes a limit shorter than asked.
    return str(max(1, math.ceil(value)))


def uv_environment(current: Limits) -> dict[str, str]:
    """uv's variables for the limits (uv bounds each read and each connect; the budget bounds the
    run)."""
    return {
        "UV_HTTP_CONNECT_TIMEOUT": _whole(current.connect),
        "UV_HTTP_TIMEOUT": _whole(current.read),
        "UV_HTTP_RETRIES": str(current.retries),
    }


def pip_options(current: Limits) -> list[str]:
    """pip's options for the limits (one socket timeout serves pip for connect and read alike)."""
    return [
        "--timeout",
        _whole(max(current.read, current.connect)),
        "--retries",
        str(current.retries),
    ]


def git_environment(current: Limits) -> dict[str, str]:
    """git's variables: an HTTP transfer slower than a byte a second for the read timeout is
    abandoned."""
    return {"GIT_HTTP_LOW_SPEED_LIMIT": "1", "GIT_HTTP_LOW_SPEED_TIME": _whole(current.read)}


def raise_hint(field: str, current: Limits) -> str:
    """What to change when a limit was reached by a host that is slow rather than down."""
    return (
        f"if the host is slow rather than down, raise {variable(field)} (now "
        f"{seconds(field, current)})"
    )


_CAUSE = re.compile(r"^\s*(?:[Cc]aused by|cause):\s*(.+?)\s*$", re.MULTILINE)


def cause(text: str) -> str:
    """The innermost cause of an error chain, on one line (uv and rattler print `cause:` or `Caused
    by:` lines; other tools end with the line that matters)."""
    causes = _CAUSE.findall(text)
    if causes:
        return causes[-1]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def timed_out(text: str) -> bool:
    """Whether a tool's message says a request ran out of time (not refused, not an HTTP error)."""
    return re.search(r"timed? ?out|timeout|too slow", text, re.IGNORECASE) is not None


_REFUSED = re.compile(r"connection refused", re.IGNORECASE)
_NO_NAME = re.compile(
    r"name or service not known|name resolution|failed to lookup address|getaddrinfo", re.I
)


def reason(text: str, current: Limits) -> str:
    """Why a tool (uv, pip) could not reach a host, in a few words: the read timeout it ran into, a
    refused connection, an unknown host name, else the innermost cause it printed."""
    if timed_out(text):
        return f"no answer within {seconds('read', current)}"
    if _REFUSED.search(text):
        return "connection refused"
    if _NO_NAME.search(text):
        return "host name not found"
    return cause(text)


# A library request abandoned at the budget or on Ctrl-C may still be in flight in its own threads
# (rattler's); finalizing the interpreter under it can crash, so the command line then ends the
# process directly.
abandoned = threading.Event()
# rattler's runtime threads call back into Python (the headers middleware) and can outlive the
# command that made the client: an interpreter finalizing under such a call aborts
# (PyGILState_Release, exit -6), so a process that made a rattler client ends the same way as one
# that abandoned a request.
native_threads = threading.Event()


def run_bounded(
    work: Coroutine[Any, Any, T], *, budget: float | None, over: Callable[[], EnvgenError]
) -> T:
    """Run `work` in an event loop of its own: cancelled on Ctrl-C (raises Interrupted) within a
    tenth of a second, and after `budget` seconds (raises `over()`; None: no budget)."""
    import asyncio  # only rattler's calls need an event loop: not every command's start-up

    async def watch() -> T:
        task = asyncio.ensure_future(work)
        loop = asyncio.get_running_loop()
        deadline = None if budget is None else loop.time() + budget
        while not task.done():
            await asyncio.wait({task}, timeout=0.1)
            late = deadline is not None and loop.time() >= deadline and not task.done()
            if (interrupts.cancelled.is_set() or late) and not task.done():
                abandoned.set()
                task.cancel()
                interrupts.check()
                raise over()
        return task.result()

    return asyncio.run(watch())
