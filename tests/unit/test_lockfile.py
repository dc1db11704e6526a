"""lockio: rendering and parsing mirror each other, output is canonical, writes are all or
nothing."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

import filelock
import msgspec
import pytest
from conda_lock.lockfile import parse_conda_lock_file
from envgen.errors import InputError
from envgen.lockio.conda_lock_yml import conda_lock_source, parse_lock_yml, render_lock_yml
from envgen.lockio.env_mutex import env_lock
from envgen.lockio.exports.pylock import expected_pylock, parse_pylock, render_pylock
from envgen.lockio.input_hashes import LOCK_SCHEMA, input_digests, input_hash
from envgen.lockio.seal import UNSEALED, intact
from envgen.lockio.sources_toml import parse_sources_toml, render_sources_toml
from envgen.lockio.store import (
    parse_lock,
    read_files,
    read_lock,
    recorded_inputs,
    sealed_sources,
    write_lock,
)
from envgen.model import CondaEntry, Lock, Origin, PipEntry, Submodule
from envgen.project import Project
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.support import budget
from tests.support.builders import SAMPLE_PLATFORMS, digest, sample_lock, stripped
from tests.support.lock_strategies import KEY, locks

# --- yml
# ------------------------------------------------------------------------------------------------


def test_yml_round_trips_through_our_parser() -> None:
    lock = sample_lock()
    yml = parse_lock_yml(render_lock_yml(lock))
    assert yml.platforms == SAMPLE_PLATFORMS
    assert yml.input_hash == lock.input_hash
    assert yml.channels == ("https://conda.example.org/forge",)
    expected = stripped(lock)
    assert yml.conda == expected.conda
    # the index a pip entry came from lives in sources.toml, not in the conda-lock file
    assert yml.pip == tuple(msgspec.structs.replace(e, index=None) for e in expected.pip)
    assert [e.sdist for e in yml.pip if e.name == "mbridge"] == [True]


def test_yml_is_read_by_conda_locks_own_parser(tmp_path: Path) -> None:
    lock = sample_lock()
    path = tmp_path / "a5.yml"
    path.write_text(render_lock_yml(lock))

    parsed = parse_conda_lock_file(path)

    assert parsed.metadata.platforms == list(SAMPLE_PLATFORMS)
    assert parsed.metadata.content_hash == dict.fromkeys(SAMPLE_PLATFORMS, lock.input_hash)
    assert parsed.metadata.sources == [conda_lock_source("a5")]
    assert parsed.metadata.time_metadata is None and parsed.metadata.git_metadata is None
    got = {(d.manager, d.platform, d.name): d for d in parsed.package}
    assert len(got) == len(lock.conda) + len(lock.pip)
    for entry in lock.conda:
        dep = got[("conda", entry.platform, entry.name)]
        assert (dep.version, dep.build, dep.url) == (entry.version, entry.build, entry.url)
        assert (dep.hash.md5, dep.hash.sha256) == (entry.md5, entry.sha256)
        assert dep.dependencies == dict(entry.depends)
        assert dep.categories == {"main"}
    for pip in lock.pip:
        dep = got[("pip", pip.platform, pip.name)]
        assert (dep.version, dep.url, dep.hash.sha256, dep.hash.md5) == (
            pip.version,
            pip.url,
            pip.sha256,
            None,
        )
        assert dep.dependencies == dict(pip.depends)


def _sorted(dependencies: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(dependencies.items()))


def _packages(entries: Sequence[CondaEntry | PipEntry]) -> list[tuple[object, ...]]:
    return sorted(
        (e.platform, e.name, e.version, e.url, e.sha256, _sorted(dict(e.depends)))
        for e in entries
        # conda-lock leaves virtual packages out
        if isinstance(e, PipEntry) or not e.name.startswith("__")
    )


@settings(
    max_examples=budget.examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(lock=locks())
def test_any_lock_is_read_back_by_conda_locks_own_parser(lock: Lock, tmp_path: Path) -> None:
    """Whatever the strings of a lock (quotes, YAML indicators, control characters, astral planes),
    the yml is the same bytes each time and conda-lock's parser reads every package back as it was,
    or conda-lock's models refuse to write it (an entry without a URL)."""
    # One entry per package and platform, as a lock holds them.
    assume(len({(e.platform, e.name) for e in lock.pip}) == len(lock.pip))
    try:
        text = render_lock_yml(lock)
    except InputError:
        return
    assert render_lock_yml(lock) == text
    path = tmp_path / "lock.yml"
    path.write_text(text, encoding="utf-8")
    parsed = parse_conda_lock_file(path)
    for manager, entries in (("conda", lock.conda), ("pip", lock.pip)):
        found = [
            (d.platform, d.name, d.version, d.url, d.hash.sha256, _sorted(d.dependencies))
            for d in parsed.package
            if d.manager == manager
        ]
        assert sorted(found) == _packages(entries)


