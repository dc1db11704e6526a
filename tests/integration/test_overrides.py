"""Scoped and transitive overrides against real uv and two loopback indexes; the lock's
consistency."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from envgen.errors import ResolutionError
from envgen.example.http import serve_directory
from envgen.example.wheels import FixtureDist, build_index
from envgen.model import (
    Index,
    Lock,
    LockedSource,
    Matrix,
    Origin,
    Override,
    PipPackage,
    Source,
    TracedRequirement,
)
from envgen.resolve.pipeline import consistent
from envgen.resolve.pypi.stage import PypiLock

from tests.support.builders import at, lock_pip, make_lock, make_matrix

PLATFORM = "linux-64"
PLATFORMS = ("linux-aarch64", "linux-64")
PYPI = (
    FixtureDist("pkg-b", "2.0", requires=("base<2",)),
    FixtureDist("pkg-b", "3.0", requires=("base>=2",)),
    FixtureDist("base", "1.26"),
    FixtureDist("base", "2.1"),
    # 50 requirements on base behind extras nobody asks for, and one that applies.
    FixtureDist(
        "big", "1.0", requires=("base>=1", *(f"base>=9 ; extra == 'e{i}'" for i in range(50)))
    ),
    FixtureDist("tr", "9.9.9"),
)
EXTRA = (FixtureDist("tr", "3.2.2"), FixtureDist("tr", "3.3.0"))


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    base = tmp_path_factory.mktemp("indexes")
    build_index(base / "pypi", PYPI)
    build_index(base / "extra", EXTRA)
    with serve_directory(base / "pypi") as pypi, serve_directory(base / "extra") as extra:
        yield f"{pypi}/simple", f"{extra}/simple"


def matrix(urls: tuple[str, str], packages: tuple[PipPackage, ...], *overrides: Override) -> Matrix:
    indexes = (Index("pypi", urls[0]), Index("extra", urls[1], explicit=True))
    return make_matrix("t", indexes=indexes, packages=packages, overrides=overrides)


def source(*lines: str) -> LockedSource:
    reqs = tuple(
        TracedRequirement(t, Origin("requirements.txt", line=i, source="verl"))
        for i, t in enumerate(lines, 1)
    )
    return LockedSource(
        Source("verl", "https://example.invalid/verl.git", "main", "verl"), "a" * 40, reqs
    )


def versions(lock: PypiLock) -> dict[str, str]:
    return {e.name: e.version for e in lock.entries}


def as_lock(m: Matrix, pypi: PypiLock, sources: tuple[LockedSource, ...]) -> Lock:
    return make_lock(
        m.name, platforms=m.platforms, pip=pypi.entries, sources=sources, overrides=pypi.overrides
    )


BASE_126 = "base==1.26"


def test_a_scoped_override_makes_the_resolver_pick_an_older_compatible_release(
    urls: tuple[str, str], tmp_path: Path
) -> None:
    verl = source("base>=2")
    # Without the override: the newest of everything.
    free = lock_pip(matrix(urls, (PipPackage("pkg-b"),)), PLATFORM, "3.11", (verl,), at(tmp_path))
    assert versions(free) == {"pkg-b": "3.0", "base": "2.1"}
    m = matrix(
        urls,
        (PipPackage("pkg-b"),),
        Override("base", BASE_126, "the kernels are built against 1.26"),
    )
    scoped = lock_pip(m, PLATFORM, "3.11", (verl,), at(tmp_path))
    # pkg-b 3.0 needs base>=2, which the override does not rewrite: the resolver goes back to pkg-b
    # 2.0.
    assert versions(scoped) == {"pkg-b": "2.0", "base": "1.26"}
    (applied,) = scoped.overrides
    assert [(r.text, str(r.origin)) for r in applied.replaced] == [
        ("base>=2", "source verl: requirements.txt:1")
    ]
    assert consistent(as_lock(m, scoped, (verl,)), m).overrides[0].violates == ()


def test_an_override_of_a_transitive_only_name_limits_without_adding_it(
    urls: tuple[str, str], tmp_path: Path
) -> None:
    m = matrix(
        urls, (PipPackage("pkg-b"),), Override("base", BASE_126, "r"), Override("tr", "tr<5", "r")
    )
    # base comes only through pkg-b: still pkg-b 2.0; tr is required by nobody: not locked at all.
    assert versions(lock_pip(m, PLATFORM, "3.11", (), at(tmp_path))) == {
        "pkg-b": "2.0",
        "base": "1.26",
    }


def test_a_transitive_override_records_and_prints_what_it_contradicts(
    urls: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    verl = source("base>=2")
    override = Override("base", BASE_126, "the kernels are built against 1.26", transitive=True)
    m = matrix(urls, (PipPackage("pkg-b"),), override)
    pypi = lock_pip(m, PLATFORM, "3.11", (verl,), at(tmp_path))
    # uv's global override rewrites pkg-b 3.0's own requirement: the newest pkg-b, contradicted.
    assert versions(pypi) == {"pkg-b": "3.0", "base": "1.26"}
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        lock = consistent(as_lock(m, pypi, (verl,)), m)
    assert lock.overrides[0].violates == ("pkg-b==3.0 needs base>=2",)
    told = [r.getMessage() for r in caplog.records]
    assert told == [
        "override base==1.26 (transitive) contradicts: pkg-b==3.0 needs base>=2 (linux-64)"
    ]


def test_any_other_contradiction_fails_the_lock_naming_both_packages(
    urls: tuple[str, str], tmp_path: Path
) -> None:
    m = matrix(urls, (PipPackage("pkg-b"),))
    pypi = lock_pip(m, PLATFORM, "3.11", (), at(tmp_path))
    broken = tuple(
        msgspec.structs.replace(e, version="1.26") if e.name == "base" else e for e in pypi.entries
    )
    with pytest.raises(ResolutionError) as caught:
        consistent(as_lock(m, dataclasses.replace(pypi, entries=broken), ()), m)
    assert caught.value.exit_code == 3
    assert "pkg-b==3.0 needs base>=2, linux-64 has 1.26" in caught.value.message
    # A scoped override's name gets no pass either: only a transitive one may record a
    # contradiction.
    scoped = dataclasses.replace(pypi, entries=broken, overrides=())
    lock = as_lock(m, scoped, ())
    lock = msgspec.structs.replace(
        lock,
        overrides=lock_pip(
            matrix(urls, (PipPackage("pkg-b"),), Override("base", BASE_126, "r")),
            PLATFORM,
            "3.11",
            (),
            at(tmp_path),
        ).overrides,
    )
    with pytest.raises(ResolutionError, match="pkg-b==3.0 needs base>=2"):
        consistent(lock, m)


def test_an_override_of_an_index_pinned_package_keeps_its_index(
    urls: tuple[str, str], tmp_path: Path
) -> None:
    pinned = PipPackage("tr", index=((PLATFORM, "extra"),))
    m = matrix(urls, (pinned,), Override("tr", "tr==3.2.2", "3.3 breaks the kernels"))
    lock = lock_pip(m, PLATFORM, "3.11", (source("tr>=3.3"),), at(tmp_path))
    (tr,) = lock.entries
    # From the explicit index, although the default index's decoy 9.9.9 is higher.
    assert (tr.version, tr.index) == ("3.2.2", "extra")
    assert tr.url.startswith(urls[1].removesuffix("simple"))


def test_the_warning_lists_only_what_applies_here(
    urls: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    verl = source(
        "base>=2", "base<3", "base>=1.5 ; platform_machine == 'aarch64'", "base ; extra == 'test'"
    )
    override = Override("base", BASE_126, "kernels", transitive=True)
    m = matrix(urls, (PipPackage("big"),), override)
    with caplog.at_level(logging.WARNING):
        pypi = lock_pip(m, PLATFORM, "3.11", (verl,), at(tmp_path))
        lock = consistent(as_lock(m, pypi, (verl,)), m)
    assert versions(pypi) == {"big": "1.0", "base": "1.26"}
    told = [r.getMessage() for r in caplog.records]
    # The aarch64-only and the extra's line do not apply on linux-64; big's 50 extra lines never
    # show.
    assert told == [
        "linux-64: override base==1.26 (transitive: third-party metadata too), locked "
        "1.26: replaces base>=2 "
        "(source verl: requirements.txt:1); 1 already satisfied (reason: kernels)"
    ]
    assert lock.overrides[0].violates == ()


GOLDEN = Path(__file__).parents[1] / "data" / "golden"


def golden(name: str, text: str) -> None:
    if os.environ.get("REGEN_GOLDEN") == "1":
        (GOLDEN / name).write_text(text)
    assert text == (GOLDEN / name).read_text()


def test_a_conflict_on_an_overridden_name_suggests_transitive_not_the_same_override(
    urls: tuple[str, str], tmp_path: Path
) -> None:
    m = matrix(urls, (PipPackage("pkg-b", "==3.0"),), Override("base", BASE_126, "kernels"))
    with pytest.raises(ResolutionError) as caught:
        lock_pip(m, PLATFORM, "3.11", (source("base>=2"),), at(tmp_path))
    text = f"error: {caught.value.message}\n  hint: {caught.value.hint}\n"
    assert "envgen-inputs" not in text
    assert "add [overrides.base]" not in text
    golden("conflict-overridden.txt", text)


def test_override_diagnostics_golden(
    urls: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    verl = source(
        "base>=2", "base<3", "base>=1.5 ; platform_machine == 'aarch64'", "base ; extra == 'test'"
    )
    scoped = Override("base", BASE_126, "kernels")
    transitive = msgspec.structs.replace(scoped, transitive=True)
    lines = []
    for override, packages in ((scoped, ("pkg-b", "big")), (transitive, ("pkg-b", "big"))):
        m = msgspec.structs.replace(
            matrix(urls, tuple(PipPackage(p) for p in packages), override), platforms=PLATFORMS
        )
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            pypi = {p: lock_pip(m, p, "3.11", (verl,), at(tmp_path)) for p in PLATFORMS}
            entries = tuple(e for p in PLATFORMS for e in pypi[p].entries)
            lock = make_lock(
                "t",
                platforms=PLATFORMS,
                pip=entries,
                sources=(verl,),
                overrides=pypi[PLATFORM].overrides,
            )
            consistent(lock, m)
        lines += [f"WARNING {r.getMessage()}" for r in caplog.records]
    golden("override-warnings.txt", "\n".join(lines) + "\n")
