"""The generations table and the pure comparison of what a host reports with what an env targets."""

from __future__ import annotations

import pytest
from envgen.npu import (
    GENERATIONS,
    Npu,
    Probe,
    compare_build,
    compare_device,
    generation_of_soc,
    soc_version_problem,
)

BUILD_INFO = "vllm_ascend._build_info"
RECORDED = f"{BUILD_INFO}.__device_type__"
A3 = Npu("a3", "ascend910_9392", BUILD_INFO)
A5 = Npu("a5", "ascend950dt_9582", BUILD_INFO)


@pytest.mark.parametrize(
    ("generation", "code", "name"),
    [
        ("a2", 220, "Ascend910B1"),
        ("a2", 225, "A2G"),
        ("a3", 250, "Ascend910_9391"),
        ("a5", 260, "Ascend950PR"),
    ],
)
def test_each_generation_accepts_its_codes_and_names_and_refuses_the_others(
    generation: str, code: int, name: str
) -> None:
    own = Npu(generation)
    assert [
        problem for _, problem, _ in compare_device(own, Probe(soc_code=code, device_name=name))
    ] == [None, None]
    for other in set(GENERATIONS) - {generation}:
        problems = [
            p for _, p, _ in compare_device(Npu(other), Probe(soc_code=code, device_name=name))
        ]
        assert all(problems), (other, problems)
        assert GENERATIONS[generation].title in str(problems[0])  # what was found is named


def test_the_edges_of_a_range() -> None:
    for code, fits in ((219, False), (220, True), (225, True), (226, False)):
        (_, problem, _), _ = compare_device(
            Npu("a2"), Probe(soc_code=code, device_name="Ascend910B1")
        )
        assert (problem is None) == fits, code


@pytest.mark.parametrize(
    ("npu", "device_type"),
    [(A3, "A3"), (A5, "A5"), (Npu("a2", build_info=BUILD_INFO), "A2"), (A3, "_910_93")],
)
def test_a_build_recording_the_env_s_device_type_passes(npu: Npu, device_type: str) -> None:
    problem, detail = compare_build(npu, Probe(built_device_type=device_type))
    assert problem is None
    assert detail.startswith(device_type) and detail.endswith(f"({BUILD_INFO}.__device_type__)")


def test_a_build_for_another_generation_names_both_device_types() -> None:
    problem, _ = compare_build(A3, Probe(built_device_type="A5"))
    assert problem == (
        "expected a build for A3 (Atlas A3 (910_93)), found A5 (Ascend 950 (A5)) "
        "(vllm_ascend._build_info.__device_type__)"
    )
    problem, _ = compare_build(A5, Probe(built_device_type="_310P"))
    assert problem == f"expected a build for A5 (Ascend 950 (A5)), found _310P ({RECORDED})"


def test_the_device_type_wins_over_a_recorded_chip() -> None:
    """A build recording both is judged by its device type, as vllm-ascend reads it."""
    problem, _ = compare_build(A5, Probe(built_device_type="A5", built_soc="ascend910b1"))
    assert problem is None
    problem, _ = compare_build(A5, Probe(built_device_type="A2", built_soc="ascend950dt_9582"))
    assert problem is not None and "found A2" in problem


def test_a_legacy_build_is_judged_by_its_chip() -> None:
    problem, _ = compare_build(A3, Probe(built_soc="ASCEND910B1"))
    assert problem == (
        "expected a build for ascend910_9392, found ASCEND910B1 (Atlas A2 (910B)) "
        "(vllm_ascend._build_info.__soc_version__)"
    )
    # older builds wrote it as the user did, often in upper case
    assert compare_build(A3, Probe(built_soc="ASCEND910_9392"))[0] is None
    # Without soc-version, any chip of the generation.
    generation_only = Npu("a3", build_info=BUILD_INFO)
    assert compare_build(generation_only, Probe(built_soc="ascend910_9391"))[0] is None
    problem, _ = compare_build(generation_only, Probe(built_soc="ascend910b1"))
    assert problem is not None
    assert problem.startswith("expected a build for a chip of Atlas A3 (910_93), found")


def test_a_build_info_that_does_not_read_or_records_nothing_is_named() -> None:
    missing = "ModuleNotFoundError: No module named 'vllm_ascend'"
    problem, _ = compare_build(A3, Probe(built_error=missing))
    assert problem == f"cannot read vllm_ascend._build_info: {missing}"
    problem, _ = compare_build(A3, Probe())
    assert problem == (
        "expected vllm_ascend._build_info to record what it was built for, "
        "found neither __device_type__ nor __soc_version__"
    )


@pytest.mark.parametrize(
    ("generation", "chip", "ok"),
    [
        ("a2", "ascend910b1", True),
        ("a2", "ascend910b4-1", True),
        ("a2", "910b", True),
        ("a3", "ascend910_9392", True),
        ("a3", "ascend910_9391", True),
        ("a3", "910c", True),
        ("a5", "ascend950dt_9582", True),
        ("a5", "ascend950pr_9599", True),
        ("a5", "ascend950_9599", True),
        # vllm-ascend's table, not a prefix: a chip it does not know fails its build
        ("a2", "ascend910b9", False),
        ("a3", "ascend910_9399", False),
        # ascend910_95* named A5 only until vllm-ascend keyed A5 on "ascend950" (2026-03-12)
        ("a5", "ascend910_9579", False),
        ("a5", "ascend910_9592", False),
        ("a3", "ascend910b1", False),
        ("a2", "ascend910_9392", False),
        ("a5", "ascend910_9392", False),
        # its release branches compare the value as written
        ("a2", "ASCEND910B1", False),
        ("a5", "Ascend950PR_9599", False),
    ],
)
def test_vllm_ascend_builds_the_chips_of_a_generation(generation: str, chip: str, ok: bool) -> None:
    assert (soc_version_problem(generation, chip) is None) == ok


def test_a_refused_chip_says_what_to_write() -> None:
    assert soc_version_problem("a3", "ascend910b1") == (
        "'ascend910b1' is a chip of Atlas A2 (910B), not of Atlas A3 (910_93) (vllm-ascend builds "
        "it for 910c, ascend910_9391, ascend910_9381, ascend910_9372, ascend910_9392, "
        "ascend910_9382, ascend910_9362)"
    )
    marker = "vllm-ascend builds it for any value containing ascend950"
    assert soc_version_problem("a5", "ascend910_9579") == (
        f"'ascend910_9579' is not a chip of Ascend 950 (A5) ({marker})"
    )
    assert soc_version_problem("a5", "Ascend950PR_9599") == (
        "write 'ascend950pr_9599': vllm-ascend's release branches compare the chip as written"
    )


def test_a_recorded_chip_is_read_case_aside() -> None:
    assert generation_of_soc("ASCEND910B1") is GENERATIONS["a2"]
    assert generation_of_soc("Ascend950DT_9582") is GENERATIONS["a5"]
    assert generation_of_soc("ascend910_9579") is None
