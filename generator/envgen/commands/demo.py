"""`envgen demo`: the whole flow on the bundled example, served on 127.0.0.1, run and shown step by
step."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from envgen import interrupts
from envgen.commits import short_commit
from envgen.errors import EnvgenError, InputError
from envgen.example.gitrepos import GitRepo
from envgen.example.project import (
    ENV,
    EXAMPLE_DIR,
    EXTRA_DISTS,
    GITHUB,
    PYPI_DISTS,
    PYTHON,
    Example,
    advance_branch,
    bump_version,
    serve_example,
    serve_kept_example,
)
from envgen.platforms import host_platform
from envgen.scratch import scratch_dir

Say = Callable[[str], None]

# The demo's version bump and its moving branch; both exist in the bundled example.
BUMP = ("demo-torch", "2.10.0", "2.10.1")
MOVED = ("trainer", "core_r0.12.0")

# How long an interrupted step gets to clean up after SIGINT before its process group is killed.
STOP_GRACE = 10.0

# The conda front ends `conda-lock install` drives, in the order the demo looks for them on PATH.
CONDA_TOOLS = ("conda", "mamba", "micromamba")
# The prefix the researchers' path installs into, in the example project.
PREFIX = f"{ENV}-env"


class StepError(EnvgenError):
    """A step of the demo exited with a code the demo does not expect; the demo exits with that
    code."""

    def __init__(self, command: str, code: int, workdir: Path, *, kept: bool) -> None:
        where = (
            f"the project is kept at {workdir / 'project'}"
            if kept
            else "`envgen demo --keep` keeps it"
        )
        super().__init__(
            f"demo step `{command}` exited with code {code}",
            hint=f"its output is above; {where}",
        )
        # A step killed by a signal reports -N; a shell would say 128 + N.
        self.exit_code = code if code > 0 else 128 - code


@dataclass(frozen=True)
class DemoResult:
    """What a finished demo did: the commands it ran, and its directory when kept."""

    commands: int
    kept: Path | None


def step_environment(example: Example, workdir: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of every step: git sent to the example's repositories, a cache and temp dir
    of its own.

    The machine's pip, uv, conda and git configuration is left out: a mirror or proxy set there must
    not redirect the example's loopback indexes or its canonical GitHub URLs.
    """
    env = {
        k: v
        for k, v in environ.items()
        if not k.startswith(("PIP_", "UV_", "CONDA_", "GIT_", "ENVGEN_"))
    }
    env.update(demo_variables(example, workdir), TMPDIR=str(workdir / "tmp"))
    # The recipe's pip caches its builds there.
    env["XDG_CACHE_HOME"] = str(workdir / "cache" / "user")
    (workdir / "tmp").mkdir(exist_ok=True)
    return env


