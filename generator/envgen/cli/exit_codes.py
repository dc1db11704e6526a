"""The one table of conditions and exit codes, and the codes the command line itself exits with.

`envgen help exit-codes` prints it, docs/cli.md holds it, the tests walk it; no --help repeats
it."""

from __future__ import annotations

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "success"),
    (1, "differences or drift: a lock stale, missing or behind a moved ref, a matrix upstream no "
        "longer agrees with (status, status --watch); a stale lock, which install refuses unless "
        "--frozen; a re-lock would change locks/ (lock --check); locks differ or a lock was "
        "edited by hand (diff --exit-code); a package the lock does not hold (why, tree --invert); "
        "a known vulnerability no [audit.ignore] covers (audit)"),
    (2, "bad input or usage: no envgen project, an unknown env or profile, a malformed matrix, "
        "channel file or option, no lock yet (check, install, export, why, tree, audit); found "
        "before any work"),
    (3, "resolution or network: a conflict, an unreachable index, channel or remote (lock, "
        "check's re-solve, install, status --watch); a vulnerability service that cannot be asked "
        "(audit)"),
    (4, "verification: a step of `check` failed (a lock stale, unless --frozen; edited, "
        "unparsable, or not installing as locked); a tampered lock (status, install and check "
        "with or without --frozen, lock --check and --dry-run, a derived file edited by hand "
        "included, diff --git with a lock file missing)"),
    (5, "external tool: git, uv, pip, a build or the recipe failed"),
    (70, "internal error: a bug in envgen (ENVGEN_DEBUG=1 shows the traceback)"),
    (130, "interrupted (Ctrl-C), at any instant from envgen's start-up on (one line, never a "
          "traceback): it says what was written; `locks/` holds the previous or the new lock, "
          "never a mix"),
    (143, "terminated (SIGTERM): as 130"),
)  # fmt: skip

INTERNAL_ERROR = 70  # sysexits' EX_SOFTWARE: a bug in envgen, not in its input
INTERRUPTED, TERMINATED = 130, 143  # 128 + SIGINT, 128 + SIGTERM


def exit_code_table() -> str:
    """The table as `envgen help exit-codes` prints it: one line per code."""
    return "".join(f"{code:>3}  {meaning}\n" for code, meaning in EXIT_CODES)
