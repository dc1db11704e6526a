"""What a command prints: its Outcome (data on stdout, notes on stderr), the JSON envelope, colour
on whole lines only, the demo's banners and the download progress bar on a terminal."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import click

from envgen.cli.options import Settings
from envgen.errors import ConflictError, EnvgenError, MatrixError
from envgen.redact import redact_text


@dataclass
class Outcome:
    """What a command produced: its JSON results, its text for stdout (the data it exists to print),
    its notes for stderr (progress, summaries: dropped by -q), and its exit code."""

    results: list[Any] = field(default_factory=list)
    text: str = ""
    notes: list[tuple[str, str | None]] = field(default_factory=list)
    exit_code: int = 0
    error: EnvgenError | None = None

    def note(self, line: str, color: str | None = None) -> None:
        self.notes.append((line, color))


def paint(
    text: str,
    flags: Settings,
    stream: TextIO,
    color: str | None = None,
    bold: bool = False,
) -> str:
    """`text` styled only when colour is on for `stream`; whole lines only, never a fragment."""
    if not (color or bold) or not flags.colored(stream):
        return text
    return click.style(text, fg=color, bold=bold or None)


def banners(flags: Settings) -> Callable[[str], None]:
    """How the demo shows its lines as they come: `# ...` in cyan, `$ command` in bold; on stderr
    with --json (stdout carries the one JSON document)."""
    stream = sys.stderr if flags.as_json else sys.stdout

    def say(line: str) -> None:
        color = "cyan" if line.startswith("#") else None
        stream.write(paint(line, flags, stream, color, bold=line.startswith("$")) + "\n")
        stream.flush()

    return say


def envelope(
    command: str,
    exit_code: int,
    results: list[Any],
    error: EnvgenError | None = None,
) -> str:
    """The one JSON shape of every command (docs/cli.schema.json)."""
    document: dict[str, Any] = {
        "command": command,
        "ok": exit_code == 0,
        "exit_code": exit_code,
        "results": results,
    }
    if error is not None:
        hint = error.hint and redact_text(error.hint)
        document["error"] = {"message": redact_text(error.message), "hint": hint}
        # The parts of a problem found in an input, as the message names them; each of a matrix's.
        document["error"] |= _redacted(error.parts())
        if isinstance(error, MatrixError):
            document["error"]["problems"] = [_redacted(p.parts()) for p in error.problems]
        if isinstance(error, ConflictError) and error.conflicts:
            document["error"]["conflicts"] = list(error.conflicts)
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _redacted(parts: dict[str, str | int]) -> dict[str, str | int]:
    return {k: redact_text(v) if isinstance(v, str) else v for k, v in parts.items()}


def emit(command: str, flags: Settings, outcome: Outcome) -> None:
    """The Outcome on stdout and stderr: the JSON document or the text, the notes, the error."""
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
        # The last line of defence: a message may quote a key or value a user wrote with
        # credentials in it.
        message = f"error: {redact_text(error.message)}"
        sys.stderr.write(paint(message, flags, sys.stderr, "red") + "\n")
        if error.hint:
            sys.stderr.write(f"  hint: {redact_text(error.hint)}\n")
    sys.stderr.flush()


def quiet_pipes() -> None:
    """After a reader closed our pipe: further writes (and the interpreter's final flush) go
    nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):
            continue


class TerminalDownloads:
    """Downloads shown on a terminal: a rich progress bar on stderr of the files verified and the
    bytes received so far (chunks arrive from the download threads; rich's Progress is
    thread-safe)."""

    def __init__(self, colored: bool) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

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
    """How `envgen bundle` shows its downloads: a progress bar on a terminal (colour as --color
    says); elsewhere, or with -q, None: plain log lines (dropped by -q)."""
    if flags.quiet or not sys.stderr.isatty():
        return None
    return TerminalDownloads(flags.colored(sys.stderr))
