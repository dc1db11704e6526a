"""Time a lock's files on a lock of realistic size: written, read back, and the no-op `envgen lock`.

    .venv/bin/python benchmarks/bench_lockfile.py [--repeats N] [--pip 237]

The bundled example is locked once for real (its matrix, channels, sources and recipe), then its
lock is grown to the real A5 lock's size: N pip packages per platform on both platforms (237 by
default, the real A5 set with its sources' declared dependencies), each needing the three before
it, and 40 more conda packages per platform; it is written as `envgen lock` writes one (sealed,
with its derived files), so the no-op lock finds it fresh. Then:
- in process, medians of N runs, every cache cleared: the yml rendered (conda-lock's models,
  PyYAML's C emitter); the same lockfile written by conda-lock's own `write_conda_lock_file` (its
  pure-Python emitter), for comparison; the lock's files written; the lock read back and parsed;
- in a fresh process, medians of N runs: the head start's prediction from the files as read, imports
  included (what stands between `envgen lock` and uv starting);
- whole processes, medians of N interleaved runs: `envgen lock demo` (no-op) against
  `envgen --version`, wall time and CPU time (user + system, less sensitive to a loaded machine).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import envgen as envgen_package
import msgspec
from envgen.commands.lock.command import lock_envs
from envgen.example.project import ENV, Example, serve_example
from envgen.inputs.matrix import load_env
from envgen.lockio import store
from envgen.lockio.conda_lock_yml import load_lock_yml, render_lock_yml
from envgen.lockio.exports.derived import derived_files
from envgen.model import Lock
from envgen.project import Project
from envgen.recipe.render import render_recipe

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from timing import interleaved_medians  # noqa: E402

from tests.support.builders import conda_entry, pip_entry  # noqa: E402

_TAGS = {
    "linux-aarch64": "cp311-cp311-manylinux_2_28_aarch64",
    "linux-64": "cp311-cp311-manylinux_2_28_x86_64",
}
# The head start's read in a process of its own: imports, the files read, the prediction.
_PREDICT = """
import sys, time
start = time.perf_counter()
from pathlib import Path
from envgen.lockio.prediction import predict
from envgen.lockio.store import read_files
from envgen.project import Project
assert predict(read_files(Project(Path(sys.argv[1])), sys.argv[2])) is not None
print(time.perf_counter() - start)
"""


def grown(lock: Lock, pip: int, conda: int) -> Lock:
    """`lock` with synthetic pip packages up to `pip` per platform (each needing the three before
    it) and `conda` more conda packages per platform."""
    pips, condas = list(lock.pip), list(lock.conda)
    channel = lock.channels[0].url.rstrip("/")
    for platform in lock.platforms:
        names = [f"bench-package-{i:03d}" for i in range(pip - len(lock.pip_for(platform)))]
        for i, name in enumerate(names):
            depends = tuple((dep, ">=1.0") for dep in names[max(0, i - 3) : i])
            tag = _TAGS[platform]
            pips.append(pip_entry(name, f"1.{i}.0", platform, tag=tag, depends=depends))
        libs = [f"bench-lib{i:02d}" for i in range(conda)]
        condas += [conda_entry(name, "1.0", platform, channel=channel) for name in libs]
    return msgspec.structs.replace(lock, pip=tuple(pips), conda=tuple(condas))


def locked_example(example: Example, tmp: Path) -> tuple[dict[str, str], Project, Lock]:
    """The served `example` locked for real in this process (its cache under `tmp`), with the
    environment every timed process gets (no machine pip, uv, conda or envgen settings)."""
    skipped = ("PIP_", "UV_", "CONDA_", "ENVGEN_")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(skipped)}
    environ |= {"GIT_CONFIG_GLOBAL": str(example.gitconfig), "GIT_CONFIG_NOSYSTEM": "1"}
    environ |= {"UV_NO_CONFIG": "1", "ENVGEN_CACHE_DIR": str(tmp / "cache")}
    os.environ.update(environ)
    project = Project(example.root)
    lock_envs(project, [ENV], force=True)
    found = store.read_lock(project, ENV)
    assert found is not None
    return environ, project, found


def median(job: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        job()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def conda_lock_writer(text: str, where: Path) -> float:
    """Seconds conda-lock's own writer takes for the lockfile `text` holds (read by its parser)."""
    from conda_lock.lockfile import parse_conda_lock_file, write_conda_lock_file

    (where / "in.yml").write_text(text)
    content = parse_conda_lock_file(where / "in.yml")
    start = time.perf_counter()
    out = where / "out.yml"
    write_conda_lock_file(content, out, metadata_choices=None, include_help_text=False)
    return time.perf_counter() - start


