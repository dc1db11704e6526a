"""`envgen lock`'s report: the JSON summary of each env's result, and its lines of text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from envgen.digests import short_digest

if TYPE_CHECKING:
    from envgen.commands.lock.command import LockResult
    from envgen.model import Lock
    from envgen.resolve.moves import Move

_SOURCES = ("source", "submodule")


def summarize(result: LockResult) -> dict[str, Any]:
    """The JSON-able summary `envgen lock --json` prints for one env."""
    summary: dict[str, Any] = {
        "env": result.env,
        "status": result.status,
        "input_hash": result.input_hash,
    }
    if result.unwritten is not None:
        files = result.unwritten.files
        summary["files"] = [{"path": path, "change": change} for path, change in files]
        summary["reasons"] = list(result.unwritten.reasons)
    if result.lock is not None:
        summary |= _locked(result.lock, result.moves)
    return summary


def _locked(lock: Lock, moves: Sequence[Move]) -> dict[str, Any]:
    """What a summary says of a lock written, and of what moved."""
    platforms = lock.platforms
    counts = {p: {"conda": len(lock.conda_for(p)), "pip": len(lock.pip_for(p))} for p in platforms}
    return {
        "platforms": counts,
        "sources": {s.source.name: {"ref": s.source.ref, "commit": s.commit} for s in lock.sources},
        "pending": {p.name: p.note for p in lock.pending},
        "overrides": {o.override.name: o.override.reason for o in lock.overrides},
        "builds_from_source": sorted({f"{e.name}=={e.version}" for e in lock.pip if e.sdist}),
        "moved": {p: [m.as_dict() for m in moves if m.platform == p] for p in platforms},
        "sources_moved": [m.as_dict() for m in moves if m.manager in _SOURCES],
    }


def summary_lines(summaries: Sequence[Mapping[str, Any]]) -> list[tuple[str, bool]]:
    """`envgen lock`'s report, one (line, is it a pending item) per line, from the summaries of
    `summarize`."""
    return [line for item in summaries for line in _item_lines(item)]


def _item_lines(item: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """One env's lines: its headline; for a lock written or that would be, why and which files,
    what moved, what is pending."""
    env = item["env"]
    if item["status"] == "up-to-date":
        return [(f"{env}: up to date (input hash {short_digest(item['input_hash'])})", False)]
    if "platforms" not in item:  # --check found no lock: it did not resolve
        return [(f"{env}: would lock: {'; '.join(item['reasons'])}", False), *_file_lines(item)]
    platforms = item["platforms"].items()
    counts = ", ".join(f"{p}: {c['conda']} conda + {c['pip']} pip" for p, c in platforms)
    shown = f"({counts}; {len(item['sources'])} sources)"
    if item["status"] == "would-lock":
        lines = [(f"{env}: would lock {shown}; nothing written", False)]
        if item["reasons"]:  # none when only what a moving flag moved differs
            lines.append((f"  because {'; '.join(item['reasons'])}", False))
        lines += _file_lines(item)
    else:
        lines = [(f"{env}: locked {shown}", False)]
    for platform, moves in [("sources", item["sources_moved"]), *item["moved"].items()]:
        lines += _move_lines(platform, moves)
    return lines + [(f"  pending {name}: {note}", True) for name, note in item["pending"].items()]


def _file_lines(item: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """The files a re-lock would change, then those it would add, by name (every one of them)."""
    lines = []
    for change in ("changed", "added"):
        paths = [f["path"] for f in item["files"] if f["change"] == change]
        if paths:
            verb = "change" if change == "changed" else "add"
            lines.append((f"  would {verb} {', '.join(paths)}", False))
    return lines


def _move_lines(platform: str, moves: Sequence[Mapping[str, Any]]) -> list[tuple[str, bool]]:
    lines = [(f"  {platform}: {len(moves)} moved", False)] if moves else []
    for move in moves:
        old, new = move["old"] or "(new)", move["new"] or "(removed)"
        said = f"{move['manager']} {move['name']} {old} -> {new}: {move['reason']}"
        lines.append((f"    {said}", False))
    return lines
