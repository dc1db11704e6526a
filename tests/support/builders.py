"""Matrices, Locks and lock entries for tests: the required fields filled with neutral values, so
that a test names only what it is about. Entry digests derive from the file name, so equal inputs
give equal entries.

Two shared cases live here too: `sample_lock` (an A5-shaped lock using every field, for the lock
file's readers and writers) and `bump` (an A5 lock before and after a version bump, for the diff).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from envgen import network
from envgen.lockio.input_hashes import LOCK_SCHEMA, input_hash
from envgen.lockio.store import read_lock, write_lock
from envgen.model import (
    AppliedOverride,
    Cann,
    Channel,
    CondaEntry,
    ImportCheck,
    Index,
    Lock,
    LockedSource,
    Matrix,
    Origin,
    Override,
    Pending,
    PipEntry,
    Profile,
    Source,
    TracedRequirement,
)
from envgen.project import Project
from envgen.recipe.render import render_recipe
from envgen.resolve.git.remote import GitEnv
from envgen.resolve.settings import Settings
from envgen.urls import url_host

if TYPE_CHECKING:
    from envgen.resolve.pypi.stage import PypiLock

CANN = Cann("pending", "/usr/local/Ascend/cann/set_env.sh")
CONDA_FORGE = "https://conda.anaconda.org/conda-forge"
FILES = "https://files.example.org"


def digest(text: str, algorithm: str = "sha256") -> str:
    return hashlib.new(algorithm, text.encode()).hexdigest()


def current_git() -> GitEnv:
    """What git runs with in this process (the test's environment)."""
    return GitEnv.read(os.environ)


def at(cache: Path, *, offline: bool = False) -> Settings:
    """What resolving takes from this process (the test's environment), `cache` its cache."""
    return Settings.read(os.environ, cache=cache, offline=offline)


def lock_pip(
    matrix: Matrix,
    platform: str,
    python: str,
    sources: Sequence[LockedSource],
    settings: Settings,
    **options: Any,
) -> PypiLock:
    """`lock_pypi` with the real uv and indexes (`Resolvers.real(settings)`)."""
    from envgen.resolve.pypi.stage import lock_pypi
    from envgen.resolve.resolvers import Resolvers

    real = Resolvers.real(settings)
    return lock_pypi(
        matrix, platform, python, sources, settings, runner=real.uv, reader=real.indexes, **options
    )


def tools_at(cache: Path) -> Settings:
    """What an install's tools run in: this process's environment as each starts, `cache` its
    cache."""
    return Settings.live(os.environ, cache=cache)


def bare_at(cache: Path) -> Settings:
    """What an install from a project's lock takes where the recipe's git runs with no variables
    of its own: this process's network limits, `cache` its cache."""
    return Settings({}, network.limits(os.environ), cache)


def make_matrix(
    name: str = "demo", *, platforms: tuple[str, ...] = ("linux-64",), **fields: object
) -> Matrix:
    """A Matrix `name` on `platforms` for python 3.11, glibc 2.28, pending CANN, and nothing else
    but `fields`."""
    values: dict[str, object] = {
        "name": name,
        "description": f"{name} test matrix",
        "path": f"env-templates/{name}.toml",
        "platforms": platforms,
        "python": "3.11",
        "glibc": "2.28",
        "cann": CANN,
        "channels": (),
        "conda_specs": (),
        "indexes": (),
        "packages": (),
        "sources": (),
    }
    values.update(fields)
    return Matrix(**values)  # type: ignore[arg-type]


def make_lock(
    env: str = "demo", *, platforms: tuple[str, ...] = ("linux-64",), **fields: object
) -> Lock:
    """A Lock of `env` on `platforms` with a placeholder input hash and nothing else but
    `fields`."""
    values: dict[str, object] = {
        "env": env,
        "platforms": platforms,
        "input_hash": "0" * 64,
        "conda": (),
        "pip": (),
        "sources": (),
    }
    values.update(fields)
    return Lock(**values)  # type: ignore[arg-type]


def conda_entry(
    name: str,
    version: str,
    platform: str,
    build: str = "h0_0",
    *,
    channel: str = CONDA_FORGE,
    subdir: str | None = None,
    depends: tuple[tuple[str, str], ...] = (),
) -> CondaEntry:
    """A conda package `name-version-build` of `channel`'s `subdir` (the platform's by default)."""
    file = f"{name}-{version}-{build}.conda"
    url = f"{channel}/{subdir or platform}/{file}"
    return CondaEntry(
        name, version, build, platform, url, digest(file, "md5"), digest(file), depends
    )


def pip_entry(
    name: str,
    version: str,
    platform: str,
    *,
    tag: str = "py3-none-any",
    sdist: bool = False,
    depends: tuple[tuple[str, str], ...] = (),
    index: str | None = None,
) -> PipEntry:
    """A wheel of `name` (or its sdist) served from files.example.org."""
    file = f"{name}-{version}.tar.gz" if sdist else f"{name}-{version}-{tag}.whl"
    return PipEntry(name, version, platform, f"{FILES}/{file}", digest(file), depends, index, sdist)


# --- the A5-shaped lock using every field
# ----------------------------------------------------------------------

SAMPLE_PLATFORMS = ("linux-aarch64", "linux-64")


def _sample_wheel(
    name: str, platform: str, index: str | None = None, sdist: bool = False
) -> PipEntry:
    machine = "aarch64" if platform == "linux-aarch64" else "x86_64"
    depends = (("numpy", ">=1.26"),) if name == "torch" else ()
    tag = f"cp311-cp311-manylinux_2_28_{machine}"
    return pip_entry(name, "1.0", platform, tag=tag, sdist=sdist, depends=depends, index=index)


def _sample_sources() -> tuple[LockedSource, ...]:
    verl = Source(
        name="verl",
        url="https://github.com/verl-project/verl.git",
        ref="HEAD",
        distribution="verl",
        requirements=("requirements-npu.txt",),
    )
    vllm_ascend = Source(
        name="vllm-ascend",
        url="https://user:secret@git.example.org/vllm-ascend.git",
        ref="releases/v0.23.0",
        distribution="vllm_ascend",
        cherry_picks=("1" * 40,),
        build_isolation=False,
        needs_cann=True,
        build_index="triton-ascend",
        env=(("SOC_VERSION", "ascend950dt_9582"), ("A_FLAG", "x y")),
        requirements=("requirements.txt", "pyproject"),
    )
    transfer_queue = Source(
        name="transferqueue",
        url="https://github.com/Ascend/TransferQueue.git",
        ref="main",
        distribution="TransferQueue",
        editable=False,
        pythonpath=True,
        origin="verl:requirements-npu.txt:4",
    )
    numpy_req = TracedRequirement(
        "numpy<2", Origin("requirements.txt", line=3, source="vllm-ascend")
    )
    torch_req = TracedRequirement(
        "torch<3", Origin("requirements.txt", line=9, source="vllm-ascend"), True
    )
    return (
        LockedSource(
            vllm_ascend,
            "a" * 40,
            (numpy_req, torch_req),
            digest=digest("vllm-ascend"),
            tree="b" * 40,
            picked=("c" * 40,),
        ),
        LockedSource(verl, "d" * 40, digest=digest("verl")),
        LockedSource(transfer_queue, "e" * 40),
    )


def sample_lock() -> Lock:
    """The shape of the A5 lock with every field set: credentials in URLs, overrides, pending, CANN,
    profiles."""
    forge = "https://conda.example.org/forge"
    conda = tuple(
        conda_entry(
            "pip", "24.0", p, channel=forge, subdir="noarch", depends=(("python", ">=3.8"),)
        )
        if name == "pip"
        else conda_entry("python", "3.11.9", p, channel=forge, depends=(("__glibc", ">=2.17"),))
        for p in SAMPLE_PLATFORMS
        for name in ("pip", "python")
    )
    pip = (
        _sample_wheel("torch", "linux-aarch64"),
        _sample_wheel("triton-ascend", "linux-aarch64", index="triton-ascend"),
        _sample_wheel("mbridge", "linux-64", sdist=True),
        _sample_wheel("torch", "linux-64", index="pytorch-cpu"),
    )
    inputs = (
        ("channel:conda-forge", digest("c")),
        ("matrix", digest("m")),
        ("schema", str(LOCK_SCHEMA)),
    )
    return make_lock(
        "a5",
        platforms=SAMPLE_PLATFORMS,
        input_hash=input_hash(inputs),
        conda=conda,
        pip=pip,
        sources=_sample_sources(),
        overrides=(
            AppliedOverride(
                Override("torch", "torch==2.10.0", "the A5 guide pins torch"),
                (TracedRequirement("torch>=2.5", Origin("setup.py", source="verl")),),
            ),
            AppliedOverride(Override("numpy", "numpy<2", "ABI"), ()),
        ),
        pending=(Pending("CANN", "due Q2"), Pending("torch-npu", "not published")),
        channels=(Channel("conda-forge", forge),),
        indexes=(
            Index("pypi", "https://pypi.org/simple"),
            Index(
                "triton-ascend",
                "https://u:p@triton.example.org/simple/",
                True,
                "triton.example.org",
            ),
        ),
        cann=Cann("pending", "/usr/local/Ascend/cann/set_env.sh", "commercial release due Q2"),
        activation_env=(("PYTHONPATH", "/src/megatron"),),
        profiles=(
            Profile("quiet", "quiet logs", (("TRANSFORMERS_VERBOSITY", "error"),)),
            Profile(
                "ckpt",
                "HCCL whitelist",
                (("HCCL_WHITELIST_DISABLE", "0"), ("HCCL_WHITELIST_FILE", "/w.json")),
            ),
        ),
        checks=(
            ImportCheck("torch", "torch", "2.10.0"),
            ImportCheck("vllm_ascend", "vllm_ascend", needs="cann"),
        ),
        inputs=inputs,
    )


def stripped(lock: Lock) -> Lock:
    """What a lock is expected to read back as: credentials gone, canonical order."""
    return msgspec.structs.replace(
        lock,
        conda=tuple(sorted(lock.conda, key=lambda e: (SAMPLE_PLATFORMS.index(e.platform), e.name))),
        pip=tuple(sorted(lock.pip, key=lambda e: (SAMPLE_PLATFORMS.index(e.platform), e.name))),
        sources=tuple(
            msgspec.structs.replace(
                s,
                source=msgspec.structs.replace(
                    s.source, url=s.source.url.replace("user:secret@", "")
                ),
            )
            for s in lock.sources
        ),
        indexes=tuple(
            msgspec.structs.replace(i, url=i.url.replace("u:p@", "")) for i in lock.indexes
        ),
        overrides=tuple(sorted(lock.overrides, key=lambda o: o.override.name)),
        profiles=tuple(sorted(lock.profiles, key=lambda p: p.name)),
    )


# --- an A5 lock before and after a bump, for the diff
# -------------------------------------------------------------

DIFF_PLATFORMS = ("linux-64", "linux-aarch64")
VLLM_ASCEND = "https://github.com/vllm-project/vllm-ascend.git"
MINDSPEED = "https://gitcode.com/Ascend/MindSpeed.git"
OLD_COMMIT = "50e87d6" + "a" * 33
NEW_COMMIT = "1a2b3c4" + "b" * 33


def locked_source(
    name: str, url: str, ref: str, commit: str, cherry_picks: tuple[str, ...] = ()
) -> LockedSource:
    """A source `name` (distribution: its name with underscores) locked at `commit`."""
    return LockedSource(
        Source(name, url, ref, name.replace("-", "_"), cherry_picks=cherry_picks), commit
    )


def diff_lock(
    python: str = "3.11.8",
    transformers: str = "4.57.5",
    mbridge: str = "0.13.0",
    vllm_ascend: str = OLD_COMMIT,
    **changes: object,
) -> Lock:
    """The A5 lock the diff tests compare, with the versions a bump moves as parameters."""
    lock = make_lock(
        "a5",
        platforms=DIFF_PLATFORMS,
        conda=tuple(
            entry
            for platform in DIFF_PLATFORMS
            for entry in (
                conda_entry("pip", "24.2", platform),
                conda_entry("python", python, platform),
            )
        ),
        pip=tuple(
            entry
            for platform in DIFF_PLATFORMS
            for entry in (
                pip_entry("mbridge", mbridge, platform),
                pip_entry("torch", "2.10.0", platform),
                pip_entry("transformers", transformers, platform),
            )
        ),
        sources=(
            locked_source(
                "mindspeed",
                MINDSPEED,
                "0c6c0ceaa523a96032dee1539a52032155e6404e",
                "0c6c0ce" + "0" * 33,
            ),
            locked_source("vllm-ascend", VLLM_ASCEND, "releases/v0.23.0", vllm_ascend),
        ),
        pending=(Pending("torch-npu", "commercial release due Q2"),),
    )
    return msgspec.structs.replace(lock, **changes)


# What brings the bumped pip packages in, on both sides: transformers a requirement vllm-ascend
# declares, mbridge an override.
BUMP_VIA = {"transformers": "vllm-ascend requirements.txt:38", "mbridge": "override: mcore 0.15"}


def _with_reasons(lock: Lock) -> Lock:
    declared = TracedRequirement(
        "transformers>=4.57", Origin("requirements.txt", line=38, source="vllm-ascend")
    )
    sources = tuple(
        msgspec.structs.replace(s, requirements=(declared,))
        if s.source.name == "vllm-ascend"
        else s
        for s in lock.sources
    )
    override = AppliedOverride(Override("mbridge", "mbridge>=0.13", "mcore 0.15"))
    return msgspec.structs.replace(lock, sources=sources, overrides=(override,))


def bump() -> tuple[Lock, Lock]:
    """One conda package, two pip packages and one source commit bumped."""
    new = diff_lock(
        python="3.11.9", transformers="4.57.6", mbridge="0.15.1", vllm_ascend=NEW_COMMIT
    )
    return _with_reasons(diff_lock()), _with_reasons(new)


# --- a hand-built lock written as `envgen lock` writes one
# -------------------------------------------------------


def write_intact(project: Project, lock: Lock) -> Lock:
    """Write `lock` so that it passes the integrity check (lockio/integrity.py) as a lock `envgen
    lock` wrote would: every index an entry names is listed (on that entry's host), and the recipe
    is rendered from the lock as it reads back (canonical order, no credentials). Returns that
    read-back lock."""
    listed = {i.name for i in lock.indexes}
    missing = {e.index: e.url for e in lock.pip if e.index and e.index not in listed}
    indexes = (
        *lock.indexes,
        *(Index(name, f"https://{url_host(url)}/simple") for name, url in sorted(missing.items())),
    )
    write_lock(project, lock.env, msgspec.structs.replace(lock, indexes=indexes), "")
    back = read_lock(project, lock.env)
    assert back is not None
    write_lock(project, lock.env, back, render_recipe(back))
    return back
