"""The no-op `envgen lock`: it compares the inputs the lock recorded with the files, and loads
nothing that resolving needs (the matrix validator, conda-lock, rattler, uv's helpers)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from envgen.commands.lock.fresh import unchanged_hash
from envgen.example.project import Example
from envgen.lockio.input_hashes import still_current
from envgen.lockio.store import read_files, recorded_inputs
from envgen.project import Project

from tests.support.example import run_envgen
from tests.support.lk_locked import locked_example

ENV = "demo"
GLIBC = "2.28"  # the example matrix's [system] glibc


def no_op(project: Project, env: str = ENV) -> str | None:
    """The input hash a no-op lock of `env` keeps, as `envgen lock` decides it."""
    return unchanged_hash(project, read_files(project, env))


@pytest.fixture(scope="module")
def served(read_only_served: Example) -> Example:
    """The worker's served example, a copy of its project for this module
    (tests/integration/conftest.py): the module edits only its project (its matrix, locks/), each
    test putting it back; upstream and what is served it only reads."""
    return read_only_served


@pytest.fixture(scope="module")
def first_lock(worker_first_lock: dict[str, bytes]) -> dict[str, bytes]:
    """The worker's example locked once (tests/integration/conftest.py); each test starts from
    these files."""
    return worker_first_lock


@pytest.fixture
def locked(
    served: Example, first_lock: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Example]:
    """The served example, locked."""
    with locked_example(served, ENV, first_lock, monkeypatch) as example:
        yield example


# What a no-op must not import: each is a second or more of a re-lock's fixed cost in some part.
# conda-lock (its package imports its whole command line) no lock imports at all.
NEVER = ("conda_lock",)
RESOLVING = (
    "rattler",
    "msgspec",
    "yaml",
    "filelock",
    "requests",
    "packaging.tags",
    "envgen.inputs.matrix",
    "envgen.model",
)

_NO_OP = """
import json, sys
from pathlib import Path
from envgen.commands.lock.command import lock_envs
from envgen.project import Project
results = lock_envs(Project(Path(sys.argv[1])), [sys.argv[2]])
print(json.dumps([[r.status for r in results], sorted(set(sys.argv[3:]) & set(sys.modules))]))
"""


def test_a_no_op_lock_loads_nothing_resolving_needs(locked: Example) -> None:
    run = [sys.executable, "-c", _NO_OP, str(locked.root), ENV, *RESOLVING, *NEVER]
    out = subprocess.run(run, check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == [["up-to-date"], []]


def test_a_re_lock_does_load_them(locked: Example) -> None:
    """The test above would pass if nothing were ever imported: a changed matrix re-locks, and
    imports them."""
    locked.matrix.write_text(locked.matrix.read_text() + "\n# changed\n")
    run = [sys.executable, "-c", _NO_OP, str(locked.root), ENV, *RESOLVING, *NEVER]
    out = subprocess.run(run, check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == [["locked"], sorted(RESOLVING)]


@pytest.mark.parametrize(
    "changed", ["env-templates/demo.toml", "channels/demo-forge.toml", "channels/extra.toml"]
)
def test_a_changed_input_file_makes_the_lock_stale(locked: Example, changed: str) -> None:
    project = Project(locked.root)
    fresh = no_op(project)
    assert fresh is not None
    path = locked.root / changed
    text = path.read_text()
    path.write_text(text + "\n# one more line\n")
    try:
        assert no_op(project) is None
    finally:
        path.write_text(text)
    assert no_op(project) == fresh


@pytest.mark.parametrize(
    "derived", ["demo.linux-64.requirements.txt", "pylock.demo-linux-aarch64.toml", "demo.nix"]
)
def test_a_missing_derived_file_makes_the_lock_stale(locked: Example, derived: str) -> None:
    (locked.root / "locks" / derived).unlink()
    assert no_op(Project(locked.root)) is None
    code, out, _ = run_envgen(locked, "lock", ENV, "--json")
    assert (code, json.loads(out)["results"][0]["status"]) == (0, "locked")
    assert (locked.root / "locks" / derived).is_file()


def test_recorded_inputs_hold_only_as_recorded(locked: Example) -> None:
    project = Project(locked.root)
    recorded = recorded_inputs(read_files(project, ENV))
    assert recorded is not None
    inputs = dict(recorded.inputs)
    assert {k.partition(":")[0] for k in inputs} == {
        "matrix",
        "channel",
        "source",
        "virtual-packages",
        "schema",
    }
    assert still_current(project, ENV, inputs, GLIBC)
    # Another glibc floor gives other virtual packages (what a change of envgen's platform facts
    # would do too).
    assert not still_current(project, ENV, inputs, "2.34")
    channel = next(k for k in inputs if k.startswith("channel:"))
    name = channel.removeprefix("channel:")
    # A lock is input: a component naming a path, or one no lock records, is never taken as current.
    assert not still_current(
        project, ENV, inputs | {f"channel:../channels/{name}": inputs[channel]}, GLIBC
    )
    assert not still_current(project, ENV, inputs | {"compiler:gcc": "0" * 64}, GLIBC)
    assert not still_current(project, ENV, inputs | {"base:gone": "0" * 64}, GLIBC)
    # Sources keep their recorded digests: they move only when asked (--update).
    source = next(k for k in inputs if k.startswith("source:"))
    assert still_current(project, ENV, inputs | {source: "f" * 64}, GLIBC)


def test_an_extending_env_is_a_no_op_with_the_glibc_of_its_base(locked: Example) -> None:
    derived = locked.root / "env-templates" / "demo-npu.toml"
    derived.write_text('schema = 1\nextends = "demo"\n\n[env]\nname = "demo-npu"\n')
    try:
        code, _, err = run_envgen(locked, "lock", "demo-npu", "-q")
        assert code == 0, err
        code, out, _ = run_envgen(locked, "lock", "demo-npu", "--json")
        assert (code, json.loads(out)["results"][0]["status"]) == (0, "up-to-date")
        base = locked.matrix.read_text()
        locked.matrix.write_text(base.replace(f'glibc = "{GLIBC}"', 'glibc = "2.34"'))
        assert no_op(Project(locked.root), "demo-npu") is None
        locked.matrix.write_text(base)
    finally:
        derived.unlink()
        for path in (locked.root / "locks").glob("*demo-npu*"):
            path.unlink()


def test_an_unreadable_matrix_is_left_to_the_re_lock(locked: Example) -> None:
    locked.matrix.write_text("[env\n")
    assert no_op(Project(locked.root)) is None
    code, _, err = run_envgen(locked, "lock", ENV)
    assert code == 2 and "TOML syntax error" in err
