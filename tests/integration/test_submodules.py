"""`envgen lock`, the recipe, `status` and `diff` on a source with nested submodules at relative
URLs.

The source is named by a canonical GitHub URL that a git mirror rule (`insteadOf`) sends to a local
repository, as on a cluster behind a mirror: its `../child` submodule resolves to the canonical
`.../child` URL, which the lock records and another mirror rule serves. Conda and pip come from the
example's servers on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from envgen.commits import SHORT_SHA
from envgen.errors import InputError, ResolutionError
from envgen.example.gitrepos import GitRepo
from envgen.example.project import Example
from envgen.example.srcprojects import backend_project
from envgen.lockio.store import read_lock
from envgen.model import FILES, Lock, Source, Submodule
from envgen.project import Project
from envgen.recipe.render import render_recipe
from envgen.resolve.sources.pins import resolve_sources

from tests.support.builders import at, make_matrix
from tests.support.example import empty_git_config, restored_example, run_envgen
from tests.support.submodules import NestedSubmodules, locked_parent, nested_submodules
from tests.support.venvs import fresh_venv

ENV = "subs"
CANONICAL = "https://github.com/envgen-demo/"
MATRIX = f"""\
schema = 1

[env]
name = "{ENV}"
description = "a source with nested submodules"
platforms = ["linux-64"]
python = "3.11"

[system]
glibc = "2.28"

[system.cann]
version = "pending"
note = "stands in for CANN"

[conda]
channels = ["demo-forge"]
specs = ["python 3.11.*", "pip"]

[pip]
indexes = ["pypi"]

