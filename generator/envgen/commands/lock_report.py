"""`envgen lock`'s report: the JSON summary of each env's result, and its lines of text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envgen.commands.lock import LockResult


def summarize(result: LockResult) -> dict[str, Any]:
    """The JSON-able summary `envgen lock --json` prints for one env."""
    summary: dict[str, Any] = {"env": result.env, "status": result.status, "input_hash": result.input_hash}
    lock = result.lock
    if lock is not None:
        summary |= {
            "platforms": {p: {"conda": len(lock.conda_for(p)), "pip": len(lock.pip_for(p))} for p in lock.platforms},
            "sources": {s.source.name: {"ref": s.source.ref, "commit": s.commit} for s in lock.sources},
            "pending": {p.name: p.note for p in lock.pending},
            "overrides": {o.override.name: o.override.reason for o in lock.overrides},
            "builds_from_source": sorted({f"{e.name}=={e.version}" for e in lock.pip if e.sdist}),
            "moved": {p: [m.as_dict() for m in result.moves if m.platform == p] for p in lock.platforms},
            "sources_moved": [m.as_dict() for m in result.moves if m.manager in ("source", "submodule")],
        }
    return summary


def summary_lines(summaries: Sequence[Mapping[str, Any]]) -> list[tuple[str, bool]]:
    """`envgen lock`'s report, one (line, is it a pending item) per line, from the summaries of `summarize`."""
    lines: list[tuple[str, bool]] = []
    for item in summaries:
        if item["status"] == "up-to-date":
            lines.append((f"{item['env']}: up to date (input hash {item['input_hash'][:12]})", False))
            continue
        counts = ", ".join(f"{p}: {c['conda']} conda + {c['pip']} pip" for p, c in item["platforms"].items())
        lines.append((f"{item['env']}: locked ({counts}; {len(item['sources'])} sources)", False))
        for platform, moves in [("sources", item["sources_moved"]), *item["moved"].items()]:
            if moves:
                lines.append((f"  {platform}: {len(moves)} moved", False))
            for move in moves:
                old, new = move["old"] or "(new)", move["new"] or "(removed)"
                lines.append((f"    {move['manager']} {move['name']} {old} -> {new}: {move['reason']}", False))
        lines += [(f"  pending {name}: {note}", True) for name, note in item["pending"].items()]
    return lines
