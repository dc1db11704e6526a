"""The one commit rule: what a full and an abbreviated commit are, applied alike by every module
that asks."""

from __future__ import annotations

from envgen.commands.status.command import moving_sources
from envgen.commits import is_abbreviated_commit, is_full_commit
from envgen.inputs.untrusted import commit_problem, ref_problem
from envgen.lockdiff.compare import diff_locks
from envgen.lockdiff.render import render_text
from envgen.model import Lock, LockedSource, Source

from tests.support.builders import make_lock

FULL = "0123456789abcdef0123456789abcdef01234567"


def _lock(*refs: str) -> Lock:
    sources = tuple(
        LockedSource(Source(f"s{i}", "https://example.invalid/s.git", ref, f"s{i}"), FULL)
        for i, ref in enumerate(refs)
    )
    return make_lock("e", sources=sources)


def test_full_and_abbreviated_commits() -> None:
    assert is_full_commit(FULL) and is_full_commit(FULL.upper())
    assert (
        not is_full_commit(FULL[:-1])
        and not is_full_commit(FULL + "0")
        and not is_full_commit("g" * 40)
    )
    assert is_abbreviated_commit(FULL[:7]) and is_abbreviated_commit(FULL[:39])
    assert not is_abbreviated_commit(FULL[:6]) and not is_abbreviated_commit(FULL)


def test_every_module_applies_the_same_rule() -> None:
    # The matrix and lock boundary, status's notion of a moving ref and the diff's shortening agree.
    assert commit_problem(FULL.upper()) is None and ref_problem(FULL.upper()) is None
    assert "abbreviated" in (ref_problem(FULL[:12]) or "")
    assert [s.source.ref for s in moving_sources(_lock(FULL.upper(), "main", FULL[:12]))] == [
        "main",
        FULL[:12],
    ]
    text = render_text([diff_locks(_lock(), _lock(FULL.upper()))])
    assert f"added https://example.invalid/s.git {FULL[:12].upper()} @ {FULL[:12]}" in text
