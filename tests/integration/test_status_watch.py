"""`envgen status --watch` on the bundled example: upstream moves, and the answer turns with it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from envgen.example.project import GITHUB, PYPI_DISTS, Example, bump_version, republish
from envgen.example.wheels import FixtureDist

from tests.support.closed import closed_port
from tests.support.example import run_envgen
from tests.support.lk_locked import lock_once, locked_example
from tests.support.schemas import validate

ENV = "demo"
DOCS = Path(__file__).resolve().parents[2] / "docs"
MATRIX = f"env-templates/{ENV}.toml"
QUIET: dict[str, list[object]] = {"findings": [], "errors": []}
H = "c" * 40


def lock(example: Example) -> None:
    # The example pins demo-torch ==2.10.0 beside a newer 2.10.1: this pin keeps the watch quiet.
    bump_version(example, "demo-torch", "2.10.0", "2.10.1")
    code, _, err = run_envgen(example, "lock", ENV, "-q")
    assert code == 0, err


@pytest.fixture(scope="module")
def quiet_lock(served: Example) -> dict[str, bytes]:
    """The module's served example with the pin that keeps the watch quiet (see `lock`), locked
    once: for the tests that change neither upstream nor what the servers offer."""
    bump_version(served, "demo-torch", "2.10.0", "2.10.1")
    return lock_once(served, ENV)


@pytest.fixture
def locked(
    served: Example, quiet_lock: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Example]:
    """That example, locked, as `lock` leaves a fresh one; its matrix and channel files put back
    afterwards."""
    channels = {p: p.read_text() for p in (served.root / "channels").glob("*.toml")}
    with locked_example(served, ENV, quiet_lock, monkeypatch) as example:
        yield example
    for path, text in channels.items():
        path.write_text(text)


def watch(example: Example) -> tuple[int, dict[str, Any]]:
    """`status --watch --json`: the exit code and this env's watch, held to the schemas."""
    code, out, _ = run_envgen(example, "status", ENV, "--watch", "--json", "-q")
    document = json.loads(out)
    validate(document, json.loads((DOCS / "cli.schema.json").read_text()))
    statuses = json.loads((DOCS / "status.schema.json").read_text())
    validate(document["results"], statuses)
    (report,) = document["results"]
    return code, report["watch"]


def quiet(example: Example) -> None:
    code, watched = watch(example)
    assert (code, watched) == (0, QUIET), watched


def found(example: Example) -> list[dict[str, Any]]:
    """The findings of a watch that found something (exit code 1)."""
    code, watched = watch(example)
    assert code == 1 and not watched["errors"], watched
    return list(watched["findings"])


def add_watch(example: Example, text: str) -> None:
    example.matrix.write_text(example.matrix.read_text() + "\n" + text)


def test_a_quiet_watch_exits_0_and_a_pin_with_a_newer_release_turns_it(example: Example) -> None:
    lock(example)
    quiet(example)
    code, out, _ = run_envgen(example, "status", ENV, "--watch")
    assert code == 0 and "  watch: the matrix still says what upstream says\n" in out
    republish(example, pypi=(*PYPI_DISTS, FixtureDist("demo-torch", "2.10.1.post1")))
    (finding,) = found(example)
    assert finding["kind"] == "newer-release"
    newer = ["2.10.1.post1"]
    expected = {"pinned": "2.10.1", "index": "pypi", "newer": newer, "newest": newer[0]}
    assert finding["details"] == expected


