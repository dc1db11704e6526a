"""`envgen check` end to end on the bundled example: lock, then static checks, re-solve and a
throwaway venv."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.commands.check.command import CheckOptions, check_env, solve_step
from envgen.commands.check.options import Install
from envgen.commands.check.static import dependencies_step, index_problems, pin_problems
from envgen.commands.check.throwaway import Hardware, import_steps
from envgen.errors import InputError
from envgen.example.condapkgs import host_python
from envgen.example.project import Example, bump_version
from envgen.inputs.matrix import load_matrix
from envgen.installer.core import Destination, Request, Source
from envgen.installer.destinations import Venv
from envgen.lockio.store import read_lock
from envgen.model import ImportCheck, Lock, Matrix
from envgen.platforms import host_platform
from envgen.project import Project, cache_dir

from tests.support.builders import at, make_lock, tools_at
from tests.support.chk_venv import copied_install
from tests.support.venvs import fresh_venv

ENV = "demo"


@pytest.fixture(scope="module")
def served(read_only_served: Example, worker_first_lock: dict[str, bytes]) -> Example:
    """The worker's served example, locked: the module's copy of its project with the worker's first
    lock in locks/ (tests/integration/conftest.py). The module edits only its project (the matrix,
    locks/), each test putting it back; upstream and what is served it only reads."""
    for name, data in worker_first_lock.items():
        (read_only_served.root / "locks" / name).write_bytes(data)
    return read_only_served


@pytest.fixture
def example(served: Example, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Example]:
    """The locked example with git pointed at the local repos; throwaway envs go under
    tmp_path/tmp."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(served.gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("ASCEND_SET_ENV", raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    matrix = served.matrix.read_text()
    locks = {p: p.read_bytes() for p in (served.root / "locks").iterdir()}
    yield served
    served.matrix.write_text(matrix)
    for path, data in locks.items():
        path.write_bytes(data)


@pytest.fixture
def installed(
    example: Example, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> list[Request]:
    """Check's throwaway install replaced by a copy of the session's venv of the lock, the requests
    it was given recorded (chk_venv.py). The throwaway install itself is proved by
    test_lock_then_check_passes_and_removes_the_throwaway_env (venv) and
    test_without_venv_the_check_installs_a_conda_prefix_and_passes (conda prefix)."""
    return copied_install(tmp_path_factory, example, monkeypatch)


def throwaways(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "tmp").glob("envgen-check-*"))


