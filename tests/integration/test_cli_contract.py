"""The command line's contract with a newcomer: project discovery, `envgen init`, one exit code per
condition (walked through every command), the JSON envelope, -q/-v/--color, a real terminal and a
closed pipe.

What envgen writes and the exit code it chooses are read from the command line run in process; a
child process runs it where the process boundary is the subject: a real terminal or pipe, a
variable of its environment (PATH, FORCE_COLOR), the exit status a real process ends with."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from click import Command, Context, Group, Option
from click.testing import CliRunner
from envgen import network
from envgen.cli import cli
from envgen.cli.exit_codes import EXIT_CODES
from envgen.project import Project

from tests.support.builders import sample_lock, write_intact
from tests.support.closed import closed_url
from tests.support.schemas import validate

DATA = Path(__file__).parents[1] / "data" / "matrices"
REPO = Path(__file__).parents[2]
SCHEMA = json.loads((REPO / "docs" / "cli.schema.json").read_text())
ENVGEN = [sys.executable, "-c", "from envgen.cli import main; main()"]
ANSI = "\x1b["

# Every command that works on a project, with the arguments it needs (NAME: the env under test).
PROJECT_COMMANDS = {
    "lock": ["lock", "NAME"],
    "show": ["show", "NAME"],
    "export": ["export", "NAME", "--format", "nix"],
    "status": ["status", "NAME"],
    "install": ["install", "NAME", "--prefix", "PREFIX", "--venv"],
    "check": ["check", "NAME", "--venv"],
}


def envgen(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command line in a child process: what a user sees, exit code included."""
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")} | (
        env or {}
    )
    return subprocess.run(
        [*ENVGEN, *args], cwd=cwd, capture_output=True, text=True, env=full, timeout=120
    )


def in_process(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The same command line run in this process (`cwd` the working directory meanwhile), for tests
    of what envgen writes rather than of the process boundary: about 0.3 s of CPU less than a child
    process each."""
    unset: dict[str, str | None] = {"NO_COLOR": None, "FORCE_COLOR": None}
    with contextlib.chdir(cwd or Path.cwd()):
        result = CliRunner().invoke(
            cli, list(args), env=unset | (env or {}), prog_name="envgen", catch_exceptions=False
        )
    return subprocess.CompletedProcess(
        ["envgen", *args], result.exit_code, result.stdout, result.stderr
    )


def argv(command: str, name: str, prefix: Path) -> list[str]:
    return [
        name if a == "NAME" else str(prefix) if a == "PREFIX" else a
        for a in PROJECT_COMMANDS[command]
    ]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(DATA / "channels", root / "channels")
    (root / "env-templates").mkdir()
    shutil.copy(DATA / "env-templates" / "valid.toml", root / "env-templates" / "valid.toml")
    return root


def with_lock(root: Path) -> None:
    """A lock for `valid` that parses but was not made from today's matrix (check finds it
    stale)."""
    write_intact(Project(root), msgspec.structs.replace(sample_lock(), env="valid"))


# --- 1. project discovery
# -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [*PROJECT_COMMANDS, "diff --git", "lock (all envs)", "status (all envs)"]
)
def test_no_project_is_exit_2_for_every_command(tmp_path: Path, command: str) -> None:
    """Before: `lock` and `status` printed nothing and exited 0 outside a project."""
    args = {
        "diff --git": ["diff", "--git"],
        "lock (all envs)": ["lock"],
        "status (all envs)": ["status"],
    }.get(command) or argv(command, "a5", tmp_path / "prefix")
    proc = in_process(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"error: no envgen project in {tmp_path.resolve()} or its parents" in proc.stderr
    assert "run `envgen init`" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "prefix").exists()


def test_root_must_exist(tmp_path: Path) -> None:
    proc = in_process("lock", "--root", str(tmp_path / "nonexistent"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_commands_find_the_project_from_a_subdirectory(project: Path) -> None:
    """Before: from env-templates/, show looked for env-templates/env-templates/valid.toml."""
    shown = in_process("show", "valid", cwd=project / "env-templates")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("valid: fixture exercising every key\n")
    status = in_process("status", "--json", cwd=project / "channels")
    assert status.returncode == 1  # no lock yet: status reports it
    assert [r["env"] for r in json.loads(status.stdout)["results"]] == ["valid"]
    via_root = in_process(
        "show", "valid", "--root", str(project / "env-templates"), cwd=project.parent
    )
    assert via_root.stdout == shown.stdout


def test_init_starts_a_project_that_the_other_commands_accept(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("build/")  # kept, and completed on its own line
    made = in_process("init", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "created env-templates/example.toml" in made.stderr
    assert (tmp_path / ".gitignore").read_text().startswith("build/\n# envgen:")
    assert "locks/.*" in (tmp_path / ".gitignore").read_text().splitlines()
    shown = in_process("show", "example", "--json", cwd=tmp_path / "env-templates")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["results"][0]["env"]["name"] == "example"
    again = in_process("init", cwd=tmp_path / "channels")
    assert (
        again.returncode == 2
        and f"already in the envgen project {tmp_path.resolve()}" in again.stderr
    )
    elsewhere = in_process("init", str(tmp_path.parent / "fresh"), cwd=tmp_path.parent)
    assert (
        elsewhere.returncode == 0
        and (tmp_path.parent / "fresh" / "channels" / "pypi.toml").is_file()
    )


# --- 2. one exit code per condition, through every command
# --------------------------------------------------


def help_text(command: str) -> str:
    """`envgen COMMAND --help`, in process: click writes the same text there as in a child
    process."""
    result = CliRunner().invoke(cli, [*command.split(), "--help"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def commands_of(group: Group) -> dict[str, Command]:
    """The commands `group` lists, each as it looks it up (the top group imports a command's module
    then)."""
    ctx = Context(group)
    found = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    return {name: command for name, command in found.items() if command is not None}


def every_command() -> list[str]:
    """Every registered command line, a group's subcommands too (a new one included)."""
    found = []
    for name, command in commands_of(cli).items():
        found.append(name)
        if isinstance(command, Group):
            found += [f"{name} {sub}" for sub in commands_of(command)]
    return found


