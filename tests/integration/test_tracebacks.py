"""No traceback: hostile files, unusable locks/, misuse of the CLI and bugs all end in one message
and an exit code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from envgen import cli as cli_module
from envgen.cli import cli
from envgen.cli.exit_codes import INTERNAL_ERROR
from envgen.project import Project

from tests.support.builders import sample_lock, write_intact

DATA = Path(__file__).parents[1] / "data" / "matrices"
DEEP = 100_000


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(DATA / "channels", root / "channels")
    (root / "env-templates").mkdir()
    shutil.copy(DATA / "env-templates" / "valid.toml", root / "env-templates" / "valid.toml")
    return root


def envgen(
    *args: str,
    timeout: float = 60,
    user: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The real command line in a child process, so a hang or a traceback is what a user would
    see."""
    argv = [*(user or []), sys.executable, "-c", "from envgen.cli import main; main()", *args]
    full = {**os.environ, **(env or {})}
    if user:
        # `make coverage` measures children; one run as another user cannot write its data file.
        full = {k: v for k, v in full.items() if not k.startswith("COVERAGE_PROCESS_")}
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False, env=full
    )


def in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The same command line run in this process, where the subject is the message and the exit
    code envgen picks for a refused input (not a hang, the C stack or another user): an exception
    escaping it fails the test as a traceback would (about 0.3 s of CPU less than a child
    process each)."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return subprocess.CompletedProcess(
        ["envgen", *args], result.exit_code, result.stdout, result.stderr
    )


def assert_clean_exit(proc: subprocess.CompletedProcess[str], code: int, *parts: str) -> None:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for part in parts:
        assert part in proc.stderr


def with_lock(project: Path) -> None:
    write_intact(Project(project), msgspec.structs.replace(sample_lock(), env="valid"))


@pytest.mark.parametrize("where", ["env-templates/valid.toml", "channels/pypi.toml"])
def test_deeply_nested_toml_is_input_error(project: Path, where: str) -> None:
    (project / where).write_text("a = " + "[" * DEEP)
    proc = envgen("show", "valid", "--root", str(project))
    assert_clean_exit(proc, 2, where, "nested too deeply")


@pytest.mark.parametrize(
    ("command", "code"),
    # check reports a lock that does not parse as its failed first step (exit 4), the others as bad
    # input.
    [
        (["status", "valid"], 2),
        (["check", "valid", "--no-solve"], 4),
        (["diff"], 2),
        (["show", "valid"], 0),
    ],
)
def test_deeply_nested_lock_yml_is_input_error(
    project: Path, command: list[str], code: int
) -> None:
    with_lock(project)
    yml = project / "locks" / "valid.yml"
    yml.write_text("version: 1\nmetadata: " + "[" * DEEP)
    args = [*command, str(yml), str(yml)] if command == ["diff"] else command
    proc = envgen(*args, "--root", str(project))
    if code == 0:  # show reads the matrix only
        assert_clean_exit(proc, 0)
        return
    assert (
        "locks/valid.yml" in proc.stderr + proc.stdout
        and "nested too deeply" in proc.stderr + proc.stdout
    )
    assert_clean_exit(proc, code)


def test_deeply_nested_sources_toml_is_input_error(project: Path) -> None:
    with_lock(project)
    (project / "locks" / "valid.sources.toml").write_text("a = " + "[" * DEEP)
    proc = envgen("status", "valid", "--root", str(project))
    assert_clean_exit(proc, 2, "valid.sources.toml")


@pytest.mark.parametrize("where", ["channels/evil.toml", "env-templates/evil.toml"])
def test_a_fifo_named_toml_is_refused_without_blocking(project: Path, where: str) -> None:
    os.mkfifo(project / where)
    proc = envgen("lock", "--root", str(project), timeout=60)
    assert_clean_exit(proc, 2, "evil.toml")


@pytest.mark.parametrize(
    "where", ["channels/evil.toml", "env-templates/evil.toml", "locks/valid.yml"]
)
def test_a_symbolic_link_is_refused_not_followed(project: Path, tmp_path: Path, where: str) -> None:
    # A pull request can add a symlink: no input is read through one (a file outside the project, a
    # device).
    with_lock(project)
    secret = tmp_path / "outside.toml"
    secret.write_text('kind = "pip"\nurl = "https://secret.example/simple"\n')
    (project / where).unlink(missing_ok=True)
    (project / where).symlink_to(secret)
    proc = in_process("lock" if where != "locks/valid.yml" else "status", "--root", str(project))
    assert_clean_exit(proc, 2, where.split("/")[1], "is a symbolic link")


@pytest.mark.parametrize(
    "url", ["ftp://mirror.example/simple", "git+https://x.example/simple", "/no/scheme"]
)
def test_index_urls_other_than_http_https_file_are_refused_at_load(project: Path, url: str) -> None:
    (project / "channels" / "pypi.toml").write_text(f'kind = "pip"\nurl = "{url}"\n')
    proc = in_process("show", "valid", "--root", str(project))
    assert_clean_exit(proc, 2, "pypi.toml", "url", "is not an https://, http:// or file:// URL")