def test_libyaml_writes_and_reads_the_yml() -> None:
    """libyaml writes and reads the yml: without it PyYAML's own emitter and parser do, ten times
    slower."""
    import yaml

    assert hasattr(yaml, "CSafeDumper") and hasattr(yaml, "CSafeLoader")


def test_yml_same_inputs_same_bytes_whatever_the_entry_order() -> None:
    lock = sample_lock()
    shuffled = msgspec.structs.replace(lock, conda=lock.conda[::-1], pip=lock.pip[::-1])
    assert render_lock_yml(lock) == render_lock_yml(lock) == render_lock_yml(shuffled)


def test_yml_changes_with_one_version_in_one_line() -> None:
    lock = sample_lock()
    bumped = msgspec.structs.replace(
        lock, pip=(msgspec.structs.replace(lock.pip[0], version="1.1"), *lock.pip[1:])
    )
    old, new = render_lock_yml(lock).splitlines(), render_lock_yml(bumped).splitlines()
    assert len(old) == len(new)
    assert [(a, b) for a, b in zip(old, new, strict=True) if a != b] == [
        ("  version: '1.0'", "  version: '1.1'")
    ]


def test_yml_rejects_a_foreign_or_broken_file() -> None:
    text = render_lock_yml(sample_lock())
    refused = "x.yml: not a conda-lock version 1 file as envgen writes it: "
    with pytest.raises(InputError, match="x.yml: version"):
        parse_lock_yml(text.replace("version: 1\n", "version: 2\n"), "x.yml")
    with pytest.raises(InputError, match="envgen_input_hash"):
        parse_lock_yml(text.replace("envgen_input_hash", "other"), "x.yml")
    with pytest.raises(InputError, match=re.escape(refused) + r"package\.\d+\.manager: "):
        parse_lock_yml(text.replace("manager: pip", "manager: npm", 1), "x.yml")
    channels = re.search(r"^  channels:\n(?:  - .*\n|    .*\n)+", text, re.MULTILINE)
    assert channels is not None
    with pytest.raises(InputError, match=re.escape(refused + "metadata.channels: ")):
        parse_lock_yml(text.replace(channels.group(0), "  channels: 1\n"), "x.yml")


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        # a key conda-lock's v1 model has but envgen never writes, and one nobody defines
        (("  category: main\n", "  category: main\n  source: null\n"), r"package\.0\.source: "),
        (("metadata:\n", "metadata:\n  time_metadata: {}\n"), r"metadata\.time_metadata: "),
        (("version: 1\n", "version: 1\nextra: 1\n"), r"extra: "),
        # a number where a string belongs (YAML reads 2.0 unquoted as a float)
        (("version: '", "version: 2.0\n  old: '"), r"package\.0\."),
    ],
    ids=["source", "time-metadata", "top-level", "number"],
)
def test_yml_refuses_what_envgen_does_not_write_naming_the_key(
    edit: tuple[str, str], named: str
) -> None:
    text = render_lock_yml(sample_lock())
    assert edit[0] in text
    edited = text.replace(edit[0], edit[1], 1)
    with pytest.raises(InputError, match=r"x\.yml: not a conda-lock version 1 file .*: " + named):
        parse_lock_yml(edited, "x.yml")


def test_yml_refuses_a_package_listed_twice_and_a_conda_entry_without_md5() -> None:
    text = render_lock_yml(sample_lock())
    body = text[text.index("package:\n") + len("package:\n") :]
    first = body[: body.index("\n- ", 1) + 1]
    with pytest.raises(InputError, match=r"package '.+' \((conda|pip), .+\) is listed twice"):
        parse_lock_yml(text + first, "x.yml")
    conda = re.search(r"^    md5: [0-9a-f]+\n", text, re.MULTILINE)
    assert conda is not None
    with pytest.raises(InputError, match="a conda package's hash needs an md5"):
        parse_lock_yml(text.replace(conda.group(0), "", 1), "x.yml")