def test_a_pending_package_that_appears_meeting_what_the_sources_ask(example: Example) -> None:
    post = example.repos["post"]
    listed = post.git("show", "HEAD:requirements-npu.txt")
    post.commit({"requirements-npu.txt": f"{listed}\ndemo-npu>=1.0\n"}, "npu")
    lock(example)
    quiet(example)
    # A release below what post asks is no answer; one that meets it is.
    older = FixtureDist("demo-npu", "0.9.0")
    republish(example, pypi=(*PYPI_DISTS, older))
    quiet(example)
    republish(example, pypi=(*PYPI_DISTS, older, FixtureDist("demo-npu", "1.0.0")))
    (finding,) = found(example)
    assert (finding["kind"], finding["subject"]) == ("installable", "demo-npu")
    assert finding["details"]["versions"] == ["1.0.0"]
    origin = "source post: requirements-npu.txt:4"
    assert finding["details"]["asks"] == [{"requirement": "demo-npu>=1.0", "origin": origin}]
    code, out, _ = run_envgen(example, "status", ENV, "--watch")
    assert code == 1 and "pending demo-npu has a release: pypi offers 1.0.0" in out


def test_a_source_whose_branch_moves_to_requirements_the_matrix_excludes(example: Example) -> None:
    lock(example)
    post = example.repos["post"]
    listed = post.git("show", "HEAD:requirements-npu.txt")
    listed = listed.replace("demo-triton==3.2.2", "demo-triton==3.3.0")
    asks = f"{listed}\ndemo-transformers>=5.0\ndemo-bridge<1\n"
    moved = post.commit({"requirements-npu.txt": asks}, "moves on")
    findings = found(example)
    moved_reqs = [f for f in findings if f["kind"] == "conflict"]
    conflicts = {f["details"]["requirement"]["requirement"]: f for f in moved_reqs}
    # demo-bridge<1 agrees with the matrix, which leaves demo-bridge free: no finding.
    assert set(conflicts) == {"demo-triton==3.3.0", "demo-transformers>=5.0"}
    triton = conflicts["demo-triton==3.3.0"]["details"]
    assert triton["upstream"] == moved
    assert triton["requirement"]["origin"] == "source post: requirements-npu.txt:1"
    pin = f"{MATRIX}: pip.packages.demo-triton.version"
    assert triton["breaks"] == [{"requirement": "demo-triton==3.2.2", "origin": pin}]
    assert "a re-lock fails" in conflicts["demo-triton==3.3.0"]["message"]
    transformers = conflicts["demo-transformers>=5.0"]
    assert "a re-lock overrules it" in transformers["message"]
    assert transformers["details"]["platforms"] == ["linux-aarch64", "linux-64"]


def test_a_new_release_branch_beyond_the_sources_ref(example: Example) -> None:
    rollout = example.repos["rollout"]
    rollout.branch("releases/v0.23.0", "v0.23.0")
    text = example.matrix.read_text().replace('ref = "v0.23.0"', 'ref = "releases/v0.23.0"', 1)
    example.matrix.write_text(text)
    add_watch(example, '[watch.releases]\nrollout = ["releases/v*"]\n')
    lock(example)
    rollout.branch("releases/v0.22.0", "v0.23.0")  # older: no news
    rollout.branch("releases/next", "v0.23.0")  # no version: no news
    quiet(example)
    rollout.branch("releases/v0.24.0rc", "v0.23.0")
    (finding,) = found(example)
    ref, new = "releases/v0.23.0", ["releases/v0.24.0rc"]
    assert finding["details"] == {"ref": ref, "patterns": ["releases/v*"], "newer": new}
    assert finding["message"] == f"source rollout: release refs beyond {ref}: {new[0]}"


def page(repo: str, ref: str, path: str, blob: str, commit: str) -> str:
    return (
        f'[[watch.pages]]\nurl = "{GITHUB}{repo}.git"\nref = "{ref}"\npath = "{path}"\n'
        f'blob = "{blob}"\ncommit = "{commit}"\n'
    )


