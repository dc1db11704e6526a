"""Every conflict of the direct layer in one run, on the bundled example: lock, --json, check."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.example.project import PYPI_DISTS, Example, republish

from tests.support.example import restored_example, run_envgen, served_example, use_git_config
from tests.support.schemas import validate

ENV = "demo"
CLI_SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "cli.schema.json"
OVERRIDE = (
    '[overrides.demo-transformers]\nrequirement = "demo-transformers==4.57.6"\n'
    'reason = "the matrix validates 4.57.6; rollout\'s requirements ask for 5.x"\n'
)
TRITON = 'demo-triton = { version = "==3.2.2", index = "extra" }'
PEFT, PEFT_018 = "demo-peft = {}", 'demo-peft = { version = "==0.18.0" }'


@pytest.fixture
def example(served: Example, monkeypatch: pytest.MonkeyPatch) -> Iterator[Example]:
    with restored_example(served, ENV, monkeypatch) as example:
        yield example


def two_conflicts(example: Example) -> None:
    """The matrix without its transformers override (rollout asks >=5.0 of what it pins ==4.57.6),
    and with a triton pin post's requirements contradict (post asks ==3.2.2 of the explicit index,
    which has only that)."""
    text = example.matrix.read_text()
    assert OVERRIDE in text and TRITON in text
    moved = TRITON.replace("3.2.2", "3.2.1")
    example.matrix.write_text(text.replace(OVERRIDE, "").replace(TRITON, moved))


def test_two_conflicting_packages_are_named_in_one_run_each_with_its_origins(
    example: Example,
) -> None:
    two_conflicts(example)
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 3, err
    assert "no release meets every requirement on demo-transformers, demo-triton" in err
    transformers = err.index("  demo-transformers (pypi offers 5.5.4, 4.57.6):")
    triton = err.index("  demo-triton (extra offers 3.2.2):")
    matrix = "env-templates/demo.toml: pip.packages"
    assert f"    demo-transformers==4.57.6  ({matrix}.demo-transformers.version)" in err
    assert "    demo-transformers>=5.0  (source rollout: requirements.txt:1)" in err
    assert f"    demo-triton==3.2.1  ({matrix}.demo-triton.version)" in err
    assert "    demo-triton==3.2.2  (source post: requirements-npu.txt:1)" in err
    # The decoy demo-triton 9.9.9 on pypi is not offered: a pinned package comes from its index.
    assert "9.9.9" not in err[triton : err.index("an override in the matrix")]
    assert transformers < triton < err.index("then uv says:") < err.index("No solution found")
    assert not list((example.root / "locks").glob(f"{ENV}.*"))


def test_the_suggested_overrides_are_toml_that_settles_the_lock_once_reasons_are_filled(
    example: Example,
) -> None:
    two_conflicts(example)
    code, out, _ = run_envgen(example, "lock", ENV, "--json")
    assert code == 3
    document = json.loads(out)
    validate(document, json.loads(CLI_SCHEMA.read_text()))
    conflicts = document["error"]["conflicts"]
    by_name = {(c["name"], c["platform"]): c for c in conflicts}
    assert {name for name, _ in by_name} == {"demo-transformers", "demo-triton"}
    transformers = next(c for (name, _), c in by_name.items() if name == "demo-transformers")
    assert transformers["index"] == "pypi"
    assert transformers["offered"] == ["4.57.6", "5.5.4"]
    assert [o["origin"] for o in transformers["origins"]] == [
        "env-templates/demo.toml: pip.packages.demo-transformers.version",
        "source rollout: requirements.txt:1",
    ]
    assert transformers["override"]["requirement"] == "demo-transformers==5.5.4"
    pin = "env-templates/demo.toml: pip.packages.demo-transformers.version"
    assert transformers["override"]["overrules"] == [pin]
    snippets = {c["name"]: c["override"]["toml"] for c in conflicts}
    overrides = tomllib.loads("\n".join(snippets.values()))["overrides"]
    assert overrides["demo-triton"]["requirement"] == "demo-triton==3.2.2"
    filled = "\n\n".join(s.replace('reason = ""', 'reason = "decided"') for s in snippets.values())
    example.matrix.write_text(example.matrix.read_text() + "\n" + filled + "\n")
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 0, err


def test_a_deeper_conflict_is_left_to_uvs_explanation(example: Example) -> None:
    """demo-peft 0.18.0 needs demo-transformers>=5.0, which the override excludes: the direct layer
    holds no conflict (each pin is offered), and uv's explanation is the message."""
    example.matrix.write_text(example.matrix.read_text().replace(PEFT, PEFT_018))
    code, out, err = run_envgen(example, "lock", ENV, "--json")
    assert code == 3
    error = json.loads(out)["error"]
    assert "conflicts" not in error
    assert "no release meets" not in error["message"]
    assert "uv says:" in error["message"] and "demo-peft" in error["message"]
    # What uv resolves is the direct layer: the matrix's pins and the sources' requirements.
    assert "the direct layer depends on demo-peft==0.18.0" in error["message"]
    assert "the matrix depends" not in error["message"] and "envgen-inputs" not in error["message"]


def test_a_deeper_conflict_still_follows_the_direct_layers(example: Example) -> None:
    two_conflicts(example)
    text = example.matrix.read_text().replace(PEFT, PEFT_018)
    example.matrix.write_text(text + "\n" + OVERRIDE)
    code, _, err = run_envgen(example, "lock", ENV)
    assert code == 3
    assert "no release meets every requirement on demo-triton" in err
    assert "demo-transformers (pypi offers" not in err
    assert "then uv says:" in err


@pytest.fixture
def own(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Example]:
    """An example of the test's own: its index loses releases."""
    with served_example(tmp_path_factory, tmp_path / "example") as served:
        use_git_config(served.gitconfig, monkeypatch)
        yield served


def test_checks_re_solve_names_every_conflict_when_the_index_drops_locked_releases(
    own: Example, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert run_envgen(own, "lock", ENV, "-q")[0] == 0
    # The locked demo-transformers 4.57.6 and demo-bridge 0.2.0 are gone from the index and caches.
    gone = {("demo-transformers", "4.57.6"), ("demo-bridge", "0.2.0")}
    republish(own, pypi=[d for d in PYPI_DISTS if (d.name, d.version) not in gone])
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache-later"))
    code, out, err = run_envgen(own, "check", ENV, "--no-env", "--json")
    assert code == 4, out + err
    document = json.loads(out)
    validate(document, json.loads(CLI_SCHEMA.read_text()))
    step = next(s for s in document["results"][0]["steps"] if s["name"] == "solve: same pip set")
    assert step["status"] == "failed"
    assert {c["name"] for c in step["conflicts"]} == {"demo-transformers", "demo-bridge"}
    bridge = next(c for c in step["conflicts"] if c["name"] == "demo-bridge")
    assert [(o["requirement"], o["origin"]) for o in bridge["origins"]] == [
        ("demo-bridge==0.2.0", f"locks/{ENV}.yml: the locked demo-bridge"),
        ("demo-bridge", "source rollout: requirements.txt:2"),
    ]
    assert bridge["offered"] == ["0.1.0"]
    headline = "no release meets every requirement on demo-bridge, demo-transformers"
    assert any(headline in p for p in step["problems"])
