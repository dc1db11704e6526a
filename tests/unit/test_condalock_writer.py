"""locks/<env>.yml is written as conda-lock's own `write_conda_lock_file` writes it, byte for byte, though envgen
runs its steps itself (with libyaml's emitter where it writes the same, and without importing conda-lock's
readers and requests)."""

from __future__ import annotations

import copy
import string
import subprocess
import sys
from pathlib import Path

from envgen.lockio.condalock import (
    Channel,
    HashModel,
    LockedDependency,
    Lockfile,
    LockMeta,
    conda_lock_text,
    plain_ascii,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def written_by_conda_lock(content: Lockfile, tmp_path: Path) -> str:
    """What conda-lock's own writer writes (importing it runs conda-lock's `conda_lock.lockfile`, which envgen
    never imports: the module-level check below runs in a process of its own)."""
    from conda_lock.lockfile import write_conda_lock_file

    path = tmp_path / "lock.yml"
    write_conda_lock_file(content, path, metadata_choices=None, include_help_text=False)
    return path.read_text(encoding="utf-8")


# Words of every kind a lock may carry: plain names, specs with spaces and operators, YAML indicators, quotes,
# and long ones (the emitters fold long scalars at 80 columns, and mark keys over 128 characters).
_ASCII = "".join(c for c in string.printable if c.isprintable())
_PLAIN = st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=20)
_MARKS = st.sampled_from([">=1.0", "<2", "*", ",", " ", ": ", "- ", "#", "'", '"', "!", "&a", "{", "[", "? ", "%"])


def texts(alphabet: str | st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    word = st.text(alphabet, min_size=1, max_size=12)
    spec = st.lists(st.one_of(_PLAIN, word, _MARKS), max_size=14)
    return st.one_of(_PLAIN, word, spec.map(" ".join), spec.map("".join))


_ASCII_TEXT = texts(_ASCII)
# Anything at all: unicode, control characters, astral planes (conda-lock's own dumper writes those).
_ANY_TEXT = texts(st.characters(codec="utf-8", exclude_categories=("Cs",)))
_HEX = st.text("0123456789abcdef", min_size=32, max_size=64)


@st.composite
def dependencies(draw: st.DrawFn, text: st.SearchStrategy[str]) -> LockedDependency:
    conda = draw(st.booleans())
    return LockedDependency(
        name=draw(text),
        version=draw(text),
        manager="conda" if conda else "pip",
        platform=draw(st.sampled_from(["linux-64", "linux-aarch64"])),
        dependencies=draw(st.dictionaries(text, text, max_size=4)),
        url=draw(st.one_of(text.filter(bool), _PLAIN.map(lambda p: f"https://example.org/{p * 6}/{p}-1.0.tar.bz2"))),
        hash=HashModel(md5=draw(_HEX) if conda else None, sha256=draw(_HEX)),
        categories={"main"},
        build=draw(text) if conda else None,
    )


@st.composite
def lockfiles(draw: st.DrawFn, text: st.SearchStrategy[str]) -> Lockfile:
    platforms = draw(st.lists(st.sampled_from(["linux-64", "linux-aarch64"]), min_size=1, max_size=2, unique=True))
    digest = draw(_HEX)
    return Lockfile(
        package=draw(st.lists(dependencies(text), max_size=6)),
        metadata=LockMeta(
            content_hash=dict.fromkeys(platforms, digest),
            channels=[Channel(url=draw(text), used_env_vars=()) for _ in range(draw(st.integers(0, 2)))],
            platforms=platforms,
            sources=[draw(text)],
            custom_metadata={"envgen_input_hash": digest, "note": draw(text)},
        ),
    )


_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(content=lockfiles(_ASCII_TEXT))
def test_printable_ascii_is_dumped_by_libyaml_as_conda_lock_writes_it(content: Lockfile, tmp_path: Path) -> None:
    theirs = written_by_conda_lock(copy.deepcopy(content), tmp_path)
    ours = copy.deepcopy(content)
    assert conda_lock_text(ours) == theirs
    # every key here is short enough: this is libyaml's output, not the fallback's
    short = all(0 < len(k) <= 100 for p in ours.package for k in p.dependencies)
    assert plain_ascii(ours.to_v1().dict_for_output()) == short


@_SETTINGS
@given(content=lockfiles(_ANY_TEXT))
def test_any_text_is_written_as_conda_lock_writes_it(content: Lockfile, tmp_path: Path) -> None:
    theirs = written_by_conda_lock(copy.deepcopy(content), tmp_path)
    assert conda_lock_text(copy.deepcopy(content)) == theirs


def test_libyaml_is_there_and_conda_locks_readers_and_requests_are_not_imported() -> None:
    import yaml

    assert hasattr(yaml, "CSafeDumper")  # else every lock is dumped by the pure-Python dumper: right, but slow
    probe = (
        "import sys, envgen.lockio.conda_lock_yml; print(sorted({'conda_lock.lookup', 'requests'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
