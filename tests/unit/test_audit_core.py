"""`envgen audit`'s pure logic (lockgraph/audit.py, audit_render.py) on hand-built answers and
locks: an answer read strictly, the smallest fixed version, ignores by id or alias, a withdrawn
advisory, the shortest path, the text, markdown and JSON escaped; and the matrix's [audit]."""

from __future__ import annotations

from pathlib import Path

import pytest
from envgen.inputs.matrix import load_matrix
from envgen.lockgraph.audit import (
    Advisory,
    Malformed,
    audit_graph,
    audited,
    parse_answer,
    smallest_fixed,
    unused_ignores,
)
from envgen.lockgraph.audit_render import audit_document, audit_markdown, audit_text
from envgen.lockgraph.graph import build
from envgen.model import Index

from tests.support.builders import make_lock, pip_entry

P = "linux-64"
MATRIX = "env-templates/demo.toml"
DATA = Path(__file__).parents[1] / "data" / "matrices"
RECORD = {
    "id": "GHSA-9wx4-h78v-vm56",
    "aliases": ["CVE-2024-35195"],
    "fixed_in": ["2.32.0"],
    "summary": "Requests Session object does not verify requests after making first request",
    "details": "ignored",
    "link": "https://osv.dev/vulnerability/GHSA-9wx4-h78v-vm56",
    "source": "osv",
    "withdrawn": None,
}


def test_an_answer_is_read_into_advisories() -> None:
    (advisory,) = parse_answer({"info": {}, "vulnerabilities": [RECORD]})
    assert advisory == Advisory(
        "GHSA-9wx4-h78v-vm56",
        ("CVE-2024-35195",),
        ("2.32.0",),
        RECORD["summary"],
        RECORD["link"],
        False,
    )
    assert parse_answer({"vulnerabilities": []}) == ()
    minimal = parse_answer({"vulnerabilities": [{"id": "PYSEC-1", "withdrawn": "2024-01-01"}]})
    assert minimal == (Advisory("PYSEC-1", withdrawn=True),)


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ([], "the answer is a list, not a JSON object"),
        ({"info": {}}, "'vulnerabilities' is null, not a list"),
        ({"vulnerabilities": {"id": "x"}}, "'vulnerabilities' is an object, not a list"),
        ({"vulnerabilities": ["GHSA-1"]}, "vulnerabilities[0] is a string, not an object"),
        ({"vulnerabilities": [{"aliases": []}]}, "vulnerabilities[0].id is null, not a non-empty"),
        ({"vulnerabilities": [{"id": " "}]}, "[0].id is a string, not a non-empty string"),
        ({"vulnerabilities": [{"id": "x", "fixed_in": "1.0"}]}, "fixed_in is not a list of non-"),
        ({"vulnerabilities": [{"id": "x", "aliases": [1]}]}, "aliases is not a list of non-empty"),
        ({"vulnerabilities": [{"id": "x", "withdrawn": True}]}, "withdrawn is a boolean, not a"),
        ({"vulnerabilities": [{"id": "x", "summary": 3}]}, "summary is a number, not a string"),
        ({"vulnerabilities": [{"id": "x"}] * 1001}, "lists 1001 records (at most 1000)"),
    ],
)
def test_an_answer_not_the_apis_is_malformed(document: object, said: str) -> None:
    with pytest.raises(Malformed) as caught:
        parse_answer(document)
    assert said in str(caught.value)


def test_the_smallest_fixed_version_above_the_locked_one() -> None:
    assert smallest_fixed("2.31.0", ["2.32.0"]) == "2.32.0"
    assert smallest_fixed("1.26.4", ["2.0.1", "1.26.3", "1.26.5"]) == "1.26.5"
    # compared as versions, not as strings: 1.10 is above 1.9
    assert smallest_fixed("1.9", ["1.10", "1.9.1rc1", "not a version"]) == "1.9.1rc1"
    assert smallest_fixed("1.26.4", ["1.26.4", "1.0"]) is None
    assert smallest_fixed("1.26.4", []) is None
    assert smallest_fixed("not-a-version", ["2.0"]) is None


def graph_of(pins: tuple[str, ...] = ("app",)):
    """app 1.0 depends on mid 1.0, which depends on requests 2.31.0; `lib` hangs from app too."""
    entries = (
        pip_entry("app", "1.0", P, depends=(("mid", ">=1"), ("lib", ""))),
        pip_entry("mid", "1.0", P, depends=(("requests", ">=2"),)),
        pip_entry("requests", "2.31.0", P),
        pip_entry("lib", "0.1", P),
    )
    lock = make_lock(indexes=(Index("pypi", "https://pypi.org/simple"),), pip=entries)
    return build(lock, P, {n: (f"{MATRIX}: pip.packages.{n}",) for n in pins})


