"""Time every command that reads a lock, on a lock of realistic size, against `envgen --version`.

    .venv/bin/python benchmarks/bench_commands.py [--repeats N] [--pip 237] [--keep DIR]

The bundled example is locked once for real and its lock grown to the real A5 lock's size
(`bench_lockfile.grown`: N pip packages per platform on both platforms, 40 more conda packages per
platform), written as `envgen lock` writes one (sealed, with its derived files), and committed in
a git repository of the project; a copy with one pin bumped is the other side of `diff A B`, and
the working tree's lock is that copy for `diff --git HEAD`. Whole processes, medians of N
interleaved runs, wall and CPU time (user + system, the process and its children), each command
against `envgen --version`: `show`, `diff A B`, `diff --git HEAD`, `export` in each format,
`status` (its remotes are the example's git server on 127.0.0.1), `lock --check` on the fresh lock,
a no-op `lock`, and `why`, `tree` and `tree --invert` (the package asked about is the grown lock's
deepest, which every other grown package needs: more than 1,000 paths per platform, the shortest of
more than 70 hops). Run it from the repository root, with nothing else running. With `--keep DIR`
the project, its grown lock and the bumped copy are built in DIR (new or empty) and left there, to
profile a command on them (`--root DIR/world/project`-style paths are printed at the end).

Figures, `--repeats 7`, CPU (user + system) medians, load about 2 on two shared cores; before: the
tree at 504d2fb, after: the lazy command group and exporters, show reading the sources.toml alone,
rattler and the index client imported where used, the derived files rendered once per lock:

    command              before    after    x --version before, after
    version              0.106 s   0.075 s
    show                 0.302 s   0.217 s  2.86x  2.90x
    diff A B             0.368 s   0.315 s  3.48x  4.21x
    diff --git HEAD      0.409 s   0.350 s  3.87x  4.68x
    status               0.429 s   0.370 s  4.06x  4.94x
    lock --check         0.375 s   0.350 s  3.55x  4.68x
    no-op lock           0.112 s   0.080 s  1.06x  1.07x
    export requirements  0.306 s   0.299 s  2.90x  4.00x
    export pylock        0.287 s   0.279 s  2.72x  3.73x
    export nix           0.286 s   0.277 s  2.70x  3.70x
    export cyclonedx     0.725 s   0.685 s  6.86x  9.16x

`why`, `tree` and `tree --invert`, added later (`--repeats 5`, load about 2.3; `--version` at
0.076 s CPU, 0.078 s wall, and `show` at 0.228 s, 0.229 s, in the same run):

    command              CPU      x --version  wall     x --version
    why                  0.312 s  4.10x        0.313 s  4.01x
    tree                 0.322 s  4.23x        0.324 s  4.14x
    tree --invert        0.311 s  4.09x        0.312 s  4.00x

Where their time goes (in process, CPU, `why`): imports about 160 ms (the command line; the lock
graph with packaging's requirements and envgen's model; the yml's conda-lock schema models with
pydantic, about 75 ms; the sources.toml's schema, about 14 ms), the lock read about 80 ms (PyYAML's
construction of the yml most of it), the graphs, the walk and the text about 25 ms for both
platforms. They read the lock as `diff` and the exports do, and cost about what those cost; the walk
is not where the time goes, and none of the heavy packages is imported.

The lock read without pydantic or a second YAML parse (`--repeats 5` before, `--repeats 7` after,
nothing else running, load under 2; before: the tree at 7b8d61a, after: both lock schemas on msgspec
(lockio/strict_schema.py), the yml's parsed document kept by its sha256 (lockio/yml_documents.py,
since lockio/lock_documents.py; warm after the first of the runs), the SBOM's components added in
the library's order with the collector paused, the derived files' renderers and `package_key`
lighter, `status` without the lock-diff code):

    command              before    after    x --version before, after
    version              0.079 s   0.086 s
    show                 0.238 s   0.161 s  3.02x  1.88x
    diff A B             0.380 s   0.183 s  4.83x  2.14x
    diff --git HEAD      0.396 s   0.203 s  5.03x  2.37x
    status               0.399 s   0.268 s  5.07x  3.13x
    lock --check         0.394 s   0.255 s  5.01x  2.98x
    no-op lock           0.089 s   0.091 s  1.13x  1.06x
    why                  0.323 s   0.172 s  4.10x  2.01x
    tree                 0.326 s   0.178 s  4.14x  2.07x
    tree --invert        0.315 s   0.192 s  4.00x  2.24x
    export requirements  0.322 s   0.199 s  4.08x  2.32x
    export pylock        0.301 s   0.161 s  3.82x  1.88x
    export nix           0.303 s   0.158 s  3.85x  1.85x
    export cyclonedx     0.728 s   0.473 s  9.24x  5.53x

(CPU medians; a second run of the after tree gave why 2.08x, tree 2.19x, tree --invert 1.98x: the
commands near 2x sit within this machine's noise of it.) The first read of a lock after it changed
parses its YAML, about 50 ms more. What a command reading a lock still pays over `--version` (in
process, CPU): envgen's model, its dataclasses made at import (about 18 ms with model_steps, npu
and model_entries); packaging's requirements (about 10 ms, the lock graph's and the matrix's);
rattler's import where a matrix's conda specs are checked (show, status, lock --check, export
requirements: about 25 ms); the schemas' strict reading (about 8 ms); for `lock --check` and
`status` the derived files rendered and compared with the files (tomli_w about 7 ms a pylock), and
for `status` a `git ls-remote` per moving source; for the SBOM, cyclonedx-python-lib's import
(about 45 ms), its model of the components (about 70 ms) and its serialisation (about 85 ms).

The model's records as msgspec Structs (a frozen dataclass costs about 1 ms to make at import on
this machine, a Struct a tenth of that; the model, the lock graph, the diff's changes, the readers'
records, the settings and credentials), the sources.toml's parsed document kept as the yml's is
(lockio/lock_documents.py), the seal's hash and the yml's validation done once per text, and a few
imports made where used (`--repeats 7`, nothing else running; before: the table's after, at
6bce951; after: 02a41e9):

    command              before   after    x --version before, after
    version              0.086 s  0.083 s
    show                 0.161 s  0.137 s  1.88x  1.66x
    diff A B             0.183 s  0.141 s  2.14x  1.70x
    diff --git HEAD      0.203 s  0.153 s  2.37x  1.84x
    status               0.268 s  0.201 s  3.13x  2.43x
    lock --check         0.255 s  0.199 s  2.98x  2.40x
    no-op lock           0.091 s  0.088 s  1.06x  1.07x
    why                  0.172 s  0.135 s  2.01x  1.62x
    tree                 0.178 s  0.146 s  2.07x  1.76x
    tree --invert        0.192 s  0.130 s  2.24x  1.56x
    export requirements  0.199 s  0.151 s  2.32x  1.83x
    export pylock        0.161 s  0.133 s  1.88x  1.60x
    export nix           0.158 s  0.133 s  1.85x  1.61x
    export cyclonedx     0.473 s  0.443 s  5.53x  5.34x

What `status` and `lock --check` still pay (in process, CPU): rattler's import for the matrix's
conda specs (about 20 ms), the derived files rendered and compared byte for byte with the files
(about 27 ms: the pylocks through tomli_w about 17), the lock read (about 12 ms), and for `status`
a `git ls-remote` per moving source (about 4 ms of CPU each).

The collector's thresholds set by the entry point for the whole command (collector.py: no pass
during the imports or the lock read), and a lock whose inputs hold judged without parsing its conda
specs again (no rattler); `--repeats 7`, CPU; before: bb93105 (`--version` 0.087 s, load about
3.6), after: the tree after those changes (`--version` 0.076 s, load about 3):

    command              before   after    x --version before, after
    show                 0.149 s  0.138 s  1.71x  1.80x
    status               0.234 s  0.170 s  2.69x  2.22x
    lock --check         0.206 s  0.171 s  2.37x  2.23x
    export cyclonedx     0.466 s  0.434 s  5.36x  5.68x

(the other commands within this machine's noise of their figures above). What `status` and `lock
--check` pay now over `--version`: the derived files rendered and compared (about 27 ms), the
modules that read and render a lock (the lock graph's and the exports' packaging, about 13 ms;
the lock command's own, about 17 ms), the lock read, and for `status` its `git ls-remote`s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import envgen as envgen_package
from envgen.example.project import ENV, serve_example
from envgen.inputs.matrix import load_env
from envgen.lockio import store
from envgen.lockio.exports.derived import derived_files
from envgen.project import Project
from envgen.recipe.render import render_recipe

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from bench_lockfile import grown, locked_example  # noqa: E402
from timing import interleaved_runs  # noqa: E402

# The formats `envgen export` writes; `nix` and `cyclonedx` cover every platform.
FORMATS = ("requirements", "pylock", "nix", "cyclonedx")
# The package `why` and `tree --invert` look for: the first of `grown`'s, which all the others need.
DEEP = "bench-package-000"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def committed_and_bumped(project: Project, lock_text: bytes, tmp: Path) -> Path:
    """The project's locks/ committed in a git repository of its own; returns a copy of the lock
    file with one pip version changed (the working tree then holds that copy)."""
    root = project.root
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "lock")
    bumped = tmp / "bumped.yml"
    text = lock_text.decode()
    old = "version: 1.7.0\n"
    assert old in text, "the grown lock has no bench-package-007 at 1.7.0"
    bumped.write_text(text.replace(old, "version: 1.7.1\n", 1))
    return bumped


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--pip", type=int, default=237, help="pip packages per platform")
    parser.add_argument("--keep", type=Path, help="build in this directory and leave it there")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        if args.keep is None:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-commands-")))
        else:
            tmp = args.keep.resolve()
            tmp.mkdir(parents=True, exist_ok=True)
            assert not any(tmp.iterdir()), f"{tmp} is not empty"
        example = stack.enter_context(serve_example(tmp / "world"))
        environ, project, found = locked_example(example, tmp)
        lock = grown(found, args.pip, 40)
        matrix = load_env(project, ENV)
        # Twice: the second time from the lock as read back, in the order envgen keeps it.
        for _ in range(2):
            derived = [(f.name, f.text) for f in derived_files(lock, matrix)]
            store.write_lock(project, ENV, lock, render_recipe(lock), derived)
            store.parse_lock_parts.cache_clear()
            read_back = store.read_lock(project, ENV)
            assert read_back is not None
            lock = read_back
        yml = project.lock_yml(ENV)
        bumped = committed_and_bumped(project, yml.read_bytes(), tmp)
        package = str(Path(envgen_package.__file__).parent)
        subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True)
        envgen = [sys.executable, "-m", "envgen"]
        root = ["--root", str(example.root)]
        commands: dict[str, tuple[list[str], tuple[int, ...]]] = {
            "version": ([*envgen, "--version"], (0,)),
            "show": ([*envgen, "show", ENV, *root], (0,)),
            "diff A B": ([*envgen, "diff", str(yml), str(bumped)], (0,)),
            "status": ([*envgen, "status", ENV, *root], (0,)),
            "lock --check": ([*envgen, "lock", ENV, "--check", "-q", *root], (0,)),
            "no-op lock": ([*envgen, "lock", ENV, "-q", *root], (0,)),
            # The deepest package of the grown lock: every other one needs it, through at least
            # 76 hops and more than 1,000 paths per platform.
            "why": ([*envgen, "why", ENV, DEEP, *root], (0,)),
            "tree": ([*envgen, "tree", ENV, *root], (0,)),
            "tree --invert": ([*envgen, "tree", ENV, "--invert", DEEP, *root], (0,)),
        }
        for fmt in FORMATS:
            out = str(tmp / f"export.{fmt}")
            cmd = [*envgen, "export", ENV, "--format", fmt, "-o", out, "-q", *root]
            commands[f"export {fmt}"] = (cmd, (0,))
        # Last: the working tree's lock becomes the bumped copy (diff --git sees one change).
        diff_git = [*envgen, "diff", "--git", "HEAD", *root]
        for what, (cmd, codes) in commands.items():
            done = subprocess.run(cmd, env=environ, capture_output=True, text=True)
            said = done.stdout + done.stderr
            assert done.returncode in codes, f"{what}: exit {done.returncode}\n{said}"
        jobs = {what: _runner(cmd, environ) for what, (cmd, _) in commands.items()}
        load = os.getloadavg()
        timed = interleaved_runs(jobs, args.repeats, warm=True)
        shutil.copyfile(bumped, yml)
        git_timed = interleaved_runs(
            {"version": jobs["version"], "diff --git HEAD": _runner(diff_git, environ)},
            args.repeats,
            warm=True,
        )
    timed = {**timed, "diff --git HEAD": git_timed["diff --git HEAD"]}
    if args.keep is not None:
        print(f"kept: the project {example.root}, the lock {yml}, its bumped copy {bumped}")
    sizes = [(p, len(lock.conda_for(p)), len(lock.pip_for(p))) for p in lock.platforms]
    counts = ", ".join(f"{p}: {conda} conda + {pip} pip" for p, conda, pip in sizes)
    print(f"a lock of {counts}; medians of {args.repeats} interleaved runs")
    print(f"load average before the runs: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    base = timed["version"]
    print(f"  {'command':20s} {'wall':>8s} {'x':>6s} {'CPU':>8s} {'x':>6s}")
    for what, t in timed.items():
        rows = (t.wall, t.wall / base.wall, t.cpu, t.cpu / base.cpu)
        print(f"  {what:20s} {rows[0]:7.3f}s {rows[1]:5.2f}x {rows[2]:7.3f}s {rows[3]:5.2f}x")
    return 0


def _runner(cmd: list[str], environ: dict[str, str]) -> Callable[[], object]:
    return lambda: subprocess.run(cmd, env=environ, check=False, capture_output=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
