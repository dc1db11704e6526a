"""The reasons a re-lock gives for each moved package, and the preferences it hands to uv (pure)."""

from __future__ import annotations

import tomllib

import msgspec
from envgen.model import (
    CondaEntry,
    LockedSource,
    Origin,
    PipEntry,
    Source,
    Submodule,
    TracedRequirement,
)
from envgen.resolve.movable import NOTHING, Movable
from envgen.resolve.moves import SOLVER, UNAVAILABLE, explain_conda, explain_pip, explain_sources
from envgen.resolve.preferences import kept, render_pylock

P = "linux-64"
MATRIX = Origin(file="env-templates/a5.toml", key="pip.packages.torch.version")


def pip(name: str, version: str, *depends: tuple[str, str]) -> PipEntry:
    return PipEntry(
        name, version, P, f"https://files/{name}-{version}.whl", "0" * 64, tuple(depends)
    )


def conda(name: str, version: str, build: str = "h0_0", *depends: tuple[str, str]) -> CondaEntry:
    return CondaEntry(
        name,
        version,
        build,
        P,
        f"https://ch/{P}/{name}-{version}-{build}.conda",
        "0" * 32,
        "0" * 64,
        depends,
    )


def reasons(moves: list) -> dict[str, tuple[str | None, str | None, str]]:  # type: ignore[type-arg]
    return {m.name: (m.old, m.new, m.reason) for m in moves}


def test_a_bumped_pin_and_what_its_new_version_requires_are_explained_by_their_requirers() -> None:
    before = [
        pip("torch", "2.1.0", ("numpy", ">=1.26")),
        pip("numpy", "1.26.4"),
        pip("six", "1.16"),
    ]
    after = [pip("torch", "2.2.0", ("numpy", ">=2")), pip("numpy", "2.0.1"), pip("six", "1.16")]
    moves = explain_pip(P, before, after, [TracedRequirement("torch==2.2.0", MATRIX)], NOTHING)
    assert reasons(moves) == {
        "torch": ("2.1.0", "2.2.0", f"required by {MATRIX} (==2.2.0)"),
        "numpy": ("1.26.4", "2.0.1", "required by torch 2.2.0 (>=2)"),
    }


def test_upgrades_and_vanished_versions_are_told_apart() -> None:
    before = [pip("a", "1.0"), pip("b", "1.0")]
    after = [pip("a", "2.0"), pip("b", "2.0")]
    moves = explain_pip(
        P,
        before,
        after,
        [TracedRequirement("a", MATRIX), TracedRequirement("b", MATRIX)],
        Movable.packages(False, ["A"]),
    )
    assert reasons(moves) == {
        "a": ("1.0", "2.0", "--upgrade-package a"),
        "b": ("1.0", "2.0", UNAVAILABLE),
    }
    everything = explain_pip(P, before, after, [], Movable.packages(True))
    assert {m.reason for m in everything} == {"--upgrade"}


def test_arrivals_and_departures() -> None:
    before = [pip("old-helper", "1.0"), pip("top", "1.0", ("old-helper", ""))]
    after = [
        pip("top", "1.0", ("new-helper", ">=2")),
        pip("new-helper", "2.1"),
        pip("extra", "0.1"),
    ]
    moves = explain_pip(P, before, after, [TracedRequirement("extra>=0.1", MATRIX)], NOTHING)
    assert reasons(moves) == {
        "old-helper": ("1.0", None, "no longer needed"),
        "new-helper": (None, "2.1", "new dependency of top 1.0"),
        "extra": (None, "0.1", f"new input {MATRIX} (>=0.1)"),
    }


def test_a_conda_build_change_is_a_move_and_its_requirers_are_checked_by_the_given_matcher() -> (
    None
):
    before = [conda("python", "3.11.9"), conda("libdemo", "1.0")]
    after = [conda("python", "3.11.9", "h0_1", ("libdemo", ">=2")), conda("libdemo", "2.0")]

    def matches(name: str, spec: str, entry: CondaEntry) -> bool:
        return not (spec == ">=2" and entry.version.startswith("1."))

    upgrade = Movable.packages(names=["python"])
    moves = explain_conda(P, before, after, ["python 3.11.*"], upgrade, matches)
    assert reasons(moves) == {
        "python": ("3.11.9 h0_0", "3.11.9 h0_1", "--upgrade-package python"),
        "libdemo": ("1.0 h0_0", "2.0 h0_0", "required by python 3.11.9 (>=2)"),
    }