[sources.parentpkg]
url = "{CANONICAL}parentpkg.git"
ref = "main"
dependencies = "files"
"""


@dataclass(frozen=True)
class Subs:
    example: Example
    repos: NestedSubmodules

    @property
    def project(self) -> Project:
        return Project(self.example.root)

    def lock(self, *args: str) -> None:
        code, _, err = run_envgen(self.example, "lock", ENV, *args)
        assert code == 0, err

    def read(self) -> Lock:
        lock = read_lock(self.project, ENV)
        assert lock is not None
        return lock

    def recipe(self, prefix: Path) -> subprocess.CompletedProcess[str]:
        """Run locks/subs.install.sh on `prefix` with the example's git configuration (its mirror
        rules)."""
        env = {
            **os.environ,
            "GIT_CONFIG_GLOBAL": str(self.example.gitconfig),
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        script = self.project.locks_dir / f"{ENV}.install.sh"
        return subprocess.run(
            ["sh", str(script), "--prefix", str(prefix)], capture_output=True, text=True, env=env
        )


@pytest.fixture
def subs(served: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Subs]:
    repos = nested_submodules(tmp_path / "up")
    with restored_example(served, ENV, monkeypatch) as example:
        template = example.root / "env-templates" / f"{ENV}.toml"
        template.write_text(MATRIX)
        config = example.gitconfig.read_text()
        mirrors = [(repos.parent, "parentpkg.git"), (repos.child, "child"), (repos.grand, "grand")]
        rules = "".join(
            f'[url "{repo.url}"]\n\tinsteadOf = {CANONICAL}{name}\n' for repo, name in mirrors
        )
        # git clones submodules over file:// (the local mirrors) only when allowed
        example.gitconfig.write_text(config + rules + '[protocol "file"]\n\tallow = always\n')
        monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
        yield Subs(example, repos)
        example.gitconfig.write_text(config)
        template.unlink()


def test_the_lock_records_each_gitlink_and_the_recipe_checks_out_exactly_those(
    subs: Subs, tmp_path: Path, pip_site_packages: Path
) -> None:
    repos = subs.repos
    subs.lock()
    (parent,) = subs.read().sources
    # canonical URLs, the relative ones resolved against the parent's (never the mirror the fetch
    # went to)
    assert parent.submodules == (
        Submodule("csrc/kernels", f"{CANONICAL}child", repos.child_locked),
        Submodule("csrc/kernels/third_party/grand", f"{CANONICAL}grand", repos.grand_locked),
    )
    text = (subs.project.locks_dir / f"{ENV}.sources.toml").read_text()
    assert (
        f'path = "csrc/kernels"\nurl = "{CANONICAL}child"\ncommit = "{repos.child_locked}"' in text
    )
    assert str(tmp_path) not in text

    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    proc = subs.recipe(prefix)
    assert proc.returncode == 0, proc.stderr
    kernels = prefix / "src" / "parentpkg" / "csrc" / "kernels"
    assert GitRepo(kernels).rev() == repos.child_locked
    assert GitRepo(kernels / "third_party" / "grand").rev() == repos.grand_locked
    assert (kernels / "third_party" / "grand" / "grand.txt").read_text() == "locked\n"

    # The submodules' branches move upstream: nothing in the lock moves, and status reports no
    # drift.
    repos.child.commit({"kernel.txt": "moved again\n"}, "upstream moves again")
    repos.grand.commit({"grand.txt": "moved again\n"}, "upstream moves again")
    before = {p.name: p.read_bytes() for p in subs.project.locks_dir.glob(f"{ENV}.*")}
    subs.lock("--update-all", "--force")
    assert {p.name: p.read_bytes() for p in subs.project.locks_dir.glob(f"{ENV}.*")} == before
    code, out, err = run_envgen(subs.example, "status", ENV, "--json")
    assert code == 0, err
    (report,) = json.loads(out)["results"]
    assert report["drifted"] == [] and [d["name"] for d in report["drift"]] == ["parentpkg"]


def test_a_parent_bump_that_moves_a_gitlink_shows_in_diff_and_moves_the_checkout(
    subs: Subs, tmp_path: Path, pip_site_packages: Path
) -> None:
    repos = subs.repos
    subs.lock()
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    first = subs.recipe(prefix)
    assert first.returncode == 0, first.stderr
    old = tmp_path / "old"
    old.mkdir()
    for name in (f"{ENV}.yml", f"{ENV}.sources.toml"):
        shutil.copy(subs.project.locks_dir / name, old / name)
    moved = repos.child.rev()
    repos.parent.git("update-index", "--cacheinfo", f"160000,{moved},csrc/kernels")
    bumped = repos.parent.commit({}, "bump kernels")
    code, out, err = run_envgen(subs.example, "lock", ENV, "--update", "parentpkg", "--json")
    assert code == 0, err
    (summary,) = json.loads(out)["results"]
    assert summary["sources_moved"][1] == {
        "manager": "submodule",
        "name": "parentpkg/csrc/kernels",
        "old": repos.child_locked,
        "new": moved,
        "reason": "the gitlink at parentpkg's new commit",
    }
    assert len(summary["sources_moved"]) == 2  # the source and the one submodule that moved with it
    (parent,) = subs.read().sources
    assert parent.commit == bumped
    # the moved child records the grand submodule at the same commit
    assert [(s.path, s.commit) for s in parent.submodules] == [
        ("csrc/kernels", moved),
        ("csrc/kernels/third_party/grand", repos.grand_locked),
    ]

    new = str(subs.project.locks_dir / f"{ENV}.yml")
    code, out, err = run_envgen(subs.example, "diff", str(old / f"{ENV}.yml"), new)
    assert code == 0, err
    short = f"{repos.child_locked[:SHORT_SHA]} -> {moved[:SHORT_SHA]}"
    link = f"https://github.com/envgen-demo/child/compare/{repos.child_locked}...{moved}"
    assert f"submodule csrc/kernels: {short} {link}" in out
    assert "third_party/grand" not in out
    # the same prefix again: the parent moves, and its submodule with it
    again = subs.recipe(prefix)
    assert again.returncode == 0, again.stderr
    assert GitRepo(prefix / "src" / "parentpkg" / "csrc" / "kernels").rev() == moved
    assert (
        prefix / "src" / "parentpkg" / "csrc" / "kernels" / "kernel.txt"
    ).read_text() == "moved\n"

    code, out, _ = run_envgen(subs.example, "diff", str(old / f"{ENV}.yml"), new, "--json")
    (diff,) = json.loads(out)["results"]
    (source,) = diff["sources"]
    assert source["submodules"] == [
        {
            "path": "csrc/kernels",
            "kind": "changed",
            "old_url": f"{CANONICAL}child",
            "new_url": f"{CANONICAL}child",
            "old_commit": repos.child_locked,
            "new_commit": moved,
            "compare_url": link,
        }
    ]


def test_a_tampered_submodule_commit_is_caught(
    subs: Subs, tmp_path: Path, pip_site_packages: Path
) -> None:
    """A lock edited to name another commit of a submodule: well-formed, the recipe (run without
    envgen) finds the tree records another one and envgen check fails the lock's integrity;
    malformed, no command reads it."""
    repos = subs.repos
    subs.lock()
    sources_toml = subs.project.locks_dir / f"{ENV}.sources.toml"
    text = sources_toml.read_text()
    other = repos.child.rev()
    sources_toml.write_text(text.replace(repos.child_locked, other))
    tampered = subs.read()
    assert tampered.sources[0].submodules[0].commit == other
    # as if the recipe were rendered again from the edited lock, so it matches what the lock renders
    (subs.project.locks_dir / f"{ENV}.install.sh").write_text(render_recipe(tampered))
    proc = subs.recipe(fresh_venv(tmp_path / "env", pip_site_packages))
    assert proc.returncode != 0
    assert (
        f"csrc/kernels {repos.child_locked}" in proc.stderr
        and f"csrc/kernels {other}" in proc.stderr
    )
    assert "pip install" not in proc.stderr
    # envgen check refuses it before any install: the files no longer hash to what the lock recorded
    # (exit 4)
    code, out, err = run_envgen(subs.example, "check", ENV, "--venv", "--no-solve")
    assert code == 4, out + err
    assert "failed  static: integrity" in out and "skipped env: install" in out

    sources_toml.write_text(text.replace(repos.child_locked, "--upload-pack=touch /tmp/pwned"))
    code, _, err = run_envgen(subs.example, "status", ENV)
    assert code == 2
    assert (
        f"{ENV}.sources.toml" in err
        and "sources[0].submodules[0].commit" in err
        and "Traceback" not in err
    )


@pytest.fixture
def bare_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No served example: an empty git configuration and a cache of the test's own."""
    empty_git_config(tmp_path, monkeypatch)
    return tmp_path / "cache"


