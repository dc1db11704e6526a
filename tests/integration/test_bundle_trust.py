"""A bundle is trusted only through the project's lock (or a content hash given on the command line)
and read as hostile input: every member held to the lock's hashes as it streams, nothing unlisted or
oversized written, a manifest that does not read is exit 4. Each case through the real CLI on the
served example's bundle, with nothing served."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from envgen.bundle.manifest import MANIFEST
from envgen.lockio.seal import UNSEALED, seal

from tests.support.bundles import (
    ENV,
    HOST,
    Bundled,
    invoke,
    members,
    relisted,
    written_tar,
    zstd_tar,
)
from tests.support.proc_bundled import bundled_copy

SOURCES, YML, RECIPE = f"locks/{ENV}.sources.toml", f"locks/{ENV}.yml", f"locks/{ENV}.install.sh"
FILE_LIMIT = 64 << 20  # what a child may write to one file: far above the example, far below 2 GiB


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Bundled:
    """The session's one lock and bundles of the example (tests/support/proc_bundled.py, which
    test_command_interrupts and test_bundle read too), its project and cache copied for this
    module (a command may take the env's mutex in locks/)."""
    return bundled_copy(tmp_path_factory, tmp_path_factory.mktemp("bundled"))


def install(tmp_path: Path, bundle: Path, root: Path, *extra: str) -> tuple[int, str]:
    """`envgen install ENV --from-bundle BUNDLE --root ROOT` into tmp_path/env, a venv."""
    args = ("--prefix", str(tmp_path / "env"), "--venv", "--root", str(root), *extra)
    return invoke("install", ENV, "--from-bundle", str(bundle), *args)


def left_nothing(tmp_path: Path) -> bool:
    """No prefix was made, and nothing of the unpacked bundle stays in the temp dir."""
    return not (tmp_path / "env").exists() and not list((tmp_path / "tmp").iterdir())


def forged(files: dict[str, bytes], wheel: str) -> tuple[dict[str, bytes], str]:
    """The bundle made from another lock with the same input hash: `wheel`'s bytes changed, the
    bundled yml and requirements naming its new sha256, the sources.toml sealed again (the seal is
    an unkeyed hash anyone can recompute), bundle.json listing it all. Its lock passes the
    integrity check; returned with its content hash."""
    old = hashlib.sha256(files[wheel]).hexdigest()
    files = {**files, wheel: files[wheel] + b"\0"}
    new = hashlib.sha256(files[wheel]).hexdigest()
    changed = [YML, f"requirements/{HOST}.txt"]
    for name in changed:
        assert old.encode() in files[name]
        files[name] = files[name].replace(old.encode(), new.encode())
    yml, recipe = files[YML].decode(), files[RECIPE].decode()
    line = re.compile(r'(?m)^content-hash = "[0-9a-f]{64}"$')
    blanked = line.sub(f'content-hash = "{UNSEALED}"', files[SOURCES].decode())
    files[SOURCES] = seal(yml, blanked, recipe).encode()
    content_hash = re.search(r'content-hash = "([0-9a-f]{64})"', files[SOURCES].decode())
    assert content_hash is not None
    return relisted(files, wheel, SOURCES, *changed), content_hash.group(1)


def test_another_lock_sealed_and_listed_anew_is_refused(offline: Bundled, tmp_path: Path) -> None:
    """Before: installed (exit 0); only the input hashes were compared."""
    files = members(offline.bundle)
    wheel = next(n for n in files if n.startswith("pip/demo_peft-"))
    bad, content_hash = forged(files, wheel)
    bundle = written_tar(tmp_path / "forged.tar", bad)
    code, out = install(tmp_path, bundle, offline.root)
    assert code == 2 and "the bundle carries another lock than the project's" in out, out
    assert f"{bundle}:{YML} differs from {YML} at line" in out, out
    assert left_nothing(tmp_path)
    # With no checkout, the hash of the reviewed lock is the trust root: the forged lock is another.
    (tmp_path / "none").mkdir()
    code, out = install(tmp_path, bundle, tmp_path / "none")
    assert code == 2 and "give --lock-sha256" in out, out
    code, out = install(tmp_path, bundle, tmp_path / "none", "--lock-sha256", offline.lock_sha256)
    assert code == 2, out
    assert f"content hash {content_hash}, not {offline.lock_sha256} (--lock-sha256)" in out, out
    assert left_nothing(tmp_path)


@pytest.mark.parametrize("kind", ["pip", "conda", "requirements", "git"])
def test_a_member_altered_with_bundle_json_to_match_is_exit_4_naming_it(
    offline: Bundled, tmp_path: Path, kind: str
) -> None:
    """bundle.json agrees with the altered member; the lock does not (a git pack: the locked commits
    are not in it). Refused before any prefix is made, nothing left behind. Before: a pip member was
    exit 70 (a KeyError) with the venv made and left."""
    files = members(offline.bundle)
    name = next(n for n in files if n.startswith(f"{kind}/"))
    files[name] = files[name] + b"\0"
    bundle = written_tar(tmp_path / "altered.tar", relisted(files, name))
    code, out = install(tmp_path, bundle, offline.root)
    assert code == 4, out
    assert name in out and "internal error" not in out, out
    if kind != "git":
        listed = hashlib.sha256(files[name]).hexdigest()
        assert f"{name}: bundle.json says sha256 {listed}, the lock" in out, out
    assert left_nothing(tmp_path)


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (b'{"format": 1, "env": "demo\xff\xfe"}', "not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"format": 1, "members": {"a": 1}}', "not a valid bundle manifest"),
    ],
    ids=["not-utf8", "nested", "malformed"],
)
def test_a_manifest_that_does_not_read_is_exit_4(
    offline: Bundled, tmp_path: Path, manifest: bytes, message: str
) -> None:
    bundle = written_tar(tmp_path / "bad.tar", {**members(offline.bundle), MANIFEST: manifest})
    code, out = install(tmp_path, bundle, offline.root)
    assert code == 4 and f"{bundle}:{MANIFEST}" in out and message in out, out
    assert left_nothing(tmp_path)