def test_render_rejects_an_entry_conda_lock_refuses() -> None:
    lock = sample_lock()
    broken = msgspec.structs.replace(lock, pip=(msgspec.structs.replace(lock.pip[0], url=""),))
    with pytest.raises(InputError, match=r"the lock of env 'a5' is not a conda-lock file: package"):
        render_lock_yml(broken)


# --- sources.toml
# --------------------------------------------------------------------------------------


def test_sources_toml_round_trips() -> None:
    lock = sample_lock()
    text = render_sources_toml(lock)
    parsed = parse_sources_toml(text)
    expected = stripped(lock)
    assert parsed.lock == msgspec.structs.replace(expected, platforms=(), conda=(), pip=())
    assert dict(parsed.pip_indexes) == {
        ("linux-aarch64", "triton-ascend"): "triton-ascend",
        ("linux-64", "torch"): "pytorch-cpu",
    }
    assert "secret" not in text and "u:p@" not in text
    assert render_sources_toml(lock) == text


def test_sources_toml_is_canonical() -> None:
    lock = sample_lock()
    reordered = msgspec.structs.replace(
        lock, overrides=lock.overrides[::-1], profiles=lock.profiles[::-1]
    )
    assert render_sources_toml(lock) == render_sources_toml(reordered)


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ('env = "a5"', 'env = "a5"\ncolour = "blue"', "colour: unknown key"),
        ('ref = "HEAD"', 'ref = "HEAD"\nbranch = "x"', r"sources\[1\].branch: unknown key"),
        ("line = 3", "line = 3\ncolumn = 2", r"sources\[0\].requirements\[0\].column: unknown key"),
        ('set-env = "', 'setenv = "', "cann.setenv: unknown key"),
        (
            "needs-cann = true",
            'needs-cann = "yes"',
            r"sources\[0\].needs-cann: expected true or false",
        ),
        ("schema = 1", "schema = 99", "schema: this envgen reads schema 1"),
        ("SOC_VERSION = ", '"SOC VERSION" = ', r'sources\[0\].env."SOC VERSION": .*variable'),
        # a value of a table: msgspec's path has no key for it, the message still names it
        ("SOC_VERSION = ", "SOC_VERSION = 1 #", r"sources\[0\].env.SOC_VERSION: expected a string"),
        ('    "1111', '    "-x",\n    "1111', r"sources\[0\].cherry-picks\[0\]: .*40-hex"),
        ('url = "https://pypi.org/simple"', 'url = "https://pypi.org/s x"', r"indexes\[0\].url: "),
        ('[[sources]]\nname = "verl"', '[[sources]\nname = "verl"', "TOML syntax error"),
    ],
)
def test_sources_toml_names_file_line_and_key_of_a_problem(old: str, new: str, key: str) -> None:
    """The file, the line the key is on (the table's, for a missing one), the key, what is wrong."""
    text = render_sources_toml(sample_lock())
    assert old in text
    edited = text.replace(old, new, 1)
    lines = zip(text.splitlines(), edited.splitlines(), strict=False)
    line = next(i for i, (a, b) in enumerate(lines, 1) if a != b)  # the first line edited
    with pytest.raises(InputError, match=rf"locks/a5.sources.toml:{line}: {key}"):
        parse_sources_toml(edited, "locks/a5.sources.toml")


def test_sources_toml_names_a_missing_key() -> None:
    text = render_sources_toml(sample_lock()).replace('commit = "' + "d" * 40 + '"\n', "")
    with pytest.raises(InputError, match=r"sources\[1\].commit: missing"):
        parse_sources_toml(text, "s.toml")


# Any text a lock's free-text fields may hold: no control characters or line separators, quotes,
# backslashes, TOML's own delimiters and escapes, characters outside the Basic Multilingual Plane,
# any other unicode.
_MARKS = ['"', "\\", "'", '"""', "\\u0041", "\\n", "#", "[x]", "= 1", "é", "\U0001f600"]
_FREE = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), max_size=16),
    st.lists(st.sampled_from(_MARKS)).map("".join),
)


