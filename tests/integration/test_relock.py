"""Re-locks keep what did not need to move: previous versions as preferences, upgrades on request,
reasons.

The bundled example is served on 127.0.0.1; between two locks the "pypi" index or the conda channel
gains newer releases (or loses one), as a real index does while a lock sits in a repository.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgen.example.condapkgs import CondaPackage, PackageFile, demo_packages
from envgen.example.project import PYPI_DISTS, Example, advance_branch, bump_version, republish
from envgen.example.wheels import FixtureDist
from envgen.inputs.matrix import load_env
from envgen.lockio.store import read_lock
from envgen.network import Limits
from envgen.project import Project
from envgen.resolve.pypi.indexes import Indexes

from tests.support.builders import at
from tests.support.example import restored_example, run_envgen, with_example_metadata
from tests.support.lk_locked import lock_once, locked_example, restore_served

ENV = "demo"
PLATFORMS = ("linux-64", "linux-aarch64")
# Newer releases of packages the example's matrix does not pin: each re-lock should keep the old
# ones.
NEWER = (FixtureDist("demo-bridge", "0.3.0"), FixtureDist("demo-tokenizers", "0.22.0"))
NEWER_DATA = CondaPackage(
    "demo-data",
    "2024.1",
    "noarch",
    build="h0_1",
    build_number=1,
    files=(PackageFile("share/demo-data/README", b"demo data, rebuilt\n"),),
    noarch="generic",
)


envgen = run_envgen


@pytest.fixture(scope="module")
def first_lock(served: Example) -> dict[str, bytes]:
    """The module's served example locked once; the tests that start from a lock get its files."""
    return lock_once(served, ENV)


@pytest.fixture
def unlocked(
    served: Example, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Example]:
    """The module's served example, no lock yet; afterwards its matrix, upstream repos, index and
    channel are as they were."""
    with restored_example(served, ENV, monkeypatch) as example:
        yield example
    restore_served(served, tmp_path_factory)


@pytest.fixture
def locked(
    served: Example,
    first_lock: dict[str, bytes],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Example]:
    """The module's served example, locked; afterwards as `unlocked` leaves it."""
    with locked_example(served, ENV, first_lock, monkeypatch) as example:
        yield example
    restore_served(served, tmp_path_factory)


def lock(example: Example, *args: str) -> dict[str, list[dict[str, str | None]]]:
    """Run `envgen lock demo ARGS --json`; the moves it reports, per platform."""
    code, out, err = envgen(example, "lock", ENV, "--json", *args)
    assert code == 0, err
    (summary,) = json.loads(out)["results"]
    moved: dict[str, list[dict[str, str | None]]] = summary["moved"]
    return moved


def versions(example: Example) -> dict[tuple[str, str], str]:
    """(platform, name) -> version (conda: `version build`) of the lock on disk."""
    locked = read_lock(Project(example.root), ENV)
    assert locked is not None
    found = {(e.platform, e.name): e.version for e in locked.pip}
    return found | {(e.platform, e.name): f"{e.version} {e.build}" for e in locked.conda}


def moved_names(moved: dict[str, list[dict[str, str | None]]]) -> dict[str, set[str | None]]:
    return {platform: {m["name"] for m in moves} for platform, moves in moved.items()}


def later(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, factory: pytest.TempPathFactory) -> None:
    """Time passes: the caches no longer hold the index pages and repodata read for the first
    lock (what the sources' build backends said of a tree stays true, and stays)."""
    cache = with_example_metadata(factory, tmp_path / "cache-later")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(cache))


