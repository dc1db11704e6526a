"""A module's served example locked once, its lock files put in place for each test that starts
from "the example, locked".

A first `envgen lock` of the example costs two uv runs, git and rattler; the tests that only need
its result were each paying for it. The lock is made against the module's servers (its URLs and
input hash name their ports), so it is only ever put into that same served example, never into
another copy. Each test gets the very bytes the lock wrote, as a lock of its own would write them
(a lock of the same inputs writes the same bytes: test_lock's forced re-lock proves it).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from envgen.example.project import Example, build_example

from tests.support.example import restored_example, run_envgen, use_git_config
from tests.support.shared import build_once


def written(example: Example) -> dict[str, bytes]:
    """Every file in locks/ (the hidden mutex files aside), with its bytes."""
    locks = example.root / "locks"
    return {p.name: p.read_bytes() for p in sorted(locks.iterdir()) if not p.name.startswith(".")}


def lock_once(example: Example, env: str) -> dict[str, bytes]:
    """`envgen lock ENV` on the served `example` (no lock yet) under its git mirror config; every
    file it wrote, its derived files (pylock.*, *.nix) too, taken out of locks/ again (the module's
    tests start from them, or from no lock)."""
    with pytest.MonkeyPatch.context() as patch:
        use_git_config(example.gitconfig, patch)
        code, _, err = run_envgen(example, "lock", env, "-q")
    assert code == 0, err
    files = written(example)
    for name in files:
        (example.root / "locks" / name).unlink()
    return files


@contextmanager
def locked_example(
    example: Example, env: str, files: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Example]:
    """`restored_example` with `files` (what `lock_once` gave for this example) in locks/ first:
    the served example as a lock of it left it. Afterwards none of them is left either: a derived
    file is not named after its env, so `restored_example` alone would leave it to the next test,
    rewritten by whatever this one locked."""
    locks = example.root / "locks"
    with restored_example(example, env, monkeypatch) as restored:
        for name, data in files.items():
            (locks / name).write_bytes(data)
        yield restored
    for name in files:
        (locks / name).unlink(missing_ok=True)


# What a test may change of a served example besides its project: its upstream repos (commits,
# branches, tags) and what its "pypi" index and conda channel offer (`republish`).
SERVED_STATE = ("upstream", "pypi", "conda")


def restore_served(example: Example, factory: pytest.TempPathFactory) -> None:
    """Put the example's upstream repos, "pypi" index and conda channel back as the session's
    artifacts have them, under the same servers (they serve these directories by path).

    Whatever a test published reaches only the caches that test read it with: a test that
    re-locks after changing what a server offers does so with a cache of its own (`later` in
    test_relock), as a new served copy's new ports did before.
    """
    artifacts = build_once(factory, "example-artifacts", build_example)
    workdir = example.root.parent
    for name in SERVED_STATE:
        shutil.rmtree(workdir / name)
        shutil.copytree(artifacts / name, workdir / name, symlinks=True)
