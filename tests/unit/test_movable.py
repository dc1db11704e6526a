"""What a re-lock may move (resolve/movable.py): names matched by their one spelling, the flag that
said so, and the sources an upgrade moves with `--update`'s."""

from __future__ import annotations

from envgen.model import Matrix, Source
from envgen.resolve.movable import NOTHING, Movable, sources_to_update

from tests.support.builders import make_matrix


def test_a_name_is_matched_by_its_one_spelling() -> None:
    named = Movable.packages(names=["Demo_Torch"])
    assert named.covers("demo-torch") and named.covers("DEMO.TORCH")
    assert not named.covers("demo-torchvision")
    assert named.describe("demo_torch") == "--upgrade-package demo-torch"
    assert Movable.packages(everything=True).covers("anything")


def test_the_flag_that_said_so_is_the_reason() -> None:
    assert Movable.sources(names=["vllm"]).describe("vllm") == "--update vllm"
    assert Movable.sources(everything=True).describe("vllm") == "--update-all"
    assert Movable.packages(everything=True).describe("torch") == "--upgrade"


def test_nothing_is_false_and_equal_whatever_its_flags() -> None:
    assert not NOTHING and not Movable.sources() and not Movable.packages()
    assert Movable.sources() == Movable.packages() == NOTHING
    assert Movable.sources(names=["a"]) and Movable.packages(everything=True)
    assert Movable.sources(names=["A_b"]) == Movable.packages(names=["a-b"])


def test_the_names_no_env_knows_are_reported() -> None:
    assert Movable.sources(names=["trainr", "Rollout"]).unknown(["rollout", "post"]) == ["trainr"]


def _matrix(*names: str) -> Matrix:
    sources = tuple(Source(n, f"https://git.example/{n}.git", "main", n) for n in names)
    return make_matrix(sources=sources)


def test_an_upgraded_source_moves_with_the_updated_ones() -> None:
    matrix = _matrix("trainer", "rollout", "post")
    update, upgrade = Movable.sources(names=["post"]), Movable.packages(names=["Trainer"])
    moving = sources_to_update(matrix, update, upgrade)
    assert moving == Movable.sources(names=["post", "trainer"])
    assert not moving.covers("rollout")
    assert sources_to_update(matrix, NOTHING, Movable.packages(everything=True)).everything
    assert sources_to_update(matrix, NOTHING, Movable.packages(names=["torch"])) == NOTHING