def test_uv_gets_the_kept_pins_as_a_pylock_file() -> None:
    entries = (pip("torch", "2.1.0"), pip("Numpy", "1.26.4"))
    data = tomllib.loads(render_pylock(kept(entries, Movable.packages(False, ["torch"]))))
    assert data["lock-version"] == "1.0"
    assert data["packages"] == [{"name": "Numpy", "version": "1.26.4"}]
    assert kept(entries, Movable.packages(True)) == ()


def test_a_conda_record_the_channel_dropped_is_told_from_one_the_solver_moved() -> None:
    before = [conda("pip", "24.0"), conda("zlib", "1.3")]
    after = [conda("pip", "24.1"), conda("zlib", "1.3.1")]
    anything = lambda name, spec, entry: True  # noqa: E731
    moves = explain_conda(P, before, after, ["pip"], NOTHING, anything, gone=["pip"])
    assert {m.name: m.reason for m in moves} == {"pip": UNAVAILABLE, "zlib": SOLVER}


def test_a_package_whose_previous_version_pins_a_bumped_one_moves_with_it() -> None:
    before = [pip("torch", "2.1.0"), pip("torchvision", "0.16.0", ("torch", "==2.1.0"))]
    after = [pip("torch", "2.2.0"), pip("torchvision", "0.17.0", ("torch", "==2.2.0"))]
    roots = [TracedRequirement("torch==2.2.0", MATRIX), TracedRequirement("torchvision", MATRIX)]
    moves = explain_pip(P, before, after, roots, NOTHING)
    assert reasons(moves)["torchvision"] == (
        "0.16.0",
        "0.17.0",
        "its previous version 0.16.0 needs torch ==2.1.0 (the lock now has 2.2.0)",
    )


def test_an_entry_uv_could_not_read_is_no_preference() -> None:
    entries = (pip("ok", "1.0"), pip("bad-version", "1.0 junk"), pip("bad name", "1.0"))
    data = tomllib.loads(render_pylock(entries))
    assert data["packages"] == [{"name": "ok", "version": "1.0"}]


def test_the_same_version_from_another_file_is_a_move_too() -> None:
    before = [pip("torch", "2.1.0")]
    rebuilt = PipEntry(
        "torch", "2.1.0", P, "https://files/torch-2.1.0-3-cp311-cp311-linux_x86_64.whl", "1" * 64
    )
    (move,) = explain_pip(P, before, [rebuilt], [], NOTHING)
    assert (move.old, move.new, move.reason) == (
        "2.1.0",
        "2.1.0",
        "same version, other file torch-2.1.0-3-cp311-cp311-linux_x86_64.whl",
    )


def test_submodules_move_with_their_source_and_say_why() -> None:
    source = Source("vllm-ascend", "https://github.com/org/vllm-ascend.git", "main", "vllm_ascend")
    kernels = Submodule("csrc/kernels", "https://github.com/org/kernels.git", "1" * 40)
    old = LockedSource(source, "a" * 40, submodules=(kernels,))
    bumped = LockedSource(
        source, "b" * 40, submodules=(msgspec.structs.replace(kernels, commit="2" * 40),)
    )
    moves = explain_sources([old], [bumped], Movable.sources(names=["vllm-ascend"]), NOTHING)
    assert [(m.manager, m.name, m.old, m.new, m.reason) for m in moves] == [
        ("source", "vllm-ascend", "a" * 40, "b" * 40, "--update vllm-ascend"),
        (
            "submodule",
            "vllm-ascend/csrc/kernels",
            "1" * 40,
            "2" * 40,
            "the gitlink at vllm-ascend's new commit",
        ),
    ]
    opted_out = LockedSource(
        msgspec.structs.replace(source, submodules=False, submodules_reason="no kernels"), "a" * 40
    )
    (move,) = explain_sources([old], [opted_out], NOTHING, NOTHING)
    assert (move.name, move.old, move.new) == ("vllm-ascend/csrc/kernels", "1" * 40, None)
    assert move.reason == "new input sources.vllm-ascend.submodules (false)"
    assert explain_sources([old], [old], Movable.sources(everything=True), NOTHING) == []
