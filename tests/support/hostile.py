"""A project to feed hostile files to, and envgen's commands run on it with every invariant of a
hostile input checked: exit code 0-5, no traceback, no lock changed, no file written outside
`locks/` and the cache, no command run from an injected string, no planted credential in any output
or written file.

A project is built once per process (`template_project`) and copied per case. Commands run in
process through Click (`CliRunner`), with the steps that would need the network replaced: `lock`'s
preflight finds every host unreachable (exit 3, after reading the matrix and the previous lock);
resolving git sources (`lock --no-preflight`) and creating the env (`install`, after every check it
makes first) are a `ResolutionError` (exit 3). git itself runs for real (`status` asks remotes),
pointed by `insteadOf` at a path that does not exist so that no remote is ever reached.
`hostile_run` runs the real command line in a child process instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import msgspec
from click.testing import CliRunner
from envgen.cli import cli
from envgen.errors import ResolutionError
from envgen.inputs.matrix import load_env
from envgen.lockio.exports.derived import derived_files
from envgen.lockio.input_hashes import input_hash, project_inputs
from envgen.lockio.store import require_lock, write_lock
from envgen.model import Index, LockedSource
from envgen.project import Project
from envgen.recipe.render import render_recipe

from tests.support.builders import digest, sample_lock

DATA = Path(__file__).parents[1] / "data" / "matrices"
ENV = "valid"
CHILD = "child"
MARKER = "PWNED-MARKER"
# A fake credential planted in a conda channel, a pip index and (through ${MIRROR_HOST}) an expanded
# URL.
SECRET = "fuzz-s3cr3t-7f3a9c"
CREDENTIAL = f"fuzzer:{SECRET}@"
CHILD_MATRIX = f"""schema = 1
extends = "{ENV}"

[env]
name = "{CHILD}"
description = "the valid env, one variable and one profile more"

[sources.second.env]
ZED = "2"

