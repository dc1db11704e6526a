"""Hostile matrices, channels and lock files fed to every command that reads them without the
network.

Each example starts from a project with a fresh lock (tests/support/hostile.py), mutates one file
(truncated, random bytes, unicode, encodings, deep nesting, huge strings, structural changes,
payloads that `touch` a marker in one or every string; tests/support/mutations.py) and runs the
commands reading that file. For every run: exit code 0-5, no traceback, every existing file of
`locks/` byte-identical, nothing written outside `locks/` and the cache, the marker never created,
and the planted credential in no output and no written file.

The number of examples is small enough for `make test`; ENVGEN_FUZZ_SCALE=N multiplies it (a long
run), and `benchmarks/fuzz_report.py` runs these tests at a higher count and prints the figures.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import budget
from tests.support.hostile import CHILD, ENV, TALLY, Case, hostile_run, new_case, template_project
from tests.support.mutations import SHELL, TOML, YAML, Format, Mutation, mutated, with_marker

pytestmark = pytest.mark.adversarial

# the report's mode: tally every failure, assert none
COLLECT = os.environ.get("ENVGEN_FUZZ_COLLECT") == "1"


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=budget.examples(examples),
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
            HealthCheck.large_base_example,
        ],
    )


CHECK = ("check", ENV, "--no-solve", "--no-env")
INSTALL = ("install", ENV, "--prefix", "prefix", "--venv")
EXPORT = ("export", ENV, "--format", "requirements", "--platform", "linux-64")
DIFF = ("diff", "../project/locks/valid.yml", "../project/locks/valid.yml")
# The commands that read each kind of file: a matrix and its channels are read by show, lock, check
# and status; a lock's files by everything that reads a lock.
MATRIX_COMMANDS = [
    ("show", ENV),
    ("lock", ENV),
    ("lock", ENV, "--no-preflight"),
    CHECK,
    ("status", ENV),
]
CHILD_COMMANDS = [("show", CHILD), ("lock", CHILD), ("lock", "--no-preflight"), ("status", CHILD)]
LOCK_COMMANDS = [("show", ENV), ("lock", ENV), CHECK, ("status", ENV), EXPORT, DIFF, INSTALL]
RECIPE_COMMANDS = [("lock", ENV), CHECK, ("status", ENV), INSTALL]
CHANNELS = ["conda-forge.toml", "private.toml", "mirror.toml", "pypi.toml"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return template_project(tmp_path_factory.mktemp("fuzz"))


def fuzzed(
    template: Path, rel: str, fmt: Format
) -> st.SearchStrategy[tuple[list[Mutation], bytes]]:
    return mutated(fmt, (template / rel).read_bytes())


def run_case(
    category: str,
    template: Path,
    rel: str,
    drawn: tuple[list[Mutation], bytes],
    commands: Sequence[Sequence[str]],
) -> Case:
    chosen, data = drawn
    for mutation in chosen:
        TALLY.kinds[(category, mutation.kind)] += 1
    what = "; ".join(f"{m.kind} {m.note}"[:200] for m in chosen)
    with new_case(category, template, {}) as case:
        case.note = f"{rel} after {what}"
        (case.project / rel).write_bytes(with_marker(data, str(case.marker)))
        case.check(commands)
    if not COLLECT:
        assert not case.failures, f"{case.note}:\n" + "\n\n".join(case.failures[:3])
    return case


@pytest.mark.parametrize("category", ["matrix"])
def test_matrix(template: Path, category: str) -> None:
    @fuzz(8)
    @given(fuzzed(template, "env-templates/valid.toml", TOML))
    def one(drawn: tuple[list[Mutation], bytes]) -> None:
        run_case(category, template, "env-templates/valid.toml", drawn, MATRIX_COMMANDS)

    one()


@pytest.mark.parametrize("category", ["extends"])
def test_extending_matrix(template: Path, category: str) -> None:
    @fuzz(6)
    @given(fuzzed(template, f"env-templates/{CHILD}.toml", TOML))
    def one(drawn: tuple[list[Mutation], bytes]) -> None:
        run_case(category, template, f"env-templates/{CHILD}.toml", drawn, CHILD_COMMANDS)

    one()


@pytest.mark.parametrize("channel", CHANNELS)
def test_channel(template: Path, channel: str) -> None:
    rel = f"channels/{channel}"

    @fuzz(3)
    @given(fuzzed(template, rel, TOML))
    def one(drawn: tuple[list[Mutation], bytes]) -> None:
        run_case("channels", template, rel, drawn, MATRIX_COMMANDS)

    one()


@pytest.mark.parametrize(
    ("category", "rel", "fmt", "commands", "examples"),
    [
        ("lock-yml", f"locks/{ENV}.yml", YAML, LOCK_COMMANDS, 8),
        ("lock-sources", f"locks/{ENV}.sources.toml", TOML, LOCK_COMMANDS, 8),
        ("recipe", f"locks/{ENV}.install.sh", SHELL, RECIPE_COMMANDS, 5),
    ],
)
def test_lock_file(
    template: Path,
    category: str,
    rel: str,
    fmt: Format,
    commands: list[tuple[str, ...]],
    examples: int,
) -> None:
    @fuzz(examples)
    @given(fuzzed(template, rel, fmt))
    def one(drawn: tuple[list[Mutation], bytes]) -> None:
        run_case(category, template, rel, drawn, commands)

    one()


# --- a few cases through the real command line (a child process: what a user would see)
# --------------------

SUBPROCESS_CASES = [
    ("matrix", "env-templates/valid.toml", lambda data: b"a = " + b"[" * 100_000, ("show", ENV)),
    (
        "lock-sources",
        f"locks/{ENV}.sources.toml",
        lambda data: data.replace(
            b'url = "https://example.com/second.git"', b'url = "--upload-pack=touch @MARKER@"'
        ),
        ("status", ENV),
    ),
    ("lock-yml", f"locks/{ENV}.yml", lambda data: data[: len(data) // 2], CHECK),
]


@pytest.mark.parametrize(
    ("category", "rel", "change", "command"), SUBPROCESS_CASES, ids=lambda v: str(v)[:24]
)
def test_real_command_line(
    template: Path, category: str, rel: str, change: object, command: tuple[str, ...]
) -> None:
    assert callable(change)
    original = (template / rel).read_bytes()
    data = change(original)
    assert data != original
    with new_case(category, template, {}) as case:
        (case.project / rel).write_bytes(with_marker(data, str(case.marker)))
        [outcome] = case.check([command], run=hostile_run)
        assert not case.failures, "\n".join(case.failures)
        # refused as bad input, or (check) as a failed static step
        assert outcome.code in (2, 4), outcome.err
        assert rel.rsplit("/", 1)[1] in outcome.out + outcome.err


# --- what the fuzz found, kept as fixed cases
# -----------------------------------------------------------------


def _credential_key(data: bytes) -> bytes:
    """The channel's URL, credentials and all, written as a key (a value of its own replaces it)."""
    return data.replace(b"url = ", b'url = "https://h.example/x"\n').replace(
        b'forge"\n', b'forge" = 1\n'
    )


