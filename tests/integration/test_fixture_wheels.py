"""The fixture builder makes real, installable, reproducible wheels and a well-formed PEP 503
index."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import socket
import sys
import tarfile
import zipfile
from pathlib import Path

import uv
from envgen.example.http import serve_directory
from envgen.example.wheels import FixtureDist, build_dists, build_index
from envgen.process import run

DIST = FixtureDist("My.Pkg", "1.2", requires=("dep>=1", "extra-dep ; extra == 'fast'"), sdist=True)


def test_wheel_installs_with_uv_and_records_every_file(tmp_path: Path) -> None:
    wheel, sdist = build_dists([DIST], tmp_path / "dist")
    assert (wheel.name, sdist.name) == ("my_pkg-1.2-py3-none-any.whl", "my_pkg-1.2.tar.gz")
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read("my_pkg-1.2.dist-info/METADATA").decode()
        record = zf.read("my_pkg-1.2.dist-info/RECORD").decode()
        assert {line.split(",")[0] for line in record.splitlines()} == set(zf.namelist())
    assert "Requires-Dist: dep>=1" in metadata and "Provides-Extra: fast" in metadata
    target = tmp_path / "target"
    env = {"PATH": os.environ["PATH"], "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    cmd = [uv.find_uv_bin(), "pip", "install", "--no-config", "--offline", "--no-deps"]
    cmd += ["--python", sys.executable, "--target", str(target), str(wheel)]
    run(cmd, env=env)
    assert (target / "my_pkg" / "__init__.py").read_text() == '__version__ = "1.2"\n'
    with tarfile.open(sdist) as tar:
        pkg_info = tar.extractfile("my_pkg-1.2/PKG-INFO")
        assert pkg_info is not None and b"Metadata-Version: 2.2" in pkg_info.read()


def test_builds_are_reproducible_and_carry_build_tags(tmp_path: Path) -> None:
    rebuilt = FixtureDist(
        "torch", "2.10.0+cpu", build="3", tags=("cp311-cp311-manylinux_2_28_x86_64",)
    )
    first = build_dists([DIST, rebuilt], tmp_path / "a")
    second = build_dists([DIST, rebuilt], tmp_path / "b")
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]
    assert "torch-2.10.0+cpu-3-cp311-cp311-manylinux_2_28_x86_64.whl" in [p.name for p in first]
    with zipfile.ZipFile(
        tmp_path / "a" / "torch-2.10.0+cpu-3-cp311-cp311-manylinux_2_28_x86_64.whl"
    ) as zf:
        wheel_file = zf.read("torch-2.10.0+cpu.dist-info/WHEEL").decode()
    assert "Root-Is-Purelib: false" in wheel_file and "Build: 3" in wheel_file


def test_index_pages_link_files_with_their_sha256_and_pep_658_metadata(tmp_path: Path) -> None:
    simple = build_index(tmp_path / "idx", [DIST])
    assert "my-pkg" in (simple / "index.html").read_text()
    page = (simple / "my-pkg" / "index.html").read_text()
    links = re.findall(r'href="\.\./\.\./files/([^"#]+)#sha256=([0-9a-f]{64})"', page)
    assert sorted(name for name, _ in links) == ["my_pkg-1.2-py3-none-any.whl", "my_pkg-1.2.tar.gz"]
    files = tmp_path / "idx" / "files"
    for name, digest in links:
        assert hashlib.sha256((files / name).read_bytes()).hexdigest() == digest
    metadata = (files / "my_pkg-1.2-py3-none-any.whl.metadata").read_bytes()
    assert f'data-core-metadata="sha256={hashlib.sha256(metadata).hexdigest()}"' in page


def test_served_directory_with_auth_answers_head_without_a_body(tmp_path: Path) -> None:
    """A HEAD answer carries headers only, with auth required or not (HTTP forbids a body there)."""
    (tmp_path / "file.txt").write_text("payload")
    token = base64.b64encode(b"u:p").decode()
    with serve_directory(tmp_path, auth="u:p") as base:
        host, port = base.removeprefix("http://").split(":")
        for headers, status in (("", b"401"), (f"Authorization: Basic {token}\r\n", b"200")):
            with socket.create_connection((host, int(port)), timeout=10) as conn:
                conn.sendall(f"HEAD /file.txt HTTP/1.0\r\n{headers}\r\n".encode())
                answer = b"".join(iter(lambda: conn.recv(65536), b""))
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.split()[1] == status and body == b""