def test_a_lock_file_that_cannot_be_opened_is_input_error(project: Path) -> None:
    (project / "locks" / ".valid.lock").mkdir(parents=True)
    # Without the preflight: it would ask the fixture's hosts (and need MIRROR_HOST) before the
    # mutex.
    proc = in_process("lock", "valid", "--no-preflight", "--root", str(project))
    assert_clean_exit(proc, 2, ".valid.lock")


def _nobody_can_run_python() -> bool:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return False
    probe = subprocess.run(
        [*NOBODY, sys.executable, "-c", "import envgen"], capture_output=True, check=False
    )
    return probe.returncode == 0


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.skipif(
    not _nobody_can_run_python(), reason="needs root, setpriv and a python another user can run"
)
def test_permission_errors_from_locks_dir_are_input_errors(request: pytest.FixtureRequest) -> None:
    """As an unprivileged user: locks/ not writable, and a .<env>.lock owned by someone else."""
    # Outside pytest's own directory, which only root may enter.
    shared = Path(tempfile.mkdtemp(prefix="envgen-perm-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    shared.chmod(0o755)
    root = shared / "project"
    shutil.copytree(DATA / "channels", root / "channels")
    (root / "env-templates").mkdir()
    shutil.copy(DATA / "env-templates" / "valid.toml", root / "env-templates" / "valid.toml")
    (root / "locks").mkdir()
    cache = shared / "cache"
    cache.mkdir()
    os.chown(cache, 65534, 65534)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    lock = ("lock", "valid", "--no-preflight", "--root", str(root))
    proc = envgen(*lock, user=NOBODY, env={"ENVGEN_CACHE_DIR": str(cache)})
    assert_clean_exit(proc, 2, "locks", "Permission denied")
    (root / "env-templates" / "valid.toml").chmod(0o600)
    proc = envgen("show", "valid", "--root", str(root), user=NOBODY)
    assert_clean_exit(proc, 2, "valid.toml", "Permission denied")
    (root / "env-templates" / "valid.toml").chmod(0o644)
    (root / "locks").chmod(0o777)
    (root / "locks" / ".valid.lock").write_text("")
    (root / "locks" / ".valid.lock").chmod(0o600)
    proc = envgen(*lock, user=NOBODY, env={"ENVGEN_CACHE_DIR": str(cache)})
    assert_clean_exit(proc, 2, ".valid.lock", "Permission denied")


def test_a_permission_error_from_the_file_lock_is_input_error(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What filelock raises for a .<env>.lock another user owns (root cannot be refused, so it is
    raised here)."""

    def refused(self: object, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(project / "locks" / ".valid.lock"))

    monkeypatch.setattr("filelock.BaseFileLock.acquire", refused)
    result = CliRunner().invoke(cli, ["lock", "valid", "--no-preflight", "--root", str(project)])
    assert result.exit_code == 2, result.output
    assert ".valid.lock" in result.stderr and "Permission denied" in result.stderr


def test_update_all_with_update_is_a_usage_error(project: Path) -> None:
    result = CliRunner().invoke(
        cli, ["lock", "valid", "--update-all", "--update", "nosuch", "--root", str(project)]
    )
    assert result.exit_code == 2
    assert "--update-all" in result.stderr
    assert not (project / "locks").exists()


def test_install_refuses_an_unknown_profile_before_any_work(project: Path, tmp_path: Path) -> None:
    with_lock(project)
    prefix = tmp_path / "env"
    result = CliRunner().invoke(
        cli,
        [
            "install",
            "valid",
            "--prefix",
            str(prefix),
            "--venv",
            "--profile",
            "nosuch",
            "--root",
            str(project),
        ],
    )
    assert result.exit_code == 2, result.output
    assert "no profile 'nosuch'" in result.stderr
    assert not prefix.exists()


def test_an_unexpected_exception_is_one_line_and_exit_70(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guard in main(): a bug anywhere in a command is reported, not dumped."""

    def broken(*args: object, **kwargs: object) -> str:
        raise RuntimeError("something impossible\nsecond line")

    monkeypatch.setattr("envgen.commands.show.render_text", broken)
    monkeypatch.setattr(sys, "argv", ["envgen", "show", "valid", "--root", str(project)])
    with pytest.raises(SystemExit) as exit_info:
        cli_module.main()
    assert exit_info.value.code == INTERNAL_ERROR == 70
    err = capsys.readouterr().err
    assert "Traceback" not in err and "second line" not in err
    assert err.splitlines()[0] == "internal error: RuntimeError: something impossible"
    assert "please file an issue" in err


def test_a_truncated_sources_toml_is_input_error_wherever_it_is_cut(project: Path) -> None:
    """The key-line scanner expects valid TOML: a file cut inside a string reached it before the
    parser."""
    with_lock(project)
    path = project / "locks" / "valid.sources.toml"
    whole = path.read_bytes()
    for cut in range(len(whole) // 7, len(whole), len(whole) // 7):
        path.write_bytes(whole[:cut])
        result = CliRunner().invoke(cli, ["status", "valid", "--root", str(project)])
        # Cut between tables it may still be valid TOML (then the lock reads as stale, exit 1).
        assert result.exit_code in (1, 2), (cut, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            cut,
            repr(result.exception),
        )
        assert result.exit_code == 1 or "valid.sources.toml" in result.stderr
