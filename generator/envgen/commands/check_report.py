"""What `envgen check` found: its steps and their outcomes, rendered as text or JSON."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass

OK, FAILED, SKIPPED = "ok", "failed", "skipped"


@dataclass(frozen=True)
class Step:
    """One check: its outcome ("ok", "failed", "skipped") and why."""

    name: str
    status: str
    detail: str = ""
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckReport:
    """Every step `check` ran for one env, in order; `kept` is the throwaway env when --keep kept it."""

    env: str
    platform: str
    steps: tuple[Step, ...]
    kept: str | None = None

    @property
    def ok(self) -> bool:
        return all(s.status != FAILED for s in self.steps)

    def as_dict(self) -> dict[str, object]:
        return {
            "env": self.env,
            "platform": self.platform,
            "ok": self.ok,
            "kept": self.kept,
            "steps": [dataclasses.asdict(s) for s in self.steps],
        }


def render_report(report: CheckReport) -> str:
    """The report as text, one line per step and its problems indented below."""
    lines = [f"check {report.env} ({report.platform}): {'ok' if report.ok else 'FAILED'}"]
    for step in report.steps:
        detail = f": {step.detail}" if step.detail else ""
        lines.append(f"  {step.status:<7} {step.name}{detail}")
        lines += [f"            {p}" for p in step.problems]
    if report.kept:
        lines.append(f"  kept the throwaway env at {report.kept}")
    return "\n".join(lines) + "\n"


def render_json(report: CheckReport) -> str:
    return json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n"


def step_of(name: str, problems: Sequence[str], ok: str = "") -> Step:
    return Step(name, FAILED, f"{len(problems)} problem(s)", tuple(problems)) if problems else Step(name, OK, ok)
