"""diff_locks and its renderings, on Locks built in memory; the bump's renderings are golden
files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
import yaml
from envgen.commands.diff_via import explain
from envgen.lockdiff.changes import LockDiff
from envgen.lockdiff.compare import diff_locks, with_via
from envgen.lockdiff.render import MARKER, OPEN_ROWS, render_json, render_markdown, render_text
from envgen.model import AppliedOverride, Lock, Override, Pending, Submodule
from envgen.urls import compare_url

from tests.support.builders import (
    DIFF_PLATFORMS,
    MINDSPEED,
    NEW_COMMIT,
    OLD_COMMIT,
    VLLM_ASCEND,
    bump,
    conda_entry,
    diff_lock,
    locked_source,
    pip_entry,
)

GOLDEN = Path(__file__).parents[1] / "data" / "golden"
WORKFLOW = Path(__file__).parents[2] / ".github" / "workflows" / "lock-diff.yml"


def no_derived(name: str) -> str | None:
    return None


def diff_bump() -> LockDiff:
    """The bump as `envgen diff` shows it: each pip change naming its root (no derived files)."""
    old, new = bump()
    diff = diff_locks(old, new, labels=("HEAD:locks/a5.yml", "locks/a5.yml"))
    return with_via(diff, explain(old, no_derived), explain(new, no_derived))


@pytest.mark.parametrize(
    ("render", "name"),
    [(render_text, "diff.txt"), (render_markdown, "diff.md"), (render_json, "diff.json")],
)
def test_bump_renders_as_golden(render: Callable[[list[LockDiff]], str], name: str) -> None:
    text = render([diff_bump()])
    golden = GOLDEN / name
    if os.environ.get("REGEN_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def test_bump_lists_each_change_with_its_direction() -> None:
    diff = diff_bump()
    got = {
        (c.platform, c.manager, c.name, c.kind, c.old_version, c.new_version) for c in diff.packages
    }
    want = set()
    for platform in DIFF_PLATFORMS:
        want |= {
            (platform, "conda", "python", "upgraded", "3.11.8", "3.11.9"),
            (platform, "pip", "mbridge", "upgraded", "0.13.0", "0.15.1"),
            (platform, "pip", "transformers", "upgraded", "4.57.5", "4.57.6"),
        }
    assert got == want
    (moved,) = diff.sources
    assert (moved.name, moved.old_short, moved.new_short) == (
        "vllm-ascend",
        "50e87d6aaaaa",
        "1a2b3c4bbbbb",
    )
    assert (
        moved.compare_url
        == f"https://github.com/vllm-project/vllm-ascend/compare/{OLD_COMMIT}...{NEW_COMMIT}"
    )
    assert diff.summary() == {"upgraded": 6, "sources changed": 1}
    assert not diff.loud and not diff.empty


def test_identical_locks_give_an_empty_diff() -> None:
    diff = diff_locks(diff_lock(), diff_lock())
    assert diff.empty
    assert json.loads(render_json([diff]))["changed"] is False


def test_versions_order_by_each_managers_rules() -> None:
    # String order would call 2024.10 older than 2024.9, and 2.0.0rc1 newer than 2.0.0.
    old = diff_lock(python="3.11.10", transformers="5.0.0", mbridge="0.15.1")
    new = diff_lock(python="3.11.9", transformers="5.0.0rc1", mbridge="0.15.1")
    diff = diff_locks(
        msgspec.structs.replace(
            old, conda=old.conda + (conda_entry("tzdata", "2024.9", "linux-64"),)
        ),
        msgspec.structs.replace(
            new, conda=new.conda + (conda_entry("tzdata", "2024.10", "linux-64"),)
        ),
    )
    kinds = {(c.platform, c.name): c.kind for c in diff.packages}
    assert kinds[("linux-64", "python")] == "downgraded"
    assert kinds[("linux-64", "transformers")] == "downgraded"
    assert kinds[("linux-64", "tzdata")] == "upgraded"


def test_same_version_with_another_hash_is_flagged_loudly() -> None:
    old = diff_lock()
    pip_new = tuple(
        msgspec.structs.replace(e, sha256="ee" * 32)
        if e.name == "torch" and e.platform == "linux-aarch64"
        else e
        for e in old.pip
    )
    conda_new = tuple(
        msgspec.structs.replace(e, build="h1_1", sha256="ff" * 32)
        if e.name == "pip" and e.platform == "linux-64"
        else e
        for e in old.conda
    )
    diff = diff_locks(old, msgspec.structs.replace(old, pip=pip_new, conda=conda_new))
    assert [(c.platform, c.manager, c.name, c.kind) for c in diff.loud] == [
        ("linux-64", "conda", "pip", "rebuilt"),
        ("linux-aarch64", "pip", "torch", "replaced"),
    ]
    text = render_text([diff])
    assert "WARNING: same version, different artifact: pip torch 2.10.0 on linux-aarch64" in text
    torch = next(e for e in old.pip if e.name == "torch")
    assert f"sha256 {torch.sha256[:12]} -> eeeeeeeeeeee" in text
    markdown = render_markdown([diff])
    assert "> [!WARNING]" in markdown and "**replaced** ⚠️" in markdown
    assert json.loads(render_json([diff]))["diffs"][0]["warnings"][1].startswith(
        "pip torch 2.10.0 on linux-aarch64"
    )


def test_added_removed_packages_and_platforms() -> None:
    old = diff_lock()
    new = msgspec.structs.replace(
        old,
        platforms=("linux-aarch64", "osx-arm64"),
        conda=old.conda_for("linux-aarch64") + (conda_entry("python", "3.11.8", "osx-arm64"),),
        pip=tuple(e for e in old.pip_for("linux-aarch64") if e.name != "mbridge")
        + (pip_entry("ray", "2.40.0", "linux-aarch64"),),
    )
    diff = diff_locks(old, new)
    assert diff.platforms_added == ("osx-arm64",) and diff.platforms_removed == ("linux-64",)
    kinds = {(c.platform, c.name, c.kind) for c in diff.packages}
    assert ("linux-aarch64", "ray", "added") in kinds
    assert ("linux-aarch64", "mbridge", "removed") in kinds
    assert ("osx-arm64", "python", "added") in kinds
    assert ("linux-64", "torch", "removed") in kinds


def test_small_platform_tables_start_unfolded_and_large_ones_folded() -> None:
    old = diff_lock()
    many = tuple(pip_entry(f"pkg{i:02}", "1.0", "linux-64") for i in range(OPEN_ROWS + 1))
    markdown = render_markdown([diff_locks(old, msgspec.structs.replace(old, pip=old.pip + many))])
    assert (
        f"<details><summary><b>linux-64</b>: {OPEN_ROWS + 1} package changes</summary>" in markdown
    )
    assert "<details open><summary><b>linux-aarch64</b>" not in markdown  # nothing changed there
    bump = render_markdown([diff_bump()])
    assert "<details open><summary><b>linux-aarch64</b>: 3 package changes</summary>" in bump


def test_pip_names_compare_normalised() -> None:
    old = diff_lock()
    new = msgspec.structs.replace(
        old, pip=tuple(msgspec.structs.replace(e, name=e.name.capitalize()) for e in old.pip)
    )
    assert diff_locks(old, new).empty


def test_moved_branch_ref_change_and_cherry_picks() -> None:
    old = diff_lock()
    new_sources = (
        locked_source(
            "mindspeed", MINDSPEED, "master", "9f8e7d6" + "c" * 33, cherry_picks=("abc1234",)
        ),
        locked_source("vllm-ascend", VLLM_ASCEND, "releases/v0.24.0", NEW_COMMIT),
        locked_source("verl", "https://github.com/verl-project/verl.git", "HEAD", "7" * 40),
    )
    diff = diff_locks(old, msgspec.structs.replace(old, sources=new_sources))
    by_name = {s.name: s for s in diff.sources}
    assert by_name["verl"].kind == "added"
    assert by_name["mindspeed"].cherry_picks_added == ("abc1234",)
    assert by_name["mindspeed"].compare_url == (
        "https://gitcode.com/Ascend/MindSpeed/compare/"
        f"{'0c6c0ce' + '0' * 33}...{'9f8e7d6' + 'c' * 33}"
    )
    assert (by_name["vllm-ascend"].old_ref, by_name["vllm-ascend"].new_ref) == (
        "releases/v0.23.0",
        "releases/v0.24.0",
    )
    text = render_text([diff])
    assert "vllm-ascend  releases/v0.23.0 -> releases/v0.24.0: 50e87d6aaaaa -> 1a2b3c4bbbbb" in text
    assert "cherry-pick added abc1234" in text


def test_source_moved_to_another_repository_has_no_compare_link() -> None:
    old = diff_lock()
    fork = locked_source(
        "vllm-ascend", "https://github.com/someone/vllm-ascend.git", "releases/v0.23.0", NEW_COMMIT
    )
    diff = diff_locks(old, msgspec.structs.replace(old, sources=(old.sources[0], fork)))
    (change,) = diff.sources
    assert change.compare_url is None
    assert (
        "url https://github.com/vllm-project/vllm-ascend.git -> "
        "https://github.com/someone/vllm-ascend.git" in (render_text([diff]))
    )


def test_submodules_added_removed_and_moved_are_changes_of_their_source() -> None:
    old = diff_lock()
    kernels = Submodule("csrc/kernels", "https://github.com/org/kernels.git", "1" * 40)
    docs = Submodule("docs/theme", "https://github.com/org/theme.git", "2" * 40)
    recipe = Submodule("recipe", "https://github.com/org/recipe.git", "3" * 40)

    def with_subs(*subs: Submodule) -> Lock:
        first, *rest = old.sources
        return msgspec.structs.replace(
            old, sources=(msgspec.structs.replace(first, submodules=subs), *rest)
        )

    moved = msgspec.structs.replace(kernels, commit="4" * 40)
    forked = msgspec.structs.replace(docs, url="https://github.com/fork/theme.git", commit="5" * 40)
    diff = diff_locks(with_subs(kernels, docs, recipe), with_subs(moved, forked))
    (change,) = diff.sources
    # the source itself did not move
    assert (change.old_commit, change.kind) == (change.new_commit, "changed")
    assert [(s.path, s.kind) for s in change.submodules] == [
        ("csrc/kernels", "changed"),
        ("docs/theme", "changed"),
        ("recipe", "removed"),
    ]
    text = render_text([diff])
    assert (
        "submodule csrc/kernels: 111111111111 -> 444444444444 "
        f"{compare_url(kernels.url, '1' * 40, '4' * 40)}" in text
    )
    assert (
        "submodule docs/theme: 222222222222 -> 555555555555 "
        "(https://github.com/org/theme.git -> https://github.com/fork/" in text
    )
    assert "submodule recipe removed: https://github.com/org/recipe.git @ 333333333333" in text
    assert "submodule recipe added" in render_text([diff_locks(with_subs(), with_subs(recipe))])
    assert diff_locks(with_subs(kernels), with_subs(kernels)).empty


def test_overrides_pending_and_inputs() -> None:
    override = AppliedOverride(Override("numpy", "numpy<2", "torch 2.10 wheels need numpy 1"))
    old = diff_lock(inputs=(("matrix", "1" * 64), ("channel:pypi", "2" * 64)))
    new = diff_lock(
        overrides=(override,),
        pending=(Pending("torch-npu", "due Q3"), Pending("cann", "no public version")),
        inputs=(("matrix", "3" * 64), ("channel:pypi", "2" * 64)),
    )
    items = {(i.section, i.name, i.kind) for i in diff_locks(old, new).items}
    assert items == {
        ("override", "numpy", "added"),
        ("pending", "torch-npu", "changed"),
        ("pending", "cann", "added"),
        ("input", "matrix", "changed"),
    }


def test_credentials_never_appear_in_renderings() -> None:
    old = diff_lock()
    secret = msgspec.structs.replace(
        old.pip[0],
        url="https://user:s3cret@private.example.org/mbridge-0.14.0-py3-none-any.whl",
        version="0.14.0",
    )
    diff = diff_locks(old, msgspec.structs.replace(old, pip=(secret,) + old.pip[1:]))
    for render in (render_text, render_markdown, render_json):
        assert "s3cret" not in render([diff])


@pytest.mark.parametrize(
    ("url", "link"),
    [
        ("https://github.com/o/r.git", "https://github.com/o/r/compare/a...b"),
        ("git@github.com:o/r.git", "https://github.com/o/r/compare/a...b"),
        (
            "https://gitcode.com/Ascend/MindSpeed",
            "https://gitcode.com/Ascend/MindSpeed/compare/a...b",
        ),
        ("https://gitlab.com/o/r.git", None),
        ("file:///tmp/repo", None),
        # Markdown links and HTML in a pull request comment: an owner or repository GitHub would not
        # allow gets no link, so `)` cannot end the link and `<!--` cannot hide the rest of the
        # comment.
        ("https://github.com/o)<!--/r", None),
        ("https://github.com/o/r)![x](https:", None),
        ("git@github.com:o/r<img>.git", None),
    ],
)
def test_compare_url(url: str, link: str | None) -> None:
    assert compare_url(url, "a", "b") == link


def test_no_changes_render() -> None:
    assert render_text([]) == "no lock changes\n"
    assert render_markdown([]).startswith(MARKER)
    assert json.loads(render_json([])) == {"changed": False, "diffs": []}


def test_workflow_runs_the_diff_and_updates_one_marked_comment() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as True.
    trigger = workflow.get("on", workflow.get(True))
    assert trigger["pull_request"]["paths"] == ["locks/**"]
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "pip install -e ." in runs
    assert 'envgen diff --git "origin/$BASE_REF" --format markdown' in runs
    diff_step = next(s for s in steps if "envgen diff" in s.get("run", ""))
    assert diff_step["env"]["BASE_REF"] == "${{ github.base_ref }}"
    # Event data reaches scripts through the environment only, never as shell text.
    assert "${{" not in runs
    script = next(s for s in steps if s.get("uses", "").startswith("actions/github-script"))[
        "with"
    ]["script"]
    assert MARKER in script and "updateComment" in script and "createComment" in script


_SCRIPT_HARNESS = """
const calls = [];
const comments = JSON.parse(process.env.COMMENTS);
const github = {
  paginate: async () => comments,
  rest: { issues: {
    listComments: "listComments",
    updateComment: async (args) => calls.push(["update", args.comment_id]),
    createComment: async (args) => calls.push(["create", args.issue_number]),
  } },
};
const context = {
  repo: { owner: "o", repo: "r" },
  issue: { number: 7 },
  payload: { pull_request: { base: { ref: "main" } } },
};
(async () => { SCRIPT
  console.log(JSON.stringify(calls));
})();
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the workflow's script")
def test_the_comment_updated_is_the_workflows_own_not_one_quoting_the_marker(
    tmp_path: Path,
) -> None:
    # Anyone can comment with the marker; updating that comment would put the lock diff where its
    # author can edit it afterwards (a forged "No lock changes."). Only the bot's own comment is
    # updated.
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    script = next(s for s in steps if s.get("uses", "").startswith("actions/github-script"))[
        "with"
    ]["script"]
    (tmp_path / "lock-diff.md").write_text(f"{MARKER}\n## envgen lock diff\n")
    harness = tmp_path / "harness.js"
    harness.write_text(_SCRIPT_HARNESS.replace("SCRIPT", script))

    def run(comments: list[dict[str, object]]) -> list[list[object]]:
        env = {**os.environ, "COMMENTS": json.dumps(comments)}
        done = subprocess.run(
            ["node", str(harness)], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    forged = {"id": 1, "body": f"{MARKER} quoted", "user": {"login": "mallory", "type": "User"}}
    own = {
        "id": 2,
        "body": f"{MARKER}\n## envgen lock diff",
        "user": {"login": "github-actions[bot]", "type": "Bot"},
    }
    assert run([forged]) == [["create", 7]]
    assert run([forged, own]) == [["update", 2]]


def test_hostile_roots_give_one_escaped_line_and_a_cycle_no_root() -> None:
    # a and b require each other and nothing else brings them in; c's override reason carries an
    # escape sequence and a newline; the platform names a file elsewhere, which is never read.
    platform = "../../etc"
    cycle = (
        pip_entry("a", "1.0", platform, depends=(("b", ">=1"),)),
        pip_entry("b", "1.0", platform, depends=(("a", ">=1"),)),
        pip_entry("c", "1.0", platform),
    )
    reason = "red \x1b[31m\nnext line"
    old = msgspec.structs.replace(diff_lock(), platforms=(platform,), conda=(), pip=(), sources=())
    new = msgspec.structs.replace(
        old, pip=cycle, overrides=(AppliedOverride(Override("c", "c==1.0", reason)),)
    )
    asked: list[str] = []

    def derived(name: str) -> str | None:
        asked.append(name)
        return None

    diff = with_via(diff_locks(old, new), explain(old, derived), explain(new, derived))
    assert {c.name: c.via for c in diff.packages} == {
        "a": None,
        "b": None,
        "c": "override: red \\x1b[31m next line",
    }
    assert asked == []
    assert "(via override: red \\x1b[31m next line)" in render_text([diff])
