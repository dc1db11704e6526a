"""bundle.json: which artifacts a lock's platforms need, a malformed manifest refused, every member
held to the lock's hashes, a bundle fitting an env and platform."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest
from envgen.bundle.manifest import (
    GitPack,
    Manifest,
    Member,
    check_fits,
    expected_members,
    parse_manifest,
    render_manifest,
    wanted_artifacts,
)
from envgen.errors import InputError, VerificationError
from envgen.lockio.exports.requirements_txt import render_find_links
from envgen.model import Lock, PipEntry

from tests.support.builders import conda_entry, locked_source, make_lock

SHA_A, SHA_B = "a" * 64, "b" * 64


def manifest(*members: Member) -> Manifest:
    git = (
        GitPack(
            "post", "https://github.com/x/post.git", "git/post.bundle", ("c" * 40,), ("d" * 40,)
        ),
    )
    return Manifest("demo", "e" * 64, ("linux-64",), "1.0", members, git)


def test_a_wheel_of_two_platforms_is_bundled_once_and_each_platform_keeps_its_conda_part() -> None:
    wheel = "https://x/simple/alpha-1.0-py3-none-any.whl"
    lock = make_lock(
        platforms=("linux-64", "linux-aarch64"),
        conda=(
            conda_entry("python", "3.11.7", "linux-64"),
            conda_entry("python", "3.11.7", "linux-aarch64"),
        ),
        pip=(
            PipEntry("alpha", "1.0", "linux-64", wheel, SHA_A),
            PipEntry("alpha", "1.0", "linux-aarch64", wheel, SHA_A),
        ),
    )
    paths = [w.path for w in wanted_artifacts(lock, ("linux-64", "linux-aarch64"))]
    assert paths.count("pip/alpha-1.0-py3-none-any.whl") == 1
    assert sum(p.startswith("conda/linux-64/") for p in paths) == 1
    assert sum(p.startswith("conda/linux-aarch64/") for p in paths) == 1
    assert not any(
        p.startswith("conda/linux-aarch64/")
        for p in (w.path for w in wanted_artifacts(lock, ("linux-64",)))
    )


def test_one_file_name_with_two_contents_is_refused() -> None:
    lock = make_lock(
        platforms=("linux-64", "linux-aarch64"),
        pip=(
            PipEntry("alpha", "1.0", "linux-64", "https://x/alpha-1.0-py3-none-any.whl", SHA_A),
            PipEntry(
                "alpha", "1.0", "linux-aarch64", "https://y/alpha-1.0-py3-none-any.whl", SHA_B
            ),
        ),
    )
    with pytest.raises(InputError, match="with two sha256"):
        wanted_artifacts(lock, ("linux-64", "linux-aarch64"))


def test_a_url_not_ending_in_a_plain_file_name_is_refused() -> None:
    lock = make_lock(
        platforms=("linux-64",), pip=(PipEntry("a", "1", "linux-64", "https://x/..%2Fevil", SHA_A),)
    )
    with pytest.raises(InputError, match="does not end in a plain file name"):
        wanted_artifacts(lock, ("linux-64",))


def test_the_manifest_round_trips_and_a_climbing_member_path_is_refused() -> None:
    one = manifest(Member("pip/a.whl", SHA_A, 3, "https://x/a.whl"))
    assert parse_manifest(render_manifest(one), "b.json") == one
    climbing = render_manifest(manifest(Member("../a.whl", SHA_A, 3)))
    with pytest.raises(VerificationError, match="not a plain path"):
        parse_manifest(climbing, "b.json")
    with pytest.raises(VerificationError, match="not a valid bundle manifest"):
        parse_manifest("{}", "b.json")


def test_a_malformed_manifest_is_exit_4_not_a_crash() -> None:
    good = json.loads(render_manifest(manifest(Member("pip/a.whl", SHA_A, 3))))
    for size in ("3", True, -1, 1.5):
        bad = {**good, "members": [{"path": "pip/a.whl", "sha256": SHA_A, "size": size}]}
        with pytest.raises(VerificationError, match="not a number of bytes"):
            parse_manifest(json.dumps(bad), "b.json")
    with pytest.raises(VerificationError, match="not a valid bundle manifest"):
        parse_manifest(json.dumps(good).replace('"size": 3', '"size": 1e400'), "b.json")
    twice = {**good, "members": good["members"] * 2}
    with pytest.raises(VerificationError, match="listed twice"):
        parse_manifest(json.dumps(twice), "b.json")
    for path in ("./pip/a.whl", "pip//a.whl", ".hidden", "pip/", "bundle.json"):
        odd = {**good, "members": [{"path": path, "sha256": SHA_A, "size": 3}]}
        with pytest.raises(VerificationError, match="not a plain path"):
            parse_manifest(json.dumps(odd), "b.json")
    short = {**good, "git": [{**good["git"][0], "commits": ["abc"]}]}
    with pytest.raises(VerificationError, match="not 40 hex digits"):
        parse_manifest(json.dumps(short), "b.json")
    with pytest.raises(RecursionError):
        parse_manifest("[" * 100_000 + "]" * 100_000, "b.json")


WHEEL = "pip/alpha-1.0-py3-none-any.whl"


def _lock() -> Lock:
    url = "https://x/simple/alpha-1.0-py3-none-any.whl"
    wheel = PipEntry("alpha", "1.0", "linux-64", url, SHA_A)
    post = locked_source("post", "https://github.com/x/post.git", "main", "c" * 40)
    return make_lock(platforms=("linux-64",), pip=(wheel,), sources=(post,))


def _bundle_of(lock: Lock, *extra: Member) -> tuple[Manifest, dict[str, Member]]:
    """A manifest listing exactly what `lock` names (as `envgen bundle` writes it), plus `extra`."""
    files = {"locks/demo.yml": Member("locks/demo.yml", SHA_B, 10)}
    requirements = render_find_links(lock, "linux-64").encode()
    digest = hashlib.sha256(requirements).hexdigest()
    members = [
        *files.values(),
        Member("requirements/linux-64.txt", digest, len(requirements)),
        Member(WHEEL, SHA_A, 7),
        Member("git/post.bundle", "d" * 64, 9),
        *extra,
    ]
    return dataclasses.replace(manifest(), members=tuple(members)), files


def test_every_member_is_held_to_the_lock_not_to_the_manifest() -> None:
    lock = _lock()
    good, files = _bundle_of(lock)
    expected = expected_members(lock, good, files)
    assert expected.problems == ()
    assert expected.members[WHEEL].sha256 == SHA_A
    # only the manifest knows a git pack's hash
    assert expected.members["git/post.bundle"].sha256 == "d" * 64
    assert [g.path for g in expected.git] == ["git/post.bundle"]
    forged = [dataclasses.replace(m, sha256=SHA_B) if m.path == WHEEL else m for m in good.members]
    forging = dataclasses.replace(good, members=tuple(forged))
    problems = expected_members(lock, forging, files).problems
    assert problems == (f"{WHEEL}: bundle.json says sha256 {SHA_B}, the lock {SHA_A}",)
    extra, _ = _bundle_of(lock, Member("pip/zeros.whl", SHA_A, 2 << 30))
    problems = expected_members(lock, extra, files).problems
    assert problems == ("pip/zeros.whl: not a file the lock names",)
    moved = GitPack("post", "https://evil.example/post.git", "git/post.bundle", ("c" * 40,), ())
    problems = expected_members(lock, dataclasses.replace(good, git=(moved,)), files).problems
    assert problems == (
        "bundle.json: git pack git/post.bundle is not one the lock's sources need",
        "git/post.bundle: no git pack in bundle.json",
        "git/post.bundle: not a file the lock names",
    )
    short = dataclasses.replace(good, members=good.members[1:])
    problems = expected_members(lock, short, files).problems
    assert problems == ("locks/demo.yml: missing from bundle.json",)


def test_a_bundle_fits_only_its_env_and_platform() -> None:
    m = manifest()
    check_fits(m, "demo", "linux-64")
    with pytest.raises(InputError, match="for env 'demo', not a5"):
        check_fits(m, "a5", "linux-64")
    with pytest.raises(InputError, match="carries linux-64, this host is linux-aarch64"):
        check_fits(m, "demo", "linux-aarch64")
