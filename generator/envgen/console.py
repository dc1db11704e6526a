"""What every command shares on the command line: the exit-code table, the output flags (-q, -v, --color,
--json, --root), the JSON envelope, and the one place an outcome or an error becomes output and an exit code."""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

import click

import envgen
from envgen import interrupts, network
from envgen.errors import ConflictError, EnvgenError, InputError
from envgen.logs import setup_logging
from envgen.redact import redact_text

if TYPE_CHECKING:
    from envgen.project import Project

log = logging.getLogger("envgen.cli")

# The one table of conditions and exit codes: README.md and every `--help` print it, tests walk it.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "success"),
    (
        1,
        "differences or drift: a lock stale, missing or behind a moved ref, "
        "a matrix upstream no longer agrees with (status, status --watch); "
        "locks differ or a lock was edited by hand (diff --exit-code)",
    ),
    (
        2,
        "bad input or usage: no envgen project, an unknown env or profile, a malformed matrix, channel file or "
        "option, no lock yet (check, install, export); found before any work",
    ),
    (
        3,
        "resolution or network: a conflict, an unreachable index, channel or remote "
        "(lock, check's re-solve, install, status --watch)",
    ),
    (
        4,
        "verification: a step of `check` failed (a lock stale, edited, unparsable, or not installing as locked); "
        "a tampered lock (status, install, diff --git with a lock file missing)",
    ),
    (5, "external tool: git, uv, pip, a build or the recipe failed"),
    (70, "internal error: a bug in envgen (ENVGEN_DEBUG=1 shows the traceback)"),
    (130, "interrupted (Ctrl-C): it says what was written; `locks/` holds the previous or the new lock, never a mix"),
    (143, "terminated (SIGTERM): as 130"),
)

EXIT_EPILOG = "\b\nExit codes:\n" + "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_CODES)


def epilog(*examples: str) -> str:
    """The end of a command's --help: its examples, the exit-code table, the network limits (`\\b`: click keeps
    the lines)."""
    lines = "\n".join(f"  {example}" for example in examples)
    return f"\b\nExamples:\n{lines}\n\n{EXIT_EPILOG}\n\n{network.HELP}"


@dataclass
class Settings:
    """The output flags of one invocation."""

    root: Path | None = None
    quiet: bool = False
    verbose: int = 0
    color: str = "auto"
    as_json: bool = False

    def colored(self, stream: TextIO) -> bool:
        """--color always/never win; with auto, NO_COLOR (any value) then FORCE_COLOR, then: is it a terminal."""
        if self.color != "auto":
            return self.color == "always"
        if os.environ.get("NO_COLOR"):
            return False
        if os.environ.get("FORCE_COLOR"):
            return True
        return stream.isatty()


class TerminalDownloads:
    """Downloads shown on a terminal: a rich progress bar on stderr of the files verified and the bytes
    received so far (chunks arrive from the download threads; rich's Progress is thread-safe)."""

    def __init__(self, colored: bool) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(file=sys.stderr, no_color=not colored, highlight=False)
        self.progress = Progress(
            TextColumn("downloading"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("files  {task.fields[size]}"),
            TimeElapsedColumn(),
            console=console,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.task = self.progress.add_task("downloading", total=None, size="0 bytes", start=False)
        self.bytes, self.lock = 0, threading.Lock()

    def started(self, files: int) -> None:
        self.progress.update(self.task, total=files)
        self.progress.start_task(self.task)
        self.progress.start()

    def received(self, size: int) -> None:
        from rich.filesize import decimal

        with self.lock:
            self.bytes += size
            self.progress.update(self.task, size=decimal(self.bytes))

    def finished(self, wanted: object, size: int) -> None:
        self.progress.advance(self.task)

    def stopped(self) -> None:
        self.progress.stop()


def download_display(flags: Settings) -> TerminalDownloads | None:
    """How `envgen bundle` shows its downloads: a progress bar on a terminal (colour as --color says); elsewhere,
    or with -q, None: plain log lines (dropped by -q)."""
    if flags.quiet or not sys.stderr.isatty():
        return None
    return TerminalDownloads(flags.colored(sys.stderr))


def settings() -> Settings:
    return click.get_current_context().find_root().ensure_object(Settings)


def _store(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None and value != param.get_default(ctx):
            setattr(ctx.find_root().ensure_object(Settings), name, value)

    return callback


def env_names(ctx: click.Context, param: click.Parameter, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
    """Env arguments are names (`a5`), never paths: refused (exit 2) before any work."""
    from envgen.inputs.untrusted import env_name_problem

    for env in (value,) if isinstance(value, str) else value:
        problem = env_name_problem(env)
        if problem:
            raise click.BadParameter(f"{problem} (an env is named by its file in env-templates/ without .toml)")
    return value


# The same flags on every command (and before it: `envgen -q lock`), stored in one Settings.
_COMMON = (
    click.option(
        "--root",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        envvar="ENVGEN_ROOT",
        expose_value=False,
        callback=_store("root"),
        help="Where to look for the project (default: the current directory); its nearest directory, upward, "
        "holding env-templates/ and channels/ is the project.",
    ),
    click.option(
        "-q", "--quiet", is_flag=True, expose_value=False, callback=_store("quiet"), help="Only errors on stderr."
    ),
    click.option(
        "-v",
        "--verbose",
        count=True,
        expose_value=False,
        callback=_store("verbose"),
        help="Debug logs on stderr: -v the commands envgen runs and the time of each stage, -vv also the libraries'.",
    ),
    click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        expose_value=False,
        callback=_store("color"),
        help="Colour on stderr and stdout; auto: on a terminal, unless NO_COLOR is set (FORCE_COLOR forces it).",
    ),
    click.option(
        "--json",
        is_flag=True,
        expose_value=False,
        callback=_store("as_json"),
        help='One JSON document on stdout: {"command", "ok", "exit_code", "results"} (docs/cli-json.md).',
    ),
)


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    # envgen.__version__ is read only here (importlib.metadata would cost every command's start-up), and is
    # "0.0.0" from a source tree never installed, where click's own lookup by package name fails.
    if value and not ctx.resilient_parsing:
        click.echo(f"envgen, version {envgen.__version__}")
        ctx.exit()


version_option = click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)


def common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_COMMON):
        func = option(func)
    return func


# install and check take a bundle the same way: trusted through the project's lock, or the hash.
_FROM = "Offline, from this bundle (envgen bundle), each member checked against the lock."
_LOCK_SHA256 = (
    "With --from-bundle and no lock of ENV under --root (no checkout): the content hash of the "
    "lock the bundle must carry, as `envgen bundle` printed it. Required then, checked when given."
)
_BUNDLE = (
    click.option("--from-bundle", type=click.Path(dir_okay=False, path_type=Path), help=_FROM),
    click.option("--lock-sha256", metavar="HASH", help=_LOCK_SHA256),
)


def bundle_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_BUNDLE):
        func = option(func)
    return func


