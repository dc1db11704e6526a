"""The direct layer's conflicts: every package no offered release satisfies, each with all its
origins."""

from __future__ import annotations

import tomllib

from envgen.model import Origin, TracedRequirement
from envgen.platforms import marker_environment
from envgen.resolve.pypi.conflicts import (
    asked,
    conflict_record,
    describe_conflicts,
    find_conflicts,
    met_by,
    override_snippet,
)
from packaging.version import Version

AARCH64 = marker_environment("linux-aarch64", "3.11")
X86 = marker_environment("linux-64", "3.11")

OFFERED = {
    "transformers": [Version(v) for v in ("4.57.6", "5.5.3", "5.5.4", "5.6.0", "5.10.4", "5.11.0")],
    "numpy": [Version(v) for v in ("1.26.0", "1.26.4", "2.0.0", "2.2.6")],
    "opencv-python-headless": [Version(v) for v in ("4.11.0.86", "4.13.0.90")],
}


def traced(
    text: str, file: str, line: int | None = None, source: str | None = None
) -> TracedRequirement:
    return TracedRequirement(text, Origin(file=file, line=line, source=source))


A5 = [
    traced("transformers==4.57.6", "env-templates/a5.toml"),
    traced("transformers==5.5.4", "requirements.txt", 38, "vllm-ascend"),
    traced("transformers!=5.6.0,<5.11,>=5.5.3", "setup.py", source="verl"),
    traced("numpy>=2.0.0", "setup.py", source="verl"),
    traced("numpy<2.0.0", "requirements-npu.txt", 3, "verl"),
    traced("numpy<=1.26.0", "requirements.txt", 2, "mindspeed"),
    traced("opencv-python-headless>=4.13.0", "requirements/common.txt", 30, "vllm"),
]


def test_every_conflict_is_named_with_all_its_origins() -> None:
    conflicts = find_conflicts(A5, lambda name: OFFERED.get(name), AARCH64)
    assert [c.name for c in conflicts] == ["numpy", "transformers"]
    numpy, transformers = conflicts
    assert [str(d.origin) for d in numpy.demands] == [
        "source verl: setup.py",
        "source verl: requirements-npu.txt:3",
        "source mindspeed: requirements.txt:2",
    ]
    assert len(transformers.demands) == 3


def test_a_settled_package_is_no_conflict_and_an_unknown_one_is_left_to_the_resolver() -> None:
    settled = [r for r in A5 if not r.text.startswith(("transformers==4", "numpy>="))]
    assert find_conflicts(settled, lambda name: OFFERED.get(name), AARCH64) == []
    assert find_conflicts(A5, lambda name: None, AARCH64) == []


def test_markers_count_on_their_platform_only() -> None:
    reqs = [
        traced("numpy<2", "a.txt"),
        traced("numpy>=2; platform_machine == 'x86_64'", "b.txt"),
    ]
    assert find_conflicts(reqs, lambda name: OFFERED.get(name), AARCH64) == []
    assert [c.name for c in find_conflicts(reqs, lambda name: OFFERED.get(name), X86)] == ["numpy"]


def test_pre_releases_count_only_where_named_or_alone() -> None:
    offered = [Version("1.0"), Version("2.1rc1")]
    assert met_by([traced("pkg>=2.0", "a.txt")], offered) == [Version("2.1rc1")]
    assert met_by([traced("pkg>=1.0", "a.txt")], offered) == [Version("1.0")]
    assert met_by([traced("pkg>=2.1rc1", "a.txt")], offered) == [Version("2.1rc1")]


def test_the_settlement_meets_the_most_origins_and_its_snippet_is_the_override_to_paste() -> None:
    conflicts = find_conflicts(A5, lambda name: OFFERED.get(name), AARCH64)
    (numpy,) = [c for c in conflicts if c.name == "numpy"]
    # It meets verl's requirements-npu.txt and MindSpeed's pin.
    assert numpy.settlement() == Version("1.26.0")
    snippet = override_snippet(numpy)
    assert snippet is not None
    table = tomllib.loads(snippet)["overrides"]["numpy"]
    assert table == {"requirement": "numpy==1.26.0", "reason": ""}
    assert "# overrules numpy>=2.0.0 (source verl: setup.py)" in snippet
    assert "# meets numpy<=1.26.0 (source mindspeed: requirements.txt:2)" in snippet
    record = conflict_record(numpy, "linux-aarch64", "pypi")
    assert record["override"] == {
        "requirement": "numpy==1.26.0",
        "meets": ["source verl: requirements-npu.txt:3", "source mindspeed: requirements.txt:2"],
        "overrules": ["source verl: setup.py"],
        "toml": snippet,
    }
    assert record["offered"] == ["1.26.0", "1.26.4", "2.0.0", "2.2.6"]


def test_ties_go_to_the_newest_final_release_and_nothing_offered_has_no_settlement() -> None:
    demands = [traced(f"pkg=={v}", f"{v}.txt") for v in ("1.0", "2.0", "3.0rc1")]
    offered = [Version("1.0"), Version("2.0"), Version("3.0rc1")]
    (conflict,) = find_conflicts(demands, lambda name: offered, X86)
    assert conflict.settlement() == Version("2.0")
    (bare,) = find_conflicts(demands[:1], lambda name: [], X86)
    assert bare.settlement() is None and override_snippet(bare) is None
    text = describe_conflicts([bare], "linux-64", {"pkg": "pypi"})
    assert "  pkg (pypi offers no release):" in text and "[overrides" not in text


def test_only_required_names_limited_to_some_versions_are_asked_or_conflict() -> None:
    reqs = [
        traced("free", "a.txt"),
        traced("pinned==1.0", "a.txt"),
        TracedRequirement("limited<2", Origin(file="c.txt", line=1, source="s"), constraint=True),
        TracedRequirement("limited>=3", Origin(file="c.txt", line=2, source="s"), constraint=True),
    ]
    assert asked(reqs, X86) == ["pinned"]
    assert find_conflicts(reqs, lambda name: [Version("1.0")], X86) == []
