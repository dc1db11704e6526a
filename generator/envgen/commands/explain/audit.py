"""`envgen audit`: the known vulnerabilities of every pinned pip package of a lock, asked of the
PyPI JSON API (resolve/pypi/advisories.py: bounded, cached), found and rendered by
lockgraph/audit.py with the path `why` shows first; the matrix's `[audit.ignore]` applied. The lock
is read from locks/ alone, the matrix only for its ignores."""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from envgen import network
from envgen.commands.cache import claimed_cache
from envgen.commands.explain.command import Explained, graphs
from envgen.errors import InputError, NetworkError, Unreached
from envgen.inputs.matrix import load_env
from envgen.lockgraph.audit import Advisory, audit_graph, audited, parse_answer, unused_ignores
from envgen.lockgraph.audit_render import audit_document, audit_markdown, audit_text
from envgen.project import Project
from envgen.resolve.pypi.advisories import DEFAULT_URL, VARIABLE, Service, ask


def service_url(environ: Mapping[str, str]) -> str:
    """Where to ask: $ENVGEN_AUDIT_URL, else PyPI; anything but an http(s) URL is bad input."""
    base = environ.get(VARIABLE, "").strip() or DEFAULT_URL
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise InputError(
            f"{VARIABLE}={base!r} is not an http(s) URL of a PyPI JSON API",
            hint=f"unset it for {DEFAULT_URL}, or name a mirror serving /pypi/NAME/VERSION/json",
            key=VARIABLE,
        )
    return base


def audit_env(
    project: Project,
    env: str,
    *,
    platform: str | None = None,
    markdown: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Explained:
    """The audit of the lock of `env` (every platform, or `platform`)."""
    environ = os.environ if environ is None else environ
    ignores = dict(load_env(project, env, conda_specs=False).audit_ignores)
    chosen = graphs(project, env, platform)
    base, limits = service_url(environ), network.limits(environ)
    releases = sorted({(name, version) for g in chosen for _, name, version in audited(g)})
    service = Service(base, claimed_cache(), limits, parse_answer)
    answers: dict[tuple[str, str], tuple[Advisory, ...] | None] = {
        release: answer if isinstance(answer, tuple) else None
        for release, answer in ask(service, releases).items()
    }
    if answers and all(answer is None for answer in answers.values()):
        why = f"it knows none of the {len(answers)} releases of the lock (HTTP 404 for each)"
        raise NetworkError(
            f"cannot ask {base}: {why}",
            hint=f"is it the PyPI JSON API? ({VARIABLE} sets where envgen asks)",
            hosts=[Unreached(base, why)],
        )
    audits = [audit_graph(g, answers, ignores) for g in chosen]
    out = Explained(results=[audit_document(a) for a in audits])
    out.lines = audit_markdown(env, audits) if markdown else audit_text(audits)
    for graph in chosen:
        out.notes += [f"{graph.platform}: {note}" for note in graph.notes]
    unknown = sorted({release for a in audits for release in a.unknown})
    if unknown:
        shown = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if unknown[10:] else "")
        out.notes.append(f"not known to {base} (not audited): {shown}")
    for advisory in unused_ignores(audits, ignores):
        out.notes.append(
            f"audit.ignore.{advisory} matches no finding in the lock of {env}: remove it?"
        )
    out.exit_code = 1 if any(a.findings for a in audits) else 0
    return out
