"""What the watch makes of upstream's answers: each kind of finding, and what is none (pure)."""

from __future__ import annotations

from envgen.commands.status.watch_findings import (
    installable,
    moved_conflicts,
    new_requirements,
    newer_releases,
    page_changed,
    ref_names,
    release_refs,
)
from envgen.model import Origin, Page, TracedRequirement
from envgen.platforms import marker_environment
from envgen.resolve.pypi.offered import Offer
from packaging.version import Version

BOTH = {p: marker_environment(p, "3.11") for p in ("linux-aarch64", "linux-64")}
MATRIX = "env-templates/a5.toml"
COMMIT = "0c6c0ceaa523a96032dee1539a52032155e6404e"


def offer(*versions: str, index: str = "pypi") -> Offer:
    return Offer(index, tuple(sorted(Version(v) for v in versions)))


def asks(text: str, file: str = "requirements.txt", line: int = 12) -> TracedRequirement:
    return TracedRequirement(text, Origin(file=file, line=line, source="vllm-ascend"))


def ours(text: str, key: str) -> TracedRequirement:
    return TracedRequirement(text, Origin(MATRIX, key=key))


def test_newer_releases_of_a_pin_are_of_its_series_and_local_builds_of_it_are_not() -> None:
    posts = ("2.10.0.post4", "2.10.0.post6", "2.10.0.post7")
    torch_npu = offer(*posts, "2.11.0", "2.14.0", "2.15.0rc1")
    finding = newer_releases("torch-npu", "==2.10.0.post4", torch_npu)
    assert finding is not None
    newer = ["2.10.0.post6", "2.10.0.post7"]
    expected = {"pinned": posts[0], "index": "pypi", "newer": newer, "newest": "2.14.0"}
    assert finding.details == expected
    head = "torch-npu ==2.10.0.post4: newer in 2.10 on pypi:"
    assert finding.message == f"{head} 2.10.0.post6, 2.10.0.post7 (newest 2.14.0)"
    assert newer_releases("torch", "==2.10.0", offer("2.10.0", "2.10.0+cpu", "2.11.0")) is None
    assert newer_releases("torch", ">=2.10", torch_npu) is None  # not a pin
    assert newer_releases("torch", "==2.10.*", torch_npu) is None
    assert newer_releases("x", "==1.0", None) is None
    pre = newer_releases("x", "==1.0rc1", offer("1.0rc1", "1.0rc2"))
    assert pre is not None and pre.details["newer"] == ["1.0rc2"]


def test_release_refs_newer_than_the_sources_own_ref() -> None:
    heads = ["main", "releases/v0.13.0", "releases/v0.23.0", "releases/v0.26.0rc"]
    heads += ["releases/v0.24.0rc", "releases/next"]
    refs = ["HEAD", *(f"refs/heads/{h}" for h in heads)]
    refs += ["refs/tags/releases/v0.24.0rc", "refs/tags/v0.25.1rc1"]
    names = ref_names(refs)
    assert names.count("releases/v0.24.0rc") == 1 and "HEAD" not in names
    finding = release_refs("vllm-ascend", "releases/v0.23.0", ["releases/v*"], names)
    assert finding is not None
    assert finding.details["newer"] == ["releases/v0.24.0rc", "releases/v0.26.0rc"]
    assert release_refs("vllm-ascend", "releases/v0.26.0rc", ["releases/v*"], names) is None
    megatron = ["core_r0.12.0", "core_r0.19.0", "core_v0.12.1", "core_v0.19.0", "core_r0.7.0.beta"]
    megatron += ["core_v0.19.0rc1", "core_v0.20.0rc0"]
    finding = release_refs("megatron-lm", "core_r0.12.0", ["core_r*", "core_v*"], megatron)
    assert finding is not None
    newer = ["core_v0.12.1", "core_r0.19.0", "core_v0.19.0", "core_v0.20.0rc0"]
    assert finding.details["newer"] == newer
    pinned = release_refs("mindspeed", COMMIT, ["core_r*"], megatron)
    assert pinned is not None and pinned.details["newer"] == ["core_r0.19.0"]
    assert "(its ref 0c6c0ce" in pinned.message
    assert release_refs("x", "main", ["releases/v*"], ["main", "dev"]) is None


