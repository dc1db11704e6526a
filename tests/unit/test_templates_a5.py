"""env-templates/a5.toml holds what upstream says of A5 now; a5-950pr.toml is it for the 950PR chip.

FACTS are the A5 guide's rows that upstream has since settled (CANN and torch-npu published, the
guide's conflicts decided), ORIGINS every requirement each override decides: a row that no longer
holds fails with its component's name.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from envgen.cli import cli

from tests.support.templates import REPO, Fact, differing, missing_origins, show_json, wrong_facts

TOOLKIT = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
NNAL = "/usr/local/Ascend/nnal/atb/set_env.sh"
BOTH = {"linux-aarch64": None, "linux-64": None}
PROFILES = "activation/profiles"
TORCH_NPU = {"distribution": "torch-npu", "version": "2.10.0.post4", "needs": "npu"}
OPENCV = "opencv-python-headless==4.11.0.86"
ROCE = {"HCCL_INTRA_ROCE_ENABLE": "1"}
WHITELIST = {"HCCL_WHITELIST_DISABLE": "0"}
# verl's A5 page on CANN and torch_npu (install_guidance_A5.rst:8, :11): pending the Q2 release.
PENDING_Q2 = "待Q2 {}版本正式商发后更新链接"

FACTS: list[Fact] = [
    ("CANN 9.1.0, as vllm-ascend states it", "system/cann/version", "9.1.0"),
    ("... where", "system/cann/note", "~docs/source/installation.md:19"),
    ("... its A5 image", "system/cann/note", "~cann:9.1.0-950-ubuntu22.04-py3.12"),
    ("... verl's page's own words", "system/cann/note", f"~{PENDING_Q2.format('CANN')}"),
    ("CANN: both scripts, as Dockerfile.a5", "system/cann/scripts", [TOOLKIT, NNAL]),
    ("nothing pending", "pending", []),
    ("torch-npu pinned", "pip/packages/torch-npu/specifier", "==2.10.0.post4"),
    ("torch-npu from PyPI", "pip/packages/torch-npu/index", BOTH),
    ("... as vllm-ascend pins it", "env/notes/torch-npu", "~requirements.txt:17"),
    ("... verl's page's own words", "env/notes/torch-npu", f"~{PENDING_Q2.format('torch_npu')}"),
    ("import torch_npu", "imports/torch_npu", TORCH_NPU),
    ("the A5 table's transformers", "pip/packages/transformers/specifier", "==4.57.6"),
    ("transformers decided", "overrides/transformers/requirement", "transformers==5.5.4"),
    ("... as the commands end", "overrides/transformers/reason", "~run literally, end on 5.5.4"),
    ("import transformers", "imports/transformers/version", "5.5.4"),
    ("numpy decided", "overrides/numpy/requirement", "numpy<2.0.0"),
    ("opencv decided", "overrides/opencv-python-headless/requirement", OPENCV),
    ("vllm-ascend builds record here", "system/npu/build_info", "vllm_ascend._build_info"),
    ("A5 builds record A5", "system/npu/device_type", "A5"),
    ("950DT chip", "system/npu/soc_version", "ascend950dt_9582"),
    ("950DT build", "sources/vllm-ascend/env", {"SOC_VERSION": "ascend950dt_9582"}),
    ("intra-node RoCE, CANN >= 8.5.0", f"{PROFILES}/intra-roce/env", ROCE),
    ("... its origin", f"{PROFILES}/intra-roce/description", "~verl/checkpoint_engine/README.md"),
    ("the log filter", f"{PROFILES}/quiet-transformers/env", {"TRANSFORMERS_VERBOSITY": "error"}),
    ("the checkpoint engine's whitelist", f"{PROFILES}/checkpoint-engine/env", WHITELIST),
]

ORIGINS: dict[str, list[str]] = {
    "transformers": [
        "install_guidance_A5.rst:14",
        "requirements.txt:38 transformers==5.5.4",
        "setup.py:43 transformers>=5.5.3,!=5.6.0,<5.11",
        "MindSpeed requirements.txt:17 transformers>=4.43.2",
        "requirements/common.txt:10 transformers>=4.56.0",
    ],
    "numpy": [
        "requirements-npu.txt:8 numpy<2.0.0",
        "setup.py:32 numpy>=2.0.0",
        "MindSpeed requirements.txt:4 numpy<=1.26.0",
        "requirements/common.txt:5",
        "vllm-ascend requirements.txt:5",
    ],
    "opencv-python-headless": [
        "requirements/common.txt:36 asks opencv-python-headless>=4.13.0",
        "opencv-python-headless>=4.0.0",
        "numpy>=2",
    ],
}


@pytest.mark.parametrize("env", ["a5", "a5-950pr"])
def test_what_upstream_says_of_a5_now_is_in_the_matrix(env: str) -> None:
    document = show_json(env)
    facts = [f for f in FACTS if env == "a5" or "950DT" not in f[0]]
    wrong = wrong_facts(document, facts)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("env", ["a5", "a5-950pr"])
def test_every_override_names_every_origin_of_what_it_decides(env: str) -> None:
    assert not missing_origins(show_json(env), ORIGINS)


def test_950pr_is_a5_built_for_another_chip_through_extends() -> None:
    text = (REPO / "env-templates" / "a5-950pr.toml").read_text()
    assert 'extends = "a5"' in text and len(text.splitlines()) < 25
    document = show_json("a5-950pr")
    assert document["env"]["extends"] == ["a5"]
    assert not wrong_facts(
        document,
        [
            ("the 950PR chip", "system/npu/soc_version", "ascend950pr_9599"),
            ("its build", "sources/vllm-ascend/env", {"SOC_VERSION": "ascend950pr_9599"}),
            ("how vllm-ascend names it", "env/notes/soc-version", "~Ascend950PR_9599"),
            ("still A5", "system/npu/generation", "a5"),
        ],
    )
    assert differing("a5", "a5-950pr") == {
        "/env/name",
        "/env/description",
        "/env/extends/0",
        "/env/notes/soc-version",
        "/system/npu/soc_version",
        "/sources/vllm-ascend/env/SOC_VERSION",
    }


@pytest.mark.parametrize(
    ("env", "lines"),
    [
        ("a5", ["CANN          9.1.0 (as vllm-ascend", "torch-npu      ==2.10.0.post4"]),
        ("a5-950pr", ["extends       a5 (merged below)", "built for ascend950pr_9599"]),
        ("a3", ["device type A3 in vllm_ascend._build_info", "intra-roce: verl's"]),
        ("a2", ["extends       a3 (merged below)", "device type A2 in vllm_ascend._build_info"]),
    ],
)
def test_show_prints_each_env(env: str, lines: list[str]) -> None:
    result = CliRunner().invoke(cli, ["show", env, "--root", str(REPO)])
    assert result.exit_code == 0, result.stderr
    assert [line for line in lines if line not in result.stdout] == []
    assert "opencv-python-headless  opencv-python-headless==4.11.0.86  (reason: " in result.stdout