def test_a_source_that_opts_out_or_has_no_gitmodules_records_none(
    tmp_path: Path, bare_git: Path
) -> None:
    repos = nested_submodules(tmp_path / "up")
    assert locked_parent(repos, bare_git).submodules == repos.recorded
    opted_out = locked_parent(
        repos, bare_git, submodules=False, submodules_reason="built without its kernels"
    )
    assert opted_out.submodules == ()
    # a gitlink without .gitmodules (a stray one, as some repositories carry) is not a submodule to
    # check out
    plain = backend_project(tmp_path / "plain", "plainpkg")
    plain.git("update-index", "--add", "--cacheinfo", f"160000,{repos.child_locked},vendor/stray")
    plain.commit({}, "a stray gitlink")
    source = Source("plainpkg", plain.url, "main", "plainpkg", dependencies=FILES)
    (locked,) = resolve_sources(make_matrix("t", sources=(source,)), at(bare_git))
    assert locked.submodules == ()


def test_gitmodules_without_a_url_or_with_a_hostile_one_is_refused(
    tmp_path: Path, bare_git: Path
) -> None:
    repos = nested_submodules(tmp_path / "up")
    repos.parent.git(
        "update-index", "--add", "--cacheinfo", f"160000,{repos.child_locked},csrc/extra"
    )
    repos.parent.commit({}, "a gitlink .gitmodules does not name")
    with pytest.raises(
        InputError,
        match=r"source parentpkg: \.gitmodules at [0-9a-f]{40} names no URL .*csrc/extra",
    ):
        locked_parent(repos, bare_git)

    for url, problem in (
        ("-oProxyCommand=touch%20/tmp/x", "starts with '-'"),
        ("ext::sh", "neither a URL"),
    ):
        hostile = nested_submodules(tmp_path / f"hostile{len(url)}")
        hostile.parent.submodule("csrc/evil", url, hostile.child_locked, "a hostile submodule")
        with pytest.raises(
            InputError, match=rf"submodule 'csrc/evil' \({re.escape(url)}\): .*{problem}"
        ) as err:
            locked_parent(hostile, bare_git)
        assert "submodules = false" in (err.value.hint or "")


def test_an_unreachable_submodule_fails_the_lock_naming_its_url(
    tmp_path: Path, bare_git: Path
) -> None:
    repos = nested_submodules(tmp_path / "up")
    gone = tmp_path / "gone"
    repos.parent.submodule(
        "csrc/gone", gone.as_uri(), repos.child_locked, "a submodule whose upstream vanished"
    )
    with pytest.raises(
        ResolutionError,
        match=rf"source parentpkg submodule csrc/gone: .*{re.escape(gone.as_uri())}",
    ):
        locked_parent(repos, bare_git)