@settings(max_examples=budget.examples(60), deadline=None)
@given(texts=st.lists(_FREE, min_size=9, max_size=9), name=KEY)
def test_free_text_reads_back(texts: list[str], name: str) -> None:
    """The fields a lock may hold free text in read back as written, whatever the escaping did. (A
    requirement's text is none: it must be a PEP 508 requirement, as test_lock_modes.py proves; here
    it is one with free text in its marker's string.)"""
    base = sample_lock()
    source, override = base.sources[0], base.overrides[0]
    origin = Origin(texts[1], texts[2], 7, texts[3])
    # PEP 508 strings have no escapes: neither their quote nor a backslash inside
    quoted = '"' + texts[0].replace('"', "").replace("\\", "") + '"'
    marked = f"demo; platform_version == {quoted}"
    req = msgspec.structs.replace(source.requirements[0], text=marked, origin=origin)
    source = msgspec.structs.replace(source, requirements=(req,), metadata_fallback=texts[5])
    reason = msgspec.structs.replace(override.override, reason=texts[4])
    override = msgspec.structs.replace(override, override=reason)
    lock = msgspec.structs.replace(
        base,
        sources=(source, *base.sources[1:]),
        overrides=(override, *base.overrides[1:]),
        activation_env=(("PYTHONPATH", texts[6]),),
        inputs=((name, texts[7]), *base.inputs),
        pending=(msgspec.structs.replace(base.pending[0], note=texts[8]),),
    )
    parsed = parse_sources_toml(render_sources_toml(lock)).lock
    inputs = tuple(dict(sorted(lock.inputs)).items())  # one value per key, sorted, as written
    expected = msgspec.structs.replace(
        stripped(lock), platforms=(), conda=(), pip=(), inputs=inputs
    )
    assert parsed == expected


@settings(max_examples=budget.examples(60), deadline=None)
@given(lock=locks())
def test_any_lock_is_written_as_toml_the_same_each_time_with_one_line_to_seal(lock: Lock) -> None:
    """Whatever a Lock holds (control characters, astral planes, odd keys), its sources.toml and
    pylocks are TOML, the same bytes for the same Lock, and the sources.toml has the one
    content-hash line `seal` fills."""
    text = render_sources_toml(lock)
    assert render_sources_toml(msgspec.structs.replace(lock)) == text
    assert tomllib.loads(text)["content-hash"] == UNSEALED
    assert text.count(f'\ncontent-hash = "{UNSEALED}"\n') == 1
    for platform in lock.platforms:
        pylock = render_pylock(lock, platform)
        assert render_pylock(lock, platform) == pylock
        tomllib.loads(pylock)


def test_the_sample_lock_seals_and_reads_back_the_same() -> None:
    lock = sample_lock()
    text = render_sources_toml(lock)
    yml, recipe = render_lock_yml(lock), "#!/bin/sh\n"
    sealed = sealed_sources(lock, yml, recipe)
    assert UNSEALED not in sealed and intact(yml, sealed, recipe)
    assert parse_sources_toml(sealed).lock == parse_sources_toml(text).lock
    for platform in lock.platforms:
        assert parse_pylock(render_pylock(lock, platform), "p") == expected_pylock(lock, platform)


# --- input hash
# ----------------------------------------------------------------------------------------


def _inputs_tree(root: Path, channel_url: str) -> tuple[Path, dict[str, Path]]:
    (root / "env-templates").mkdir(parents=True)
    (root / "channels").mkdir()
    matrix = root / "env-templates/a5.toml"
    matrix.write_text('schema = 1\n[env]\nname = "a5"\n')
    forge = root / "channels/conda-forge.toml"
    forge.write_text(f'kind = "conda"\nurl = "{channel_url}"\n')
    return matrix, {"conda-forge": forge}


def test_input_digests_name_every_component(tmp_path: Path) -> None:
    matrix, channels = _inputs_tree(tmp_path, "http://127.0.0.1:8000/forge")
    sources = sample_lock().sources
    vpkgs = {"linux-64": ["__glibc=2.28=0", "__unix=0=0"]}

    inputs = input_digests(matrix, channels, sources, vpkgs)

    assert [name for name, _ in inputs] == sorted(
        [
            "channel:conda-forge",
            "matrix",
            "schema",
            "source:transferqueue",
            "source:verl",
            "source:vllm-ascend",
            "virtual-packages:linux-64",
        ]
    )
    digests = dict(inputs)
    assert digests["matrix"] == hashlib.sha256(matrix.read_bytes()).hexdigest()
    assert digests["source:verl"] == sources[1].digest
    assert digests["source:transferqueue"] == "e" * 40
    assert digests["schema"] == str(LOCK_SCHEMA)


