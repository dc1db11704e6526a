"""The SGLang route's install steps in a Lock (pure): what sources.toml records and refuses when
read back, what the consistency check counts as met, what the recipe renders and what valid sh it
is."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import msgspec
import pytest
from envgen.errors import InputError
from envgen.lockdiff.compare import diff_locks
from envgen.lockio.consistency import violations
from envgen.lockio.sources_toml import parse_sources_toml, render_sources_toml
from envgen.model import (
    ArchiveMember,
    Exclusion,
    Link,
    Lock,
    LockedArchive,
    LockedSource,
    Origin,
    Replacement,
    Source,
    TracedRequirement,
)
from envgen.recipe.render import archive_key, install_key, render_recipe

from tests.support.builders import digest, make_lock, pip_entry

PLATFORMS = ("linux-aarch64", "linux-64")
KERNELS = "https://github.com/sgl-project/sgl-kernel-npu"
URL = KERNELS + "/releases/download/2026.02.01/k-{}.zip"


def archive(platform: str, *, requires: tuple[str, ...] = ("torch==2.8.0",)) -> LockedArchive:
    machine = "aarch64" if platform == "linux-aarch64" else "x86_64"
    wheel = f"deep_ep-1.0.0-cp311-cp311-manylinux_2_28_{machine}.whl"
    members = (ArchiveMember(f"wheels/{wheel}", "deep-ep", "1.0.0", digest(wheel), requires),)
    return LockedArchive("sgl-kernel-npu", platform, URL.format(machine), digest(machine), members)


def sglang(commit: str = "a" * 40) -> LockedSource:
    replaced = (Replacement("python/pyproject_npu.toml", "python/pyproject.toml"),)
    source = Source(
        "sglang",
        "https://github.com/sgl-project/sglang.git",
        "v0.5.10",
        "sglang",
        subdirectory="python",
        extras=("srt_npu",),
        replacements=replaced,
    )
    origin = Origin("python/pyproject_npu.toml", line=57, source="sglang")
    requirements = (TracedRequirement("timm==1.0.16", origin),)
    return LockedSource(source, commit, requirements, tree="b" * 40)


def route_lock(**fields: object) -> Lock:
    values: dict[str, object] = {
        "pip": tuple(pip_entry("torch", "2.8.0", p) for p in PLATFORMS),
        "sources": (sglang(),),
        "archives": tuple(archive(p) for p in PLATFORMS),
        "links": (Link("deep_ep/deep_ep_cpp*.so", "deep_ep imports its extension top-level"),),
        "exclusions": (Exclusion("timm", "the script uninstalls it"),),
    }
    values.update(fields)
    return make_lock("a3-sglang", platforms=PLATFORMS, **values)


def test_sources_toml_records_every_step_and_reads_it_back() -> None:
    lock = route_lock(exclusions=(Exclusion("triton", "xgrammar's, not the NPU's", ("linux-64",)),))
    text = render_sources_toml(lock)
    read = parse_sources_toml(text, "a3-sglang.sources.toml").lock
    assert read.archives == lock.archives
    assert read.links == lock.links and read.exclusions == lock.exclusions
    assert read.sources[0].source == lock.sources[0].source
    assert '{ from = "python/pyproject_npu.toml", to = "python/pyproject.toml" }' in text


def test_an_archive_s_redirect_hosts_are_recorded_read_back_and_given_to_the_recipe() -> None:
    """Only an archive that lists some records the key: a lock from before it reads the same."""
    hosts = ("objects.githubusercontent.com", "cdn.example.com")
    listed = msgspec.structs.replace(archive("linux-64"), redirect_hosts=hosts)
    lock = route_lock(archives=(archive("linux-aarch64"), listed))
    text = render_sources_toml(lock)
    assert text.count("redirect-hosts = [") == 1
    assert parse_sources_toml(text, "a3-sglang.sources.toml").lock.archives == lock.archives
    recipe = render_recipe(lock)
    assert f" {listed.sha256} {archive_key(listed)} '{' '.join(hosts)}' " in recipe
    first = lock.archives[0]
    assert f" {first.sha256} {archive_key(first)} '' " in recipe


def test_a_lock_without_the_steps_renders_as_before() -> None:
    plain = render_sources_toml(make_lock("plain"))
    keys = ("archives", "links", "excluded", "subdirectory", "extras")
    assert not any(key in plain for key in keys)


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ('path = "wheels/deep_ep-', 'path = "../deep_ep-', "archives[0].members[0].path"),
        (f'url = "{KERNELS}', f'url = "https://u:t@{KERNELS[8:]}', "archives[0].url"),
        (f'url = "{KERNELS}', f'url = "file:///{KERNELS[8:]}', "archives[0].url"),
        (
            f'sha256 = "{digest("aarch64")}"\n',
            f'sha256 = "{digest("aarch64")}"\nredirect-hosts = ["https://evil.example"]\n',
            "archives[0].redirect-hosts[0]",
        ),
        (
            f'sha256 = "{digest("aarch64")}"\n',
            f'sha256 = "{digest("aarch64")}"\nredirect-hosts = ["-oProxy"]\n',
            "archives[0].redirect-hosts[0]",
        ),
        ('target = "deep_ep/deep_ep_cpp*.so"', 'target = "../../x.so"', "links[0].target"),
        ('target = "deep_ep/deep_ep_cpp*.so"', 'target = "$(reboot)*.so"', "links[0].target"),
        ('from = "python/pyproject_npu.toml"', 'from = "/etc/x"', "sources[0].replace[0].from"),
        ('subdirectory = "python"', 'subdirectory = "-e"', "sources[0].subdirectory"),
        ('"srt_npu"', '"srt npu"', "sources[0].extras[0]"),
    ],
)
def test_a_tampered_step_is_refused_when_the_lock_is_read(old: str, new: str, key: str) -> None:
    text = render_sources_toml(route_lock())
    assert old in text
    with pytest.raises(InputError) as raised:
        parse_sources_toml(text.replace(old, new, 1), "a3-sglang.sources.toml")
    assert f": {key}: " in raised.value.message


def test_what_is_left_out_counts_as_met_only_where_it_is_left_out() -> None:
    lock = route_lock()
    assert violations(lock, lambda platform: "3.11") == []
    only_x86 = route_lock(exclusions=(Exclusion("timm", "left out on x86_64", ("linux-64",)),))
    (found,) = violations(only_x86, lambda platform: "3.11")
    assert (found.platform, found.found) == ("linux-aarch64", "none locked")
    assert found.pair == "source sglang: python/pyproject_npu.toml:57 needs timm==1.0.16"


def test_an_archive_wheel_is_held_to_its_requirements_and_its_version() -> None:
    pinned = tuple(archive(p, requires=("torch==2.10.0",)) for p in PLATFORMS)
    found = violations(route_lock(archives=pinned), lambda platform: "3.11")
    assert [(v.pair, v.found) for v in found] == [
        ("deep-ep==1.0.0 (archive sgl-kernel-npu) needs torch==2.10.0", "2.8.0"),
    ] * 2
    needs = (("deep-ep", ">=2"),)
    ext = tuple(pip_entry("sglang-ext", "1.0", p, depends=needs) for p in PLATFORMS)
    wants_newer = route_lock(pip=(*route_lock().pip, *ext))
    assert {(v.pair, v.found) for v in violations(wants_newer, lambda platform: "3.11")} == {
        ("sglang-ext==1.0 needs deep-ep>=2", "1.0.0")
    }


def test_the_recipe_takes_each_platform_s_archive_replaces_before_building_and_links_last() -> None:
    text = render_recipe(route_lock())
    (aarch64, x86_64) = route_lock().archives
    assert f"\tlinux-aarch64) archive sgl-kernel-npu {aarch64.url} {aarch64.sha256} " in text
    assert f"\tlinux-64) archive sgl-kernel-npu {x86_64.url} {x86_64.sha256} " in text
    member = x86_64.members[0]
    assert f" {member.path} {member.sha256} deep-ep ;;\n" in text
    replaced = "\nreplace_files sglang python/pyproject_npu.toml python/pyproject.toml\n"
    pip = """\tpip_install -- --no-deps -e "$src"/sglang/'python[srt_npu]'\n"""
    link = "\nlink 'deep_ep/deep_ep_cpp*.so' ''\n"
    first = text.index("\tlinux-aarch64) archive sgl-kernel-npu ")
    assert first < text.index(replaced) < text.index(pip) < text.index(link)


def test_a_source_s_install_key_moves_with_its_layout_and_only_then() -> None:
    lock = route_lock()
    locked = lock.sources[0]
    bare = msgspec.structs.replace(
        locked, source=msgspec.structs.replace(locked.source, replacements=())
    )
    assert install_key(lock, locked) != install_key(lock, bare)
    other = msgspec.structs.replace(locked.source, extras=())
    assert install_key(lock, msgspec.structs.replace(locked, source=other)) != install_key(
        lock, locked
    )


@pytest.mark.parametrize("shell", ["sh", "bash --posix", "dash"])
def test_the_recipe_with_every_step_is_valid_sh(shell: str, tmp_path: Path) -> None:
    program = shell.split()[0]
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")
    script = tmp_path / "recipe.sh"
    script.write_text(render_recipe(route_lock()))
    proc = subprocess.run([*shell.split(), "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    shown = subprocess.run([*shell.split(), str(script), "--help"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "--archives DIR" in shown.stdout and "sgl-kernel-npu (linux-64): " in shown.stdout


def test_a_diff_names_an_archive_or_wheel_that_moved_and_a_step_added() -> None:
    old = route_lock()
    moved = msgspec.structs.replace(old.archives[1], sha256=digest("new zip"))
    members = (
        msgspec.structs.replace(moved.members[0], version="1.0.1", sha256=digest("new wheel")),
    )
    new = route_lock(
        archives=(old.archives[0], msgspec.structs.replace(moved, members=members)),
        exclusions=(*old.exclusions, Exclusion("triton", "xgrammar's", ("linux-64",))),
    )
    changes = {(c.section, c.name, c.kind): (c.old, c.new) for c in diff_locks(old, new).items}
    sha = old.archives[1].sha256[:12]
    assert changes == {
        ("archive", "sgl-kernel-npu (linux-64)", "changed"): (
            f"sha256 {sha} {moved.url}",
            f"sha256 {digest('new zip')[:12]} {moved.url}",
        ),
        ("archive", "sgl-kernel-npu (linux-64): deep-ep", "changed"): (
            f"1.0.0 sha256 {old.archives[1].members[0].sha256[:12]}",
            f"1.0.1 sha256 {digest('new wheel')[:12]}",
        ),
        ("excluded", "triton", "added"): (None, "xgrammar's (linux-64)"),
    }