def cpu_medians(
    jobs: dict[str, list[str]],
    environ: dict[str, str],
    repeats: int,
) -> dict[str, float]:
    """Median CPU seconds (user + system) of each command, interleaved."""
    times: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(repeats):
        for name, cmd in jobs.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(cmd, env=environ, check=True, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            times[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {name: statistics.median(values) for name, values in times.items()}


def in_process(project: Project, lock: Lock, repeats: int, tmp: Path) -> list[tuple[str, float]]:
    """The in-process figures: rendering, conda-lock's own writer, writing, reading back."""
    matrix = load_env(project, ENV)

    def write() -> None:
        derived = [(file.name, file.text) for file in derived_files(lock, matrix)]
        store.write_lock(project, ENV, lock, render_recipe(lock), derived)

    def read() -> object:
        store.parse_lock_parts.cache_clear()
        load_lock_yml.cache_clear()
        return store.read_lock(project, ENV)

    theirs = [conda_lock_writer(render_lock_yml(lock), tmp) for _ in range(repeats)]
    rendered = median(lambda: render_lock_yml(lock), repeats)
    rows = [
        ("yml rendered (conda-lock's models, C emitter)", rendered),
        ("the same by conda-lock's write_conda_lock_file", statistics.median(theirs)),
        ("the lock's files written (yml, sources, ...)", median(write, repeats)),
        ("the lock read back (both files, parsed)", median(read, repeats)),
    ]
    back = read()
    assert isinstance(back, Lock) and len(back.pip) == len(lock.pip), "the lock does not read back"
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--pip", type=int, default=237, help="pip packages per platform")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="bench-lockfile-") as tmp,
        serve_example(Path(tmp) / "world") as example,
    ):
        environ, project, found = locked_example(example, Path(tmp))
        lock = grown(found, args.pip, 40)
        rows = in_process(project, lock, args.repeats, Path(tmp))
        size = project.lock_yml(ENV).stat().st_size
        envgen = [sys.executable, "-m", "envgen"]
        package = str(Path(envgen_package.__file__).parent)
        subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True)
        predict = [sys.executable, "-c", _PREDICT, str(example.root), ENV]
        ahead = [float(_output(predict, environ)) for _ in range(args.repeats)]
        rows.append(("the head start's prediction (fresh process)", statistics.median(ahead)))
        noop_cmd = [*envgen, "lock", ENV, "--root", str(example.root)]
        said = subprocess.run(noop_cmd, env=environ, capture_output=True, text=True).stderr
        assert "up to date" in said, f"the grown lock is not fresh: {said}"
        load = os.getloadavg()
        commands = {"no-op": [*noop_cmd, "-q"], "version": [*envgen, "--version"]}
        jobs = {name: _runner(cmd, environ) for name, cmd in commands.items()}
        wall = interleaved_medians(jobs, args.repeats, warm=True)
        cpu = cpu_medians(commands, environ, args.repeats)
    sizes = [(p, len(lock.conda_for(p)), len(lock.pip_for(p))) for p in lock.platforms]
    counts = ", ".join(f"{p}: {conda} conda + {pip} pip" for p, conda, pip in sizes)
    print(f"a lock of {counts} ({size} bytes of yml); medians of {args.repeats} runs")
    print(f"load average before the whole-process runs: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for what, seconds in rows:
        print(f"  {what:48s} {seconds * 1000:8.1f} ms")
    for what, found_times in (("wall", wall), ("CPU", cpu)):
        noop, version = found_times["no-op"], found_times["version"]
        ratio = noop / version
        print(f"  {what:4s}: no-op lock {noop:.3f} s, --version {version:.3f} s, {ratio:.2f}x")
    return 0


def _output(cmd: list[str], environ: dict[str, str]) -> str:
    return subprocess.run(cmd, env=environ, check=True, capture_output=True, text=True).stdout


def _runner(cmd: list[str], environ: dict[str, str]) -> Callable[[], object]:
    return lambda: subprocess.run(cmd, env=environ, check=True, capture_output=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
