"""lockio/seal.py and lockio/integrity.py as pure functions: the content hash, file hosts, the
problems found."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from envgen.errors import VerificationError
from envgen.lockio.conda_lock_yml import render_lock_yml
from envgen.lockio.integrity import LockTexts, integrity_problems, require_intact
from envgen.lockio.seal import file_hosts, host_problems, intact, recorded, seal
from envgen.lockio.sources_toml import render_sources_toml
from envgen.lockio.store import parse_lock_parts
from envgen.model import Index, Lock
from envgen.project import Project
from envgen.recipe.render import render_recipe

from tests.support.builders import sample_lock, write_intact

NAMES = ("locks/a5.yml", "locks/a5.sources.toml", "locks/a5.install.sh")


def sealed(lock: Lock) -> tuple[str, str, str]:
    yml, recipe = render_lock_yml(lock), render_recipe(lock)
    return yml, seal(yml, render_sources_toml(lock), recipe), recipe


def problems_of(yml: str, sources: str, recipe: str | None) -> list[str]:
    lock, parts = parse_lock_parts(yml, sources, NAMES[0], NAMES[1])
    return integrity_problems(LockTexts("a5", yml, sources, recipe, NAMES), lock, parts)


@pytest.fixture
def written(tmp_path: Path) -> tuple[str, str, str]:
    """The sample lock as `envgen lock` would write it (canonical, every index listed), its three
    texts."""
    project = Project(tmp_path)
    write_intact(project, sample_lock())
    return tuple(
        p.read_text()
        for p in (project.lock_yml("a5"), project.sources_toml("a5"), project.install_sh("a5"))
    )  # type: ignore[return-value]


def test_seal_records_the_hash_of_the_three_files_and_is_deterministic() -> None:
    yml, sources, recipe = sealed(sample_lock())
    found = recorded(yml, sources, recipe)
    assert found.recorded == found.computed and f'content-hash = "{found.computed}"' in sources
    assert "content-hash" not in yml
    assert intact(yml, sources, recipe)
    assert sealed(sample_lock()) == (yml, sources, recipe)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_an_edit_of_any_file_breaks_the_hash(which: int) -> None:
    texts = list(sealed(sample_lock()))
    texts[which] += "# edited\n"
    assert not intact(*texts)


def test_bytes_moved_from_one_file_to_the_next_hash_differently() -> None:
    yml, sources, recipe = sealed(sample_lock())
    assert not intact(yml + recipe[:5], sources, recipe[5:])


def test_seal_refuses_texts_without_a_content_hash_line() -> None:
    with pytest.raises(ValueError, match="exactly one content-hash line"):
        seal("version: 1\n", "schema = 1\n", "")


def test_file_hosts_are_those_other_than_the_index_own() -> None:
    lock = sample_lock()
    pytorch = Index("pytorch-cpu", "https://download.pytorch.org/whl/cpu")
    assert file_hosts(lock, pytorch) == ("files.example.org",)
    assert file_hosts(lock, Index("pytorch-cpu", "https://files.example.org/simple")) == ()
    lock = msgspec.structs.replace(lock, indexes=(*lock.indexes, pytorch))
    triton = {"triton-ascend": ("files.example.org",)}
    assert host_problems(lock, {**triton, "pytorch-cpu": ("files.example.org",)}) == []
    (problem,) = host_problems(lock, triton)
    assert problem.startswith(
        "torch 1.0 (linux-64): its URL is on files.example.org, which index pytorch-cpu"
    )


def test_a_lock_as_written_has_no_problems(written: tuple[str, str, str]) -> None:
    assert problems_of(*written) == []


def test_a_missing_recipe_and_an_unsealed_lock_are_named(written: tuple[str, str, str]) -> None:
    yml, sources, _ = written
    assert problems_of(yml, sources, None)[0] == "locks/a5.install.sh is missing"
    bare_sources = (
        "\n".join(line for line in sources.splitlines() if not line.startswith("content-hash"))
        + "\n"
    )
    assert problems_of(yml, bare_sources, written[2])[0] == (
        "locks/a5.sources.toml records no content hash: it was edited after `envgen lock` wrote it"
    )


def test_a_resealed_edit_is_still_caught_by_the_rules_beside_the_hash(
    written: tuple[str, str, str],
) -> None:
    """Someone who recomputes the hash after removing a package and editing the recipe: the
    sources.toml still names the package's index, and the recipe is not the one the lock renders."""
    yml, sources, recipe = written
    lock, _ = parse_lock_parts(yml, sources, NAMES[0], NAMES[1])
    gone = next(e for e in lock.pip if e.index)
    removed = msgspec.structs.replace(lock, pip=tuple(e for e in lock.pip if e != gone))
    new_yml = render_lock_yml(removed)
    new_recipe = recipe + "echo extra\n"
    problems = problems_of(new_yml, seal(new_yml, sources, new_recipe), new_recipe)
    assert problems == [
        f"locks/a5.sources.toml: pip-indexes names index {gone.index} for {gone.name} "
        f"({gone.platform}), which "
        "locks/a5.yml does not lock",
        "locks/a5.install.sh differs from the recipe its lock renders: it was edited "
        "by hand or belongs to another "
        "lock",
    ]


def test_require_intact_is_exit_4_listing_every_problem(tmp_path: Path) -> None:
    project = Project(tmp_path)
    write_intact(project, sample_lock())
    assert require_intact(project, "a5").env == "a5"
    project.install_sh("a5").write_text("#!/bin/sh\n")
    with pytest.raises(VerificationError, match="the lock of a5 was tampered with") as caught:
        require_intact(project, "a5")
    assert caught.value.exit_code == 4
    assert "locks/a5.install.sh differs from the recipe" in caught.value.message
    assert "do not hash to the content hash" in caught.value.message
