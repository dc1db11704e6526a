"""Time re-locks against bare uv runs of envgen's own generated inputs: the bundled example
(offline), or a PyPI set on pypi.org.

    .venv/bin/python benchmarks/bench_relock.py [--repeats N] [--network | --realistic]

Whole processes, medians of N (default 7) interleaved runs (every job once per round), warm
caches, wall time and CPU time (the process and its children, uv's included):
- forced re-lock (`envgen lock ENV --force`, and with `--no-preflight`: the hosts are not asked
  alongside) vs bare `uv pip compile` with the previous output present;
- re-lock after a one-pin bump (a pin alternating between two releases), and what it moved, vs
  bare `uv pip compile` of the bumped inputs with the previous output present;
- no-op lock vs `envgen --version`;
- cold lock (no previous lock) vs bare `uv pip compile` in a fresh directory.
The uv inputs are captured from a real forced re-lock and a real bump: every `uv pip compile`
envgen runs has its work directory copied as uv is started (its generated project, uv.toml,
excludes and the previous output as preferences); the bare runs are those, again, concurrently as
envgen runs them. envgen's modules
are byte-compiled first, as an installed envgen's are (an editable checkout run with
PYTHONDONTWRITEBYTECODE would otherwise compile its sources in every timed process).
Without a flag: the bundled example on 127.0.0.1, both platforms (demo-torch alternates between
2.10.0 and 2.10.1). With --network the pip side is the A5 PyPI set on pypi.org (84 packages,
linux-aarch64; transformers alternates between 4.57.6 and 4.57.5); with --realistic it is the A5
lock's 237 PyPI packages (benchmarks/a5_lock_set.txt) pinned as the lock pins them (tqdm
alternates between 4.70.1 and 4.70.0). Either way the conda side is the example's loopback
channel; run it from the repository root.

`--realistic --repeats 7`, nothing else running (load under 2), before: the tree at 7b8d61a, after:
the lock schemas on msgspec and the previous lock's parsed YAML kept by its sha256:

    job                  before: wall, CPU  after: wall, CPU  x bare uv (wall/CPU) before, after
    forced re-lock       1.806 s  2.24 s     1.713 s  2.08 s    1.35/1.47x  1.29/1.40x
    one-pin bump         1.855 s  2.27 s     1.684 s  2.14 s    1.32/1.45x  1.29/1.45x
    no-op lock           0.097 s  0.10 s     0.090 s  0.09 s    1.14x, 1.13x (of --version)
    cold lock            2.028 s  2.26 s     1.858 s  2.01 s    1.35/1.37x  1.41/1.38x

The same after the model's records became msgspec Structs and the readers lighter (02a41e9, load
about 2): forced re-lock 1.567 s wall, 1.93 s CPU (1.19x, 1.33x of bare uv; `--no-preflight`
1.20x, 1.32x); one-pin bump 1.565 s, 1.92 s (1.20x, 1.34x); no-op 1.08x of `--version`; cold lock
1.759 s, 1.91 s (1.38x, 1.36x). The head start has uv running 0.15 s after envgen starts.

Again at the tree with the collector's thresholds set for the whole command and a commit found in
the git cache not looked for twice (`--repeats 7`, load about 2): forced re-lock 1.654 s wall,
2.06 s CPU (1.22x, 1.34x of bare uv at 1.359 s, 1.54 s; `--no-preflight` 1.18x, 1.28x); one-pin
bump 1.27x, 1.43x; no-op 1.18x of `--version`; cold lock 1.36x, 1.33x. Within this
machine's noise of the figures above: the re-lock's own work was not what changed.

What a forced re-lock paid over bare uv before that (about 0.4 s wall, 0.6 s CPU): the imports a
re-lock needs (about 0.25 s of CPU in one thread: rattler, requests for the preflight's probes,
packaging, build, the pipeline), the conda solve, the metadata of the 237 artifacts read and parsed
from the cache, the files rendered, sealed and written.
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
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import envgen as envgen_package
from envgen.commands.lock.command import lock_envs
from envgen.example.project import ENV, EXAMPLE_DIR, serve_example
from envgen.model import PipPackage
from envgen.project import Project

# Run as a script, Python puts benchmarks/ first on sys.path; the tests import tests.support from
# the repository root (pytest's `pythonpath`), and so does this benchmark, wherever it is started
# from.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from timing import interleaved_runs  # noqa: E402

from tests.support.a5 import a5_pypi_matrix  # noqa: E402

EXAMPLE_MATRIX = EXAMPLE_DIR / "env-templates" / f"{ENV}.toml"


@dataclass(frozen=True)
class Captured:
    """One `uv pip compile` envgen ran: its command, environment, and a copy of its work directory
    as uv found it (the generated inputs and the previous output)."""

    cmd: list[str]
    env: dict[str, str]
    files: Path


@contextmanager
def capturing_uv(where: Path) -> Iterator[list[Captured]]:
    """Record every `uv pip compile` run in this process (through subprocess.Popen, which
    envgen.process uses)."""
    captured: list[Captured] = []
    lock = threading.Lock()
    real = subprocess.Popen

    class Spy(real):  # type: ignore[misc,valid-type]
        def __init__(self, cmd: Any, *args: Any, **kwargs: Any) -> None:
            if isinstance(cmd, list) and cmd[1:3] == ["pip", "compile"]:
                # Copied before uv starts: its inputs and the previous output it is given.
                with lock:  # platforms start concurrently
                    files = where / f"uv-{len(captured)}"
                    shutil.copytree(kwargs["cwd"], files)
                    captured.append(Captured([str(c) for c in cmd], dict(kwargs["env"]), files))
            super().__init__(cmd, *args, **kwargs)

    subprocess.Popen = Spy  # type: ignore[misc]
    try:
        yield captured
    finally:
        subprocess.Popen = real  # type: ignore[misc]
    if not captured:
        raise RuntimeError(
            "no `uv pip compile` run was seen: has envgen.process stopped using subprocess.Popen?"
        )


def bare_uv(runs: list[Captured], scratch: Path, previous: bool) -> None:
    """The captured uv runs again, concurrently, each in a copy of its work directory (with or
    without pylock.toml)."""

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
    """What is locked: a project, its env, the environment to run envgen in, and a pin the bump
    alternates."""

    root: Path
    env: str
    environ: dict[str, str]
    pin: tuple[str, str, str]
    what: str


NETWORK_ENV = "a5pypi"
# The A5 lock's PyPI set (benchmarks/a5_lock_set.txt): name==version per line, # comments.
LOCK_SET = Path(__file__).with_name("a5_lock_set.txt")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--network",
        action="store_true",
        help="the A5 PyPI set on pypi.org (conda on loopback)",
    )
    group.add_argument(
        "--realistic",
        action="store_true",
        help="the A5 lock's 237 PyPI packages on pypi.org, pinned (conda on loopback)",
    )
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="bench-relock-") as tmp,
        serve_example(Path(tmp) / "world") as example,
    ):
        environ = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIXES)}
        environ |= {"GIT_CONFIG_GLOBAL": str(example.gitconfig), "GIT_CONFIG_NOSYSTEM": "1"}
        environ |= {"UV_NO_CONFIG": "1", "ENVGEN_CACHE_DIR": str(Path(tmp) / "cache")}
        chosen = subject(args, Path(tmp), example.root, example.channel_url, environ)
        report(chosen, Path(tmp), args.repeats)
    return 0


ENV_PREFIXES = ("PIP_", "UV_", "CONDA_", "ENVGEN_")


def subject(
    args: argparse.Namespace,
    tmp: Path,
    example: Path,
    channel: str,
    environ: dict[str, str],
) -> Subject:
    """What the arguments ask to lock: the bundled example, or a PyPI set (conda on `channel`)."""
    if args.realistic:
        packages = lock_set(LOCK_SET)
        root = a5_pypi_project(tmp / "a5", channel, packages)
        what = f"the A5 lock's PyPI set on pypi.org ({len(packages)} pins), linux-aarch64"
        return Subject(root, NETWORK_ENV, environ, ("tqdm", "4.70.1", "4.70.0"), what)
    if args.network:
        root = a5_pypi_project(tmp / "a5", channel, a5_pypi_matrix().packages)
        what = "A5 PyPI set on pypi.org, linux-aarch64"
        return Subject(root, NETWORK_ENV, environ, ("transformers", "4.57.6", "4.57.5"), what)
    what = "bundled example on 127.0.0.1, both platforms"
    return Subject(example, ENV, environ, ("demo-torch", "2.10.0", "2.10.1"), what)


def lock_set(path: Path) -> tuple[PipPackage, ...]:
    """Each `name==version` line of `path` as a matrix pin."""
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    pins = (line.partition("==") for line in lines if line)
    return tuple(PipPackage(name, f"=={version}") for name, _, version in pins)


def a5_pypi_project(root: Path, channel_url: str, packages: Sequence[PipPackage]) -> Path:
    """A project whose pip side is `packages` on pypi.org and conda side the example's loopback
    channel (python 3.11), linux-aarch64 only: no git source, so nothing but PyPI is needed."""
    lines = ["[pip.packages]"]
    for package in packages:
        fields = [f"version = {json.dumps(package.specifier)}"] if package.specifier else []
        fields += [f"extras = {json.dumps(list(package.extras))}"] if package.extras else []
        fields += [f"marker = {json.dumps(package.marker)}"] if package.marker else []
        lines.append(f"{json.dumps(package.name)} = {{ {', '.join(fields)} }}")
    head = EXAMPLE_MATRIX.read_text().split("[pip.packages]")[0]
    matrix = head.replace('name = "demo"', f'name = "{NETWORK_ENV}"')
    both = 'platforms = ["linux-aarch64", "linux-64"]'
    matrix = matrix.replace(both, 'platforms = ["linux-aarch64"]')
    (root / "env-templates").mkdir(parents=True)
    (root / "channels").mkdir()
    matrix_file = root / "env-templates" / f"{NETWORK_ENV}.toml"
    matrix_file.write_text(matrix + "\n".join(lines) + "\n")
    (root / "channels" / "demo-forge.toml").write_text(f'kind = "conda"\nurl = "{channel_url}"\n')
    pypi = 'kind = "pip"\nurl = "https://pypi.org/simple"\n'
    (root / "channels" / "pypi.toml").write_text(pypi)
    return root


def swap_pin(matrix: Path, package: str, old: str, new: str) -> None:
    text = matrix.read_text()
    before = f'{json.dumps(package)} = {{ version = "=={old}"'
    if before not in text:
        before = f'{package} = {{ version = "=={old}"'
    matrix.write_text(text.replace(before, before.replace(f"=={old}", f"=={new}")))


@dataclass
class Runs:
    """The whole-process runs a report times, for one subject."""

    subject: Subject
    lock: list[str]
    envgen: list[str]

    def cli(self, *extra: str) -> Callable[[], object]:
        cmd = [*self.lock, *extra]
        env = self.subject.environ
        return lambda: subprocess.run(cmd, env=env, check=True, capture_output=True)

    def bumper(self, project: Project) -> Callable[[], object]:
        """A re-lock after the subject's pin moved to its other version (back and forth)."""
        package, first, second = self.subject.pin
        state = {"now": first}

        def bumped() -> object:
            old = state["now"]
            new = state["now"] = second if old == first else first
            swap_pin(project.template(self.subject.env), package, old, new)
            cmd = [*self.lock, "--json"]
            env = self.subject.environ
            return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)

        return bumped

    def cold(self) -> object:
        for path in (self.subject.root / "locks").glob(f"{self.subject.env}.*"):
            path.unlink()
        return self.cli()()

    def version(self) -> object:
        cmd = [*self.envgen, "--version"]
        return subprocess.run(cmd, env=self.subject.environ, check=True, capture_output=True)


