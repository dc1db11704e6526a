"""ci/npu_check.py: npu-check.yml's matrix from ci/npu-runners.toml, and its env x runner x verdict
table."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from envgen.cli.output import envelope
from envgen.commands.check.report import CheckReport, Step

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("npu_check", REPO / "ci" / "npu_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


npu = _load()


def test_the_repository_config_names_verls_labels_and_leaves_a5_for_later() -> None:
    labels, minutes = npu.read_config(REPO / "ci" / "npu-runners.toml")
    a2, a3 = ["linux-aarch64-a2b3-8"], ["linux-aarch64-a3-8"]
    # The SGLang route runs on the same runners as the vLLM route of its generation.
    sglang = {"a2-sglang": a2, "a3-sglang": a3, "a3-sglang-fsdp": a3}
    assert labels == {"a2": a2, "a3": a3, "a5": [], **sglang}
    assert minutes == 30


def test_plan_pairs_locked_envs_with_their_labels_and_notes_every_gap() -> None:
    labels = {"a2": ["linux-aarch64-a2b3-8"], "a3": ["linux-aarch64-a3-8", "spare"], "a5": []}
    include, notes = npu.plan(labels, ["a3", "a5", "demo"])
    assert include == [
        {
            "env": "a3",
            "runner": "linux-aarch64-a3-8",
            "artifact": "npu-check-a3-linux-aarch64-a3-8",
        },
        {"env": "a3", "runner": "spare", "artifact": "npu-check-a3-spare"},
    ]
    assert notes == [
        "a2: no locks/a2.yml yet; not checked",
        "a5: no runner label configured in ci/npu-runners.toml; not checked",
        "demo: has a lock but no entry in ci/npu-runners.toml; not checked",
    ]


def test_a_pull_request_checks_the_envs_whose_locks_it_changes() -> None:
    envs = ["a2", "a3", "a5"]
    assert npu.touched(envs, ["locks/a3.yml", "locks/a3.sources.toml"]) == {"a3"}
    assert npu.touched(
        envs, ["locks/pylock.a5-linux-aarch64.toml", "locks/a2.linux-64.requirements.txt"]
    ) == {
        "a2",
        "a5",
    }
    # A matrix may be extended by another: every env.
    assert npu.touched(envs, ["env-templates/a3.toml"]) == {"a2", "a3", "a5"}
    assert npu.touched(envs, []) == set()
    labels = {"a2": ["linux-aarch64-a2b3-8"], "a3": ["linux-aarch64-a3-8"]}
    include, notes = npu.plan(labels, ["a2", "a3"], only={"a3"})
    assert [(e["env"], e["runner"]) for e in include] == [("a3", "linux-aarch64-a3-8")]
    assert notes == ["a2: not touched by this change; not checked"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[envs]\na3 = ["--label"]\n', "envs.a3: a list of runner labels"),
        ('[envs]\na3 = ["two words"]\n', "envs.a3: a list of runner labels"),
        ('[envs]\na3 = "linux-aarch64-a3-8"\n', "envs.a3: a list of runner labels"),
        ('[envs]\n"-x" = []\n', "envs.-x: not an env name"),
        ("queue-minutes = 0\n[envs]\na3 = []\n", "queue-minutes must be a whole number"),
        ('queue-minutes = "30"\n[envs]\na3 = []\n', "queue-minutes must be a whole number"),
        ("a3 = []\n", "no [envs] table"),
        ("[envs\n", "npu-runners.toml: "),
    ],
)
def test_a_malformed_config_is_refused_naming_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "npu-runners.toml"
    config.write_text(text)
    with pytest.raises(npu.ConfigError, match=message.replace("[", r"\[")):
        npu.read_config(config)


def test_matrix_command_writes_the_workflow_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "npu-runners.toml").write_text(
        'queue-minutes = 45\n[envs]\na3 = ["linux-aarch64-a3-8"]\n'
    )
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "a3.yml").write_text("version: 1\n")
    outputs, summary = tmp_path / "outputs", tmp_path / "summary"
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert npu.main(["matrix", "--root", str(tmp_path)]) == 0
    entry = {
        "env": "a3",
        "runner": "linux-aarch64-a3-8",
        "artifact": "npu-check-a3-linux-aarch64-a3-8",
    }
    assert outputs.read_text() == f"include={json.dumps([entry])}\ncount=1\nqueue-minutes=45\n"
    assert summary.read_text() == ""
    changed = tmp_path / "changed.txt"
    changed.write_text("locks/a2.yml\n")
    assert npu.main(["matrix", "--root", str(tmp_path), "--changed", str(changed)]) == 0
    assert outputs.read_text().endswith("include=[]\ncount=0\nqueue-minutes=45\n")
    assert summary.read_text() == "- a3: not touched by this change; not checked\n"
    (tmp_path / "ci" / "npu-runners.toml").write_text('[envs]\na3 = ["bad label"]\n')
    assert npu.main(["matrix", "--root", str(tmp_path)]) == 2


def _result(results: Path, env: str, runner: str, *steps: Step) -> None:
    where = results / npu.artifact_name(env, runner)
    where.mkdir(parents=True)
    report = CheckReport(env, "linux-aarch64", steps)
    (where / f"{env}.json").write_text(envelope("check", report.exit_code, [report.as_dict()]))


def test_summary_table_has_a_verdict_for_every_pair(tmp_path: Path) -> None:
    include = [
        {"env": env, "runner": runner, "artifact": npu.artifact_name(env, runner)}
        for env, runner in (
            ("a2", "linux-aarch64-a2b3-8"),
            ("a3", "linux-aarch64-a3-8"),
            ("a3", "gone"),
        )
    ]
    _result(
        tmp_path,
        "a2",
        "linux-aarch64-a2b3-8",
        Step("static: lock parses", "ok"),
        Step("import vllm", "ok"),
    )
    _result(
        tmp_path,
        "a3",
        "linux-aarch64-a3-8",
        Step("static: lock parses", "ok"),
        Step("import torch_npu", "failed", "needs an NPU"),
        Step("import vllm_ascend", "skipped", "import torch_npu failed"),
    )
    text, passed = npu.summary(include, tmp_path)
    assert not passed
    assert text.splitlines()[2:] == [
        "| env | runner | verdict |",
        "|---|---|---|",
        "| a2 | `linux-aarch64-a2b3-8` | ok (2 steps) |",
        "| a3 | `linux-aarch64-a3-8` | **failed**: `import torch_npu` |",
        "| a3 | `gone` | no result: no runner picked the job up in time, or it stopped "
        "before the check |",
    ]
    assert npu.summary(include[:1], tmp_path)[1] is True
    assert "no env has both a lock and a runner label" in npu.summary([], tmp_path)[0]


def test_names_with_a_line_break_are_not_envs_or_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pull request names its lock files, and `$` matches before a final newline: a lock file
    # "x\n<img>.yml" must not become a line of the job summary, nor a label "a\n" a runner of the
    # matrix.
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "npu-runners.toml").write_text('[envs]\na3 = ["linux-aarch64-a3-8"]\n')
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "a3.yml").write_text("version: 1\n")
    (tmp_path / "locks" / "x\n<img src=x>.yml").write_text("version: 1\n")
    summary = tmp_path / "summary"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert npu.main(["matrix", "--root", str(tmp_path)]) == 0
    assert "<img" not in summary.read_text()
    (tmp_path / "ci" / "npu-runners.toml").write_text('[envs]\na3 = ["label\\n"]\n')
    with pytest.raises(npu.ConfigError, match="a list of runner labels"):
        npu.read_config(tmp_path / "ci" / "npu-runners.toml")


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The script as the workflow runs it: its own process, where a traceback would show."""
    cmd = [sys.executable, str(REPO / "ci" / "npu_check.py"), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        (None, "--changed {path}: No such file or directory"),
        (b"locks/a3.yml\n\xff\xfe\n", "--changed {path}: not UTF-8"),
    ],
    ids=["missing", "not-utf8"],
)
def test_a_changed_file_that_does_not_read_is_one_line_and_exit_2(
    tmp_path: Path, changed: bytes | None, message: str
) -> None:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "npu-runners.toml").write_text('[envs]\na3 = ["linux-aarch64-a3-8"]\n')
    path = tmp_path / "changed.txt"
    if changed is not None:
        path.write_bytes(changed)
    proc = _run("matrix", "--root", str(tmp_path), "--changed", str(path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"npu-check: {message.format(path=path)}\n", proc.stderr
    (tmp_path / "ci" / "npu-runners.toml").write_bytes(b'[envs]\na3 = ["\xff"]\n')
    proc = _run("matrix", "--root", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "include",
    [
        "not json",
        "[" * 100_000,
        '{"env": "a3"}',
        '[{"env": "a3", "runner": "r"}]',
        '[{"env": "../x", "runner": "r", "artifact": "a"}]',
    ],
)
def test_an_include_that_is_not_the_matrix_is_one_line_and_exit_2(
    tmp_path: Path,
    include: str,
) -> None:
    proc = _run("summary", "--include", include, "--results", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("npu-check: --include is not"), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize(
    "document",
    [
        '{"results": [{"ok": true, "steps": "all fine"}]}',
        '{"results": [{"ok": true, "steps": ["ok", 1]}]}',
        '{"results": [{"ok": true, "steps": [{"name": 1, "status": "ok"}]}]}',
        '{"results": ["ok"]}',
        '{"results": {"ok": true}}',
        '[{"ok": true}]',
        "[" * 100_000,
        "\xff not json",
    ],
)
def test_a_result_that_is_not_a_check_result_fails_its_cell_without_a_traceback(
    tmp_path: Path,
    document: str,
) -> None:
    runner = "linux-aarch64-a3-8"
    include = [{"env": "a3", "runner": runner, "artifact": npu.artifact_name("a3", runner)}]
    where = tmp_path / include[0]["artifact"]
    where.mkdir()
    (where / "a3.json").write_bytes(document.encode("latin-1"))
    args = ("--include", json.dumps(include), "--results", str(tmp_path))
    proc = _run("summary", *args, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    assert "| a3 | `linux-aarch64-a3-8` | **failed**: the result " in proc.stdout, proc.stdout