def envgen_check(example: Example, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli, ["check", ENV, "--root", str(example.root), *args], catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


def steps_of(out: str) -> dict[str, dict[str, str]]:
    return {s["name"]: s for s in json.loads(out)["results"][0]["steps"]}


def test_lock_then_check_passes_and_removes_the_throwaway_env(
    example: Example, tmp_path: Path
) -> None:
    # uv for the throwaway env: check's pip path is test_exports' and test_frozen_and_installers'
    code, out, err = envgen_check(example, "--venv", "--installer", "uv", "--json")
    assert code == 0, out + err
    steps = steps_of(out)
    failed = {n: s for n, s in steps.items() if s["status"] == "failed"}
    assert not failed
    for name in (
        "static: input hash",
        "static: matrix pins",
        "static: import checks",
        "static: dependencies",
        "static: indexes",
        "static: integrity",
        "solve: same pip set",
        "solve: same conda set",
        "env: install (venv)",
        "env: pip check",
        "import demo_torch",
        "import rollout",
        "import trainer",
        "import post",
        "import demo_queue",
    ):
        assert steps[name]["status"] == "ok", (name, steps[name])  # fmt: skip
    assert steps["import demo_torch"]["detail"] == "demo-torch 2.10.0"
    assert steps["import demo_triton"]["status"] == "skipped"
    assert "needs CANN" in steps["import demo_triton"]["detail"]
    assert throwaways(tmp_path) == []


def test_require_npu_turns_skips_into_failures_and_keep_keeps_the_env(
    example: Example, tmp_path: Path, installed: list[Request]
) -> None:
    code, out, err = envgen_check(
        example, "--venv", "--installer", "uv", "--no-solve", "--require-npu", "--keep"
    )
    assert code == 4
    assert "failed  import demo_triton: needs CANN" in out
    (kept,) = throwaways(tmp_path)
    assert str(kept) in out and str(kept) in err
    assert (kept / "env" / "src" / "rollout" / ".git").is_dir()


def test_without_venv_the_check_installs_a_conda_prefix_and_passes(
    example: Example,
    tmp_path: Path,
) -> None:
    """The researchers' env, end to end: the conda part by rattler, the pip part into the prefix's
    own python, the recipe, pip check and the imports; every pip package in the prefix, none in the
    host's interpreter. The pip part by uv: pip run by the prefix's python is test_install's."""
    code, out, err = envgen_check(example, "--installer", "uv", "--no-solve", "--keep", "--json")
    assert code == 0, out + err
    steps = steps_of(out)
    passed = ("env: install (conda prefix)", "env: installed set", "env: pip check")
    for name in (*passed, "import rollout", "import trainer"):
        assert steps[name]["status"] == "ok", steps[name]
    assert steps["import demo_torch"]["detail"] == "demo-torch 2.10.0"
    (kept,) = throwaways(tmp_path)
    prefix = kept / "env"
    site = prefix / "lib" / "python3.11" / "site-packages"
    assert {"demo_torch", "demo_numpy", "demo_bridge"} <= {p.name for p in site.iterdir()}
    assert (prefix / "conda-meta").is_dir() and (prefix / "src" / "post" / ".git").is_dir()
    modules = "('demo_torch', 'rollout')"
    probe = f"import importlib.util as u; print([m for m in {modules} if u.find_spec(m)])"
    host = [host_python().executable, "-I", "-c", probe]
    assert subprocess.run(host, capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_no_env_runs_static_checks_and_the_re_solve_only(example: Example, tmp_path: Path) -> None:
    """What the relock workflow runs on a hosted runner: no throwaway env at all."""
    code, out, err = envgen_check(example, "--no-env", "--json")
    assert code == 0, out + err
    steps = steps_of(out)
    assert steps["solve: same pip set"]["status"] == "ok"
    assert steps["env: install"] == {
        "name": "env: install",
        "status": "skipped",
        "detail": "--no-env",
        "problems": [],
        "unreachable": False,
        "conflicts": [],
    }
    assert not any(name.startswith("import ") for name in steps)
    assert throwaways(tmp_path) == []


def test_a_source_needing_cann_is_skipped_without_it_and_installed_with_it(
    example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, installed: list[Request]
) -> None:
    """What check decides: the install is asked to leave the source out (the recipe's
    --skip-cann is test_recipe_run's), its import is skipped, not failed; with CANN both are
    asked for."""
    text = example.matrix.read_text()
    example.matrix.write_text(
        text.replace('distribution = "post"\n', 'distribution = "post"\nneeds-cann = true\n', 1)
    )
    result = CliRunner().invoke(cli, ["lock", ENV, "-q", "--root", str(example.root)])
    assert result.exit_code == 0, result.output

    code, out, _ = envgen_check(example, "--venv", "--installer", "uv", "--no-solve", "--json")
    assert code == 0, out
    steps = steps_of(out)
    assert steps["env: sources needing CANN"]["status"] == "skipped"
    assert steps["env: sources needing CANN"]["detail"].startswith("post: ")
    assert steps["import post"]["status"] == "skipped"
    assert [r.skip_cann for r in installed] == [True]

    set_env = tmp_path / "cann" / "set_env.sh"
    set_env.parent.mkdir()
    set_env.write_text("export DEMO_CANN_HOME=/opt/demo-cann\n")
    monkeypatch.setenv("ASCEND_SET_ENV", str(set_env))
    code, out, _ = envgen_check(example, "--venv", "--installer", "uv", "--no-solve", "--json")
    assert code == 0, out
    steps = steps_of(out)
    assert "env: sources needing CANN" not in steps
    assert steps["import post"]["status"] == "ok"
    assert steps["import demo_triton"]["status"] == "ok"  # needs = "cann": CANN is present now
    assert [r.skip_cann for r in installed] == [True, False]


def test_a_pin_contradicting_its_import_check_is_found_statically_and_the_demo_bump_moves_both(
    example: Example,
) -> None:
    """Before: the demo's bump moved the pin only; the lock's own check failed, and only after an
    install."""
    text = example.matrix.read_text()
    pin = 'demo-torch = { version = "==2.10.0" }'
    example.matrix.write_text(text.replace(pin, pin.replace("2.10.0", "2.10.1")))
    relock = ["lock", ENV, "-q", "--root", str(example.root)]
    assert CliRunner().invoke(cli, relock).exit_code == 0
    code, out, _ = envgen_check(example, "--no-env", "--no-solve", "--json")
    step = steps_of(out)["static: import checks"]
    assert code == 4 and step["status"] == "failed"
    assert any(
        "import demo_torch expects demo-torch 2.10.0, the lock has 2.10.1" in p
        for p in step["problems"]
    )
    example.matrix.write_text(text)
    bump_version(example, "demo-torch", "2.10.0", "2.10.1")
    assert 'version = "2.10.1"' in example.matrix.read_text()
    assert CliRunner().invoke(cli, relock).exit_code == 0
    code, out, _ = envgen_check(example, "--no-env", "--no-solve", "--json")
    assert code == 0 and steps_of(out)["static: import checks"]["status"] == "ok"


def test_a_lock_made_stale_by_editing_the_matrix_fails_the_static_step(
    example: Example, tmp_path: Path
) -> None:
    bump_version(example, "demo-torch", "2.10.0", "2.10.1")
    code, out, _ = envgen_check(example, "--venv", "--json")
    assert code == 4
    steps = steps_of(out)
    assert steps["static: input hash"]["status"] == "failed"
    assert any(
        "matrix env-templates/demo.toml changed" in p
        for p in steps["static: input hash"]["problems"]
    )
    assert any("wants ==2.10.1" in p for p in steps["static: matrix pins"]["problems"])
    assert steps["env: install"]["status"] == "skipped"
    assert throwaways(tmp_path) == []


def test_a_tampered_wheel_fails_the_install_step_and_the_env_is_removed(
    example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The install for real, by uv with a cache of its own (the session's holds the wheel as
    locked, from an earlier check's install, and would install that): uv's venv seeds are not
    compiled, pip's would be (seconds of CPU) before pip reached the wheel. Each installer's own
    hash check is test_install's test_tampered_wheel_fails_the_install."""
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    numpy = next(e for e in lock.pip if e.name == "demo-numpy" and e.platform == "linux-64")
    served = Path(example.root).parent / "pypi" / "files" / numpy.url.rsplit("/", 1)[1]
    original = served.read_bytes()
    served.write_bytes(original + b"\0")
    try:
        code, out, _ = envgen_check(example, "--venv", "--installer", "uv", "--no-solve", "--json")
    finally:
        served.write_bytes(original)
    assert code == 4
    install = steps_of(out)["env: install (venv)"]
    assert install["status"] == "failed" and "does not match its locked sha256" in install["detail"]
    assert throwaways(tmp_path) == []


def venv_with(install: Install) -> CheckOptions:
    """A throwaway venv installed by `install`, a stand-in for the install core (no re-solve)."""
    return CheckOptions(cache_dir(), venv=True, solve=False, install=install)


def test_an_interrupt_inside_a_step_still_removes_the_throwaway_env(
    example: Example, tmp_path: Path
) -> None:
    def interrupted(request: Request, source: Source, env: Destination, *_: object) -> None:
        (env.path / "bin").mkdir(parents=True)
        assert throwaways(tmp_path)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        options = venv_with(interrupted)
        check_env(Project(example.root), ENV, options)
    assert throwaways(tmp_path) == []


def test_a_failing_step_with_a_bug_still_removes_the_throwaway_env(
    example: Example, tmp_path: Path
) -> None:
    def broken(request: Request, source: Source, env: Destination, *_: object) -> None:
        env.path.mkdir(parents=True)
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        options = venv_with(broken)
        check_env(Project(example.root), ENV, options)
    assert throwaways(tmp_path) == []


# --- the static checks on a real lock, changed one fact at a time
# ------------------------------------------


def _loaded(example: Example) -> tuple[Matrix, Lock]:
    lock = read_lock(Project(example.root), ENV)
    assert lock is not None
    return load_matrix(example.matrix, example.root / "channels"), lock


def _python(platform: str) -> str:
    return "3.11.9"


def test_static_checks_pass_on_the_fresh_lock(example: Example) -> None:
    matrix, lock = _loaded(example)
    assert pin_problems(matrix, lock) == []
    assert dependencies_step(lock, _python).problems == ()
    assert index_problems(matrix, lock) == []


def test_a_package_from_the_wrong_index_is_reported(example: Example) -> None:
    matrix, lock = _loaded(example)
    pip = tuple(
        msgspec.structs.replace(e, index="pypi") if e.name == "demo-triton" else
        msgspec.structs.replace(e, index="extra") if e.name == "demo-numpy" else e
        for e in lock.pip
    )  # fmt: skip
    problems = index_problems(matrix, msgspec.structs.replace(lock, pip=pip))
    assert any(
        p.startswith("demo-triton 3.2.2 (linux-64) must come from extra, came from pypi")
        for p in problems
    )
    assert any(
        "demo-numpy 1.26.4 (linux-64) came from the explicit index extra" in p for p in problems
    )


def test_an_unmet_pin_and_a_missing_dependency_are_reported(example: Example) -> None:
    matrix, lock = _loaded(example)
    pip = tuple(
        msgspec.structs.replace(e, version="2.10.1") if e.name == "demo-torch" else e
        for e in lock.pip
        if e.name != "demo-numpy"
    )
    changed = msgspec.structs.replace(lock, pip=pip)
    assert any(
        "demo-torch: wants ==2.10.0, linux-aarch64 has 2.10.1" in p
        for p in pin_problems(matrix, changed)
    )
    unmet = dependencies_step(changed, _python).problems
    assert "demo-torch==2.10.1 needs demo-numpy>=1.26, linux-64 has none locked" in unmet


def test_a_pin_an_override_replaces_is_held_to_the_override(example: Example) -> None:
    """a5 keeps its guide's table pin (transformers==4.57.6) and overrides it: the lock holds the
    override's version, not the pin's."""
    matrix, lock = _loaded(example)
    guide = {"demo-transformers": "==5.0.0"}  # as a guide's table might say; the override decides
    pins = matrix.packages
    table = tuple(
        msgspec.structs.replace(p, specifier=guide.get(p.name, p.specifier)) for p in pins
    )
    assert pin_problems(msgspec.structs.replace(matrix, packages=table), lock) == []
    without = pin_problems(msgspec.structs.replace(matrix, packages=table, overrides=()), lock)
    assert any("demo-transformers: wants ==5.0.0, linux-64 has 4.57.6" in p for p in without)


def test_a_marker_keeps_an_x86_only_dependency_out_of_the_aarch64_check(example: Example) -> None:
    matrix, lock = _loaded(example)
    helper = [e for e in lock.pip if e.name == "demo-x86-helper"]
    assert [e.platform for e in helper] == ["linux-64"]
    without = msgspec.structs.replace(
        lock, pip=tuple(e for e in lock.pip if e.name != "demo-x86-helper")
    )
    unmet = dependencies_step(without, _python).problems
    assert unmet and all("linux-64" in p and "demo-x86-helper" in p for p in unmet)


def test_the_solve_step_reports_an_artifact_the_indexes_no_longer_resolve_to(
    example: Example,
) -> None:
    matrix, lock = _loaded(example)
    assert solve_step(matrix, lock, at(cache_dir())).status == "ok"
    pip = tuple(
        msgspec.structs.replace(e, sha256="f" * 64) if e.name == "demo-numpy" else e
        for e in lock.pip
    )
    step = solve_step(matrix, msgspec.structs.replace(lock, pip=pip), at(cache_dir()))
    assert step.status == "failed"
    assert (
        "linux-64: the lock has demo-numpy 1.26.4 (ffffffffffff), not resolved now" in step.problems
    )


def test_a_missing_lock_fails_the_first_step(tmp_path: Path) -> None:
    project = Project(tmp_path / "empty")
    (project.root / "locks").mkdir(parents=True)
    with pytest.raises(InputError, match="no lock for demo yet") as raised:
        check_env(project, ENV, CheckOptions(cache_dir(), venv=True))
    assert raised.value.exit_code == 2


def test_an_expected_version_is_compared_even_without_a_named_distribution(
    tmp_path: Path, pip_site_packages: Path
) -> None:
    """`version` with no `distribution`: the module's own distribution is read, never silently
    skipped."""
    prefix = fresh_venv(tmp_path / "env", pip_site_packages)
    code = "import importlib.metadata as m; print(m.version('pip'))"
    have = subprocess.run(
        [prefix / "bin" / "python", "-c", code], capture_output=True, text=True
    ).stdout.strip()
    checks = (
        ImportCheck("pip", version=have),
        ImportCheck("csv"),
        ImportCheck("json", version="1.0"),
    )
    lock = make_lock("v", platforms=(host_platform(),), checks=checks)
    hardware = Hardware("/nonexistent/set_env.sh", cann=False, npu=False)
    steps = {
        s.name: s
        for s in import_steps(
            lock,
            Venv(prefix, tools_at(tmp_path)),
            host_platform(),
            settings=tools_at(tmp_path),
            hardware=hardware,
            require_npu=False,
            skipped=set(),
        )
    }
    assert (steps["import pip"].status, steps["import pip"].detail) == ("ok", f"pip {have}")
    assert steps["import csv"].status == "ok"
    # The stdlib's json has no distribution to read a version from: the expectation cannot be met.
    assert steps["import json"].status == "failed" and "json" in steps["import json"].detail
