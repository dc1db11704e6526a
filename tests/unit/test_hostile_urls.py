"""URLs no parser can take apart are refused where they are read, and redaction never fails on
one."""

from __future__ import annotations

import pytest
from envgen.inputs.untrusted import git_url_problem, index_url_problem
from envgen.redact import has_credentials, redact_text, redact_url, strip_credentials

SECRET = "s3cr3t"


@pytest.mark.parametrize(
    ("url", "shown", "bare"),
    [
        # port out of range
        ("https://u:s3cr3t@h:99999/x", "https://***@h:99999/x", "https://h:99999/x"),
        ("https://u:s3cr3t@h:port/x", "https://***@h:port/x", "https://h:port/x"),  # not a number
        ("https://u:s3cr3t@[h/x", "https://***@[h/x", "https://[h/x"),  # an IPv6 bracket left open
        # user `a@b`, as urlsplit reads it
        ("https://a@b:s3cr3t@h/x", "https://***@h/x", "https://h/x"),
    ],
)
def test_redaction_takes_any_url_apart(url: str, shown: str, bare: str) -> None:
    assert has_credentials(url)
    assert redact_url(url) == shown and redact_text(f"at {url}: no") == f"at {shown}: no"
    assert strip_credentials(url) == bare


def test_text_after_a_url_keeps_its_at_signs() -> None:
    assert (
        redact_text("https://h/x?a=b@c and mail@example.org")
        == "https://h/x?a=b@c and mail@example.org"
    )


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://u:s3cr3t@h:99999/simple", "Port out of range"),
        ("https://u:s3cr3t@h:port/simple", "Port could not be cast"),
        ("https://u:s3cr3t@[h/simple", "Invalid IPv6 URL"),
        ("https://u:s3cr3t@/simple", "names no host"),
        ("ftp://u:s3cr3t@h/simple", "is not an https://"),
    ],
)
def test_an_index_url_that_cannot_be_used_is_refused_without_its_credentials(
    url: str, why: str
) -> None:
    problem = index_url_problem(url)
    assert problem is not None and why in problem and SECRET not in problem and "***@" in problem


@pytest.mark.parametrize(
    "url", ["https://u:s3cr3t@[h/x.git", "https://u:s3cr3t@h:99999/x.git", "ftp://u:s3cr3t@h/x"]
)
def test_a_git_url_that_cannot_be_used_is_refused_without_its_credentials(url: str) -> None:
    problem = git_url_problem(url)
    assert problem is not None and SECRET not in problem


def test_usable_urls_pass() -> None:
    assert (
        index_url_problem("https://u:p@h:8080/simple") is None
        and index_url_problem("file:///srv/simple") is None
    )
    assert index_url_problem("${MIRROR}/simple") is None
    assert git_url_problem("https://h/x.git") is None and git_url_problem("git@h:o/x.git") is None
