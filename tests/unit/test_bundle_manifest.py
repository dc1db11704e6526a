"""bundle.json: which artifacts a lock's platforms need, members checked, a bundle fitting an env and lock."""

from __future__ import annotations

import pytest
from envgen.bundle.manifest import (
    GitPack,
    Manifest,
    Member,
    check_fits,
    member_problems,
    parse_manifest,
    render_manifest,
    wanted_artifacts,
)
from envgen.errors import InputError, VerificationError
from envgen.model import PipEntry

from tests.support.builders import conda_entry, make_lock

SHA_A, SHA_B = "a" * 64, "b" * 64


def manifest(*members: Member) -> Manifest:
    git = (GitPack("post", "https://github.com/x/post.git", "git/post.bundle", ("c" * 40,), ("d" * 40,)),)
    return Manifest("demo", "e" * 64, ("linux-64",), "1.0", members, git)


def test_a_wheel_shared_by_two_platforms_is_bundled_once_and_each_platform_keeps_its_conda_part() -> None:
    wheel = "https://x/simple/alpha-1.0-py3-none-any.whl"
    lock = make_lock(
        platforms=("linux-64", "linux-aarch64"),
        conda=(conda_entry("python", "3.11.7", "linux-64"), conda_entry("python", "3.11.7", "linux-aarch64")),
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
        p.startswith("conda/linux-aarch64/") for p in (w.path for w in wanted_artifacts(lock, ("linux-64",)))
    )


def test_one_file_name_with_two_contents_is_refused() -> None:
    lock = make_lock(
        platforms=("linux-64", "linux-aarch64"),
        pip=(
            PipEntry("alpha", "1.0", "linux-64", "https://x/alpha-1.0-py3-none-any.whl", SHA_A),
            PipEntry("alpha", "1.0", "linux-aarch64", "https://y/alpha-1.0-py3-none-any.whl", SHA_B),
        ),
    )
    with pytest.raises(InputError, match="with two sha256"):
        wanted_artifacts(lock, ("linux-64", "linux-aarch64"))


def test_a_url_not_ending_in_a_plain_file_name_is_refused() -> None:
    lock = make_lock(platforms=("linux-64",), pip=(PipEntry("a", "1", "linux-64", "https://x/..%2Fevil", SHA_A),))
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


def test_member_problems_name_each_missing_altered_or_unlisted_file() -> None:
    m = manifest(Member("pip/a.whl", SHA_A, 3), Member("git/post.bundle", SHA_B, 5))
    assert member_problems(m, {"pip/a.whl": (SHA_A, 3), "git/post.bundle": (SHA_B, 5), "bundle.json": ("x", 1)}) == []
    problems = member_problems(m, {"pip/a.whl": (SHA_B, 3), "extra.sh": (SHA_A, 1)})
    assert problems == [
        f"pip/a.whl: sha256 {SHA_B} (3 bytes), the manifest says {SHA_A}",
        "git/post.bundle: missing",
        "extra.sh: not in the manifest",
    ]


def test_a_bundle_fits_only_its_env_platform_and_lock() -> None:
    m = manifest()
    check_fits(m, "demo", "linux-64", "e" * 64)
    check_fits(m, "demo", "linux-64", None)
    with pytest.raises(InputError, match="for env demo, not a5"):
        check_fits(m, "a5", "linux-64", None)
    with pytest.raises(InputError, match="carries linux-64, this host is linux-aarch64"):
        check_fits(m, "demo", "linux-aarch64", None)
    with pytest.raises(InputError, match=f"input hash {'e' * 64}; locks/demo.yml has {'f' * 64}"):
        check_fits(m, "demo", "linux-64", "f" * 64)
