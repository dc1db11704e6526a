"""The example locked and bundled once per session (what tests/support/bundles.bundle_example makes
per module and worker), for every worker to read; each test takes a copy of the project and cache.

The lock and the two bundles are the expensive part (a lock of the example, two bundles of it);
copying the project and the cache they filled takes milliseconds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.bundles import ENV, HOST, OTHER, Bundled, invoke
from tests.support.example import served_example
from tests.support.shared import build_once
from tests.support.venvs import seeded_cache


def _build(where: Path, factory: pytest.TempPathFactory) -> None:
    cache = seeded_cache(factory, where / "cache")
    with served_example(factory, where / "example") as example:
        env = {"GIT_CONFIG_GLOBAL": str(example.gitconfig), "GIT_CONFIG_NOSYSTEM": "1"}
        env["ENVGEN_CACHE_DIR"] = str(cache)
        root = ("--root", str(example.root))
        code, out = invoke("lock", ENV, "-q", *root, env=env)
        assert code == 0, out
        code, out = invoke(
            "bundle", ENV, "--platform", HOST, "-o", str(where / "demo.tar.zst"), *root, env=env
        )
        assert code == 0, out
        (where / "output.txt").write_text(out)
        args = ("bundle", ENV, "--platform", OTHER, "-o", str(where / "other.tar"), *root)
        assert invoke(*args, env=env)[0] == 0


def shared_bundle(factory: pytest.TempPathFactory) -> Path:
    """The session's one lock and bundles of the example (read only): example/project, cache/,
    demo.tar.zst (this host), other.tar (the other platform), output.txt (what bundle said)."""
    return build_once(factory, "proc-bundled", lambda where: _build(where, factory))


def bundled_copy(factory: pytest.TempPathFactory, workdir: Path) -> Bundled:
    """A Bundled of the test's own under `workdir`: the session's project and cache copied (a
    command may take the env's mutex in locks/ or fill the cache), the bundles read where they
    are."""
    shared = shared_bundle(factory)
    root, cache = workdir / "project", workdir / "cache"
    shutil.copytree(shared / "example" / "project", root, symlinks=True)
    shutil.copytree(shared / "cache", cache, symlinks=True)
    output = (shared / "output.txt").read_text()
    return Bundled(root, cache, shared / "demo.tar.zst", shared / "other.tar", output)