def command_of(line: str) -> Command:
    command: Command = cli
    for word in line.split():
        assert isinstance(command, Group)
        command = commands_of(command)[word]
    return command


TOPICS = "Exit codes: `envgen help exit-codes`; variables: `envgen help environment`."


def test_every_help_is_short_says_its_options_and_points_at_the_exit_codes() -> None:
    """Before: 42-58 lines each, every one repeating the exit-code table and the network limits."""
    assert {"bundle", "demo", "init", "cache dir", "cache clean", "help"} <= set(every_command())
    for line in ["", *every_command()]:
        text = help_text(line)
        examples = text.split("Examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert examples and all(e.strip().startswith("envgen ") for e in examples), line
        options = [p for p in command_of(line).params if isinstance(p, Option)]
        assert [p.name for p in options if not p.help] == [], line  # before: --installer had none
        assert text.rstrip().endswith(TOPICS), line
        assert len(text.splitlines()) <= 40, (line, len(text.splitlines()))
        for code, meaning in EXIT_CODES[1:]:
            assert meaning[:30] not in text, (line, code)
        assert "ENVGEN_NETWORK_BUDGET" not in text, line


def test_command_summaries_are_whole_sentences() -> None:
    """Before: `lock     Lock ENV...`, click's cut at the first '...'."""
    listed = help_text("").split("Commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    summaries = dict(line.strip().split(None, 1) for line in listed)
    commands = commands_of(cli)
    assert set(summaries) == set(commands)
    for name, summary in summaries.items():
        assert summary == commands[name].short_help, name
        assert summary.endswith(".") and not summary.endswith("..."), name


def test_the_exit_codes_are_one_topic_and_one_table_in_the_docs() -> None:
    shown = in_process("help", "exit-codes")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [f"{code:>3}  {meaning}" for code, meaning in EXIT_CODES]
    docs = (REPO / "docs" / "cli.md").read_text()
    for code, meaning in EXIT_CODES:
        assert f"| {code} | {meaning} |" in docs
    readme = (REPO / "README.md").read_text()
    assert "| 70 |" not in readme and "docs/cli.md#exit-codes" in readme
    (topic,) = json.loads(in_process("help", "exit-codes", "--json").stdout)["results"]
    assert topic["exit_codes"][2] == {"code": 2, "meaning": EXIT_CODES[2][1]}


def test_the_environment_is_one_topic_with_every_network_limit_and_its_default() -> None:
    from envgen.cli.help_command import ENVIRONMENT

    shown = in_process("help", "environment").stdout
    docs = (REPO / "docs" / "cli.md").read_text()
    for field, name, what in network.VARIABLES:
        assert f"{name} (default {network.seconds(field)}): {what}\n" in shown, name
    for name, default, what in ENVIRONMENT:
        assert f"| `{name}` | {default} | {what} |" in docs, name
    assert {"ENVGEN_ROOT", "ENVGEN_CACHE_DIR"} <= {name for name, _, _ in ENVIRONMENT}
    for field, name, what in network.VARIABLES:
        assert f"| `{name}` | {network.seconds(field)} | {what} |" in docs, name
        assert f"`{name}`" in docs.split("### Network limits\n", 1)[1], name
    readme = (REPO / "README.md").read_text()
    assert "ENVGEN_NETWORK_BUDGET" not in readme
    assert "docs/cli.md#environment-variables" in readme and "docs/cli.md#network-limits" in readme
    assert in_process("help", "nosuch").returncode == 2


@pytest.mark.parametrize("command", PROJECT_COMMANDS)
def test_an_unknown_env_is_exit_2_naming_the_available_ones(project: Path, command: str) -> None:
    """Before: check 4, status 1 for an env without a matrix."""
    proc = in_process(*argv(command, "nope", project / "prefix"), cwd=project)
    assert proc.returncode == 2, proc.stderr
    assert "error: unknown env 'nope'" in proc.stderr and "available envs: valid" in proc.stderr
    assert not (project / "prefix").exists()


@pytest.mark.parametrize(
    ("command", "code"), [("check", 2), ("install", 2), ("export", 2), ("status", 1)]
)
def test_no_lock_yet(project: Path, command: str, code: int) -> None:
    """Commands that need the lock: bad input with the command that makes one. status reports it
    (its job)."""
    proc = in_process(*argv(command, "valid", project / "prefix"), cwd=project)
    assert proc.returncode == code, proc.stderr
    if code == 2:
        assert (
            "error: no lock for valid yet" in proc.stderr
            and "run `envgen lock valid`" in proc.stderr
        )
    else:
        assert proc.stdout == "valid: no lock yet\n  run `envgen lock valid` to write it\n"
    assert not (project / "prefix").exists()


@pytest.mark.parametrize("command", ["lock", "show", "status", "check"])
def test_a_malformed_matrix_is_exit_2(project: Path, command: str) -> None:
    with_lock(project)
    (project / "env-templates" / "valid.toml").write_text("schema = [1\n")
    proc = in_process(*argv(command, "valid", project / "prefix"), cwd=project)
    assert proc.returncode == 2, proc.stderr
    assert "env-templates/valid.toml:2: TOML syntax error: Unclosed array" in proc.stderr


def test_an_unknown_profile_is_exit_2_before_any_work(project: Path) -> None:
    """Before: install installed the pip packages, then failed with 5."""
    with_lock(project)
    prefix = project / "prefix"
    proc = in_process(
        "install", "valid", "--prefix", str(prefix), "--venv", "--profile", "nope", cwd=project
    )
    assert proc.returncode == 2, proc.stderr
    assert "has no profile 'nope'" in proc.stderr and not prefix.exists()


def test_verification_and_differences(project: Path, tmp_path: Path) -> None:
    with_lock(project)
    checked = in_process("check", "valid", "--no-env", "--no-solve", cwd=project)
    assert checked.returncode == 4 and "check valid" in checked.stdout
    other = tmp_path / "other.yml"
    other.write_text((project / "locks" / "valid.yml").read_text().replace("3.11.9", "3.11.10"))
    lock = str(project / "locks" / "valid.yml")
    assert in_process("diff", lock, lock, "--exit-code").returncode == 0
    differs = in_process("diff", lock, str(other), "--exit-code")
    assert differs.returncode == 1 and "python  upgraded  3.11.9 -> 3.11.10" in differs.stdout
    # -q: the diff (the data) stays; the warning that other.yml has no sources.toml does not.
    assert "no sources.toml next to it" in differs.stderr
    quiet = in_process("diff", lock, str(other), "-q")
    assert quiet.stdout == differs.stdout and quiet.stderr == ""


def test_an_external_tool_failing_is_exit_5(project: Path, tmp_path: Path) -> None:
    """git missing from PATH: a tool failure (5) naming the command and what to install, not an
    unreachable host (3), with the preflight asking the hosts first and without it; nothing is
    written."""
    (tmp_path / "empty").mkdir()
    (project / "channels" / "conda-forge.toml").write_text(
        f'kind = "conda"\nurl = "{closed_url()}/forge"\n'
    )
    env = {"PATH": str(tmp_path / "empty"), "MIRROR_HOST": "mirror.invalid"}
    for extra in ((), ("--no-preflight",)):
        proc = envgen("lock", "valid", "--offline", *extra, cwd=project, env=env)
        assert proc.returncode == 5, proc.stderr
        assert "error: cannot run `git ls-remote -- https://example.com/" in proc.stderr, (
            proc.stderr
        )
        assert "hint: install 'git' and retry" in proc.stderr and "Traceback" not in proc.stderr
        assert list(project.glob("locks/valid.*")) == []


# --- 3. output flags
# ----------------------------------------------------------------------------------------


def test_every_command_speaks_one_json_envelope(project: Path, tmp_path: Path) -> None:
    """Before: lists from lock/status, objects from check/diff, nothing from install, `diff --json`
    an error. In process but for install, whose envelope is read from the real command line with the
    exit status it has."""
    with_lock(project)
    lock, cache = str(project / "locks" / "valid.yml"), tmp_path / "cache"
    runs = {
        "show": in_process("show", "valid", "--json", cwd=project),
        "status": in_process("status", "--json", cwd=project),
        "check": in_process("check", "valid", "--json", "--no-env", "--no-solve", cwd=project),
        "export": in_process(
            "export",
            "valid",
            "--format",
            "requirements",
            "--platform",
            "linux-64",
            "--json",
            cwd=project,
        ),
        "diff": in_process("diff", lock, lock, "--json"),
        "install": envgen(
            "install", "nope", "--prefix", str(tmp_path / "p"), "--json", cwd=project
        ),
        "init": in_process("init", str(tmp_path / "new"), "--json"),
        "cache dir": in_process("cache", "dir", "--json"),
        "cache clean": in_process("cache", "clean", "--json", env={"ENVGEN_CACHE_DIR": str(cache)}),
        "help": in_process("help", "environment", "--json"),
    }
    for command, proc in runs.items():
        document = json.loads(proc.stdout)
        validate(document, SCHEMA)
        assert (document["command"], document["exit_code"]) == (command, proc.returncode)
        assert document["ok"] is (proc.returncode == 0)
    assert runs["install"].returncode == 2
    assert json.loads(runs["install"].stdout)["error"]["message"].startswith("unknown env 'nope'")
    assert json.loads(runs["diff"].stdout)["results"] == []
    # the alias
    assert in_process("diff", lock, lock, "--format", "json").stdout == runs["diff"].stdout


def test_quiet_keeps_the_data_and_verbose_shows_the_commands_run(project: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(project),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "base",
        ],
        check=True,
    )
    with_lock(project)
    quiet = in_process("diff", "--git", "-q", cwd=project)
    assert quiet.returncode == 0 and quiet.stderr == "" and "valid" in quiet.stdout
    verbose = in_process("diff", "--git", "-v", cwd=project)
    assert verbose.returncode == 0
    assert "ran `git -C" in verbose.stderr and "rev-parse" in verbose.stderr  # a command envgen ran
    assert "s diff: " in verbose.stderr  # the total time, after the seconds since start
    assert "ran `git" not in in_process("diff", "--git", cwd=project).stderr


def _on_a_terminal(
    args: list[str], cwd: Path, env: dict[str, str], columns: int = 40
) -> tuple[int, str]:
    """Run envgen with stdout and stderr on a real pseudo-terminal `columns` wide; its exit code and
    output."""
    import fcntl
    import struct
    import termios

    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")} | env
    proc = subprocess.Popen(
        [*ENVGEN, *args], cwd=cwd, stdin=child, stdout=child, stderr=child, env=full
    )
    os.close(child)
    chunks = []
    while True:
        ready, _, _ = select.select([main], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    return proc.wait(timeout=60), b"".join(chunks).decode().replace("\r\n", "\n")


def test_colour_on_a_terminal_and_never_with_no_color(project: Path) -> None:
    """Before: NO_COLOR=1 still emitted bold codes; rich wrapped lines at the terminal's width and
    padded them."""
    code, out = _on_a_terminal(["status", "nope"], project, {})
    assert code == 2
    assert "\x1b[31merror: unknown env 'nope'" in out
    # One unwrapped line although the terminal is 40 columns wide, without trailing spaces.
    assert "available envs: valid" in out.splitlines()[0]
    assert all(line == line.rstrip() for line in out.splitlines())
    for env, args in (
        ({"NO_COLOR": "1"}, []),
        ({}, ["--color", "never"]),
        ({"FORCE_COLOR": "1"}, ["--color=never"]),
    ):
        assert ANSI not in _on_a_terminal(["status", "nope", *args], project, env)[1]
    piped = envgen("status", "nope", cwd=project)
    assert ANSI not in piped.stderr
    assert ANSI in envgen("status", "nope", cwd=project, env={"FORCE_COLOR": "1"}).stderr
    # --color always on what is not a terminal: in process, whose stderr is not one either
    assert ANSI in in_process("status", "nope", "--color", "always", cwd=project).stderr


def test_a_closed_stdout_pipe_is_not_an_error(project: Path) -> None:
    """Before: `envgen lock --force 2>&1 | head -1` exited 1 after the lock was written."""
    with_lock(project)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before envgen writes a byte: every write meets EPIPE
    proc = subprocess.run(
        [*ENVGEN, "show", "valid"], cwd=project, stdout=write, stderr=write, timeout=60
    )
    os.close(write)
    assert proc.returncode == 0
    shell = subprocess.run(
        [
            "bash",
            "-c",
            f"set -o pipefail; {' '.join(ENVGEN[:2])} '{ENVGEN[2]}' status 2>&1 | head -c 1",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # status's own answer (no lock yet), no pipe error
    assert shell.returncode == 1 and shell.stderr == ""