def demo_variables(example: Example, workdir: Path) -> dict[str, str]:
    """What envgen needs set to work on the example: git's config mapping GitHub to its
    repositories, the machine's pip and uv configuration out of the way, a cache of its own."""
    return {
        "GIT_CONFIG_GLOBAL": str(example.gitconfig),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "PIP_CONFIG_FILE": os.devnull,
        "UV_NO_CONFIG": "1",
        "ENVGEN_CACHE_DIR": str(workdir / "cache"),
    }


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def run_step(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> int:
    """Run one step with its output going straight to this terminal; returns its exit code.

    The step runs in a process group of its own so that nothing it starts (git, uv, pip, builds)
    outlives it: on an interrupt the group gets SIGINT, then SIGKILL after STOP_GRACE seconds.
    (`_proc.run` captures output; the demo's point is to show it as it comes.)
    """
    # A Ctrl-C inside Popen (after the fork, before it returns) is held: it would leave an unknown
    # child.
    with interrupts.held() as held:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, process_group=0
        )
    try:
        if held:
            raise KeyboardInterrupt
        # Wait without reaping, so the group id cannot be reused before its stragglers are killed.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    except BaseException:
        _signal_group(proc.pid, signal.SIGINT)
        # A second Ctrl-C, like the grace time running out, only cuts the wait short.
        with suppress(subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.wait(timeout=STOP_GRACE)
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    _signal_group(proc.pid, signal.SIGKILL)
    return proc.wait()


def describe_servers(example: Example) -> list[str]:
    """Lines naming what the example serves, and where."""
    extra_names = {d.name for d in EXTRA_DISTS}
    decoys = sorted({f"{d.name} {d.version}" for d in PYPI_DISTS if d.name in extra_names})
    on_extra = sorted({f"{d.name} {d.version}" for d in EXTRA_DISTS})
    repos = ", ".join(sorted(example.repos))
    on_pypi = f"{len(PYPI_DISTS)} releases; decoy: {', '.join(decoys)}"
    return [
        f"#   pip index 'pypi'   {example.pypi_url}/simple  ({on_pypi})",
        f"#   pip index 'extra'  {example.extra_url}/simple  ({', '.join(on_extra)}; explicit)",
        f"#   conda channel      {example.channel_url}",
        f"#   git repositories   {repos}, reached from {GITHUB}<name>.git through url.insteadOf",
    ]


def commit_project(root: Path, message: str) -> str:
    """Commit the whole project (a git repository from the first call on); returns the commit."""
    repo = GitRepo(root)
    if not (root / ".git").exists():
        repo.git("init", "--quiet", "--initial-branch=main")
    repo.git("add", "--all")
    return repo.commit({}, message)


class _Steps:
    """Runs one demo command: its banner through `say`, its output to this process; counts what
    ran."""

    def __init__(
        self,
        say: Say,
        envgen: Sequence[str],
        root: Path,
        env: dict[str, str],
        workdir: Path,
        keep: bool,
    ):
        self.say, self.envgen, self.root, self.env = say, envgen, root, env
        self.workdir, self.keep = workdir, keep
        self.commands = 0

    def __call__(
        self,
        why: str,
        args: Sequence[str],
        expected: frozenset[int] = frozenset({0}),
        env: Mapping[str, str] | None = None,
    ) -> None:
        if args[0] == "envgen":
            argv = [*self.envgen, *args[1:], "--root", str(self.root)]
        elif args[0] == "conda-lock":  # envgen's dependency, beside it, not necessarily on PATH
            argv = [self.envgen[0], "-m", "conda_lock", *args[1:]]
        else:
            argv = list(args)
        self.say("")
        self.say(f"# {why}")
        self.say(f"$ {shlex.join(args)}")
        code = run_step(argv, cwd=self.root, env={**self.env, **(env or {})})
        self.commands += 1
        if code not in expected:
            raise StepError(shlex.join(args), code, self.workdir, kept=self.keep)


def _tour(step: _Steps, say: Say, example: Example) -> None:
    """The demo's commands, in the order a user meets them."""
    root = example.root
    step(
        "lock: git refs to commits, a conda solve and a pip resolution per platform",
        ["envgen", "lock", ENV],
    )
    say("# locks/ now holds, for conda, for the recipe, and derived for pip, uv and Nix:")
    for path in sorted(p for p in (root / "locks").iterdir() if not p.name.startswith(".")):
        say(f"#   {path.name:<40} {path.stat().st_size:>7} bytes")
    base = commit_project(root, f"lock {ENV}")
    say(
        f"# committed the project as {short_commit(base)}: the base a pull request "
        "would diff against"
    )
    step(
        "check: a throwaway conda prefix from the lock (rattler), the pip part by the prefix's "
        "own pip, hash-checked, the recipe, pip check, smoke imports",
        ["envgen", "check", ENV],
    )
    _researchers_path(step, say)
    package, old, new = BUMP
    bump_version(example, package, old, new)
    step(f"a version bump: {package} {old} -> {new} in the matrix", ["git", "--no-pager", "diff"])
    step("lock again: only what the bump touches changes", ["envgen", "lock", ENV])
    step(
        "the lock diff, as a pull request comment",
        ["envgen", "diff", "--git", "HEAD", "--format", "markdown"],
    )
    source, branch = MOVED
    moved = advance_branch(example, source, branch)
    say("")
    say(f"# upstream moves: a new commit {short_commit(moved)} on {source}'s branch {branch}")
    # The branch just moved: exit 0 here would mean the drift went unseen.
    step(
        "status: is the lock fresh, have its branches moved, what is still pending",
        ["envgen", "status", ENV],
        expected=frozenset({1}),
    )
    say("# exit 1 is status reporting the drift")


def conda_tool(path: str | None) -> str | None:
    """The first of CONDA_TOOLS on `path` (a PATH value), for `conda-lock install --conda`."""
    return next((tool for tool in CONDA_TOOLS if shutil.which(tool, path=path)), None)


def _researchers_path(step: _Steps, say: Say) -> None:
    """What a researcher runs on a lock: a conda prefix from locks/<env>.yml, then the recipe. With
    a conda, mamba or micromamba on PATH that is conda-lock's own install; without one, `envgen
    install` does both."""
    tool = conda_tool(step.env.get("PATH"))
    if tool is None:
        say("")
        say(f"# no {', '.join(CONDA_TOOLS)} on PATH for `conda-lock install`: `envgen install`")
        say("# does what it and the recipe do (rattler makes the conda prefix from the lock, the")
        say("# prefix's own pip installs the pip part)")
        step(
            "the researchers' path: the lock into a conda prefix, then the recipe",
            ["envgen", "install", ENV, "--prefix", PREFIX],
        )
    else:
        # conda's package cache and environment list, micromamba's root prefix and pip's cache
        # stay in the demo's directory; pip's version check would ask PyPI.
        workdir = step.workdir
        own = {
            "HOME": str(workdir / "home"),
            "CONDA_PKGS_DIRS": str(workdir / "cache" / "conda-pkgs"),
            "MAMBA_ROOT_PREFIX": str(workdir / "mamba"),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
        step(
            f"the researchers' path: conda-lock installs the lock into a conda prefix ({tool})",
            ["conda-lock", "install", "--conda", tool, "-p", PREFIX, f"locks/{ENV}.yml"],
            env=own,
        )
        step(
            "then the recipe: the git sources at their locked commits",
            ["sh", f"locks/{ENV}.install.sh", "--prefix", PREFIX],
            env=own,
        )
    step(
        "the prefix's own pip: the locked pip packages and the editable sources, in the prefix",
        [f"{PREFIX}/bin/pip", "list"],
        env={"PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )


def _bundle(step: _Steps, platform: str) -> str:
    """Bundle the lock for this host while the servers still run; returns the bundle's name (in the
    project)."""
    bundle = f"{ENV}-{platform}.tar.zst"
    step(
        "bundle: every artifact, source commit and lock file for this host in one verified archive",
        ["envgen", "bundle", ENV, "--platform", platform, "-o", bundle],
    )
    return bundle


def _offline_install(step: _Steps, say: Say, bundle: str) -> None:
    """With every server stopped and git seeing no configuration, install from the bundle alone."""
    say("")
    say(
        "# the servers are stopped, and git below reads no configuration (no insteadOf "
        "to the example's"
    )
    say("# repositories): what installs now comes from the bundle alone")
    step.env = {**step.env, "GIT_CONFIG_GLOBAL": os.devnull}
    step(
        "install from the bundle with no network: every member checked against the lock first",
        ["envgen", "install", ENV, "--from-bundle", bundle, "--prefix", "offline-env"],
    )


def check_python(version: Sequence[int] = tuple(sys.version_info[:3])) -> None:
    """The example is made for one python (PYTHON): refused on another before anything is built."""
    if tuple(version[:2]) != PYTHON:
        wanted, have = ".".join(map(str, PYTHON)), ".".join(map(str, version[:3]))
        raise InputError(
            f"the demo needs python {wanted}, and envgen runs on python {have} ({sys.executable}): "
            f"the example's matrix asks for python {wanted}.*, its wheels are for it, and its "
            "conda python launches this interpreter",
            hint=f"run envgen with a python {wanted} (`make clean demo PYTHON=python{wanted}`)",
        )


def run_demo(
    say: Say,
    *,
    keep: bool = False,
    example_dir: Path = EXAMPLE_DIR,
    envgen: Sequence[str] = (sys.executable, "-m", "envgen"),
) -> DemoResult:
    """Build and serve the example, then lock, check, bump, re-lock, diff and status it as a user
    would, bundle it, stop the servers and install from the bundle.

    Every command's banner goes through `say`; its output goes straight to this process's stdout and
    stderr. Raises StepError at the first step that exits with an unexpected code. The servers stop
    and the directory is removed (unless `keep`) however the demo ends, Ctrl-C included.
    """
    check_python()
    with scratch_dir("envgen-demo-", keep=keep) as workdir:
        say(f"# building the example ({example_dir}) in {workdir}")
        with serve_example(workdir, example_dir) as example:
            say("# serving on 127.0.0.1 (stopped when the demo ends):")
            for line in describe_servers(example):
                say(line)
            say(f"# every command below runs in the example project {example.root} (--root)")
            step = _Steps(
                say,
                envgen,
                example.root,
                step_environment(example, workdir, os.environ),
                workdir,
                keep,
            )
            _tour(step, say, example)
            bundle = _bundle(step, host_platform())
        _offline_install(step, say, bundle)
        say("")
        say(f"# done: {step.commands} commands ran as expected; the servers are stopped")
        if keep:
            say(
                f"# kept {workdir}: `envgen demo --serve {shlex.quote(str(workdir))}` "
                "serves it again, to lock, check,"
            )
            say("# diff and bundle in its project")
    return DemoResult(step.commands, workdir if keep else None)


def serve_kept(
    say: Say, workdir: Path, *, wait: Callable[[], object] = signal.pause
) -> dict[str, object]:
    """Serve a directory `run_demo(keep=True)` left until Ctrl-C (or SIGTERM): its servers as the
    demo had them, and what to set and run in another shell. Returns what was served."""
    workdir = workdir.resolve()
    served: dict[str, object] = {"kept": str(workdir)}
    # Ctrl-C is how this ends, whenever it comes: before the servers are up, or while they serve.
    try:
        with serve_kept_example(workdir) as example:
            variables = demo_variables(example, workdir)
            served.update(
                project=str(example.root),
                urls={
                    "pypi": example.pypi_url,
                    "extra": example.extra_url,
                    "conda": example.channel_url,
                },
                environment=variables,
            )
            say(f"# serving the demo kept in {workdir} on 127.0.0.1 until Ctrl-C:")
            for line in describe_servers(example):
                say(line)
            say(
                "# in another shell (git reaches the example's repositories; your pip "
                "and uv settings stay out):"
            )
            say("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items()))
            say(f"cd {shlex.quote(str(example.root))}")
            for command, why in PLAYGROUND:
                say(f"{command:<34} # {why}")
            while True:
                wait()
    except KeyboardInterrupt:
        pass
    say("# stopped the servers; the directory is kept")
    return served


# What a kept demo is for, as `envgen demo --serve` shows it.
PLAYGROUND = (
    (f"envgen status {ENV}", "the upstream branch the demo moved"),
    (f"envgen lock {ENV} --update {MOVED[0]}", "take it: one source moves"),
    ("envgen diff --git HEAD", "what moved since the demo's commit"),
    (f"envgen check {ENV}", "prove the lock in a throwaway conda prefix"),
    (f"envgen bundle {ENV} -o {ENV}.tar.zst", "everything it names, for an offline install"),
)
