"""`envgen check --require-npu` against a fake Ascend host: a fake `npu-smi` on PATH, a fake
`torch_npu` and two fake vllm-ascend builds on the throwaway env's PYTHONPATH (one recording its
device type, as builds do since 2025-11-26, one only its chip, as older builds did), driving pass,
wrong generation, a build for another generation and a missing device."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from envgen.cli import cli
from envgen.commands.check import command as check
from envgen.commands.check import npu as check_npu
from envgen.commands.check import throwaway as check_throwaway
from envgen.commands.check.options import CheckOptions
from envgen.commands.check.throwaway import throwaway_steps
from envgen.errors import VerificationError
from envgen.example.project import GITHUB, Example
from envgen.example.srcprojects import backend_project
from envgen.installer import core
from envgen.installer.core import Destination, Installer, Request, Source
from envgen.installer.destinations import destination
from envgen.installer.sources import IndexSource
from envgen.installer.tools import Pip
from envgen.npu import Npu
from envgen.project import Project

from tests.support.builders import bare_at, make_lock, tools_at
from tests.support.chk_venv import compile_pip
from tests.support.example import served_example
from tests.support.shared import build_once, session_root

ENV = "demo"
A3, A5 = "Atlas A3 (910_93)", "Ascend 950 (A5)"
CURRENT, LEGACY = "fake_ascend._build_info", "fake_legacy._build_info"

# The example's matrix targets an A3, built for ascend910_9392, and reads the older build, which
# records only that chip; the envs extending it read the newer build, which records "A5".
NPU = """
[system.npu]
generation = "a3"
soc-version = "ascend910_9392"
build-info = "fake_legacy._build_info"

[sources.fakenpu]
url = "{github}fakenpu.git"
ref = "main"
pythonpath = true
dependencies = "none"
dependencies-reason = "a stand-in for torch_npu, on PYTHONPATH only"
"""

# Envs extending the example, both reading the build that records "A5": an A5 target and an A3 one.
A5_BUILD = 'build-info = "fake_ascend._build_info"\n'
EXTENDING = {
    "demo-a5": f'\n[system.npu]\ngeneration = "a5"\nsoc-version = "ascend950dt_9582"\n{A5_BUILD}',
    "demo-a3-on-a5-build": f"\n[system.npu]\n{A5_BUILD}",
}

# torch_npu as the test sets it up per case: what the device reports comes from FAKE_NPU_*
# variables.
TORCH_NPU = """\
import os


def device_count():
    return int(os.environ.get("FAKE_NPU_COUNT", "1"))


def get_soc_version():
    return int(os.environ["FAKE_NPU_SOC"])


def get_device_name(index=0):
    return os.environ["FAKE_NPU_NAME"]
"""

NPU_SMI = """\
#!/bin/sh
if [ "${FAKE_NPU_COUNT:-1}" = 0 ]; then
    echo "dcmi module initialize failed. ret is -8005: no NPU device found" >&2
    exit 1