def test_input_hash_ignores_paths_but_not_channel_urls(tmp_path: Path) -> None:
    sources = sample_lock().sources
    vpkgs = {"linux-64": ["__unix=0=0", "__glibc=2.28=0"]}
    here = input_digests(
        *_inputs_tree(tmp_path / "a", "http://127.0.0.1:8000/forge"), sources, vpkgs
    )
    elsewhere = input_digests(
        *_inputs_tree(tmp_path / "b" / "c", "http://127.0.0.1:8000/forge"), sources, vpkgs
    )
    other_port = input_digests(
        *_inputs_tree(tmp_path / "d", "http://127.0.0.1:8001/forge"), sources, vpkgs
    )

    assert input_hash(here) == input_hash(elsewhere)
    assert input_hash(here) != input_hash(other_port)
    assert input_hash(here) == input_hash(here[::-1])
    changed = {n for (n, a), (_, b) in zip(here, other_port, strict=True) if a != b}
    assert changed == {"channel:conda-forge"}


def test_input_hash_follows_sources_and_virtual_packages(tmp_path: Path) -> None:
    matrix, channels = _inputs_tree(tmp_path, "https://conda.example.org/forge")
    sources = sample_lock().sources
    base = input_digests(matrix, channels, sources, {"linux-64": ["__glibc=2.28=0"]})
    moved = (msgspec.structs.replace(sources[0], digest=digest("moved")), *sources[1:])
    assert input_hash(base) != input_hash(
        input_digests(matrix, channels, moved, {"linux-64": ["__glibc=2.28=0"]})
    )
    assert input_hash(base) != input_hash(
        input_digests(matrix, channels, sources, {"linux-64": ["__glibc=2.34=0"]})
    )


def test_input_digests_name_a_missing_channel_file(tmp_path: Path) -> None:
    matrix, _ = _inputs_tree(tmp_path, "https://x")
    with pytest.raises(InputError, match="channel file of 'gone'"):
        input_digests(matrix, {"gone": tmp_path / "channels/gone.toml"}, (), {})


# --- locks/ on disk
# ------------------------------------------------------------------------------------


RECIPE = "#!/usr/bin/env bash\nset -euo pipefail\necho install\n"


def _snapshot(project: Project) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(project.locks_dir.iterdir()) if p.is_file()}


def test_write_then_read_gives_the_lock_back(tmp_path: Path) -> None:
    project = Project(tmp_path)
    lock = sample_lock()

    assert read_lock(project, "a5") is None
    write_lock(project, "a5", lock, RECIPE)

    assert read_lock(project, "a5") == stripped(lock)
    assert project.install_sh("a5").read_text() == RECIPE
    assert project.install_sh("a5").stat().st_mode & 0o777 == 0o755
    assert project.lock_yml("a5").read_text() == render_lock_yml(lock)
    # The sources.toml as it renders, its derived hash recorded (no derived file here), sealed
    # with the content hash of the three files.
    assert project.sources_toml("a5").read_text() == sealed_sources(
        lock, render_lock_yml(lock), RECIPE
    )
    assert sorted(p.name for p in project.locks_dir.iterdir()) == [
        "a5.install.sh",
        "a5.sources.toml",
        "a5.yml",
    ]


def test_parse_lock_joins_both_files_without_touching_disk() -> None:
    lock = sample_lock()
    joined = parse_lock(render_lock_yml(lock), render_sources_toml(lock), "a.yml", "a.sources.toml")
    assert joined == stripped(lock)
    other = render_sources_toml(msgspec.structs.replace(lock, input_hash=digest("other")))
    with pytest.raises(InputError, match="a.yml and a.sources.toml are not from one"):
        parse_lock(render_lock_yml(lock), other, "a.yml", "a.sources.toml")


def test_read_lock_refuses_another_envs_files(tmp_path: Path) -> None:
    project = Project(tmp_path)
    write_lock(project, "a5", sample_lock(), RECIPE)
    for path in project.locks_dir.iterdir():
        path.rename(path.with_name(path.name.replace("a5", "a2")))
    with pytest.raises(InputError, match="lock of 'a5', not 'a2'"):
        read_lock(project, "a2")


def test_read_lock_refuses_files_of_two_runs(tmp_path: Path) -> None:
    project = Project(tmp_path)
    lock = sample_lock()
    write_lock(project, "a5", lock, RECIPE)
    other = msgspec.structs.replace(lock, input_hash=digest("other"))
    project.sources_toml("a5").write_text(render_sources_toml(other))
    with pytest.raises(InputError, match="not from one `envgen lock` run"):
        read_lock(project, "a5")
    project.lock_yml("a5").unlink()
    with pytest.raises(InputError, match="a5.yml is missing"):
        read_lock(project, "a5")


