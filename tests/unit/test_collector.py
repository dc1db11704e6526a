"""The collector's settings for a command (envgen/collector.py)."""

from __future__ import annotations

import ast
import gc
import subprocess
import sys

from envgen import collector

# What an envgen process reports as it exits: its thresholds, and the passes of each generation
# made after its entry point set them.
REPORT = """
import atexit, gc, sys
def report():
    print(gc.get_threshold(), [s["collections"] - b for s, b in zip(gc.get_stats(), base)])
sys.argv = ["envgen", *sys.argv[1:]]
import envgen.__main__ as entry
base = [s["collections"] for s in gc.get_stats()]
atexit.register(report)
entry.run()
"""


def test_a_command_runs_with_the_commands_thresholds_and_its_imports_make_no_full_pass() -> None:
    """`envgen` (the script and `python -m envgen` both run `envgen.__main__.run`) sets the
    thresholds before it imports the command line; with Python's own, that import alone makes
    dozens of passes."""
    proc = subprocess.run(
        [sys.executable, "-c", REPORT, "--version"], capture_output=True, text=True, check=True
    )
    thresholds, passes = proc.stdout.strip().splitlines()[-1].split(") ")
    assert thresholds + ")" == str(collector.THRESHOLDS)
    young, middle, full = ast.literal_eval(passes)
    assert young <= 5 and middle == 0 and full == 0, passes


def test_a_paused_collector_resumes_as_it_was() -> None:
    was = gc.isenabled()
    try:
        gc.disable()
        with collector.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        gc.enable()
        with collector.collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
