"""Estimate the pip part of an A5 bundle from PyPI: the A5 PyPI set resolved by envgen's pip stage,
each locked file's size as PyPI's JSON simple API (PEP 700) gives it.

    .venv/bin/python benchmarks/a5_bundle_size.py [--platform linux-aarch64] [--add NAME ...]

The set is tests/support/a5.py's (a5.toml's PyPI pins and what verl's requirements-npu.txt adds);
`--add` puts more names in (e.g. verl's own runtime requirements). Where the whole A5 lock can be
made, `envgen bundle` prints the real figure; this is for where GitHub, conda-forge and the
triton-ascend index are out of reach.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import msgspec
import requests
from envgen.model import PipPackage
from packaging.utils import canonicalize_name
from rich.filesize import decimal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.a5 import a5_pypi_matrix  # noqa: E402
from tests.support.builders import at, lock_pip  # noqa: E402

SIMPLE = "https://pypi.org/simple"
JSON = "application/vnd.pypi.simple.v1+json"


def sizes_by_sha256(session: requests.Session, name: str) -> dict[str, int]:
    """Every file PyPI lists for `name`, its size by sha256 (PEP 700 gives `size` in the JSON simple
    API)."""
    response = session.get(
        f"{SIMPLE}/{canonicalize_name(name)}/", headers={"Accept": JSON}, timeout=60
    )
    response.raise_for_status()
    return {
        f["hashes"]["sha256"]: int(f["size"])
        for f in response.json()["files"]
        if "sha256" in f["hashes"]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--platform", default="linux-aarch64")
    parser.add_argument(
        "--add", nargs="*", default=[], metavar="NAME", help="more PyPI names in the set"
    )
    args = parser.parse_args()
    matrix = a5_pypi_matrix((args.platform,))
    matrix = msgspec.structs.replace(
        matrix, packages=matrix.packages + tuple(PipPackage(n) for n in args.add)
    )
    with tempfile.TemporaryDirectory(prefix="envgen-a5-size-") as tmp:
        lock = lock_pip(matrix, args.platform, "3.11", (), at(Path(tmp) / "cache"))
    rows = []
    with requests.Session() as session:
        for entry in lock.entries:
            size = sizes_by_sha256(session, entry.name).get(entry.sha256)
            if size is None:
                raise SystemExit(f"PyPI lists no file with sha256 {entry.sha256} for {entry.name}")
            rows.append((size, entry.name, entry.version))
    rows.sort(reverse=True)
    total = sum(size for size, _, _ in rows)
    print(f"{args.platform}: {len(rows)} pip artifacts, {total} bytes ({decimal(total)})")
    for size, name, version in rows[:10]:
        print(f"  {decimal(size):>10}  {name} {version}")


if __name__ == "__main__":
    main()