def test_failed_render_leaves_old_files_intact(tmp_path: Path) -> None:
    project = Project(tmp_path)
    write_lock(project, "a5", sample_lock(), RECIPE)
    before = _snapshot(project)
    broken = msgspec.structs.replace(
        sample_lock(), pip=(msgspec.structs.replace(sample_lock().pip[0], url=""),)
    )

    with pytest.raises(InputError):
        write_lock(project, "a5", broken, "echo new\n")

    assert _snapshot(project) == before


def test_failed_write_midway_leaves_old_files_intact(tmp_path: Path) -> None:
    project = Project(tmp_path)
    write_lock(project, "a5", sample_lock(), RECIPE)
    before = _snapshot(project)
    newer = msgspec.structs.replace(sample_lock(), pending=(), input_hash=digest("newer"))

    # The third file cannot be encoded: the first two temp files exist by then and must not survive.
    with pytest.raises(InputError, match="cannot write the lock of env 'a5'"):
        write_lock(project, "a5", newer, "echo \udcff\n")

    assert _snapshot(project) == before
    assert sorted(p.name for p in project.locks_dir.iterdir()) == [
        "a5.install.sh",
        "a5.sources.toml",
        "a5.yml",
    ]


def test_failed_rename_puts_back_the_files_already_renamed(tmp_path: Path) -> None:
    project = Project(tmp_path)
    write_lock(project, "a5", sample_lock(), RECIPE)
    before = _snapshot(project)
    # A directory where the recipe goes: its rename, the last one, fails.
    project.install_sh("a5").unlink()
    project.install_sh("a5").mkdir()
    (project.install_sh("a5") / "keep").write_text("x")
    del before["a5.install.sh"]

    with pytest.raises(InputError):
        write_lock(
            project,
            "a5",
            msgspec.structs.replace(sample_lock(), pending=(), input_hash=digest("newer")),
            RECIPE,
        )

    assert _snapshot(project) == before
    assert sorted(p.name for p in project.locks_dir.iterdir()) == [
        "a5.install.sh",
        "a5.sources.toml",
        "a5.yml",
    ]
    shutil.rmtree(project.install_sh("a5"))


def test_env_lock_excludes_a_second_holder_and_leaves_no_file_behind(tmp_path: Path) -> None:
    project = Project(tmp_path)
    with env_lock(project, "a5"):
        other = filelock.SoftFileLock(project.locks_dir / ".a5.lock")
        with pytest.raises(filelock.Timeout):
            other.acquire(timeout=0)
    assert list(project.locks_dir.iterdir()) == []
    with pytest.raises(RuntimeError), env_lock(project, "a5"):
        raise RuntimeError("the re-lock failed")
    assert list(project.locks_dir.iterdir()) == []
    other.acquire(timeout=0)
    other.release()


def test_the_recorded_inputs_are_the_sources_tomls_and_the_source_digests(tmp_path: Path) -> None:
    project = Project(tmp_path)
    assert recorded_inputs(read_files(project, "a5")) is None
    lock = sample_lock()
    lock = msgspec.structs.replace(
        lock, inputs=(*lock.inputs, ("source:vllm", digest("vllm-files")))
    )
    write_lock(project, "a5", lock, RECIPE)
    recorded = recorded_inputs(read_files(project, "a5"))
    assert recorded is not None
    assert recorded.input_hash == lock.input_hash
    assert recorded.inputs == dict(lock.inputs)
    assert recorded.sources == {"vllm": digest("vllm-files")}
    assert read_files(project, "a5").intact
    other = msgspec.structs.replace(lock, input_hash=digest("other"))
    project.sources_toml("a5").write_text(render_sources_toml(other))
    assert not read_files(project, "a5").intact  # the files disagree: the no-op lock re-locks