FOUND = [
    # A recipe that is not UTF-8 was a UnicodeDecodeError in check's static recipe step: it differs
    # (exit 4).
    ("recipe", f"locks/{ENV}.install.sh", lambda data: b"\xff" + data, CHECK, 4),
    # unreadable
    ("recipe", f"locks/{ENV}.install.sh", lambda data: data.decode().encode("utf-16"), INSTALL, 2),
    # A channel URL urlsplit cannot take apart was accepted, then a ValueError when shown or used.
    (
        "channels",
        "channels/conda-forge.toml",
        lambda data: data.replace(b".com/", b".com:99999/"),
        ("show", ENV),
        2,
    ),
    (
        "channels",
        "channels/private.toml",
        lambda data: data.replace(b"@", b"@["),
        ("status", ENV),
        2,
    ),
    (
        "channels",
        "channels/private.toml",
        lambda data: data.replace(b"@pypi.example.com", b"@"),
        ("lock", ENV),
        2,
    ),
    # A key holding a URL with credentials was echoed as it was written ("unknown key").
    ("channels", "channels/conda-forge.toml", _credential_key, CHECK, 2),
]


@pytest.mark.parametrize(
    ("category", "rel", "change", "command", "code"), FOUND, ids=lambda v: str(v)[:24]
)
def test_found(
    template: Path, category: str, rel: str, change: object, command: tuple[str, ...], code: int
) -> None:
    assert callable(change)
    with new_case(category, template, {}) as case:
        (case.project / rel).write_bytes(change((template / rel).read_bytes()))
        [outcome] = case.check([command])
        assert not case.failures, "\n".join(case.failures)
        assert outcome.code == code, outcome.out + outcome.err
        assert rel.rsplit("/", 1)[1] in outcome.out + outcome.err
