"""A source with nested submodules whose branches moved after the parent recorded them: the recipe and the bundle
must check out the recorded commits, not the branch tips."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envgen.example.gitrepos import GitRepo
from envgen.example.srcprojects import backend_project


@dataclass(frozen=True)
class NestedSubmodules:
    """`parent` (the installable `parentpkg`) records `csrc/kernels` at `child_locked`, which records
    `third_party/grand` at `grand_locked`; both submodule branches have a later commit."""

    parent: GitRepo
    child_locked: str
    grand_locked: str


def nested_submodules(root: Path) -> NestedSubmodules:
    grand = GitRepo.create(root / "grand", {"grand.txt": "locked\n"})
    grand_locked = grand.rev()
    child = GitRepo.create(root / "child", {"kernel.txt": "locked\n"})
    child_locked = child.submodule("third_party/grand", grand.url, grand_locked, "add grand")
    parent = backend_project(root / "parent", "parentpkg")
    parent.submodule("csrc/kernels", child.url, child_locked, "add kernels")
    grand.commit({"grand.txt": "moved\n"}, "upstream moves")
    child.commit({"kernel.txt": "moved\n"}, "upstream moves")
    return NestedSubmodules(parent, child_locked, grand_locked)
