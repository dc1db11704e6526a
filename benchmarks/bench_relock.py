"""Time re-locks of the bundled example against bare uv runs of envgen's own generated inputs (offline).

    .venv/bin/python benchmarks/bench_relock.py [--repeats N] [--network]

Whole processes, medians of N interleaved runs, warm caches, both platforms (envgen solves them concurrently;
the bare uv runs of the two platforms run concurrently too):
- forced re-lock (`envgen lock demo --force`, and with `--no-preflight`: the hosts are not asked alongside) vs bare
  `uv pip compile` with the previous output present;
- re-lock after a one-pin bump (demo-torch alternates between 2.10.0 and 2.10.1), and what it moved;
- no-op lock vs `envgen --version`;
- cold lock (no previous lock) vs bare `uv pip compile` in a fresh directory.
The uv inputs are captured from a real lock: every `uv pip compile` envgen runs has its work directory copied.
envgen's modules are byte-compiled first, as an installed envgen's are (an editable checkout run with
PYTHONDONTWRITEBYTECODE would otherwise compile its sources in every timed process).
With --network the pip side is the A5 PyPI set on pypi.org (linux-aarch64; transformers alternates between
4.57.6 and 4.57.5), the conda side the example's loopback channel; run it from the repository root.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import envgen as envgen_package
from envgen.commands.lock import lock_envs
from envgen.example.project import ENV, EXAMPLE_DIR, serve_example
from envgen.project import Project

# Run as a script, Python puts benchmarks/ first on sys.path; the tests import tests.support from the repository
# root (pytest's `pythonpath`), and so does this benchmark, wherever it is started from.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from timing import interleaved_medians  # noqa: E402

from tests.support.a5 import a5_pypi_matrix  # noqa: E402

EXAMPLE_MATRIX = EXAMPLE_DIR / "env-templates" / f"{ENV}.toml"


@dataclass(frozen=True)
class Captured:
    """One `uv pip compile` envgen ran: its command, environment, and a copy of its work directory after the run."""

    cmd: list[str]
    env: dict[str, str]
    files: Path


@contextmanager
def capturing_uv(where: Path) -> Iterator[list[Captured]]:
    """Record every `uv pip compile` run in this process (through subprocess.Popen, which envgen.process uses)."""
    captured: list[Captured] = []
    lock = threading.Lock()
    real = subprocess.Popen

    class Spy(real):  # type: ignore[misc,valid-type]
        def __init__(self, cmd: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(cmd, *args, **kwargs)
            compile_run = isinstance(cmd, list) and cmd[1:3] == ["pip", "compile"]
            self.seen = (cmd, kwargs.get("cwd"), kwargs.get("env")) if compile_run else None

        def communicate(self, *args: Any, **kwargs: Any) -> Any:
            result = super().communicate(*args, **kwargs)
            # Platforms run concurrently, and a run may be waited on more than once: record each once.
            with lock:
                if self.seen is not None:
                    cmd, cwd, env = self.seen
                    self.seen = None
                    files = where / f"uv-{len(captured)}"
                    shutil.copytree(cwd, files)
                    captured.append(Captured([str(c) for c in cmd], dict(env), files))
            return result

    subprocess.Popen = Spy  # type: ignore[misc]
    try:
        yield captured
    finally:
        subprocess.Popen = real  # type: ignore[misc]
    if not captured:
        raise RuntimeError("no `uv pip compile` run was seen: has envgen.process stopped using subprocess.Popen?")


def bare_uv(runs: list[Captured], scratch: Path, previous: bool) -> None:
    """The captured uv runs again, concurrently, each in a copy of its work directory (with or without pylock.toml)."""

    def one(i: int, run: Captured) -> None:
        work = scratch / f"bare-{i}"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(run.files, work)
        if not previous:
            (work / "pylock.toml").unlink()
        subprocess.run(run.cmd, cwd=work, env=run.env, check=True, capture_output=True)

    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        list(pool.map(one, range(len(runs)), runs))


@dataclass(frozen=True)
class Subject:
    """What is locked: a project, its env, the environment to run envgen in, and a pin the bump alternates."""

    root: Path
    env: str
    environ: dict[str, str]
    pin: tuple[str, str, str]
    what: str


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--network", action="store_true", help="the A5 PyPI set on pypi.org (conda on loopback)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-relock-") as tmp, serve_example(Path(tmp) / "world") as example:
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "CONDA_", "ENVGEN_"))}
        environ |= {"GIT_CONFIG_GLOBAL": str(example.gitconfig), "GIT_CONFIG_NOSYSTEM": "1", "UV_NO_CONFIG": "1"}
        environ["ENVGEN_CACHE_DIR"] = str(Path(tmp) / "cache")
        if args.network:
            root = a5_pypi_project(Path(tmp) / "a5", example.channel_url)
            pin = ("transformers", "4.57.6", "4.57.5")
            subject = Subject(root, NETWORK_ENV, environ, pin, "A5 PyPI set on pypi.org, linux-aarch64")
        else:
            pin = ("demo-torch", "2.10.0", "2.10.1")
            subject = Subject(example.root, ENV, environ, pin, "bundled example on 127.0.0.1, both platforms")
        report(subject, Path(tmp), args.repeats)
    return 0


NETWORK_ENV = "a5pypi"


def a5_pypi_project(root: Path, channel_url: str) -> Path:
    """A project whose pip side is the A5 PyPI set on pypi.org (tests/support/a5.py) and conda side the example's
    loopback channel (python 3.11): no git source, so nothing but PyPI is needed."""
    lines = ["[pip.packages]"]
    for package in a5_pypi_matrix().packages:
        fields = [f"version = {json.dumps(package.specifier)}"] if package.specifier else []
        fields += [f"extras = {json.dumps(list(package.extras))}"] if package.extras else []
        fields += [f"marker = {json.dumps(package.marker)}"] if package.marker else []
        lines.append(f"{json.dumps(package.name)} = {{ {', '.join(fields)} }}")
    matrix = (EXAMPLE_MATRIX.read_text().split("[pip.packages]")[0]).replace('name = "demo"', f'name = "{NETWORK_ENV}"')
    matrix = matrix.replace('platforms = ["linux-aarch64", "linux-64"]', 'platforms = ["linux-aarch64"]')
    (root / "env-templates").mkdir(parents=True)
    (root / "channels").mkdir()
    (root / "env-templates" / f"{NETWORK_ENV}.toml").write_text(matrix + "\n".join(lines) + "\n")
    (root / "channels" / "demo-forge.toml").write_text(f'kind = "conda"\nurl = "{channel_url}"\n')
    (root / "channels" / "pypi.toml").write_text('kind = "pip"\nurl = "https://pypi.org/simple"\n')
    return root


def swap_pin(matrix: Path, package: str, old: str, new: str) -> None:
    text = matrix.read_text()
    before = f'{json.dumps(package)} = {{ version = "=={old}"'
    if before not in text:
        before = f'{package} = {{ version = "=={old}"'
    matrix.write_text(text.replace(before, before.replace(f"=={old}", f"=={new}")))


def report(subject: Subject, tmp: Path, repeats: int) -> None:
    env = subject.environ
    os.environ.update(env)
    envgen = [sys.executable, "-m", "envgen"]
    lock = [*envgen, "lock", subject.env, "--root", str(subject.root), "-q"]
    project = Project(subject.root)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(envgen_package.__file__).parent)], check=True)
    subprocess.run(lock, env=env, check=True, capture_output=True)  # fills the caches and writes the first lock
    logging.getLogger("envgen").setLevel(logging.ERROR)
    with capturing_uv(tmp / "captured") as runs:
        lock_envs(project, [subject.env], force=True)  # a forced re-lock: uv gets the previous pins as its output

    def cli(*extra: str) -> Callable[[], object]:
        return lambda: subprocess.run([*lock, *extra], env=env, check=True, capture_output=True)

    package, first, second = subject.pin
    pins = iter((second, first) * (repeats + 1))

    def bumped() -> object:
        new = next(pins)
        swap_pin(project.template(subject.env), package, first if new == second else second, new)
        return subprocess.run([*lock, "--json"], env=env, check=True, capture_output=True, text=True)

    def cold() -> object:
        for path in (subject.root / "locks").glob(f"{subject.env}.*"):
            path.unlink()
        return cli()()

    # What the head start did in a forced re-lock: each platform's uv run adopted, so uv ran once per platform.
    verbose = [*envgen, "-v", "lock", subject.env, "--root", str(subject.root), "--force"]
    said = subprocess.run(verbose, env=env, check=True, capture_output=True, text=True).stderr
    adopted = said.count("adopting the uv run started ahead")
    uv_runs = len(re.findall(r"ran `\S+ pip compile ", said))
    load = os.getloadavg()
    forced = interleaved_medians(
        {
            "envgen": cli("--force"),
            "no preflight": cli("--force", "--no-preflight"),
            "bare": lambda: bare_uv(runs, tmp, previous=True),
        },
        repeats,
    )
    bump = interleaved_medians({"envgen": bumped}, repeats)
    moved = json.loads(bumped().stdout)["results"][0]["moved"]  # type: ignore[attr-defined]
    noop = interleaved_medians(
        {"envgen": cli(), "version": lambda: subprocess.run([*envgen, "--version"], env=env, capture_output=True)},
        repeats,
    )
    fresh = interleaved_medians({"envgen": cold, "bare": lambda: bare_uv(runs, tmp, previous=False)}, repeats)
    print(f"{subject.what}, warm caches, medians of {repeats} interleaved runs")
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: {os.getloadavg()[0]:.2f}")
    rows = (
        ("forced re-lock", forced["envgen"], "bare uv, previous output present", forced["bare"]),
        ("  the same, --no-preflight", forced["no preflight"], "bare uv, previous output present", forced["bare"]),
        ("re-lock after a one-pin bump", bump["envgen"], "bare uv, previous output present", forced["bare"]),
        ("no-op lock", noop["envgen"], "envgen --version", noop["version"]),
        ("cold lock (no previous lock)", fresh["envgen"], "bare uv, fresh directory", fresh["bare"]),
    )
    for what, ours, against, theirs in rows:
        print(f"  {what:30s} {ours:7.3f} s   {against:34s} {theirs:7.3f} s   ratio {ours / theirs:5.2f}x")
    print(f"  a forced re-lock adopted the head start's uv run on {adopted} platform(s) and ran uv {uv_runs} time(s)")
    shown = {p: [f"{m['name']} {m['old']} -> {m['new']}" for m in ms] for p, ms in moved.items()}
    print(f"  the last bump moved: {shown}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