def bundle_project(
    env: str,
    bundle: Path | None,
    lock_sha256: str | None,
    *,
    locked: bool,
) -> Project:
    """The project of `install` or `check`; with a bundle, which brings its lock, none is needed."""
    if lock_sha256 is not None and bundle is None:
        raise click.UsageError("--lock-sha256 goes with --from-bundle")
    project = current_project(required=bundle is None)
    if bundle is None:
        project.known_envs([env], locked=locked)
    return project


@dataclass
class Outcome:
    """What a command produced: its JSON results, its text for stdout (the data it exists to print), its notes
    for stderr (progress, summaries: dropped by -q), and its exit code."""

    results: list[Any] = field(default_factory=list)
    text: str = ""
    notes: list[tuple[str, str | None]] = field(default_factory=list)
    exit_code: int = 0
    error: EnvgenError | None = None

    def note(self, line: str, color: str | None = None) -> None:
        self.notes.append((line, color))


INTERRUPTED, TERMINATED = 130, 143  # 128 + SIGINT, 128 + SIGTERM
_terminated: list[int] = []
_working: list[bool] = []  # inside a command's work, where an interrupt is reported with what was written


def on_signal(signum: int, frame: FrameType | None) -> None:
    """SIGINT, and SIGTERM (a CI job cancelled, a supervisor stopping envgen) alike, stop the work."""
    if signum == signal.SIGTERM:
        _terminated.append(signum)
    if not _working:  # before or after the work (parsing options, printing): nothing is being written now
        sys.stderr.write(interrupts.message(interrupts.written()) + "\n")
        sys.exit(TERMINATED if _terminated else INTERRUPTED)
    raise KeyboardInterrupt


def _work(body: Callable[..., Outcome], flags: Settings, *args: Any, **kwargs: Any) -> Outcome:
    """Run a command's body: its Outcome, or the Outcome of the error it raised (`error` set)."""
    interrupts.reset()
    _working.append(True)
    try:
        network.limits()  # a malformed ENVGEN_*_TIMEOUT is bad input, found before any work
        return body(*args, **kwargs)
    except KeyboardInterrupt:
        # Workers may be writing a lock right now: stop them and wait for a write in progress, then say what
        # is on disk (each env's files are from one run: the old ones, or the new ones).
        message = interrupts.message(interrupts.interrupt())
        sys.stderr.write(paint(message, flags, sys.stderr, "red") + "\n")
        sys.exit(TERMINATED if _terminated else INTERRUPTED)
    except (EnvgenError, click.ClickException, OSError) as exc:
        error = _error_of(exc)
        if error is None:
            raise
        return Outcome(exit_code=error.exit_code, error=error)
    finally:
        _working.pop()


def setup(flags: Settings) -> None:
    setup_logging(quiet=flags.quiet, verbose=flags.verbose, color=flags.colored(sys.stderr))


def paint(text: str, flags: Settings, stream: TextIO, color: str | None = None, bold: bool = False) -> str:
    """`text` styled only when colour is on for `stream`; whole lines only, never a fragment."""
    if not (color or bold) or not flags.colored(stream):
        return text
    return click.style(text, fg=color, bold=bold or None)