fi
echo "| npu-smi 26.0.rc1                 Version: 26.0.rc1                                       |"
echo "| 0     ${FAKE_NPU_NAME}            | OK            | 93.8        42                0    / 0  |"
"""  # noqa: E501 (npu-smi's table, column for column)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Example]:
    """The example locked with an A3 target and a stand-in torch_npu source; a fake CANN."""
    work = tmp_path_factory.mktemp("npu")
    with served_example(tmp_path_factory, work / "example") as example:
        fake = backend_project(work / "upstream" / "fakenpu", "fakenpu", importable=False)
        fake.commit(
            {
                "torch_npu/__init__.py": "from . import npu\n",
                "torch_npu/npu.py": TORCH_NPU,
                # as vllm-ascend's gen_build_info() writes it
                "fake_ascend/__init__.py": "",
                "fake_ascend/_build_info.py": "# Auto-generated file\n__device_type__ = 'A5'\n",
                # as older builds wrote it: the chip as SOC_VERSION gave it, here in upper case
                "fake_legacy/__init__.py": "",
                "fake_legacy/_build_info.py": '__soc_version__ = "ASCEND910_9392"\n',
            },
            "a stand-in for torch_npu",
        )
        gitconfig = work / "gitconfig"
        gitconfig.write_text(
            f'[include]\n\tpath = {example.gitconfig}\n[url "{fake.url}"]\n\tinsteadOf '
            f"= {GITHUB}fakenpu.git\n"
        )
        with example.matrix.open("a") as matrix:
            matrix.write(NPU.format(github=GITHUB))
        for name, target in EXTENDING.items():
            (example.matrix.parent / f"{name}.toml").write_text(
                f'schema = 1\nextends = "{ENV}"\n\n[env]\nname = "{name}"\n{target}'
            )
        env = {
            "GIT_CONFIG_GLOBAL": str(gitconfig),
            "GIT_CONFIG_NOSYSTEM": "1",
            "PIP_CONFIG_FILE": "/dev/null",
        }
        argv = ["lock", ENV, *EXTENDING, "-q", "--root", str(example.root)]
        result = CliRunner().invoke(cli, argv, env=env)
        assert result.exit_code == 0, result.output
        bin_dir = work / "bin"
        bin_dir.mkdir()
        (bin_dir / "npu-smi").write_text(NPU_SMI)
        (bin_dir / "npu-smi").chmod(0o755)
        (work / "cann").mkdir()
        (work / "cann" / "set_env.sh").write_text("export DEMO_CANN_HOME=/opt/demo-cann\n")
        yield example


@pytest.fixture
def host(
    served: Example,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Example]:
    """A fake Ascend host: npu-smi on PATH and CANN's script; the device is set per test. Every
    check installs into the session's one venv (see `_installed_once`)."""
    work = served.root.parent.parent
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(work / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("PATH", f"{work / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("ASCEND_SET_ENV", str(work / "cann" / "set_env.sh"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    shared = session_root(tmp_path_factory) / VENV
    monkeypatch.setattr(check_throwaway, "destination", lambda _, **kw: destination(shared, **kw))
    install = functools.partial(_installed_once, tmp_path_factory)
    # The command line's own options, its install the one below: the CLI stays the path checked.
    monkeypatch.setattr(
        check, "CheckOptions", functools.partial(check.CheckOptions, install=install)
    )
    yield served


VENV = "chk-npu-venv"


def _installed_once(
    factory: pytest.TempPathFactory,
    request: Request,
    source: Source,
    env: Destination,
    installer: Installer,
) -> None:
    """The install of a check in this module: the first check of the session installs the session's
    venv for real (uv, the recipe of the stand-in torch_npu and the example's sources), every other
    check finds it installed. The envs of this module differ in their NPU target only, not in what
    is installed, and these tests are about the NPU steps: what is checked after the install
    (installed set, pip check, imports, the NPU steps) runs on that venv as on a new one. The
    throwaway env itself is test_check.py's. pip's bytecode is compiled once there (chk_venv's
    compile_pip): each check's pip check would compile pip anew."""

    def build(_: Path) -> None:
        core.install(request, source, env, installer)
        compile_pip(env.path)

    build_once(factory, VENV, build)


Steps = dict[str, dict[str, str]]


def run_check(example: Example, *args: str, env: str = ENV) -> tuple[int, Steps, str]:
    # uv for the throwaway env: these tests are about the NPU steps; pip's install path is tested
    # elsewhere
    argv = ["check", env, "--root", str(example.root), "--venv", "--installer", "uv", "--no-solve"]
    argv += args
    result = CliRunner().invoke(cli, argv)
    assert "Traceback" not in result.output
    steps = (
        {s["name"]: s for s in json.loads(result.stdout)["results"][0]["steps"]}
        if "--json" in args
        else {}
    )
    return result.exit_code, steps, result.stdout


def npu(steps: dict[str, dict[str, str]]) -> dict[str, tuple[str, str]]:
    return {
        name: (s["status"], s["detail"]) for name, s in steps.items() if name.startswith("npu: ")
    }


def test_the_host_the_env_was_built_for_passes(
    host: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NPU_SOC", "253")
    monkeypatch.setenv("FAKE_NPU_NAME", "Ascend910_9392")
    code, steps, _ = run_check(host, "--require-npu", "--json")
    assert code == 0, steps
    assert npu(steps) == {
        "npu: npu-smi": ("ok", "npu-smi info lists the NPUs"),
        "npu: device": ("ok", "1 NPU device"),
        "npu: soc version": ("ok", "253 (Atlas A3 (910_93)), within 250-255"),
        "npu: device name": ("ok", "Ascend910_9392"),
        # the older build, judged by the chip it recorded
        "npu: built for": ("ok", f"ASCEND910_9392 ({A3}) ({LEGACY}.__soc_version__)"),
    }


def test_a_host_of_another_generation_fails_naming_expected_and_found(
    host: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NPU_SOC", "222")
    monkeypatch.setenv("FAKE_NPU_NAME", "Ascend910B2")
    code, steps, _ = run_check(host, "--require-npu", "--json")
    assert code == 4
    found = npu(steps)
    assert found["npu: soc version"] == (
        "failed",
        "expected 250-255 (Atlas A3 (910_93)), found 222 (Atlas A2 (910B))",
    )
    assert found["npu: device name"] == (
        "failed",
        "expected a name containing Ascend910_93, found 'Ascend910B2' (Atlas A2 (910B))",
    )
    assert found["npu: built for"][0] == "ok"  # the env itself is the A3 build its matrix asks for


def test_a_host_without_a_device_fails_and_a_host_without_npu_smi_skips(
    host: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NPU_COUNT", "0")
    code, steps, _ = run_check(host, "--require-npu", "--json")
    assert code == 4
    found = npu(steps)
    assert (
        found["npu: npu-smi"][0] == "failed" and "no NPU device found" in found["npu: npu-smi"][1]
    )
    assert found["npu: device"] == (
        "failed",
        "expected at least one NPU, found none: torch_npu sees no NPU device",
    )
    assert {found[n] for n in ("npu: soc version", "npu: device name")} == {
        ("skipped", "no NPU device to ask")
    }
    assert found["npu: built for"][0] == "ok"  # a fact of the env, known without a device

    work = host.root.parent.parent
    monkeypatch.setenv("PATH", os.environ["PATH"].replace(f"{work / 'bin'}:", ""))
    code, steps, _ = run_check(host, "--json")
    assert code == 0
    reason = "no NPU on this host (npu-smi is not on PATH); the env targets Atlas A3 (910_93)"
    assert set(npu(steps).values()) == {("skipped", reason)}
    code, steps, _ = run_check(host, "--require-npu", "--json")
    assert code == 4
    assert set(npu(steps).values()) == {("failed", reason)}


def test_a_build_recording_its_device_type_passes_on_the_env_of_that_generation(
    host: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NPU_SOC", "260")
    monkeypatch.setenv("FAKE_NPU_NAME", "Ascend950DT")
    code, steps, _ = run_check(host, "--require-npu", "--json", env="demo-a5")
    assert code == 0, steps
    assert npu(steps) == {
        "npu: npu-smi": ("ok", "npu-smi info lists the NPUs"),
        "npu: device": ("ok", "1 NPU device"),
        "npu: soc version": ("ok", f"260 ({A5}), within 260"),
        "npu: device name": ("ok", "Ascend950DT"),
        "npu: built for": ("ok", f"A5 ({A5}) ({CURRENT}.__device_type__)"),
    }


def test_another_generations_build_fails(host: Example, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host is the A3 the env targets; the env's build is the A5 one."""
    monkeypatch.setenv("FAKE_NPU_SOC", "253")
    monkeypatch.setenv("FAKE_NPU_NAME", "Ascend910_9392")
    code, steps, _ = run_check(host, "--require-npu", "--json", env="demo-a3-on-a5-build")
    assert code == 4
    found = npu(steps)
    assert found["npu: built for"] == (
        "failed",
        f"expected a build for A3 ({A3}), found A5 ({A5}) ({CURRENT}.__device_type__)",
    )
    assert {found[n][0] for n in ("npu: soc version", "npu: device name")} == {"ok"}


def test_a_hanging_npu_smi_fails_its_step_without_stopping_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "npu-smi").write_text("#!/bin/sh\nexec sleep 30\n")
    (tmp_path / "bin" / "npu-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(check_npu, "SMI_TIMEOUT", 1)
    target = Npu("a3", "ascend910_9392", "fake_legacy._build_info")
    steps = {
        s.name: s
        for s in check_npu.npu_steps(
            target, tmp_path / "no-env", "true", tools_at(tmp_path), require_npu=True
        )
    }
    assert steps["npu: npu-smi"].status == "failed"
    assert "did not finish within 1 s" in steps["npu: npu-smi"].detail
    # the env's python is missing here: the probe's failure is the device step's
    assert (
        steps["npu: device"].status == "failed"
        and "the probe did not run" in steps["npu: device"].detail
    )


def test_a_failed_install_skips_the_npu_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_install(*args: object, **kwargs: object) -> None:
        raise VerificationError("the wheel does not match its locked sha256")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    lock = make_lock("x")
    source = IndexSource(Project(tmp_path), settings=bare_at(tmp_path))
    tools = tools_at(tmp_path)
    options = CheckOptions(tmp_path, venv=True, require_npu=True, install=failing_install)
    steps, _ = throwaway_steps(
        lock, source, Pip(tools), options, platform="linux-64", settings=tools, npu=Npu("a3")
    )
    assert [(s.name, s.status, s.detail) for s in steps if s.name.startswith("npu: ")] == [
        (f"npu: {name}", "skipped", "the install failed")
        for name in ("npu-smi", "device", "soc version", "device name")
    ]