def _plant(path: Path, kind: str, tmp_path: Path) -> None:
    """A FIFO, or a symlink to a file outside the project, where a lock file should be."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        outside = tmp_path / "outside.toml"
        outside.write_text(render_sources_toml(sample_lock()))
        path.symlink_to(outside)


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_planted_sources_toml_is_refused_unread_and_never_written_over(
    kind: str,
    tmp_path: Path,
) -> None:
    """The reader opens nothing but a regular file (a FIFO would block it, a symlink lead anywhere),
    and the writer replaces nothing but one: nothing is written then, the previous files stay."""
    project = Project(tmp_path / "project")
    write_lock(project, "a5", sample_lock(), RECIPE)
    path = project.sources_toml("a5")
    _plant(path, kind, tmp_path)
    texts = read_files(project, "a5")
    assert texts.sources is None and texts.unreadable is not None
    assert recorded_inputs(texts) is None and not texts.intact
    with pytest.raises(InputError, match="sources.toml (is a symbolic link|is not a regular file)"):
        read_lock(project, "a5")
    before = project.lock_yml("a5").read_bytes()
    with pytest.raises(InputError, match="sources.toml is not a regular file: envgen does not"):
        write_lock(project, "a5", msgspec.structs.replace(sample_lock(), pending=()), RECIPE)
    assert project.lock_yml("a5").read_bytes() == before
    assert path.is_fifo() if kind == "fifo" else path.is_symlink()
    assert (tmp_path / "outside.toml").exists() or kind == "fifo"


KERNELS = Submodule("csrc/kernels", "https://github.com/org/kernels.git", "1" * 40)
NESTED = Submodule("csrc/kernels/third_party/grand", "https://github.com/org/grand.git", "2" * 40)


def with_submodules(lock: Lock, *subs: Submodule, **source: object) -> Lock:
    first, *rest = lock.sources
    changed = msgspec.structs.replace(
        first, source=msgspec.structs.replace(first.source, **source), submodules=subs
    )
    return msgspec.structs.replace(lock, sources=(changed, *rest))


def test_sources_toml_records_each_submodule_and_an_opt_out_with_its_reason() -> None:
    lock = sample_lock()
    text = render_sources_toml(with_submodules(lock, KERNELS, NESTED))
    assert "submodules" not in render_sources_toml(lock)  # sources without any keep their bytes
    assert text.count("[[sources.submodules]]") == 2
    assert (
        f'path = "csrc/kernels"\nurl = "https://github.com/org/kernels.git"\ncommit = "{"1" * 40}"'
        in text
    )
    parsed = parse_sources_toml(text).lock.sources
    assert [s.submodules for s in parsed] == [(KERNELS, NESTED)] + [()] * (len(parsed) - 1)
    assert all(s.source.submodules for s in parsed)

    opted_out = render_sources_toml(
        with_submodules(lock, submodules=False, submodules_reason="built without")
    )
    assert 'submodules-reason = "built without"' in opted_out
    first = parse_sources_toml(opted_out).lock.sources[0].source
    assert (first.submodules, first.submodules_reason) == (False, "built without")


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("commit", "1" * 39, "is not a full 40-hex commit"),
        ("commit", "--upload-pack=touch /tmp/x", "is not a full 40-hex commit"),
        ("path", "../../outside", "is not a relative path inside the repository"),
        ("path", "/etc", "is not a relative path inside the repository"),
        ("path", "csrc/.git/hooks", "is not a relative path inside the repository"),
        ("path", "a\nb", "must not contain control characters"),
        ("url", "ext::sh -c touch% /tmp/x", "must be a non-empty URL without whitespace"),
        ("url", "--upload-pack=touch", "starts with '-'"),
        ("url", "ext::git-remote-evil", "is neither a URL git fetches"),
    ],
)
def test_sources_toml_refuses_a_tampered_submodule(field: str, value: str, problem: str) -> None:
    # The recipe checks out and verifies what these name: a lock edited in a pull request is
    # untrusted.
    lock = with_submodules(
        sample_lock(), KERNELS, msgspec.structs.replace(NESTED, **{field: value})
    )
    with pytest.raises(
        InputError,
        match=rf"locks/x.sources.toml:\d+: sources\[0\]\.submodules\[1\]\.{field}: .*{problem}",
    ):
        parse_sources_toml(render_sources_toml(lock), "locks/x.sources.toml")


def test_sources_toml_refuses_submodules_of_a_source_that_opts_out() -> None:
    lock = with_submodules(sample_lock(), KERNELS, submodules=False, submodules_reason="none")
    with pytest.raises(InputError, match="submodules-reason checks out no submodules"):
        parse_sources_toml(render_sources_toml(lock), "x.toml")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("url", "https://files.example/a.whl\n--index-url https://evil.example/simple"),
        ("url", "-e git+https://evil.example/x"),
        ("url", "ext::sh -c touch% /tmp/x"),
        ("name", "a\n-r /etc/shadow"),
        ("name", "--trusted-host"),
        ("version", "1.0 --extra-index-url=https://evil.example/simple"),
        ("sha256", "a" * 63 + "\n-e ."),
    ],
)
def test_yml_refuses_an_entry_whose_strings_could_become_pip_options(
    field: str, value: str
) -> None:
    # The installer writes `name @ url --hash=sha256:...` lines from these for pip: a newline or a
    # leading `-` would add an option line (an index, an editable install) that no lock diff shows
    # as such.
    lock = sample_lock()
    hostile = msgspec.structs.replace(
        lock, pip=(msgspec.structs.replace(lock.pip[0], **{field: value}), *lock.pip[1:])
    )
    with pytest.raises(InputError, match=rf"x.yml: package .*: {field}: "):
        parse_lock_yml(render_lock_yml(hostile), "x.yml")


def test_yml_refuses_a_platform_envgen_does_not_lock() -> None:
    # Platforms reach markdown (`envgen diff`'s <summary>), Nix system names and file names
    # unquoted.
    text = render_lock_yml(sample_lock())
    hostile = text.replace("- linux-64\n", "- linux-64</b></summary><!--\n", 1)
    with pytest.raises(
        InputError, match=r"x.yml: platform 'linux-64</b></summary><!--' is not one envgen locks"
    ):
        parse_lock_yml(hostile, "x.yml")
    entry = text.replace("platform: linux-64\n", "platform: linux-64<!--\n", 1)
    with pytest.raises(InputError, match=r"x.yml: platform 'linux-64<!--' is not one envgen locks"):
        parse_lock_yml(entry, "x.yml")


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        (
            '"https://pypi.org/simple"',
            '"https://pypi.org/simple --extra-index-url https://evil.example/simple"',
            "url",
        ),
        ('"https://pypi.org/simple"', '"-e git+https://evil.example/x"', "url"),
        ('"https://pypi.org/simple"', '"${MIRROR}/simple -e git+https://evil.example/x"', "url"),
        (
            'trusted-host = "triton.example.org"',
            'trusted-host = "triton.example.org -e ."',
            "trusted-host",
        ),
    ],
)
def test_sources_toml_refuses_an_index_that_would_add_options(old: str, new: str, key: str) -> None:
    # The requirements export writes `--index-url URL` and `--trusted-host HOST` lines from these.
    text = render_sources_toml(sample_lock())
    assert old in text
    with pytest.raises(InputError, match=rf"indexes\[\d\]\.{key}: "):
        parse_sources_toml(text.replace(old, new, 1), "locks/a5.sources.toml")


def test_an_input_hash_that_is_not_a_sha256_is_refused() -> None:
    # Every derived file writes it in its header (`# envgen-input-hash: ...`) and the Nix dev shell
    # puts it in a shell command: a line break or `$(...)` in it must not get that far.
    text = render_lock_yml(sample_lock())
    recorded = sample_lock().input_hash
    hostile = text.replace(recorded, "0\\n--index-url https://evil.example/simple $(touch x)")
    with pytest.raises(InputError, match="x.yml: .*envgen_input_hash"):
        parse_lock_yml(hostile, "x.yml")
    sources = render_sources_toml(sample_lock())
    with pytest.raises(InputError, match="input-hash"):
        parse_sources_toml(sources.replace(recorded, "0 $(touch x)"), "a5.sources.toml")


def test_a_lock_is_parsed_once_per_text(tmp_path: Path) -> None:
    """The preflight and the re-lock both read the previous lock: the second read is the first one's
    Lock, and a file written anew (or edited) is parsed again."""
    project = Project(tmp_path)
    lock = sample_lock()
    write_lock(project, "a5", lock, "#!/bin/sh\n")
    first = read_lock(project, "a5")
    assert first is not None and first.pending and read_lock(project, "a5") is first
    write_lock(project, "a5", msgspec.structs.replace(lock, pending=()), "#!/bin/sh\n")
    second = read_lock(project, "a5")
    assert second is not None and second.pending == () and read_lock(project, "a5") is second
    yml = project.lock_yml("a5")
    # edited in place: read again, refused
    yml.write_text(yml.read_text().replace("platforms:", "platform:", 1))
    with pytest.raises(InputError):
        read_lock(project, "a5")


def test_reading_and_writing_a_lock_imports_no_conda_lock(tmp_path: Path) -> None:
    """conda-lock's package imports its whole command line: envgen reads and writes its format
    itself, so a command reading a lock does not pay for it (conda-lock is the consumer the tests
    prove the files against)."""
    script = (
        "import sys\n"
        "from envgen.lockio.conda_lock_yml import parse_lock_yml, render_lock_yml\n"
        "from tests.support.builders import sample_lock\n"
        "assert parse_lock_yml(render_lock_yml(sample_lock())).pip\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'conda_lock'))\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"