[activation.profiles.loud]
description = "more logging"
env = {{ LOG_LEVEL = "debug" }}
"""
CHANNELS = {
    "conda-forge.toml": f'kind = "conda"\nurl = "https://{CREDENTIAL}conda.example.com/conda-forge"\n',
    "private.toml": f'kind = "pip"\nurl = "https://{CREDENTIAL}pypi.example.com/simple"\n'
    "explicit = true\n",
}
# git may ask no remote: every URL a source may have is rewritten to a path that does not exist.
GITCONFIG = "".join(
    f'[url "file:///nonexistent-remote/"]\n\tinsteadOf = {prefix}\n'
    for prefix in ("https://", "http://", "ssh://", "git@", "file://")
)


def payloads(marker: Path) -> list[str]:
    """Strings that run `touch <marker>` if anything hands them to a shell or to git as an
    option."""
    touch = f"touch {marker}"
    return [
        f"$({touch})",
        f"`{touch}`",
        f";{touch}",
        f"; {touch} #",
        f"&& {touch}",
        f"| {touch}",
        f"\n{touch}\n",
        f"'; {touch}; '",
        f'"; {touch}; "',
        f"$(touch${{IFS}}{marker})",
        f"--upload-pack={touch}",
        f"--upload-pack=touch${{IFS}}{marker}",
        f"-c core.sshCommand={touch}",
        f"--config=core.fsmonitor={touch}",
        f"ext::sh -c {touch}",
        f"https://h.example/x.git;{touch}",
        f"x\nEOF\n{touch}\n",
        f"}}; {touch}; {{",
    ]


def template_project(where: Path) -> Path:
    """The valid fixture matrix, a child env extending it, channels with a planted credential, and a
    lock of the valid env that is fresh for its inputs (so `lock` is a no-op until an input
    changes)."""
    root = where / "project"
    shutil.copytree(DATA / "channels", root / "channels")
    for name, text in CHANNELS.items():
        (root / "channels" / name).write_text(text)
    (root / "env-templates").mkdir()
    shutil.copy(DATA / "env-templates" / f"{ENV}.toml", root / "env-templates" / f"{ENV}.toml")
    (root / "env-templates" / f"{CHILD}.toml").write_text(CHILD_MATRIX)
    project = Project(root)
    with environment(where):
        matrix = load_env(project, ENV)
    sources = tuple(
        LockedSource(s, hashlib.sha1(s.name.encode()).hexdigest(), digest=digest(s.name))
        for s in matrix.sources
    )
    inputs = project_inputs(project, matrix, sources)
    sample = sample_lock()
    # torch's
    indexes = (*sample.indexes, Index("pytorch-cpu", "https://download.pytorch.org/whl/cpu", True))
    lock = msgspec.structs.replace(
        sample,
        env=ENV,
        sources=sources,
        indexes=indexes,
        inputs=inputs,
        input_hash=input_hash(inputs),
    )
    # Written, then written again as read back: the files are then exactly what the lock renders
    # (credentials in the lock are redacted on the way out, so the first rendering is not).
    for _ in range(2):
        derived = [(file.name, file.text) for file in derived_files(lock, matrix)]
        write_lock(project, ENV, lock, render_recipe(lock), derived)
        lock = require_lock(project, ENV)
    return root


@contextlib.contextmanager
def environment(case: Path) -> Iterator[None]:
    """The process as a case runs in: its own HOME, cache, temp dir and git config, the mirror
    variable holding the credential, and the current directory inside the case (so a relative write
    is seen)."""
    for name in ("home", "cache", "tmp", "cwd"):
        (case / name).mkdir(exist_ok=True)
    (case / "home" / "gitconfig").write_text(GITCONFIG)
    env = {
        "HOME": str(case / "home"),
        "ENVGEN_CACHE_DIR": str(case / "cache"),
        "TMPDIR": str(case / "tmp"),
        "GIT_CONFIG_GLOBAL": str(case / "home" / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "MIRROR_HOST": f"{CREDENTIAL}mirror.example.com",
    }
    with (
        mock.patch.dict(os.environ, env),
        mock.patch.object(tempfile, "tempdir", str(case / "tmp")),
        contextlib.chdir(case / "cwd"),
    ):
        yield


def _offline(what: str) -> Callable[..., object]:
    def refuse(*args: object, **kwargs: object) -> object:
        raise ResolutionError(f"fuzz: {what} is not run here (it needs the network)")

    return refuse


@dataclass
class Outcome:
    """One command's run: exit code, output, and the traceback of an exception that escaped (None if
    none)."""

    args: tuple[str, ...]
    code: int
    out: str
    err: str
    escaped: str | None = None
    seconds: float = 0.0


KINDS = ("tracebacks", "commands_run", "secrets", "bad_exits", "changed_locks", "stray_files")


@dataclass
class Tally:
    """What a fuzz run saw: per category the cases, command runs and credential checks; per kind
    every broken invariant (`tracebacks`, `commands_run`, `secrets`, `bad_exits`, `changed_locks`,
    `stray_files`)."""

    cases: Counter[str] = field(default_factory=Counter)
    runs: Counter[str] = field(default_factory=Counter)
    secret_checks: Counter[str] = field(default_factory=Counter)
    # (category, mutation kind) -> cases
    kinds: Counter[tuple[str, str]] = field(default_factory=Counter)
    # seconds, command, what the case was
    slowest: list[tuple[float, str, str]] = field(default_factory=list)
    codes: Counter[tuple[str, int]] = field(default_factory=Counter)
    broken: dict[str, list[str]] = field(default_factory=lambda: {kind: [] for kind in KINDS})


TALLY = Tally()


def invoke(project: Path, args: Sequence[str]) -> Outcome:
    """`envgen ARGS --root PROJECT` in process, with the preflight's probes, resolution and env
    creation stopped (exit 3)."""
    full = (*args, "--root", str(project))
    with (
        mock.patch("envgen.resolve.preflight._probe", lambda *args: "fuzz: no host is asked here"),
        mock.patch(
            "envgen.resolve.sources.pins.resolve_sources", _offline("resolving git sources")
        ),
        mock.patch("envgen.installer.destinations.create_venv", _offline("creating the env")),
        mock.patch("envgen.installer.destinations.install_conda", _offline("creating the env")),
    ):
        result = CliRunner().invoke(cli, full, catch_exceptions=True)
    escaped = None
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert result.exc_info is not None
        escaped = "".join(traceback.format_exception(*result.exc_info))
    return Outcome(tuple(args), result.exit_code, result.stdout, result.stderr, escaped)


def hostile_run(project: Path, args: Sequence[str], timeout: float = 60) -> Outcome:
    """The real command line in a child process (with the case's environment already set)."""
    argv = [
        sys.executable,
        "-c",
        "from envgen.cli import main; main()",
        *args,
        "--root",
        str(project),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    return Outcome(tuple(args), proc.returncode, proc.stdout, proc.stderr)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).digest()
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


def _secret_intact(inputs: Mapping[str, bytes]) -> bool:
    """Every occurrence of the planted secret still sits in the userinfo of a URL (a mutation that
    cut the URL up, or moved the secret into a path, made it a plain string, which a message may
    quote)."""
    secret, planted = SECRET.encode(), b"://" + CREDENTIAL.encode()
    return all(text.count(secret) == text.count(planted) for text in inputs.values())


@dataclass
class Case:
    """One fuzzed project: a copy of the template with some files replaced, and the commands to run
    on it."""

    category: str
    # holds project/, cache/, home/, tmp/, cwd/ and the marker, if anything ran a payload
    root: Path
    note: str = ""  # what was done to the project, for messages
    failures: list[str] = field(default_factory=list)

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def marker(self) -> Path:
        return self.root / MARKER

    def check(
        self,
        commands: Sequence[Sequence[str]],
        run: Callable[[Path, Sequence[str]], Outcome] = invoke,
    ) -> list[Outcome]:
        """Run each command; every broken invariant goes to `failures` and TALLY (the caller asserts
        none)."""
        TALLY.cases[self.category] += 1
        inputs = {p.name: p.read_bytes() for p in self.project.rglob("*") if p.is_file()}
        outcomes = []
        for args in commands:
            with environment(self.root):
                before = _snapshot(self.root)
                started = time.monotonic()
                outcome = run(self.project, args)
                outcome.seconds = time.monotonic() - started
                after = _snapshot(self.root)
            outcomes.append(outcome)
            self._record(outcome, before, after, _secret_intact(inputs))
        return outcomes

    def _record(
        self, outcome: Outcome, before: dict[str, bytes], after: dict[str, bytes], intact: bool
    ) -> None:
        label = f"[{self.category}] envgen {' '.join(outcome.args)} ({self.note[:300]})"
        TALLY.runs[self.category] += 1
        TALLY.codes[(outcome.args[0], outcome.code)] += 1
        TALLY.slowest = sorted([*TALLY.slowest, (outcome.seconds, label, self.note)], reverse=True)[
            :5
        ]
        text = outcome.out + outcome.err
        if outcome.escaped or "Traceback" in text or "internal error" in text:
            self._broken("tracebacks", f"{label}: {outcome.escaped or outcome.err}")
        if not 0 <= outcome.code <= 5:
            self._broken("bad_exits", f"{label}: exit {outcome.code}: {outcome.err[-2000:]}")
        if self.marker.exists() or any(MARKER in p for p in after):
            self._broken("commands_run", f"{label}: a payload ran (found {MARKER})")
        allowed = ("project/locks/", "cache/")
        for path in sorted(set(before) | set(after)):
            if before.get(path) == after.get(path):
                continue
            if path.startswith("project/locks/") and path in before:
                self._broken("changed_locks", f"{label}: {path} changed or removed")
            elif not path.startswith(allowed) or path not in after:
                self._broken(
                    "stray_files", f"{label}: {path} {'written' if path in after else 'removed'}"
                )
        if intact:
            TALLY.secret_checks[self.category] += 1
            written = [
                self.root / p for p in after if p.startswith(allowed) and before.get(p) != after[p]
            ]
            leaks = [str(p) for p in written if SECRET.encode() in p.read_bytes()]
            said = [line for line in text.splitlines() if SECRET in line]
            leaks += [
                name
                for name, out in (("stdout", outcome.out), ("stderr", outcome.err))
                if SECRET in out
            ]
            if leaks:
                lines = "\n".join(line[:300] for line in said[:3])
                self._broken(
                    "secrets", f"{label}: the planted credential is in {', '.join(leaks)}:\n{lines}"
                )

    def _broken(self, kind: str, message: str) -> None:
        TALLY.broken[kind].append(message)
        self.failures.append(message)


@contextlib.contextmanager
def new_case(category: str, template: Path, files: Mapping[str, bytes]) -> Iterator[Case]:
    """A copy of `template` with `files` (relative to the project) written over it; removed
    afterwards."""
    root = Path(tempfile.mkdtemp(prefix="case-", dir=template.parent.parent))
    try:
        shutil.copytree(template, root / "project", symlinks=True)
        for rel, data in files.items():
            (root / "project" / rel).write_bytes(data)
        yield Case(category, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
