"""The preflight's verdict as `envgen lock` prints it, read back: each unreachable host with its
reason and the targets named below it (a wrapped line joined again)."""

from __future__ import annotations


def verdict(err: str) -> dict[str, tuple[str, list[str]]]:
    """host -> (its reason, the lines below it) from the error's lines, in their order; the hint
    ends it."""
    hosts: dict[str, tuple[str, list[str]]] = {}
    below: list[str] = []
    for line in err.splitlines():
        if line.startswith("  hint: ") or line.startswith("error: ") and hosts:
            break
        if line.startswith("      "):
            below[-1] += " " + line.strip()
        elif line.startswith("    "):
            below.append(line.strip())
        elif line.startswith("  "):
            host, _, reason = line.strip().partition(": ")
            below = []
            hosts[host] = (reason, below)
    return hosts