def test_a_pin_bump_moves_only_that_pin_and_upgrades_move_the_rest_on_request(
    unlocked: Example,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    assert lock(unlocked) == {p: [] for p in PLATFORMS}
    first = versions(unlocked)
    republish(unlocked, pypi=PYPI_DISTS + NEWER, conda=(*demo_packages(), NEWER_DATA))
    later(monkeypatch, tmp_path, tmp_path_factory)

    bump_version(unlocked, "demo-torch", "2.10.0", "2.10.1")
    moved = lock(unlocked)
    assert versions(unlocked) == first | {(p, "demo-torch"): "2.10.1" for p in PLATFORMS}
    for platform in PLATFORMS:
        (torch,) = moved[platform]
        assert (torch["name"], torch["old"], torch["new"]) == ("demo-torch", "2.10.0", "2.10.1")
        assert "pip.packages.demo-torch.version (==2.10.1)" in str(torch["reason"])

    moved = lock(unlocked, "--upgrade-package", "demo_bridge")
    now = versions(unlocked)
    assert {now[(p, "demo-bridge")] for p in PLATFORMS} == {"0.3.0"}
    assert {now[(p, "demo-tokenizers")] for p in PLATFORMS} == {"0.21.0"}  # not named: kept
    assert {now[(p, "demo-data")] for p in PLATFORMS} == {"2024.1 h0_0"}
    assert moved_names(moved) == {
        "linux-64": {"demo-bridge", "demo-x86-helper"},
        "linux-aarch64": {"demo-bridge"},
    }
    bridge = next(m for m in moved["linux-aarch64"] if m["name"] == "demo-bridge")
    assert bridge["reason"] == "--upgrade-package demo-bridge"
    helper = next(m for m in moved["linux-64"] if m["name"] == "demo-x86-helper")
    assert (helper["old"], helper["new"], helper["reason"]) == ("1.0.0", None, "no longer needed")

    moved = lock(unlocked, "--upgrade-package", "demo-data")
    assert {versions(unlocked)[(p, "demo-data")] for p in PLATFORMS} == {"2024.1 h0_1"}
    assert moved_names(moved) == {p: {"demo-data"} for p in PLATFORMS}

    moved = lock(unlocked, "--upgrade")
    assert {versions(unlocked)[(p, "demo-tokenizers")] for p in PLATFORMS} == {"0.22.0"}
    assert moved_names(moved) == {p: {"demo-tokenizers"} for p in PLATFORMS}
    assert all(m["reason"] == "--upgrade" for moves in moved.values() for m in moves)


def test_a_package_no_longer_required_leaves_and_a_new_one_arrives_each_with_its_reason(
    locked: Example,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    accel = (
        FixtureDist("demo-accel", "1.0.0", requires=("demo-accel-core>=2",)),
        FixtureDist("demo-accel-core", "2.1"),
    )
    republish(locked, pypi=PYPI_DISTS + accel)
    later(monkeypatch, tmp_path, tmp_path_factory)
    text = locked.matrix.read_text()
    text = text.replace(
        "demo-bridge = {}", 'demo-bridge = { version = "==0.1.0" }\ndemo-accel = {}'
    )
    locked.matrix.write_text(text)

    moved = lock(locked)
    by_name = {(p, m["name"]): m for p, moves in moved.items() for m in moves}
    assert moved_names(moved) == {
        "linux-64": {"demo-bridge", "demo-x86-helper", "demo-accel", "demo-accel-core"},
        "linux-aarch64": {"demo-bridge", "demo-accel", "demo-accel-core"},
    }
    assert by_name[("linux-64", "demo-x86-helper")]["reason"] == "no longer needed"
    assert "pip.packages.demo-bridge.version (==0.1.0)" in str(
        by_name[("linux-64", "demo-bridge")]["reason"]
    )
    assert str(by_name[("linux-aarch64", "demo-accel")]["reason"]).startswith("new input ")
    assert (
        by_name[("linux-aarch64", "demo-accel-core")]["reason"]
        == "new dependency of demo-accel 1.0.0"
    )

    code, _, err = envgen(locked, "lock", ENV, "--force")
    assert code == 0, err
    assert "moved" not in err  # nothing moves a second time


def test_a_previous_version_gone_from_the_index_falls_back_with_a_warning(
    locked: Example,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    bridge_020 = [d for d in PYPI_DISTS if (d.name, d.version) != ("demo-bridge", "0.2.0")]
    data = [NEWER_DATA if p.name == "demo-data" else p for p in demo_packages()]
    republish(locked, pypi=(*bridge_020, FixtureDist("demo-bridge", "0.3.0")), conda=data)
    later(monkeypatch, tmp_path, tmp_path_factory)

    code, out, err = envgen(locked, "lock", ENV, "--force", "--json")
    assert code == 0, err
    assert "demo-bridge 0.2.0 is no longer offered by the indexes; resolved afresh to 0.3.0" in err
    assert "the conda channels no longer offer demo-data 2024.1 h0_0" in err
    (summary,) = json.loads(out)["results"]
    for platform in PLATFORMS:
        reasons = {m["name"]: m["reason"] for m in summary["moved"][platform]}
        assert reasons["demo-bridge"].startswith("the previous version is no longer offered")
        assert reasons["demo-data"].startswith("the previous version is no longer offered")
    assert {versions(locked)[(p, "demo-data")] for p in PLATFORMS} == {"2024.1 h0_1"}


def test_unknown_upgrade_names_stop_before_any_work(unlocked: Example) -> None:
    code, _, err = envgen(unlocked, "lock", ENV, "--upgrade-package", "demo-tourch")
    assert code == 2
    assert "--upgrade-package demo-tourch" in err and "demo-torch" in err
    assert not list((unlocked.root / "locks").glob(f"{ENV}.*"))


def test_a_source_is_upgraded_by_name_and_its_move_reported(locked: Example) -> None:
    old = {s.source.name: s.commit for s in read_lock(Project(locked.root), ENV).sources}  # type: ignore[union-attr]
    moved = advance_branch(locked, "trainer", "core_r0.12.0")
    code, out, err = envgen(locked, "lock", ENV, "--upgrade-package", "trainer", "--json")
    assert code == 0, err
    (summary,) = json.loads(out)["results"]
    assert summary["sources_moved"] == [
        {
            "manager": "source",
            "name": "trainer",
            "old": old["trainer"],
            "new": moved,
            "reason": "--upgrade-package trainer",
        }
    ]
    assert summary["moved"] == {p: [] for p in PLATFORMS}


def test_the_text_report_lists_what_moved_per_platform(
    locked: Example,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    republish(locked, pypi=PYPI_DISTS + NEWER)
    later(monkeypatch, tmp_path, tmp_path_factory)
    code, _, err = envgen(locked, "lock", ENV, "--upgrade-package", "demo-tokenizers")
    assert code == 0, err
    assert (
        "  linux-aarch64: 1 moved\n    pip demo-tokenizers 0.21.0 -> 0.22.0: "
        "--upgrade-package demo-tokenizers" in err
    )


def test_a_package_pinning_the_bumped_one_moves_with_it_without_a_warning(example: Example) -> None:
    vision = (
        FixtureDist("demo-vision", "1.0", requires=("demo-torch==2.10.0",)),
        FixtureDist("demo-vision", "1.1", requires=("demo-torch==2.10.1",)),
    )
    republish(example, pypi=PYPI_DISTS + vision)
    example.matrix.write_text(
        example.matrix.read_text().replace("demo-bridge = {}", "demo-bridge = {}\ndemo-vision = {}")
    )
    lock(example)
    # torch 2.10.0 needs it
    assert {versions(example)[(p, "demo-vision")] for p in PLATFORMS} == {"1.0"}

    bump_version(example, "demo-torch", "2.10.0", "2.10.1")
    code, out, err = envgen(example, "lock", ENV, "--json")
    assert code == 0, err
    assert "no longer offered" not in err
    (summary,) = json.loads(out)["results"]
    for platform in PLATFORMS:
        reasons = {m["name"]: m["reason"] for m in summary["moved"][platform]}
        assert reasons == {
            "demo-torch": reasons["demo-torch"],
            "demo-vision": "its previous version 1.0 needs demo-torch ==2.10.0 (the lock now has "
            "2.10.1)",
        }


def test_the_index_is_asked_whether_a_previous_version_is_still_offered(
    locked: Example,
    tmp_path: Path,
) -> None:
    project = Project(locked.root)
    bridge = [e for e in read_lock(project, ENV).pip if e.name == "demo-bridge"]  # type: ignore[union-attr]
    matrix = load_env(project, ENV)
    indexes = at(tmp_path).accesses(matrix.indexes)
    asked = Indexes(tmp_path, Limits(), offline=False)
    assert asked.offered(bridge, indexes) == {"demo-bridge"}
    republish(
        locked, pypi=[d for d in PYPI_DISTS if (d.name, d.version) != ("demo-bridge", "0.2.0")]
    )
    assert asked.offered(bridge, indexes) == set()


def test_a_changed_conda_spec_moves_that_package_with_its_reason(
    locked: Example,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    newer = [
        CondaPackage(
            "libdemo", "1.1", subdir, build="h0_0", depends=("__glibc >=2.17",), fmt="tar.bz2"
        )
        for subdir in PLATFORMS
    ]
    republish(locked, conda=(*demo_packages(), *newer, NEWER_DATA))
    later(monkeypatch, tmp_path, tmp_path_factory)
    locked.matrix.write_text(locked.matrix.read_text().replace('"libdemo"]', '"libdemo >=1.1"]'))
    moved = lock(locked)
    for platform in PLATFORMS:
        assert [(m["name"], m["old"], m["new"], m["reason"]) for m in moved[platform]] == [
            ("libdemo", "1.0 h0_0", "1.1 h0_0", "required by [conda] specs (>=1.1)")
        ]