def banners(flags: Settings) -> Callable[[str], None]:
    """How the demo shows its lines as they come: `# ...` in cyan, `$ command` in bold; on stderr with --json
    (stdout carries the one JSON document)."""
    stream = sys.stderr if flags.as_json else sys.stdout

    def say(line: str) -> None:
        color = "cyan" if line.startswith("#") else None
        stream.write(paint(line, flags, stream, color, bold=line.startswith("$")) + "\n")
        stream.flush()

    return say


def envelope(command: str, exit_code: int, results: list[Any], error: EnvgenError | None = None) -> str:
    """The one JSON shape of every command (docs/cli.schema.json)."""
    document: dict[str, Any] = {"command": command, "ok": exit_code == 0, "exit_code": exit_code, "results": results}
    if error is not None:
        document["error"] = {"message": redact_text(error.message), "hint": error.hint and redact_text(error.hint)}
        if isinstance(error, ConflictError) and error.conflicts:
            document["error"]["conflicts"] = list(error.conflicts)
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _error_of(exc: BaseException) -> EnvgenError | None:
    if isinstance(exc, EnvgenError):
        return exc
    if isinstance(exc, click.ClickException):  # a usage error found by a command's own checks
        return InputError(exc.format_message())
    if isinstance(exc, OSError) and exc.filename is not None:
        # A file or directory of the project that cannot be read or written (permissions, a full disk).
        return InputError(
            f"cannot use {exc.filename}: {exc.strerror or exc}",
            hint="check that you may read env-templates/ and channels/ and write locks/",
        )
    return None


def _emit(command: str, flags: Settings, outcome: Outcome) -> None:
    error = outcome.error
    if flags.as_json:
        sys.stdout.write(envelope(command, outcome.exit_code, outcome.results, error))
    elif outcome.text:
        sys.stdout.write(outcome.text)
    sys.stdout.flush()
    if not flags.quiet:
        for line, color in outcome.notes:
            sys.stderr.write(paint(line, flags, sys.stderr, color) + "\n")
    if error is not None:
        # The last line of defence: a message may quote a key or value a user wrote with credentials in it.
        sys.stderr.write(paint(f"error: {redact_text(error.message)}", flags, sys.stderr, "red") + "\n")
        if error.hint:
            sys.stderr.write(f"  hint: {redact_text(error.hint)}\n")
    sys.stderr.flush()


def _quiet_pipes() -> None:
    """After a reader closed our pipe: further writes (and the interpreter's final flush) go nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):
            continue


def reporting(command: str) -> Callable[[Callable[..., Outcome]], Callable[..., None]]:
    """Run a command's body and turn its Outcome, or the error it raised, into output and the exit code."""

    def decorate(body: Callable[..., Outcome]) -> Callable[..., None]:
        @functools.wraps(body)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            interrupts.begin(command)
            flags = settings()
            setup(flags)
            started = time.monotonic()
            outcome = _work(body, flags, *args, **kwargs)
            log.debug("%s: %.2f s, exit code %d", command, time.monotonic() - started, outcome.exit_code)
            try:
                _emit(command, flags, outcome)
            except BrokenPipeError:
                _quiet_pipes()
            sys.exit(outcome.exit_code)

        return wrapper

    return decorate


INTERNAL_ERROR = 70  # sysexits' EX_SOFTWARE: a bug in envgen, not in its input


def guarded(run: Callable[[], object]) -> None:
    """Run the command line: signals reported by `on_signal`, any exception that is not an EnvgenError as one
    line and exit 70 (ENVGEN_DEBUG=1 re-raises it for a developer)."""
    # An index with `trusted_host` in channels/ skips certificate checks by choice: no warning per request.
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")  # urllib3's InsecureRequestWarning
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        run()
    except SystemExit as exc:
        if interrupts.cancelled.is_set() or network.abandoned.is_set() or network.native_threads.is_set():
            # A library's threads still running (a request abandoned, rattler's runtime) must not meet the
            # interpreter's finalization.
            interrupts.leave(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
        # Done and reported: a signal from here on would only turn a true exit status into "killed".
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        raise
    except Exception as exc:
        if os.environ.get("ENVGEN_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        sys.stderr.write(f"internal error: {type(exc).__name__}: {first}\n")
        hint = f"this is a bug in envgen {envgen.__version__}: please file an issue in the envgen repository with the "
        sys.stderr.write(f"  {hint}command you ran and this message (ENVGEN_DEBUG=1 shows the traceback)\n")
        sys.exit(INTERNAL_ERROR)


def current_project(*, required: bool = True) -> Project:
    """The project of this invocation: found upward from --root (or the current directory).

    Not `required` (a bundle brings its own lock): without one, that directory stands for a project with no locks.
    """
    from envgen.project import Project, find_project, is_project

    start = settings().root or Path.cwd()
    if not required and not any(is_project(d) for d in (start.resolve(), *start.resolve().parents)):
        return Project(start.resolve())
    return find_project(start)
