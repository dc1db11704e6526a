"""Overrides end to end on the bundled example: scoped by default, transitive recorded, shown,
checked."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator

import pytest
from envgen.commands.check import command as check
from envgen.example.project import Example
from envgen.lockio.store import read_lock
from envgen.platforms import host_platform
from envgen.project import Project

from tests.support.example import restored_example, run_envgen
from tests.support.lk_locked import locked_example

ENV = "demo"
OVERRIDE = "[overrides.demo-transformers]\n"
VIOLATION = "demo-peft==0.18.0 needs demo-transformers>=5.0"


@pytest.fixture(scope="module")
def served(read_only_served: Example) -> Example:
    """The worker's served example, a copy of its project for this module
    (tests/integration/conftest.py): the module edits only its project (its matrices, locks/),
    each test putting it back; upstream and what is served it only reads."""
    return read_only_served


@pytest.fixture
def example(served: Example, monkeypatch: pytest.MonkeyPatch) -> Iterator[Example]:
    with restored_example(served, ENV, monkeypatch) as example:
        yield example


@pytest.fixture
def locked(
    served: Example, worker_first_lock: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Example]:
    """The example with the worker's first lock in locks/, for the tests whose subject comes after
    a first lock: their own `envgen lock` of it is then a no-op (its locking is the first test's
    subject)."""
    with locked_example(served, ENV, worker_first_lock, monkeypatch) as example:
        yield example


envgen = run_envgen


def peft(example: Example) -> set[str]:
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    return {e.version for e in lock.pip if e.name == "demo-peft"}


def test_the_scoped_override_keeps_an_older_release_that_agrees_with_it(example: Example) -> None:
    code, _, err = envgen(example, "lock", ENV)
    assert code == 0, err
    # demo-peft 0.18.0 needs demo-transformers>=5.0; the override pins 4.57.6 and leaves that
    # requirement be.
    assert peft(example) == {"0.17.0"}
    assert "contradicts" not in err
    assert "violates" not in (example.root / "locks" / f"{ENV}.sources.toml").read_text()
    code, out, err = envgen(example, "check", ENV, "--no-env")
    assert code == 0, out + err
    assert out.startswith(
        f"check {ENV} ({host_platform()}): ok (static, solve; env skipped: --no-env)\n"
    )
    assert "  ok      static: dependencies\n" in out
    code, out, _ = envgen(example, "check", ENV, "--no-env", "--require-env", "--json")
    assert code == 4
    document = json.loads(out)["results"][0]
    assert (document["ok"], document["verdict"]) == (
        False,
        "FAILED (env skipped: --no-env; --require-env)",
    )


def test_a_transitive_override_is_recorded_shown_diffed_and_checked(locked: Example) -> None:
    example = locked
    assert envgen(example, "lock", ENV, "-q")[0] == 0
    before = example.root / "before"
    before.mkdir(exist_ok=True)
    for suffix in (".yml", ".sources.toml"):
        (before / f"{ENV}{suffix}").write_text(
            (example.root / "locks" / f"{ENV}{suffix}").read_text()
        )
    text = example.matrix.read_text()
    example.matrix.write_text(text.replace(OVERRIDE, OVERRIDE + "transitive = true\n"))
    # A re-lock keeps the previous versions where the inputs allow; asked to, demo-peft moves to the
    # newest.
    code, _, err = envgen(example, "lock", ENV, "--upgrade-package", "demo-peft")
    assert code == 0, err
    assert peft(example) == {"0.18.0"}
    told = (
        f"override demo-transformers==4.57.6 (transitive) contradicts: {VIOLATION} "
        "(linux-64, linux-aarch64)"
    )
    assert err.count(told) == 1, err
    sources = example.root / "locks" / f"{ENV}.sources.toml"
    recorded = f'violates = [\n    "{VIOLATION}",\n]\n'
    assert recorded in sources.read_text()

    code, out, _ = envgen(example, "check", ENV, "--no-env", "--no-solve")
    assert code == 0, out
    assert (
        "  ok      static: dependencies: 1 contradiction(s) recorded by transitive overrides\n"
        in out
    )
    assert f"override demo-transformers==4.57.6 (transitive): {VIOLATION}" in out
    code, out, _ = envgen(example, "show", ENV)
    assert f"    violates (in the lock): {VIOLATION}" in out
    document = json.loads(envgen(example, "show", ENV, "--json")[1])["results"][0]
    assert document["overrides"]["demo-transformers"]["violates"] == [VIOLATION]
    code, out, _ = envgen(
        example, "diff", str(before / f"{ENV}.yml"), str(example.root / "locks" / f"{ENV}.yml")
    )
    assert code == 0, out
    assert "upgraded" in out and "demo-peft" in out
    assert (
        "4.57.6 (the matrix validates 4.57.6; rollout's requirements ask for 5.x); "
        f"transitive; violates {VIOLATION}" in out
    )

    # A contradiction nobody recorded: the lock edited by hand.
    sources.write_text(sources.read_text().replace(recorded, ""))
    code, out, _ = envgen(example, "check", ENV, "--no-env", "--no-solve")
    assert code == 4, out
    assert "  failed  static: dependencies: 2 problem(s)\n" in out
    assert f"{VIOLATION}, linux-64 has 4.57.6" in out


def test_a_host_the_lock_has_no_part_for_gets_a_verdict_naming_the_skipped_env(
    locked: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = locked
    assert envgen(example, "lock", ENV, "-q")[0] == 0
    monkeypatch.setattr(check, "host_platform", lambda: "linux-ppc64le")
    code, out, _ = envgen(example, "check", ENV, "--no-solve")
    assert code == 0, out
    assert out.startswith(
        f"check {ENV} (linux-ppc64le): ok (static; solve skipped: --no-solve; "
        "env skipped: the lock has no linux-ppc64le part)\n"
    )
    code, out, _ = envgen(example, "check", ENV, "--no-solve", "--require-env")
    assert code == 4
    assert out.startswith(
        f"check {ENV} (linux-ppc64le): FAILED (env skipped: the lock has no linux-ppc64le part"
    )


def test_an_override_of_the_matrixs_own_pin_is_told_and_recorded_as_what_it_replaces(
    example: Example,
) -> None:
    # The override leaves the matrix's ==4.57.6 for 5.5.4, which rollout's >=5.0 accepts.
    text = example.matrix.read_text()
    pinned = 'requirement = "demo-transformers==4.57.6"'
    assert pinned in text
    example.matrix.write_text(text.replace(pinned, pinned.replace("4.57.6", "5.5.4")))
    code, _, err = envgen(example, "lock", ENV)
    assert code == 0, err
    key = "pip.packages.demo-transformers.version"
    pin = f"demo-transformers==4.57.6 (env-templates/demo.toml: {key})"
    for platform in ("linux-64", "linux-aarch64"):
        told = f"{platform}: override demo-transformers==5.5.4, locked 5.5.4: replaces {pin}"
        assert f"{told}; 1 already satisfied" in err, err
    assert "overrules nothing" not in err
    sources = tomllib.loads((example.root / "locks" / f"{ENV}.sources.toml").read_text())
    (override,) = sources["overrides"]
    recorded = [(r["text"], r["file"], r.get("key"), r.get("source")) for r in override["replaced"]]
    assert recorded == [
        ("demo-transformers==4.57.6", "env-templates/demo.toml", key, None),
        ("demo-transformers>=5.0", "requirements.txt", None, "rollout"),
    ]
    code, out, _ = envgen(example, "check", ENV, "--no-env")
    assert code == 0, out


@pytest.fixture
def extended(example: Example) -> Iterator[Example]:
    """The example with `demo-x`, which extends demo and writes only its name and one pin."""
    path = example.root / "env-templates" / f"{EXTENDED}.toml"
    head = f'schema = 1\nextends = "demo"\n\n[env]\nname = "{EXTENDED}"\n'
    path.write_text(f"{head}\n[pip.packages]\n{PEFT}\n")
    yield example
    path.unlink()
    for lock in (example.root / "locks").glob(f"{EXTENDED}.*"):
        lock.unlink()


EXTENDED = "demo-x"
PEFT = 'demo-peft = { version = "==0.18.0" }'


def test_what_an_extending_matrix_inherits_is_attributed_to_the_file_that_wrote_it(
    extended: Example,
) -> None:
    # demo-peft 0.18.0 needs demo-transformers>=5.0, which the inherited override excludes.
    code, _, err = envgen(extended, "lock", EXTENDED)
    assert code == 3, err
    own = f"env-templates/{EXTENDED}.toml: pip.packages.demo-peft.version"
    inherited = "env-templates/demo.toml: overrides.demo-transformers.requirement"
    assert f"  demo-peft==0.18.0  ({own})\n" in err
    assert f"  demo-transformers==4.57.6  ({inherited})\n" in err
    # Where to add a key is still the env's own file.
    assert f"(requirement + reason) to env-templates/{EXTENDED}.toml" in err
    path = extended.root / "env-templates" / f"{EXTENDED}.toml"
    path.write_text(path.read_text().replace(PEFT, "demo-peft = {}"))
    code, _, err = envgen(extended, "lock", EXTENDED)
    assert code == 0, err
    sources = tomllib.loads((extended.root / "locks" / f"{EXTENDED}.sources.toml").read_text())
    (override,) = sources["overrides"]
    pin = next(r for r in override["replaced"] if r.get("key"))
    pinned = ("env-templates/demo.toml", "pip.packages.demo-transformers.version")
    assert (pin["file"], pin["key"]) == pinned