def report(subject: Subject, tmp: Path, repeats: int) -> None:
    env = subject.environ
    os.environ.update(env)
    envgen = [sys.executable, "-m", "envgen"]
    runs = Runs(subject, [*envgen, "lock", subject.env, "--root", str(subject.root), "-q"], envgen)
    project = Project(subject.root)
    package_dir = str(Path(envgen_package.__file__).parent)
    subprocess.run([sys.executable, "-m", "compileall", "-q", package_dir], check=True)
    runs.cli()()  # fills the caches and writes the first lock
    logging.getLogger("envgen").setLevel(logging.ERROR)
    with capturing_uv(tmp / "captured") as captured:
        # A forced re-lock: uv gets the previous pins as its output.
        lock_envs(project, [subject.env], force=True)
    # A re-lock after the bump (then the pin put back): uv gets the bumped input and the previous
    # pins.
    package, first, second = subject.pin
    swap_pin(project.template(subject.env), package, first, second)
    with capturing_uv(tmp / "captured-bump") as captured_bump:
        lock_envs(project, [subject.env])
    swap_pin(project.template(subject.env), package, second, first)
    lock_envs(project, [subject.env])
    # What the head start did in a forced re-lock: each platform's uv run adopted, so uv ran once
    # per platform.
    verbose = [*envgen, "-v", "lock", subject.env, "--root", str(subject.root), "--force"]
    said = subprocess.run(verbose, env=env, check=True, capture_output=True, text=True).stderr
    adopted = said.count("adopting the uv run started ahead")
    uv_runs = len(re.findall(r"ran `\S+ pip compile ", said))
    bumped = runs.bumper(project)
    load = os.getloadavg()
    timed = interleaved_runs(
        {
            "bare": lambda: bare_uv(captured, tmp, previous=True),
            "bare bump": lambda: bare_uv(captured_bump, tmp, previous=True),
            "forced": runs.cli("--force"),
            "no preflight": runs.cli("--force", "--no-preflight"),
            "bump": bumped,
            "no-op": runs.cli(),
            "version": runs.version,
        },
        repeats,
    )
    moved = json.loads(bumped().stdout)["results"][0]["moved"]  # type: ignore[attr-defined]
    fresh = interleaved_runs(
        {"cold": runs.cold, "bare": lambda: bare_uv(captured, tmp, previous=False)},
        repeats,
    )
    print(f"{subject.what}, warm caches, medians of {repeats} interleaved whole-process runs")
    after = os.getloadavg()[0]
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: {after:.2f}")
    bare, version = "bare uv, previous output present", "envgen --version"
    rows = (
        ("forced re-lock", timed["forced"], bare, timed["bare"]),
        ("  the same, --no-preflight", timed["no preflight"], bare, timed["bare"]),
        (
            "re-lock after a one-pin bump",
            timed["bump"],
            "bare uv, bumped, previous output",
            timed["bare bump"],
        ),
        ("no-op lock", timed["no-op"], version, timed["version"]),
        ("cold lock (no previous lock)", fresh["cold"], "bare uv, fresh directory", fresh["bare"]),
    )
    print(f"  {'':30s} {'wall':>7s}   {'CPU':>6s}   {'against':34s} {'wall':>7s}   {'CPU':>6s}")
    for what, ours, against, theirs in rows:
        print(
            f"  {what:30s} {ours.wall:7.3f} s {ours.cpu:6.2f} s   "
            f"{against:34s} {theirs.wall:7.3f} s "
            f"{theirs.cpu:6.2f} s   ratio {ours.wall / theirs.wall:5.2f}x wall, "
            f"{ours.cpu / theirs.cpu:5.2f}x CPU"
        )
    print(f"  a forced re-lock adopted the head start's uv run on {adopted} platform(s)", end="")
    print(f" and ran uv {uv_runs} time(s)")
    shown = {p: [f"{m['name']} {m['old']} -> {m['new']}" for m in ms] for p, ms in moved.items()}
    print(f"  the last bump moved: {shown}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
