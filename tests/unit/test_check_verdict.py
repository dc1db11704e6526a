"""check's verdict says what was proven: the stages that ran, and why the others were skipped."""

from __future__ import annotations

from envgen.commands.check.report import FAILED, OK, SKIPPED, CheckReport, Step, render_report

STATIC = (Step("static: lock parses", OK), Step("static: dependencies", OK))
SOLVED = Step("solve: same pip set", OK, "15 entries on 2 platforms")
INSTALLED = (
    Step("env: install (venv)", OK),
    Step("env: pip check", OK),
    Step("import demo_triton", SKIPPED, "needs CANN"),
)


def report(*steps: Step, require_env: bool = False) -> CheckReport:
    return CheckReport("demo", "linux-64", (*STATIC, *steps), require_env=require_env)


def test_everything_ran() -> None:
    full = report(SOLVED, *INSTALLED)
    assert (full.ok, full.verdict, full.skipped) == (True, "ok", {})
    assert render_report(full).startswith("check demo (linux-64): ok\n")


def test_a_skipped_env_says_so_and_require_env_fails_it() -> None:
    lacking = report(SOLVED, Step("env: install", SKIPPED, "the lock has no linux-64 part"))
    assert lacking.ok
    assert lacking.verdict == "ok (static, solve; env skipped: the lock has no linux-64 part)"
    assert render_report(lacking).splitlines()[0] == (
        "check demo (linux-64): ok (static, solve; env skipped: the lock has no linux-64 part)"
    )
    strict = report(SOLVED, Step("env: install", SKIPPED, "--no-env"), require_env=True)
    assert not strict.ok
    assert strict.verdict == "FAILED (env skipped: --no-env; --require-env)"
    document = strict.as_dict()
    assert (document["ok"], document["verdict"]) == (
        False,
        "FAILED (env skipped: --no-env; --require-env)",
    )
    assert (document["proven"], document["skipped"], document["require_env"]) == (
        ["static", "solve"],
        {"env": "--no-env"},
        True,
    )


def test_skipped_solve_and_env_and_a_failure() -> None:
    static_only = report(
        Step("solve: same pip set", SKIPPED, "--no-solve"),
        Step("env: install", SKIPPED, "--no-env"),
    )
    assert static_only.verdict == "ok (static; solve skipped: --no-solve; env skipped: --no-env)"
    failed = report(
        Step("solve: same pip set", FAILED, "1 problem(s)"), Step("env: install", SKIPPED, "x")
    )
    assert (failed.ok, failed.verdict) == (False, "FAILED")
    # An import skipped for want of CANN is not a skipped env: the env was installed and checked.
    assert report(SOLVED, *INSTALLED, require_env=True).ok
