"""Time lock_pypi against a bare `uv pip compile` of the same inputs (same platform, warm cache,
medians).

    .venv/bin/python benchmarks/bench_pypi.py [--network] [--repeats N] [--platform linux-aarch64]

Without --network the inputs are fixture packages on a loopback index; with it, the A5 PyPI set on
PyPI. Both ways with the previous lock as preferences (against uv with its previous output present)
and without (against uv in a fresh directory).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uv
from envgen import network
from envgen.example.http import serve_directory
from envgen.example.wheels import FixtureDist, build_index
from envgen.inputs.channels import access_index
from envgen.model import Index, Matrix, PipPackage
from envgen.platforms import uv_python_platform
from envgen.process import run
from envgen.resolve.pypi.stage import gather_inputs
from envgen.resolve.pypi.uv_compile import uv_environment

# Run as a script, Python puts benchmarks/ first on sys.path; the tests import tests.support from
# the repository root (pytest's `pythonpath`), and so does this benchmark, wherever it is started
# from.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from timing import interleaved_medians  # noqa: E402

from tests.support.a5 import a5_pypi_matrix  # noqa: E402
from tests.support.builders import at, lock_pip, make_matrix  # noqa: E402

PYTHON = "3.11"
ARCHES: tuple[str, ...] = (
    "cp311-cp311-manylinux_2_28_aarch64",
    "cp311-cp311-manylinux_2_28_x86_64",
)


def fixture_dists(count: int = 30) -> list[FixtureDist]:
    """A chain of pure and platform packages with markers and extras, about the shape of a real
    set."""
    dists = [FixtureDist("top", "1.0", requires=tuple(f"lib{i}>=1" for i in range(count)))]
    for i in range(count):
        requires: tuple[str, ...] = (f"lib{i + 1}[x]" if i + 1 < count else "leaf",)
        requires += ("gpu-only ; platform_machine == 'x86_64'",) if i % 5 == 0 else ()
        tags = ARCHES if i % 3 == 0 else ("py3-none-any",)
        dists += [
            FixtureDist(f"lib{i}", v, requires=requires, tags=tags) for v in ("1.0", "1.1", "2.0")
        ]
    return [*dists, FixtureDist("leaf", "1.0"), FixtureDist("gpu-only", "1.0")]


def matrix_for(index_url: str, packages: tuple[PipPackage, ...]) -> Matrix:
    platforms = ("linux-aarch64", "linux-64")
    indexes = (Index("pypi", index_url),)
    return make_matrix(
        "bench",
        path="benchmarks/bench_pypi.py",
        platforms=platforms,
        indexes=indexes,
        packages=packages,
    )


@contextmanager
def inputs(network: bool, work: Path) -> Iterator[Matrix]:
    if network:
        yield a5_pypi_matrix(("linux-aarch64", "linux-64"))
        return
    build_index(work / "index", fixture_dists())
    with serve_directory(work / "index") as base:
        yield matrix_for(f"{base}/simple", (PipPackage("top", "==1.0"),))


def bare_compile(
    matrix: Matrix, platform: str, cache: Path, work: Path, fresh: bool = False
) -> None:
    """`uv pip compile` of the same requirements on the same index, platform and cache, nothing
    more.

    Its previous output stays in `work` (uv reads it as preferences) unless `fresh`.
    """
    if fresh:
        (work / "pylock.bare.toml").unlink(missing_ok=True)
    requirements = gather_inputs(matrix, platform, (), os.environ).requirements
    (work / "requirements.in").write_text("".join(f"{r.text}\n" for r in requirements))
    index = access_index(matrix.indexes[0], os.environ)
    cmd = [
        uv.find_uv_bin(),
        "pip",
        "compile",
        "requirements.in",
        "--no-config",
        "--default-index",
        index.url,
    ]
    cmd += [
        "--python-version",
        PYTHON,
        "--python-platform",
        uv_python_platform(platform, matrix.glibc),
    ]
    # The same interpreter flag envgen passes, so both skip uv's interpreter discovery alike.
    cmd += ["--format", "pylock.toml", "--output-file", "pylock.bare.toml", "--no-python-downloads"]
    cmd += ["--python", sys.executable]
    run(cmd, cwd=work, env=uv_environment([index], cache, os.environ, network.limits(os.environ)))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", action="store_true", help="the A5 PyPI set on pypi.org")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--platform", default="linux-aarch64", choices=("linux-aarch64", "linux-64")
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-pypi-") as tmp:
        work, cache = Path(tmp), Path(tmp) / "cache"
        with inputs(args.network, work) as matrix:
            locked = lock_pip(matrix, args.platform, PYTHON, (), at(cache))
            medians = interleaved_medians(
                {
                    "ours": lambda: lock_pip(matrix, args.platform, PYTHON, (), at(cache)),
                    "ours-prefs": lambda: lock_pip(
                        matrix, args.platform, PYTHON, (), at(cache), preferred=locked.entries
                    ),
                    "bare": lambda: bare_compile(matrix, args.platform, cache, work),
                    "bare-fresh": lambda: bare_compile(
                        matrix, args.platform, cache, work, fresh=True
                    ),
                },
                args.repeats,
                warm=True,
            )
    what = "A5 PyPI set on pypi.org" if args.network else "fixture index on 127.0.0.1"
    print(
        f"{what}, {args.platform}, {len(locked.entries)} packages, warm cache, median "
        f"of {args.repeats}"
    )
    print(f"  load average {os.getloadavg()[0]:.2f}")
    rows = (
        ("lock_pypi, previous lock as preferences", "ours-prefs", "bare"),
        ("lock_pypi, no previous lock", "ours", "bare-fresh"),
    )
    for what, ours, bare in rows:
        print(f"  {what:40s} {medians[ours]:7.3f} s  ratio {medians[ours] / medians[bare]:5.2f}x")
    print(f"  {'bare uv pip compile, previous output':40s} {medians['bare']:7.3f} s")
    print(f"  {'bare uv pip compile, fresh directory':40s} {medians['bare-fresh']:7.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
