"""A source with nested submodules whose branches moved after the parent recorded them: the lock,
the recipe and the bundle must use the recorded commits, not the branch tips. Both submodule URLs
are relative (`../child`), as most projects write them: they resolve against the URL of the
repository naming them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from envgen.example.gitrepos import GitRepo
from envgen.example.srcprojects import backend_project
from envgen.model import FILES, LockedSource, Source, Submodule
from envgen.resolve.sources.pins import resolve_sources

from tests.support.builders import at, make_matrix
from tests.support.shared import build_once


@dataclass(frozen=True)
class NestedSubmodules:
    """`parent` (the installable `parentpkg`) records `csrc/kernels` (repository `child`) at
    `child_locked`, which records `third_party/grand` (repository `grand`) at `grand_locked`; both
    submodule branches have a later commit."""

    parent: GitRepo
    child: GitRepo
    grand: GitRepo
    child_locked: str
    grand_locked: str

    @property
    def recorded(self) -> tuple[Submodule, ...]:
        """What the lock must record for the parent: every submodule, nested ones by their full
        path."""
        return (
            Submodule("csrc/kernels", self.child.url, self.child_locked),
            Submodule("csrc/kernels/third_party/grand", self.grand.url, self.grand_locked),
        )


def nested_submodules(root: Path) -> NestedSubmodules:
    grand = GitRepo.create(root / "grand", {"grand.txt": "locked\n"})
    grand_locked = grand.rev()
    child = GitRepo.create(root / "child", {"kernel.txt": "locked\n"})
    child_locked = child.submodule("third_party/grand", "../grand", grand_locked, "add grand")
    parent = backend_project(root / "parent", "parentpkg")
    parent.submodule("csrc/kernels", "../child", child_locked, "add kernels")
    grand.commit({"grand.txt": "moved\n"}, "upstream moves")
    child.commit({"kernel.txt": "moved\n"}, "upstream moves")
    return NestedSubmodules(parent, child, grand, child_locked, grand_locked)


def shared_nested_submodules(factory: pytest.TempPathFactory) -> NestedSubmodules:
    """`nested_submodules` made once per session (build_once), for the tests that only read the
    repositories (clone and fetch them): none may commit to them, move a branch, change their
    config or delete them."""

    def build(path: Path) -> None:
        repos = nested_submodules(path)
        locked = {"child": repos.child_locked, "grand": repos.grand_locked}
        (path / "locked.json").write_text(json.dumps(locked))

    root = build_once(factory, "nested-submodules", build)
    locked = json.loads((root / "locked.json").read_text())
    return NestedSubmodules(
        *(GitRepo(root / name) for name in ("parent", "child", "grand")),
        locked["child"],
        locked["grand"],
    )


def locked_parent(repos: NestedSubmodules, cache: Path, **fields: object) -> LockedSource:
    """The parent as `envgen lock` pins it: its submodules read from its tree, each fetched into
    `cache`."""
    source = Source(
        "parentpkg", repos.parent.url, "main", "parentpkg", dependencies=FILES, **fields
    )  # type: ignore[arg-type]
    (locked,) = resolve_sources(make_matrix("sub", sources=(source,)), at(cache))
    return locked
