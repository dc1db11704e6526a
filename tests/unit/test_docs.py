"""The README and docs/ as a newcomer reads them: a page long, every link landing on a file and a
heading that exist, the shipped envs all named, and CI running the test command the README gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)


def prose(text: str) -> str:
    """The text without its code blocks, where a `# comment` is no heading."""
    return FENCE.sub("", text)


def anchors(text: str) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated one numbered."""
    made: set[str] = set()
    counts: dict[str, int] = {}
    for heading in HEADING.findall(prose(text)):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = counts.get(slug, 0)
        counts[slug] = count + 1
        made.add(f"{slug}-{count}" if count else slug)
    return made


def links(page: Path) -> list[str]:
    """The targets of a page's links outside code (a link's text may hold code; its target not)."""
    return LINK.findall(CODE.sub("", prose(page.read_text())))


def test_the_anchors_are_githubs() -> None:
    text = "# The command line\n## Lock modes: `--check` and `--dry-run`\n"
    text += "```\n# no heading\n```\n## A\n## A\n"
    assert anchors(text) == {"the-command-line", "lock-modes---check-and---dry-run", "a", "a-1"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_lands_on_a_file_and_a_heading(page: Path) -> None:
    for target in [t for t in links(page) if not re.match(r"[a-z]+:", t)]:
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name}: {target}"
        if anchor:
            assert anchor in anchors(file.read_text()), f"{page.name}: {target}"


def test_every_doc_page_is_reached_from_the_readme() -> None:
    reached = {(REPO / t.partition("#")[0]).resolve() for t in links(REPO / "README.md")}
    assert [p.name for p in PAGES[1:] if p not in reached] == []


def test_the_readme_is_a_page() -> None:
    """Before: 52 KB with the reference inline; the reference lives in docs/."""
    assert len((REPO / "README.md").read_bytes()) <= 15_000


def test_the_readme_and_the_matrix_reference_name_every_shipped_env() -> None:
    shipped = {p.stem for p in (REPO / "env-templates").glob("*.toml")}
    readme = (REPO / "README.md").read_text().split("\n## The envs\n", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^- `([\w.-]+)`: ", readme, re.MULTILINE)) == shipped
    matrix = (REPO / "docs" / "matrix.md").read_text()
    listed = matrix.split("\n## The envs that ship\n", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^- \*\*`([\w.-]+)`\*\*: ", listed, re.MULTILINE)) == shipped


def test_ci_runs_the_test_command_the_readme_gives() -> None:
    readme = (REPO / "README.md").read_text()
    given = {line.split("#")[0].strip() for line in readme.splitlines() if line.startswith("make ")}
    assert {"make lock", "make test", "make demo"} <= given
    run = (REPO / ".ci" / "run").read_text().splitlines()
    assert run[-1] == "make test" and "make lint" in run


def test_the_researchers_section_starts_with_where_locks_come_from() -> None:
    """Before: a fresh checkout has no locks/, and the README said where they come from only after
    the commands that need them."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## For researchers", 1)[1].split("\n## ", 1)[0]
    before_commands = section.split("```", 1)[0]
    assert "no `locks/`" in before_commands
    assert "`make lock`" in before_commands and "relock workflow" in before_commands


@pytest.mark.parametrize("page", ["README.md", "docs/ci.md"])
def test_make_lock_is_given_makes_own_exit_code(page: str) -> None:
    """Before: "`make lock` ... exits 3", where make exits 2 whatever code its recipe exits with."""
    text = " ".join(prose((REPO / page).read_text()).split())
    claims = re.findall(r"`make lock`[^.;]*?exit(?:s| code)? (\d+)", text)
    assert claims == [] or set(claims) == {"2"}, claims
    assert "`envgen lock` exits 3" in text or "`envgen lock` stops with exit code 3" in text