def test_a_pending_package_is_installable_with_a_release_meeting_each_platforms_asks() -> None:
    aarch64_only = asks("torch-npu==2.10.0.post4 ; platform_machine == 'aarch64'")
    posts = offer("2.10.0.post4", "2.10.0.post6")
    finding = installable("torch-npu", "pending Q2", [aarch64_only], posts, BOTH)
    # On x86_64 nothing asks: any release does; on aarch64 only post4 meets the pin.
    assert finding is not None and finding.details["versions"] == ["2.10.0.post4"]
    assert "vllm-ascend: requirements.txt:12" in finding.message
    assert "pending Q2" in finding.message
    other = [asks("torch-npu==2.10.0.post5")]
    assert installable("torch-npu", "n", other, offer("2.10.0.post4"), BOTH) is None
    assert installable("torch-npu", "n", [], None, BOTH) is None
    anything = installable("torch-npu", "n", [], offer("2.9.0"), BOTH)
    assert anything is not None and "no source asks anything of it" in anything.message


def test_a_moved_requirement_against_a_pin_fails_and_against_an_override_is_overruled() -> None:
    pin = ours("opencv-python-headless==4.11.0.86", "pip.packages.x.version")
    override = ours("transformers==4.57.6", "overrides.transformers.requirement")
    locked = [asks("transformers==5.5.4", line=38), asks("opencv-python-headless>=4.11")]
    moved = [asks("transformers==5.13.0", line=38), asks("opencv-python-headless>=4.13.0", line=30)]
    moved += [asks("numpy<2", line=3)]
    new = new_requirements(locked, moved)
    assert new == moved
    offered = {
        "transformers": offer("4.57.6", "5.13.0"),
        "opencv-python-headless": offer("4.11.0.86", "4.13.0.90"),
        "numpy": offer("1.26.4"),
    }
    moved_to = ("releases/v0.24.0rc", "a" * 40)
    found = moved_conflicts("vllm-ascend", moved_to, new, [pin, override], offered, BOTH)
    by_text = {f.message.split(" asks ")[1].split(",")[0]: f for f in found}
    assert set(by_text) == {"transformers==5.13.0", "opencv-python-headless>=4.13.0"}
    assert by_text["opencv-python-headless>=4.13.0"].message == (
        "source vllm-ascend releases/v0.24.0rc moved to aaaaaaaaaaaa: requirements.txt:30 asks "
        "opencv-python-headless>=4.13.0, which the matrix's opencv-python-headless==4.11.0.86 "
        f"({MATRIX}: pip.packages.x.version) excludes (a re-lock fails; linux-aarch64, linux-64)"
    )
    assert "a re-lock overrules it" in by_text["transformers==5.13.0"].message


def test_a_page_is_news_when_its_blob_differs_and_a_forge_gives_a_compare_link() -> None:
    url = "https://github.com/verl-project/verl.git"
    record = Page(url, "main", "docs/a.rst", "1" * 40, "2" * 40)
    assert page_changed(record, "3" * 40, "1" * 40) is None
    changed = page_changed(record, "3" * 40, "4" * 40)
    assert changed is not None
    link = f"https://github.com/verl-project/verl/compare/{'2' * 40}...{'3' * 40}"
    assert changed.details["compare_url"] == link and changed.message.endswith(f"; {link}")
    gone = page_changed(record, "3" * 40, None)
    assert gone is not None and "gone (moved or removed)" in gone.message
    elsewhere = Page("https://git.example/r.git", "main", "a", "1" * 40, "2" * 40)
    other = page_changed(elsewhere, "3" * 40, None)
    assert other is not None and other.details["compare_url"] is None