def _limited() -> None:
    """In the child: no file over FILE_LIMIT bytes (a write past it fails with EFBIG, no signal)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def envgen_limited(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real command line in a child that cannot write a file over FILE_LIMIT: a 2 GiB member
    written even in part past it ends in an error other than the refusal asserted."""
    return subprocess.run(
        [sys.executable, "-m", "envgen", *args],
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limited,
        check=False,
    )


ZEROS = 2 << 30
# The true sha256 of ZEROS zero bytes (hashlib.sha256(bytes(ZEROS)).hexdigest()), written out:
# hashing 2 GiB again took 1.7 s of CPU in every run.
ZEROS_SHA256 = "a7c744c13cc101ed66c29f672f92455547889cc586ce6d44fe76ae824958ea51"


@pytest.mark.parametrize("case", ["unlisted", "listed", "replacing", "swapped"])
def test_a_2_gib_member_of_zeros_is_never_written(
    offline: Bundled, tmp_path: Path, case: str
) -> None:
    """A few kB of zstd holding 2 GiB of zeros: not in bundle.json, listed with its true hash and
    size, put in place of a wheel with bundle.json to match, or in place of a wheel alone. Refused
    (exit 4) before its bytes are written, in a child that could not write them anyway (a partial
    write would fail otherwise). Before: written in full, then exit 4."""
    files = members(offline.bundle)
    names = list(files)
    wheel = next(n for n in names if n.startswith("pip/"))
    name = "pip/zeros.whl" if case in ("unlisted", "listed") else wheel
    position = 1 if name == "pip/zeros.whl" else names.index(wheel)
    size = len(files.pop(wheel)) if name == wheel else 0
    if case in ("listed", "replacing"):
        manifest = json.loads(files[MANIFEST])
        listed = {m["path"]: m for m in manifest["members"]}
        listed.setdefault(name, {"path": name, "url": ""}).update(sha256=ZEROS_SHA256, size=ZEROS)
        files[MANIFEST] = json.dumps({**manifest, "members": list(listed.values())}).encode()
    bundle = zstd_tar(tmp_path / "zeros.tar.zst", files, (name, ZEROS, position))
    # The 2 GiB of zeros add a few kB to the bundle's own members.
    assert bundle.stat().st_size < offline.bundle.stat().st_size + (1 << 20)
    expected = {
        "unlisted": f"member '{name}' is not a file the lock names (refused before it was written)",
        "listed": "bytes of members, more than the ceiling of",
        "replacing": "bytes of members, more than the ceiling of",
        "swapped": f"member {name} holds {ZEROS} bytes, not {size}",
    }[case]
    args = ("install", ENV, "--from-bundle", str(bundle), "--venv", "--root", str(offline.root))
    proc = envgen_limited(tmp_path, *args, "--prefix", str(tmp_path / "env"))
    assert proc.returncode == 4 and expected in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert left_nothing(tmp_path)


def test_members_climbing_out_linking_or_twice_are_refused(
    offline: Bundled,
    tmp_path: Path,
) -> None:
    files = members(offline.bundle)
    for evil in ("../../escape.txt", "/tmp/absolute-escape.txt", "pip"):
        bundle = written_tar(tmp_path / "evil.tar", {MANIFEST: b"", evil: b"outside", **files})
        code, out = install(tmp_path, bundle, offline.root)
        assert code == 4, out
        assert "is not a file the lock names (refused before it was written)" in out, out
        assert left_nothing(tmp_path) and not (tmp_path.parent / "escape.txt").exists()
    with tarfile.open(tmp_path / "link.tar", "w") as tar:
        for member, content in files.items():
            info = tarfile.TarInfo(member)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        link = tarfile.TarInfo("pip/link.whl")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    code, out = install(tmp_path, tmp_path / "link.tar", offline.root)
    assert code == 4 and "member 'pip/link.whl' is not a regular file" in out, out
    twice = next(n for n in files if n.startswith("conda/"))
    with tarfile.open(tmp_path / "twice.tar", "w") as tar:
        for member, content in [*files.items(), (twice, files[twice])]:
            info = tarfile.TarInfo(member)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    code, out = install(tmp_path, tmp_path / "twice.tar", offline.root)
    assert code == 4 and f"member {twice} comes twice" in out, out
    assert left_nothing(tmp_path)
