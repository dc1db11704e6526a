"""Bundles for tests: the example locked and bundled while served, then used with nothing served;
members read, rewritten and listed again as in a hostile bundle."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner
from envgen.bundle import archive
from envgen.bundle.manifest import MANIFEST
from envgen.cli import cli
from envgen.platforms import host_platform

from tests.support.example import served_example
from tests.support.venvs import seeded_cache

ENV = "demo"
HOST = host_platform()
OTHER = "linux-aarch64" if HOST == "linux-64" else "linux-64"


@dataclass(frozen=True)
class Bundled:
    root: Path
    cache: Path
    bundle: Path
    other: Path
    output: str

    @property
    def lock_sha256(self) -> str:
        """The content hash `envgen bundle` printed for the lock."""
        return self.output.rsplit("--lock-sha256 ", 1)[1].split()[0]


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.output


def bundle_example(factory: pytest.TempPathFactory) -> Iterator[Bundled]:
    """The example locked and bundled for this host while served; then nothing is served."""
    work = factory.mktemp("bundle")
    cache = seeded_cache(factory, work / "cache")
    with served_example(factory, work / "example") as example:
        env = {"GIT_CONFIG_GLOBAL": str(example.gitconfig), "GIT_CONFIG_NOSYSTEM": "1"}
        env["ENVGEN_CACHE_DIR"] = str(cache)
        root = ("--root", str(example.root))
        code, out = invoke("lock", ENV, "-q", *root, env=env)
        assert code == 0, out
        bundle = work / "demo.tar.zst"
        code, out = invoke("bundle", ENV, "--platform", HOST, "-o", str(bundle), *root, env=env)
        assert code == 0, out
        other = work / "other.tar"
        args = ("bundle", ENV, "--platform", OTHER, "-o", str(other), *root)
        assert invoke(*args, env=env)[0] == 0
    yield Bundled(example.root, cache, bundle, other, out)


def go_offline(bundled: Bundled, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Bundled:
    """No server runs; git sees no config that could map the canonical URLs to the local
    repositories; the temp dir is the test's own, so that what a command leaves there shows."""
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(bundled.cache))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return bundled


def members(bundle: Path) -> dict[str, bytes]:
    with archive._open_tar(bundle) as tar:
        return {info.name: tar.extractfile(info).read() for info in tar}  # type: ignore[union-attr]


def written_tar(out: Path, files: Mapping[str, bytes]) -> Path:
    """A plain tar at `out` holding `files` (member name -> content), in that order."""
    with tarfile.open(out, "w") as tar:
        for member, content in files.items():
            info = tarfile.TarInfo(member)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return out


def rewritten(bundle: Path, out: Path, name: str) -> Path:
    """A copy of `bundle` (as plain tar) with one byte of member `name` changed."""
    files = members(bundle)
    data = bytearray(files[name])
    data[len(data) // 2] ^= 0xFF
    files[name] = bytes(data)
    return written_tar(out, files)


def relisted(files: dict[str, bytes], *names: str) -> dict[str, bytes]:
    """`files` with bundle.json listing each of `names` with the sha256 and size it now has (added
    when not listed yet), as one who alters a bundle and its manifest together would."""
    manifest = json.loads(files[MANIFEST])
    listed = {m["path"]: m for m in manifest["members"]}
    for name in names:
        entry = listed.setdefault(name, {"path": name, "url": ""})
        entry["sha256"], entry["size"] = hashlib.sha256(files[name]).hexdigest(), len(files[name])
    manifest["members"] = list(listed.values())
    return {**files, MANIFEST: (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()}


def zstd_tar(
    out: Path,
    files: Mapping[str, bytes],
    zeros: tuple[str, int, int] | None = None,
) -> Path:
    """A .tar.zst at `out` holding `files`, with `zeros` = (name, size, position): a member of
    `size` zero bytes inserted at that position, streamed (a few kB compressed per GiB).

    The tar is written block by block as tarfile writes a stream (each member's header as
    TarInfo.tobuf makes it, its data padded to a block, two zero blocks and a full record at the
    end), the zeros handed to the compressor 64 MiB at a time from one buffer: through tarfile's
    copy loop, 2 GiB of zeros cost more than a second of CPU in Python alone."""
    items: list[tuple[str, int, bytes | None]] = []
    items += [(name, len(content), content) for name, content in files.items()]
    if zeros is not None:
        name, size, position = zeros
        items.insert(position, (name, size, None))
    compressor = zstandard.ZstdCompressor(level=1).compressobj()
    chunk = memoryview(bytes(64 << 20))
    written = 0
    with out.open("wb") as raw:

        def write(data: bytes | memoryview) -> None:
            nonlocal written
            raw.write(compressor.compress(data))
            written += len(data)

        for name, size, content in items:
            info = tarfile.TarInfo(name)
            info.size = size
            write(info.tobuf(tarfile.DEFAULT_FORMAT, tarfile.ENCODING, "surrogateescape"))
            if content is not None:
                write(content)
            else:
                for start in range(0, size, len(chunk)):
                    write(chunk[: min(len(chunk), size - start)])
            write(bytes(-size % tarfile.BLOCKSIZE))
        write(bytes(2 * tarfile.BLOCKSIZE))
        write(bytes(-written % tarfile.RECORDSIZE))
        raw.write(compressor.flush())
    return out
