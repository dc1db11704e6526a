"""The generations table and the pure comparison of what a host reports with what an env targets."""

from __future__ import annotations

import pytest
from envgen.npu import GENERATIONS, Npu, Probe, compare_build, compare_device, soc_version_problem

A3 = Npu("a3", "ascend910_9392", "vllm_ascend._build_info.__soc_version__")


@pytest.mark.parametrize(
    ("generation", "code", "name"),
    [("a2", 220, "Ascend910B1"), ("a2", 225, "A2G"), ("a3", 250, "Ascend910_9391"), ("a5", 260, "Ascend950PR")],
)
def test_each_generation_accepts_its_codes_and_names_and_refuses_the_others(
    generation: str, code: int, name: str
) -> None:
    own = Npu(generation)
    assert [problem for _, problem, _ in compare_device(own, Probe(soc_code=code, device_name=name))] == [None, None]
    for other in set(GENERATIONS) - {generation}:
        problems = [p for _, p, _ in compare_device(Npu(other), Probe(soc_code=code, device_name=name))]
        assert all(problems), (other, problems)
        assert GENERATIONS[generation].title in str(problems[0])  # what was found is named


def test_the_edges_of_a_range() -> None:
    for code, fits in ((219, False), (220, True), (225, True), (226, False)):
        (_, problem, _), _ = compare_device(Npu("a2"), Probe(soc_code=code, device_name="Ascend910B1"))
        assert (problem is None) == fits, code


def test_a_build_for_another_chip_is_named() -> None:
    problem, _ = compare_build(A3, Probe(built_soc="ASCEND910B1"))
    assert problem == (
        "expected a build for ascend910_9392, found ASCEND910B1 (vllm_ascend._build_info.__soc_version__)"
    )
    assert compare_build(A3, Probe(built_soc="ASCEND910_9392"))[0] is None
    problem, _ = compare_build(A3, Probe(built_error="ModuleNotFoundError: No module named 'vllm_ascend'"))
    assert problem == (
        "cannot read vllm_ascend._build_info.__soc_version__: ModuleNotFoundError: No module named 'vllm_ascend'"
    )


@pytest.mark.parametrize(
    ("generation", "chip", "fits"),
    [
        ("a2", "ascend910b1", True),
        ("a3", "ascend910_9392", True),
        ("a3", "ascend910_9391", True),
        ("a5", "ascend950dt_9582", True),
        ("a3", "ascend910b1", False),
        ("a2", "ascend910_9392", False),
        ("a5", "ascend910_9392", False),
    ],
)
def test_a_chip_belongs_to_its_generation(generation: str, chip: str, fits: bool) -> None:
    assert (soc_version_problem(generation, chip) is None) == fits
