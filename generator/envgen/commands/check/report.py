"""What `envgen check` found: its steps and their outcomes, rendered as text or JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

OK, FAILED, SKIPPED = "ok", "failed", "skipped"


@dataclass(frozen=True)
class Step:
    """One check: its outcome ("ok", "failed", "skipped") and why; `unreachable`: it failed only
    because a host could not be reached (no verdict on the lock)."""

    name: str
    status: str
    detail: str = ""
    problems: tuple[str, ...] = ()
    unreachable: bool = False
    # The re-solve's: each package of the direct layer no offered release meets (conflicts.py).
    conflicts: tuple[dict[str, object], ...] = ()


# What a check proves, in order; a step belongs to the stage its name starts with (imports are env
# steps).
STAGES = ("static", "solve", "env")
# The step whose skipping means its stage proved nothing.
_STAGE_STEP = {"solve": "solve: same pip set", "env": "env: install"}


@dataclass(frozen=True)
class CheckReport:
    """Every step `check` ran for one env, in order; `kept` is the throwaway env when --keep kept
    it.

    `require_env` makes a skipped env stage a failure: a check that never installed the lock proves
    less.
    """

    env: str
    platform: str
    steps: tuple[Step, ...]
    kept: str | None = None
    require_env: bool = False

    @property
    def skipped(self) -> dict[str, str]:
        """The stages that did not run (solve, env) with the reason, in order."""
        out = {}
        for stage, prefix in _STAGE_STEP.items():
            step = next((s for s in self.steps if s.name.startswith(prefix)), None)
            if step is None or step.status == SKIPPED:
                out[stage] = step.detail if step else "not reached"
        return out

    @property
    def ok(self) -> bool:
        failed = any(s.status == FAILED for s in self.steps)
        return not failed and not (self.require_env and "env" in self.skipped)

    @property
    def verdict(self) -> str:
        """`ok` when every stage ran; else what was proven and why the rest was skipped; `FAILED`
        otherwise."""
        skipped = self.skipped
        if any(s.status == FAILED for s in self.steps):
            return "FAILED"
        if self.require_env and "env" in skipped:
            return f"FAILED (env skipped: {skipped['env']}; --require-env)"
        if not skipped:
            return "ok"
        proven = ", ".join(stage for stage in STAGES if stage not in skipped)
        return (
            f"ok ({proven}; "
            + "; ".join(f"{stage} skipped: {why}" for stage, why in skipped.items())
            + ")"
        )

    @property
    def exit_code(self) -> int:
        """0 ok; 4 a step found the lock wrong; 3 a step could not tell because a host was
        unreachable."""
        failed = [s for s in self.steps if s.status == FAILED]
        if self.ok:
            return 0
        return 3 if failed and all(s.unreachable for s in failed) else 4

    def as_dict(self) -> dict[str, object]:
        return {
            "env": self.env,
            "platform": self.platform,
            "ok": self.ok,
            "verdict": self.verdict,
            "proven": [stage for stage in STAGES if stage not in self.skipped],
            "skipped": self.skipped,
            "require_env": self.require_env,
            "kept": self.kept,
            "steps": [dataclasses.asdict(s) for s in self.steps],
        }


def render_report(report: CheckReport) -> str:
    """The report as text: the verdict, then one line per step and its problems indented below."""
    lines = [f"check {report.env} ({report.platform}): {report.verdict}"]
    for step in report.steps:
        detail = f": {step.detail}" if step.detail else ""
        lines.append(f"  {step.status:<7} {step.name}{detail}")
        lines += [f"            {p}" for p in step.problems]
    if report.kept:
        lines.append(f"  kept the throwaway env at {report.kept}")
    return "\n".join(lines) + "\n"


def step_of(name: str, problems: Sequence[str], ok: str = "") -> Step:
    return (
        Step(name, FAILED, f"{len(problems)} problem(s)", tuple(problems))
        if problems
        else Step(name, OK, ok)
    )
