"""Run the hostile-input fuzz (tests/adversarial/test_loader_fuzz.py) at a higher count and print
its figures.

    .venv/bin/python benchmarks/fuzz_report.py [--scale 20] [--show 5] [-k EXPR]

Figures: cases tried per category and per mutation kind, command runs and their exit codes, and the
broken invariants: tracebacks (target 0), commands run from injected strings (target 0), planted
credentials found in output, locks/ or the cache (target 0), exit codes outside 0-5, locks changed,
files written outside locks/ and the cache. Every case runs to the end (ENVGEN_FUZZ_COLLECT=1): a
failure is counted, not stopped at. Exit status 1 when any invariant broke.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scale", type=int, default=20, help="examples = the test's count x SCALE (default 20)"
    )
    parser.add_argument("--show", type=int, default=3, help="failures printed per kind (default 3)")
    parser.add_argument("-k", default=None, help="only the tests pytest's -k selects")
    args = parser.parse_args()
    os.environ["ENVGEN_FUZZ_SCALE"] = str(args.scale)
    os.environ["ENVGEN_FUZZ_COLLECT"] = "1"
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    import pytest

    from tests.support.hostile import KINDS, TALLY

    started = time.monotonic()
    selection = ["-k", args.k] if args.k else []
    code = pytest.main(
        [
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "-m",
            "adversarial",
            *selection,
            "tests/adversarial/test_loader_fuzz.py",
        ]
    )
    seconds = time.monotonic() - started
    print(
        f"\nfuzz at scale {args.scale}: {sum(TALLY.cases.values())} cases, "
        f"{sum(TALLY.runs.values())} command runs,"
    )
    print(f"{seconds:.0f} s (pytest exit {int(code)})\n")
    print(f"{'category':<14}{'cases':>7}{'runs':>7}{'secret checks':>15}  mutation kinds")
    for category in sorted(TALLY.cases):
        kinds = ", ".join(f"{k} {n}" for (c, k), n in sorted(TALLY.kinds.items()) if c == category)
        row = f"{category:<14}{TALLY.cases[category]:>7}{TALLY.runs[category]:>7}"
        row += f"{TALLY.secret_checks[category]:>15}"
        print(f"{row}  {kinds}")
    codes: Counter[str] = Counter()
    for (command, exit_code), n in TALLY.codes.items():
        codes[f"{command} {exit_code}"] += n
    print(
        "\nexit codes (command code: runs): "
        + ", ".join(f"{k}: {n}" for k, n in sorted(codes.items()))
    )
    print(
        "slowest runs: "
        + "; ".join(f"{s:.1f} s {label} ({note[:120]})" for s, label, note in TALLY.slowest)
    )
    print()
    for kind in KINDS:
        print(f"{kind:<14}{len(TALLY.broken[kind]):>6}")
    for kind in KINDS:
        for failure in TALLY.broken[kind][: args.show]:
            # a traceback: its first line and its innermost frames
            head, _, rest = failure.partition("\n")
            print(f"\n--- {kind}: {head}\n" + "\n".join(rest.splitlines()[-8:]))
    broken = sum(len(v) for v in TALLY.broken.values())
    return 1 if broken or code not in (0, 5) else 0


if __name__ == "__main__":
    sys.exit(main())
