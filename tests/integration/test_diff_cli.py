"""`envgen diff` end to end: lock files written by lockio.store, `REV:path` read with real git, exit
codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner, Result
from envgen.cli import cli
from envgen.example.gitrepos import GitRepo
from envgen.lockio.exports.names import requirements_name
from envgen.lockio.exports.requirements_txt import render_requirements
from envgen.lockio.store import write_lock
from envgen.model import Lock, Origin, PipPackage, TracedRequirement
from envgen.project import Project
from envgen.recipe.render import render_recipe

from tests.support.builders import DIFF_PLATFORMS, bump, diff_lock, make_matrix, pip_entry
from tests.support.schemas import validate

GOLDEN = Path(__file__).parents[1] / "data" / "golden"
DOCS = Path(__file__).parents[2] / "docs"


def put(root: Path, lock: Lock) -> None:
    (root / "locks").mkdir(exist_ok=True)
    write_lock(Project(root), lock.env, lock, render_recipe(lock))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitRepo]:
    """A git repository whose HEAD holds the old lock and whose work tree holds the bumped one."""
    old, new = bump()
    repo = GitRepo.create(tmp_path / "project", {"README": "envgen project\n"})
    for marker in ("env-templates", "channels"):  # what makes it a project `diff --git` finds
        (repo.path / marker).mkdir()
    put(repo.path, old)
    repo.git("add", "locks")
    repo.commit({}, "lock a5")
    put(repo.path, new)
    monkeypatch.chdir(repo.path)
    yield repo


def envgen(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize(
    ("fmt", "golden"), [("text", "diff.txt"), ("markdown", "diff.md"), ("json", "diff.json")]
)
def test_rev_path_against_work_tree_matches_golden(repo: GitRepo, fmt: str, golden: str) -> None:
    result = envgen("diff", "HEAD:locks/a5.yml", "locks/a5.yml", "--format", fmt)
    assert result.exit_code == 0, result.output
    expected = (GOLDEN / golden).read_text(encoding="utf-8")
    if fmt == "json":  # the envelope every --json prints, its results the diffs
        document = json.loads(result.stdout)
        assert (document["command"], document["ok"]) == ("diff", True)
        validate(document, json.loads((DOCS / "cli.schema.json").read_text(encoding="utf-8")))
        assert document["results"] == json.loads(expected)["diffs"]
        assert envgen("diff", "HEAD:locks/a5.yml", "locks/a5.yml", "--json").stdout == result.stdout
    else:
        assert result.stdout == expected


def test_git_mode_compares_every_changed_lock(repo: GitRepo) -> None:
    result = envgen("diff", "--git", "--format", "text")
    assert result.exit_code == 0, result.output
    assert result.stdout == (GOLDEN / "diff.txt").read_text(encoding="utf-8")


def test_git_mode_skips_unchanged_locks_and_reports_added_ones(repo: GitRepo) -> None:
    repo.git("add", "locks")
    repo.commit({}, "bump a5")
    other = diff_lock(env="a2a3")
    put(repo.path, other)
    data = json.loads(envgen("diff", "--git", "HEAD", "--format", "json").stdout)
    assert [d["env"] for d in data["results"]] == ["a2a3"]
    (diff,) = data["results"]
    assert diff["old_label"] == "HEAD: none" and diff["new_label"] == "locks/a2a3.yml"
    assert {p["kind"] for p in diff["packages"]} == {"added"}
    assert {s["name"] for s in diff["sources"]} == {"mindspeed", "vllm-ascend"}


def test_two_revisions(repo: GitRepo) -> None:
    repo.git("add", "locks")
    repo.commit({}, "bump a5")
    result = envgen("diff", "HEAD~1:locks/a5.yml", "HEAD:locks/a5.yml", "--format", "json")
    data = json.loads(result.stdout)
    assert data["results"][0]["summary"] == {"upgraded": 6, "sources changed": 1}
    assert envgen("diff", "HEAD:locks/a5.yml", "locks/a5.yml", "--exit-code").exit_code == 0


def test_exit_code(repo: GitRepo) -> None:
    assert envgen("diff", "HEAD:locks/a5.yml", "locks/a5.yml", "--exit-code").exit_code == 1
    same = envgen("diff", "locks/a5.yml", "locks/a5.yml", "--exit-code")
    assert same.exit_code == 0 and same.stdout == "no lock changes\n"
    assert envgen("diff", "--git", "--exit-code", "--format", "markdown").exit_code == 1


def test_yml_without_its_sources_toml_compares_packages(repo: GitRepo, tmp_path: Path) -> None:
    lone = tmp_path / "old.yml"
    lone.write_text(repo.git("show", "HEAD:locks/a5.yml") + "\n", encoding="utf-8")
    data = json.loads(envgen("diff", str(lone), "locks/a5.yml", "--format", "json").stdout)
    (diff,) = data["results"]
    assert diff["summary"] == {"upgraded": 6} and diff["sources"] == []


def test_a_rebuilt_artifact_is_flagged_through_the_files(repo: GitRepo) -> None:
    old = diff_lock()
    rebuilt = tuple(
        msgspec.structs.replace(e, sha256="ee" * 32) if e.name == "torch" else e for e in old.pip
    )
    put(repo.path, msgspec.structs.replace(old, pip=rebuilt))
    result = envgen("diff", "HEAD:locks/a5.yml", "locks/a5.yml", "--exit-code")
    assert result.exit_code == 1
    assert (
        "WARNING: same version, different artifact: pip torch 2.10.0 on linux-64" in result.stdout
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("locks/nope.yml", "locks/a5.yml"), "no lock file at"),
        (("NOPE:locks/a5.yml", "locks/a5.yml"), "unknown git revision 'NOPE'"),
        (("HEAD:locks/gone.yml", "locks/a5.yml"), "locks/gone.yml does not exist at revision HEAD"),
        (("--", "--output=x:locks/a5.yml", "locks/a5.yml"), "'--output=x' is not a git revision"),
    ],
)
def test_bad_inputs_exit_2_naming_what(repo: GitRepo, args: tuple[str, ...], message: str) -> None:
    result = CliRunner().invoke(cli, ["diff", *args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_git_mode_with_a_bad_rev(repo: GitRepo) -> None:
    result = CliRunner().invoke(cli, ["diff", "--git", "no-such-branch"])
    assert result.exit_code == 2 and "unknown git revision 'no-such-branch'" in result.stderr


def test_rev_path_outside_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["diff", "HEAD:locks/a5.yml", "HEAD:locks/a5.yml"])
    assert result.exit_code == 2 and "not inside a git repository" in result.stderr


def test_git_mode_reports_a_deleted_lock(repo: GitRepo) -> None:
    for name in ("a5.yml", "a5.sources.toml", "a5.install.sh"):
        (repo.path / "locks" / name).unlink()
    data = json.loads(envgen("diff", "--git", "--format", "json").stdout)
    (diff,) = data["results"]
    assert (diff["old_label"], diff["new_label"]) == ("HEAD:locks/a5.yml", "deleted")
    assert {p["kind"] for p in diff["packages"]} == {"removed"}
    assert diff["platforms_removed"] == ["linux-64", "linux-aarch64"]


def test_a_lock_file_named_as_markup_is_refused_not_rendered(repo: GitRepo) -> None:
    # lock-diff.yml posts this markdown on a pull request, which can name its files: a backtick and
    # `<!--` in a lock's file name would end the heading's code span and hide the rest of the
    # comment.
    yml = (repo.path / "locks" / "a5.yml").read_text()
    (repo.path / "locks" / "x`<!--.yml").write_text(yml)
    result = envgen("diff", "--git", "--format", "markdown")
    assert result.exit_code == 2, result.output
    assert "<!--" not in result.stdout
    assert "locks/x`<!--.yml: env name 'x`<!--' must start with a letter or digit" in result.stderr


def test_a_lock_file_that_is_a_symbolic_link_is_refused(repo: GitRepo, tmp_path: Path) -> None:
    secret = tmp_path / "secret.yml"
    secret.write_text("version: 1\n")
    (repo.path / "locks" / "a5.yml").unlink()
    (repo.path / "locks" / "a5.yml").symlink_to(secret)
    result = envgen("diff", "--git", "--format", "markdown")
    assert result.exit_code == 2, result.output
    assert "a5.yml is a symbolic link" in result.stderr


def with_accelerate(lock: Lock, origin: Origin | None) -> Lock:
    """`lock` holding accelerate 1.0 on each platform, declared by vllm-ascend at `origin` (none:
    named by no source)."""
    added = tuple(pip_entry("accelerate", "1.0", p) for p in DIFF_PLATFORMS)
    declared = (TracedRequirement("accelerate>=1.0", origin),) if origin else ()
    sources = tuple(
        msgspec.structs.replace(s, requirements=declared) if s.source.name == "vllm-ascend" else s
        for s in lock.sources
    )
    return msgspec.structs.replace(lock, pip=lock.pip + added, sources=sources)


def vias(result: Result, name: str) -> dict[str, tuple[str, str | None]]:
    (diff,) = json.loads(result.stdout)["results"]
    return {p["platform"]: (p["kind"], p["via"]) for p in diff["packages"] if p["name"] == name}


def test_a_package_a_source_declares_names_its_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    origin = Origin("requirements.txt", line=12, source="vllm-ascend")
    for side, lock in (("old", diff_lock()), ("new", with_accelerate(diff_lock(), origin))):
        (tmp_path / side).mkdir()
        put(tmp_path / side, lock)
    args = ("diff", "old/locks/a5.yml", "new/locks/a5.yml")
    assert vias(envgen(*args, "--json"), "accelerate") == {
        p: ("added", "vllm-ascend requirements.txt:12") for p in DIFF_PLATFORMS
    }
    lines = [line.split() for line in envgen(*args).stdout.splitlines() if "accelerate" in line]
    assert lines == [
        ["pip", "accelerate", "added", "1.0", "(via", "vllm-ascend", "requirements.txt:12)"]
    ] * len(DIFF_PLATFORMS)


def test_a_removed_package_names_the_root_it_had_on_the_old_side(repo: GitRepo) -> None:
    # HEAD pins accelerate in the matrix (its derived requirements files say so); the work tree
    # drops it, and keeps the bump, whose packages name their roots on the new side.
    old, new = bump()
    old = with_accelerate(old, None)
    matrix = make_matrix(
        "a5", platforms=DIFF_PLATFORMS, packages=(PipPackage("accelerate", "==1.0"),)
    )
    derived = [
        (requirements_name("a5", p), render_requirements(old, p, matrix)) for p in old.platforms
    ]
    write_lock(Project(repo.path), "a5", old, render_recipe(old), derived)
    repo.git("add", "locks")
    repo.commit({}, "pin accelerate")
    put(repo.path, new)
    result = envgen("diff", "--git", "--json")
    assert vias(result, "accelerate") == {
        p: ("removed", "matrix pip.packages.accelerate") for p in DIFF_PLATFORMS
    }
    assert vias(result, "transformers") == {
        p: ("upgraded", "vllm-ascend requirements.txt:38") for p in DIFF_PLATFORMS
    }
    text = envgen("diff", "--git", "--format", "markdown").stdout
    assert "| removed | pip | `accelerate` | 1.0 | - | matrix pip.packages.accelerate |" in text