def answers(**advisories: tuple[Advisory, ...] | None):
    found = {("app", "1.0"): (), ("mid", "1.0"): (), ("requests", "2.31.0"): (), ("lib", "0.1"): ()}
    for name, value in advisories.items():
        version = next(v for n, v in found if n == name)
        found[(name, version)] = value
    return found


ADVISORY = parse_answer({"vulnerabilities": [RECORD]})[0]


def test_a_finding_has_its_fix_and_the_shortest_path_that_brought_it() -> None:
    graph = graph_of()
    assert [name for _, name, _ in audited(graph)] == ["app", "lib", "mid", "requests"]
    result = audit_graph(graph, answers(requests=(ADVISORY,)), {})
    (finding,) = result.findings
    assert (finding.name, finding.version, finding.fixed) == ("requests", "2.31.0", "2.32.0")
    assert finding.path == f"matrix ({MATRIX}: pip.packages.app) -> app -> mid>=1 -> requests>=2"
    assert result.asked == 4 and result.ignored == () and result.unknown == ()
    # a shorter way in wins
    shorter = audit_graph(graph_of(("app", "requests")), answers(requests=(ADVISORY,)), {})
    assert shorter.findings[0].path == f"matrix ({MATRIX}: pip.packages.requests) -> requests"


def test_ignores_by_id_or_alias_withdrawn_and_unknown_releases() -> None:
    graph = graph_of()
    withdrawn = Advisory("PYSEC-2099-1", withdrawn=True)
    other = Advisory("GHSA-aaaa-bbbb-cccc", fixed_in=("0.0.1",))
    given = answers(requests=(ADVISORY, withdrawn), lib=(other,), mid=None)
    ignores = {"cve-2024-35195": "only verify=True is used", "GHSA-gone-gone-gone": "old"}
    result = audit_graph(graph, given, ignores)
    assert [f.advisory.id for f in result.findings] == ["GHSA-aaaa-bbbb-cccc"]
    assert result.findings[0].fixed is None
    (ignored,) = result.ignored
    assert (ignored.advisory.id, ignored.ignored_as, ignored.ignored) == (
        "GHSA-9wx4-h78v-vm56",
        "cve-2024-35195",
        "only verify=True is used",
    )
    assert result.unknown == ("mid==1.0",)
    assert unused_ignores([result], ignores) == ["GHSA-gone-gone-gone"]


def test_text_markdown_and_json_escape_what_an_answer_says() -> None:
    hostile = Advisory(
        "GHSA-x|y\x1b[31m",
        ("CVE-1",),
        ("3.0",),
        "a | b <img src=x> `code` \n next line",
        "javascript:alert(1)",
    )
    graph = graph_of()
    result = audit_graph(graph, answers(requests=(hostile,)), {})
    text = audit_text([result])
    assert text[0] == "requests 2.31.0: GHSA-x|y\\x1b[31m (CVE-1), fixed in 3.0 [linux-64]"
    assert text[1] == "  a | b <img src=x> `code` next line"
    assert text[-1] == "1 known vulnerability, 0 ignored; pinned packages asked about: 4 on " + P
    markdown = audit_markdown("demo", [result])
    (row,) = [line for line in markdown if line.startswith("| requests")]
    # the link is not http(s): no link; `|` cannot end a cell; no tag, no escape sequence
    cells = "| requests | 2.31.0 | GHSA-x\\|y\\\\x1b\\[31m (CVE-1) | 3.0 | linux-64 |"
    assert row.startswith(cells)
    assert row.count(" | ") == 5 and "\x1b" not in row and "javascript" not in row
    document = audit_document(result)
    assert document["findings"][0]["id"] == hostile.id  # JSON carries the value as it came
    assert document["findings"][0]["fixed"] == "3.0" and document["unknown"] == []
    assert audit_markdown("demo", [audit_graph(graph, answers(), {})])[-1].startswith(
        "no known vulnerability, 0 ignored;"
    )


def test_the_matrix_reads_audit_ignore(tmp_path: Path) -> None:
    text = (DATA / "env-templates" / "valid.toml").read_text()
    (tmp_path / "valid.toml").write_text(
        text + '\n[audit.ignore]\nPYSEC-2023-74 = " unused code path "\nGHSA-9wx4-h78v-vm56 = "x"\n'
    )
    matrix = load_matrix(tmp_path / "valid.toml", DATA / "channels", conda_specs=False)
    assert matrix.audit_ignores == (
        ("GHSA-9wx4-h78v-vm56", "x"),
        ("PYSEC-2023-74", "unused code path"),
    )
    assert load_matrix(DATA / "env-templates" / "valid.toml", DATA / "channels").audit_ignores == ()
