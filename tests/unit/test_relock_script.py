"""ci/relock.py's output for GitHub: annotations and the pull request body carry upstream text
inertly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("relock", REPO / "ci" / "relock.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    # Its dataclasses look their module up while being defined.
    sys.modules["relock"] = module
    spec.loader.exec_module(module)
    return module


relock = _load()


def test_a_warning_is_one_workflow_command_whatever_the_remote_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A remote's error text reaches the annotation; a line break in it would start a workflow
    # command of its own (::set-output, ::add-mask::, ::stop-commands::) in the relock job.
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    relock._warn(
        "demo: source x: upstream not asked: fatal\n::set-output name=changed::true\r::error::100%"
    )
    out = capsys.readouterr().out
    assert out == (
        "::warning title=relock::demo: source x: upstream not asked: "
        "fatal%0A::set-output name=changed::true"
        "%0D::error::100%25\n"
    )


def test_the_body_shows_remote_text_and_refs_as_text_not_markup() -> None:
    drift = {
        "name": "src",
        "ref": "main`<!--",
        "locked": "a" * 40,
        "upstream": "b" * 40,
        "drifted": True,
        "compare_url": None,
        "url": "https://git.example/r<img src=x>",
        "error": None,
    }
    gone = {**drift, "name": "other", "drifted": False, "error": "fatal: <!-- hidden\n--> | x"}
    news = {"kind": "page", "subject": "a", "message": "page <!-- a | b", "details": {}}
    watch = {"findings": [news], "errors": ["cannot reach `x`\n<!--"]}
    report = {"env": "demo", "drift": [drift, gone], "reasons": [], "drifted": ["src"]}
    reports = [{**report, "watch": watch}]
    plans = relock.plan_envs(reports, [])
    body = relock.pr_body(reports, plans, ["demo"], {}, "")
    assert body.count("<!--") == 1  # the marker's own
    assert "<img" not in body
    assert "`main`&lt;!--`" in body
    assert "`other` not asked: fatal: &lt;!-- hidden --&gt; \\| x" in body
    assert "- **demo**: page &lt;!-- a \\| b\n" in body
    assert "- **demo**: not asked: cannot reach `x` &lt;!--\n" in body


def test_the_script_shortens_commits_as_envgen_does() -> None:
    """ci/relock.py runs on the standard library alone, so it keeps its own copy of the length."""
    from envgen.commits import SHORT_SHA

    assert relock.SHORT == SHORT_SHA


def _finding(name: str, version: str, advisory: str, fixed: str | None) -> dict:
    return {"name": name, "version": version, "id": advisory, "fixed": fixed}


def test_the_body_names_the_vulnerabilities_of_what_moved_and_counts_the_rest() -> None:
    diff = {
        "diffs": [
            {
                "env": "a5",
                "packages": [
                    {
                        "manager": "pip",
                        "kind": "upgraded",
                        "platform": "linux-64",
                        "name": "transformers",
                        "new_version": "4.57.6",
                    },
                    {
                        "manager": "pip",
                        "kind": "upgraded",
                        "platform": "linux-aarch64",
                        "name": "transformers",
                        "new_version": "4.57.6",
                    },
                    {
                        "manager": "pip",
                        "kind": "removed",
                        "platform": "linux-64",
                        "name": "gone",
                        "new_version": None,
                    },
                    {
                        "manager": "conda",
                        "kind": "upgraded",
                        "platform": "linux-64",
                        "name": "python",
                        "new_version": "3.11.9",
                    },
                ],
            }
        ]
    }
    moved = relock.moved_releases(diff)
    assert moved == {
        ("a5", "linux-64", "transformers", "4.57.6"),
        ("a5", "linux-aarch64", "transformers", "4.57.6"),
    }
    audits = {
        "a5": {
            "results": [
                {
                    "platform": platform,
                    "findings": [
                        _finding("transformers", "4.57.6", "GHSA-<b>x</b>", "4.58.0"),
                        _finding("requests", "2.31.0", "GHSA-9wx4-h78v-vm56", None),
                    ],
                }
                for platform in ("linux-64", "linux-aarch64")
            ]
        },
        "a3": {"error": {"message": "cannot ask https://pypi.org: connection refused"}},
    }
    lines = relock.audit_lines(audits, moved)
    assert lines == [
        "### Known vulnerabilities in what moved (`envgen audit`)",
        "",
        "- **a3**: not audited: cannot ask https://pypi.org: connection refused",
        "- **a5** `transformers==4.57.6` (linux-64, linux-aarch64): "
        "GHSA-&lt;b&gt;x&lt;/b&gt;, fixed in 4.58.0",
        "- 2 more known in what did not move: `envgen audit ENV` lists them",
        "",
    ]
    assert relock.audit_lines({}, set())[2] == "- none in the pip packages this change moved"