def test_a_changed_guide_page_is_reported_with_a_compare_link(example: Example) -> None:
    trainer = example.repos["trainer"]
    guide = "docs/install.rst"
    written = trainer.commit({guide: "pip install trainer==0.12.0\n"}, "the guide", branch="docs")
    blob = trainer.git("rev-parse", f"docs:{guide}")
    add_watch(example, page("trainer", "docs", guide, blob, written))
    lock(example)
    quiet(example)
    # Another file of the branch moves: the page did not change.
    trainer.commit({"README.md": "news\n"}, "elsewhere", branch="docs")
    quiet(example)
    now = trainer.commit({guide: "pip install trainer==0.13.0\n"}, "the guide moves", branch="docs")
    (finding,) = found(example)
    assert (finding["kind"], finding["subject"]) == ("page", guide)
    compare = f"{GITHUB}trainer/compare/{written}...{now}"
    assert finding["details"]["compare_url"] == compare and compare in finding["message"]
    assert finding["details"]["upstream_blob"] == trainer.git("rev-parse", f"docs:{guide}")
    trainer.commit({guide: None}, "the guide is gone", branch="docs")
    (finding,) = found(example)
    assert finding["details"]["upstream_blob"] is None and "gone" in finding["message"]


def without_timings(text: str) -> str:
    """git's curl errors say how long a refused connect took ("after 4 ms"): two asks differ in
    that alone."""
    return re.sub(r"after \d+ ms", "after N ms", text)


def test_a_host_that_does_not_answer_is_exit_3_naming_it(locked: Example) -> None:
    example = locked
    port = closed_port()
    nowhere = f"http://127.0.0.1:{port}"
    record = page("x", "main", "a.rst", H, H)
    add_watch(example, record.replace(f"{GITHUB}x.git", f"{nowhere}/g.git"))
    code, watched = watch(example)
    assert code == 3
    (error,) = watched["errors"]
    assert f"127.0.0.1:{port}" in error
    code, out, _ = run_envgen(example, "status", ENV, "--watch")
    assert code == 3 and f"    not asked: {without_timings(error)}" in without_timings(out)
    pypi = example.root / "channels" / "pypi.toml"
    pypi.write_text(pypi.read_text().replace(example.pypi_url, nowhere))
    code, watched = watch(example)
    assert code == 3
    assert any(f"{nowhere}/simple/demo-torch/" in e for e in watched["errors"])


@pytest.mark.parametrize(
    ("record", "key"),
    [
        (page("y", "main", "a", H, H).replace(f"{GITHUB}y.git", "-uhttps://x"), "pages[0].url"),
        (page("y", "--all", "a", H, H), "pages[0].ref"),
        (page("y", "main", "-a", H, H), "pages[0].path"),
        (page("y", "main", "a", H[:12], H), "pages[0].blob"),
        ('[watch.releases]\nrollout = ["--upload-pack=x*"]\n', "releases.rollout[0]"),
        ('[watch.releases]\nrolout = ["v*"]\n', "releases.rolout"),
    ],
)
def test_a_malformed_record_or_pattern_is_exit_2_naming_the_key(
    locked: Example,
    record: str,
    key: str,
) -> None:
    add_watch(locked, record)
    code, _, err = run_envgen(locked, "status", ENV, "--watch")
    assert code == 2
    assert f"{MATRIX}:" in err and f": watch.{key}: " in err


def test_with_no_lock_yet_the_pages_are_watched_and_plain_status_asks_nothing(
    example: Example,
) -> None:
    bump_version(example, "demo-torch", "2.10.0", "2.10.1")
    trainer = example.repos["trainer"]
    written = trainer.commit({"docs/install.rst": "v1\n"}, "the guide", branch="docs")
    trainer.commit({"docs/install.rst": "v2\n"}, "the guide moves", branch="docs")
    add_watch(example, page("trainer", "docs", "docs/install.rst", H, written))
    code, watched = watch(example)
    assert code == 1
    assert [f["kind"] for f in watched["findings"]] == ["page"]
    code, out, _ = run_envgen(example, "status", ENV, "--json", "-q")
    assert code == 1 and json.loads(out)["results"][0]["watch"] is None
