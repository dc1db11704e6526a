"""The relock workflow's logic (.github/workflows/relock.yml), runnable on any checkout with envgen
installed.

    python ci/relock.py [--root DIR] [--envs "a5 a3"] [--update "vllm megatron" | --update all]
                        [--out DIR] [--base REV]

1. `envgen status --watch --json` for the envs (every env by default);
2. `envgen lock ENV` for each env that is stale, has no lock, or has a drifted source, with
   `--update NAME` for exactly its drifted sources (`--update` names instead of those;
   `--update all` moves every source);
3. `envgen check ENV --no-env` (static checks and a re-solve) and `envgen audit ENV` (known
   vulnerabilities, PyPI's JSON API) for each env whose lock files changed;
4. into --out: `status.json` always; when a lock changed also `relock.patch` (a binary git diff of
   locks/ against --base), `pr-body.md` (the status summary, what the watch found, the checks, the
   known vulnerabilities of the pip packages this change moved, and `envgen diff --format
   markdown`), `changed-envs.txt`, `checks/<env>.json` and `audits/<env>.json`. An audit that
   cannot ask its service is a line in the body and a warning, not a failure.

Nothing changed: no patch and no body (what the watch found is a warning on the run). Writes
`changed=true|false` to $GITHUB_OUTPUT when that is set. Exit codes: 0 done (with or without
changes); 2 bad arguments; 4 a check of a changed lock failed (the body is still written, for the
job summary); otherwise the code of the envgen or git command that failed. Standard library only: it
drives envgen through its command line, as the workflow would.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ENVGEN = (sys.executable, "-m", "envgen")
# Env and source names as the matrix allows them; anything else (an option, a path) is refused up
# front.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# The files of a lock that say whether it changed; the exports derived from them (requirements,
# pylock, nix) change only with one of these.
LOCK_SUFFIXES = (".yml", ".sources.toml", ".install.sh")
MARKER = "<!-- envgen-relock -->"
# GitHub refuses pull request bodies over 65536 characters.
BODY_LIMIT = 60000
SHORT = 12  # as envgen shows a commit (generator/envgen/commits.py, SHORT_SHA)


class Failed(Exception):
    """A step failed: the message goes to stderr, the code is the script's exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Plan:
    """What one env needs: a lock (with these --update names, or all) and why."""

    env: str
    update: list[str] = field(default_factory=list)
    update_all: bool = False
    why: list[str] = field(default_factory=list)

    def lock_args(self) -> list[str]:
        extra = (
            ["--update-all"] if self.update_all else [f"--update={name}" for name in self.update]
        )
        return ["lock", "--quiet", *extra, "--", self.env]


# --- pure: names, the plan, the body
# ------------------------------------------------------------------------


def names(text: str, what: str) -> list[str]:
    """Names separated by spaces or commas (a dispatch input); each one checked, so none becomes an
    option."""
    found = [n for n in re.split(r"[\s,]+", text.strip()) if n]
    for name in found:
        if not NAME.match(name):
            raise Failed(f"{what}: {name!r} is not a name (letters, digits, '.', '_', '-')", 2)
    return found


def plan_envs(reports: Sequence[dict], update: Sequence[str]) -> list[Plan]:
    """One Plan per env that must be re-locked; `update` is explicit source names, ["all"], or []
    for drifted."""
    every = update == ["all"]
    moving = {d["name"] for r in reports for d in r["drift"]}
    unknown = sorted(set(update) - moving) if update and not every else []
    if unknown:
        raise Failed(
            f"--update {unknown[0]}: no source pinned from a branch, tag or HEAD has that name", 2
        )
    plans = []
    for report in reports:
        plan = Plan(report["env"], update_all=every, why=list(report["reasons"]))
        if every:
            plan.why.append("--update all")
        elif update:
            plan.update = [d["name"] for d in report["drift"] if d["name"] in update]
            plan.why += [f"--update {name}" for name in plan.update]
        else:
            plan.update = list(report["drifted"])
            plan.why += [f"source {name} moved upstream" for name in plan.update]
        if plan.why:
            plans.append(plan)
    return plans


def _cell(text: str) -> str:
    """Text from a lock or a remote as text in the body: no HTML (an open `<!--` would hide the
    rest), no pipes, one line."""
    return html.escape(" ".join(text.split()), quote=False).replace("|", "\\|")


def moved_table(reports: Sequence[dict], changed: Sequence[str]) -> list[str]:
    """Markdown: each drifted source of a changed env, from which commit to which, with its compare
    link."""
    rows = []
    for report in reports:
        if report["env"] not in changed:
            continue
        for d in report["drift"]:
            if d["drifted"]:
                link = f"[compare]({d['compare_url']})" if d["compare_url"] else _cell(d["url"])
                old, new = d["locked"][:SHORT], d["upstream"][:SHORT]
                rows.append(
                    f"| {report['env']} | `{d['name']}` | `{_cell(d['ref'])}` | "
                    f"`{old}` | `{new}` | {link} |"
                )
    if not rows:
        return []
    head = [
        "### Upstream moved",
        "",
        "| env | source | ref | from | to | commits |",
        "|---|---|---|---|---|---|",
    ]
    return [*head, *rows, ""]


def status_lines(
    reports: Sequence[dict], plans: Sequence[Plan], changed: Sequence[str]
) -> list[str]:
    """Markdown: why each env was re-locked, and the remotes that could not be asked."""
    lines = ["### Why", ""]
    for plan in plans:
        state = "changed" if plan.env in changed else "unchanged"
        lines.append(f"- **{plan.env}** ({state}): " + "; ".join(_cell(w) for w in plan.why))
    for report in reports:
        for d in report["drift"]:
            if d["error"]:
                lines.append(f"- **{report['env']}**: `{d['name']}` not asked: {_cell(d['error'])}")
    return [*lines, ""]


def watch_lines(reports: Sequence[dict]) -> list[str]:
    """Markdown: where a matrix no longer says what upstream says; what the watch could not ask."""
    lines = []
    for report in reports:
        watched, env = report.get("watch") or {}, report["env"]
        lines += [f"- **{env}**: {_cell(f['message'])}" for f in watched.get("findings", [])]
        lines += [f"- **{env}**: not asked: {_cell(e)}" for e in watched.get("errors", [])]
    if not lines:
        return []
    return ["### Upstream says otherwise (`envgen status --watch`)", "", *lines, ""]


def check_lines(checks: dict[str, dict]) -> list[str]:
    """Markdown: the verdict of `envgen check ENV --no-env` per changed env, and its failed
    steps."""
    lines = ["### Checks (`envgen check ENV --no-env`: static checks and a re-solve)", ""]
    for env, report in checks.items():
        steps = report.get("steps", [])
        counts = {
            s: sum(1 for step in steps if step["status"] == s) for s in ("ok", "failed", "skipped")
        }
        verdict = "ok" if report.get("ok") else "**FAILED**"
        lines.append(
            f"- **{env}**: {verdict} ({counts['ok']} ok, {counts['failed']} failed, "
            f"{counts['skipped']} skipped)"
        )
        lines += [
            f"  - {_cell(s['name'])}: {_cell(s['detail'])}"
            for s in steps
            if s["status"] == "failed"
        ]
    return [*lines, ""]


def moved_releases(diff: dict) -> set[tuple[str, str, str, str]]:
    """(env, platform, name, version) of every pip package `envgen diff --format json` says the
    change brought in: added, or at another version or artifact."""
    return {
        (d["env"], p["platform"], p["name"], p["new_version"])
        for d in diff.get("diffs", [])
        for p in d.get("packages", [])
        if p["manager"] == "pip" and p.get("new_version") and p["kind"] != "removed"
    }


def audit_lines(audits: dict[str, dict], moved: set[tuple[str, str, str, str]]) -> list[str]:
    """Markdown: the known vulnerabilities `envgen audit` found in the pip packages this change
    moved (one line each, platforms merged), how many others the changed locks hold, and each env
    whose audit could not ask its service."""
    lines = ["### Known vulnerabilities in what moved (`envgen audit`)", ""]
    found: dict[tuple[str, str, str, str], list[str]] = {}
    others = 0
    for env, audit in audits.items():
        if audit.get("error"):
            lines.append(f"- **{env}**: not audited: {_cell(audit['error'].get('message', ''))}")
            continue
        for result in audit.get("results", []):
            for f in result.get("findings", []):
                if (env, result["platform"], f["name"], f["version"]) not in moved:
                    others += 1
                    continue
                key = (env, f"{f['name']}=={f['version']}", f["id"], f.get("fixed") or "")
                found.setdefault(key, []).append(result["platform"])
    for (env, release, advisory, fixed), platforms in sorted(found.items()):
        fix = f", fixed in {_cell(fixed)}" if fixed else ", no fixed release"
        lines.append(
            f"- **{env}** `{_cell(release)}` ({', '.join(sorted(platforms))}): "
            f"{_cell(advisory)}{fix}"
        )
    if not found:
        lines.append("- none in the pip packages this change moved")
    if others:
        lines.append(f"- {others} more known in what did not move: `envgen audit ENV` lists them")
    return [*lines, ""]


def pr_body(
    reports: Sequence[dict],
    plans: Sequence[Plan],
    changed: Sequence[str],
    checks: dict,
    diff: str,
    audits: Sequence[str] = (),
) -> str:
    """The pull request's body: summary first, then the lock diff, cut to what GitHub accepts."""
    lines = [
        MARKER,
        "## Re-lock",
        "",
        f"Locks changed: {', '.join(f'`{e}`' for e in changed)}.",
        "",
    ]
    lines += moved_table(reports, changed) + status_lines(reports, plans, changed)
    lines += watch_lines(reports) + check_lines(checks) + list(audits)
    body = "\n".join(lines) + "\n" + diff
    if len(body) > BODY_LIMIT:
        body = (
            body[:BODY_LIMIT]
            + "\n\n*Cut here: run `make diff REV=<base>` on the branch for the rest.*\n"
        )
    return body


# --- effects
# ------------------------------------------------------------------------------------------------


def run(
    argv: Sequence[str], root: Path, ok: Sequence[int] = (0,), env: dict[str, str] | None = None
) -> str:
    """Run a command in `root` (stderr passes through); its stdout, or Failed with its exit code."""
    done = subprocess.run(
        list(argv), cwd=root, stdout=subprocess.PIPE, text=True, check=False, env=env
    )
    if done.returncode not in ok:
        raise Failed(f"`{' '.join(argv)}` exited with {done.returncode}", done.returncode or 1)
    return done.stdout


def envgen(root: Path, *args: str, ok: Sequence[int] = (0,)) -> str:
    return run([*ENVGEN, *args[:1], f"--root={root}", *args[1:]], root, ok)


def lock_patch(root: Path, base: str) -> tuple[bytes, list[str]]:
    """The binary diff of locks/ (new files included) against `base`, through a throwaway index."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        run(["git", "read-tree", base], root, env=env)
        run(["git", "add", "--all", "--", "locks"], root, env=env)
        changed = run(
            ["git", "diff", "--cached", "--name-only", base, "--", "locks"], root, env=env
        ).split()
        patch = subprocess.run(
            ["git", "diff", "--cached", "--binary", base, "--", "locks"],
            cwd=root,
            env=env,
            capture_output=True,
        )
        if patch.returncode != 0:
            raise Failed(
                f"git diff of locks/ against {base} failed: {patch.stderr.decode().strip()}", 5
            )
    return patch.stdout, changed


def changed_envs(plans: Sequence[Plan], files: Sequence[str]) -> list[str]:
    touched = set(files)
    return [
        p.env for p in plans if any(f"locks/{p.env}{suffix}" in touched for suffix in LOCK_SUFFIXES)
    ]


def _warn(message: str) -> None:
    """A warning on stderr; in GitHub Actions also an annotation on the run, so it is not lost in a
    green log."""
    print(f"relock: warning: {message}", file=sys.stderr)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        # GitHub's escapes for a command's data: a line break in a remote's message would start a
        # command.
        data = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        print(f"::warning title=relock::{data}")


def _clear_outputs(out: Path) -> None:
    """A previous run's outputs go first: none of them may describe this run."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("relock.patch", "pr-body.md", "changed-envs.txt"):
        (out / stale).unlink(missing_ok=True)
    shutil.rmtree(out / "checks", ignore_errors=True)
    shutil.rmtree(out / "audits", ignore_errors=True)


def _require_commit(root: Path, base: str) -> None:
    verify = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    if verify.returncode != 0:
        raise Failed(
            f"{root}: not a git checkout with a commit {base!r} to compare the locks with", 2
        )


def _warn_unasked(reports: Sequence[dict]) -> None:
    """The upstreams and watched pages status could not ask, each a warning."""
    for report in reports:
        for d in report["drift"]:
            if d["error"]:
                _warn(f"{report['env']}: source {d['name']}: upstream not asked: {d['error']}")
        for error in (report.get("watch") or {}).get("errors", []):
            _warn(f"{report['env']}: watch: not asked: {error}")


def _check_changed(root: Path, out: Path, changed: Sequence[str]) -> dict[str, dict]:
    """`envgen check` of each changed env, its report kept in out/checks/."""
    checks = {}
    (out / "checks").mkdir(exist_ok=True)
    for env in changed:
        report = envgen(root, "check", "--no-env", "--json", "--quiet", "--", env, ok=(0, 4))
        (out / "checks" / f"{env}.json").write_text(report)
        checks[env] = json.loads(report)["results"][0]
    return checks


def _audit_changed(root: Path, out: Path, changed: Sequence[str], base: str) -> list[str]:
    """`envgen audit` of each changed env, its report kept in out/audits/; the body's lines of
    what it found in the pip packages the change moved. An audit that cannot ask (exit 3) is
    reported, not raised."""
    audits = {}
    (out / "audits").mkdir(exist_ok=True)
    for env in changed:
        report = envgen(root, "audit", "--json", "--quiet", "--", env, ok=(0, 1, 3))
        (out / "audits" / f"{env}.json").write_text(report)
        audits[env] = json.loads(report)
        if audits[env].get("error"):
            _warn(f"{env}: not audited: {audits[env]['error'].get('message', '')}")
    diff = json.loads(envgen(root, "diff", f"--git={base}", "--format=json", "--quiet"))
    return audit_lines(audits, moved_releases(diff))


def relock(
    root: Path, out: Path, envs: list[str], update: list[str], base: str
) -> tuple[bool, int]:
    """The whole dry run; returns (a lock changed, exit code)."""
    _clear_outputs(out)
    _require_commit(root, base)
    status = envgen(root, "status", "--watch", "--json", "--quiet", "--", *envs, ok=(0, 1, 3))
    (out / "status.json").write_text(status)
    reports = json.loads(status)["results"]
    _warn_unasked(reports)
    plans = plan_envs(reports, update)
    for plan in plans:
        print(f"relock: {plan.env}: {'; '.join(plan.why)}", file=sys.stderr)
        envgen(root, *plan.lock_args())
    patch, files = lock_patch(root, base)
    changed = changed_envs(plans, files)
    if not changed:
        for report in reports:
            for finding in (report.get("watch") or {}).get("findings", []):
                _warn(f"{report['env']}: {finding['message']}")
        print("relock: no lock changed; no pull request", file=sys.stderr)
        return False, 0
    checks = _check_changed(root, out, changed)
    audits = _audit_changed(root, out, changed, base)
    diff = envgen(root, "diff", f"--git={base}", "--format=markdown", "--quiet")
    (out / "relock.patch").write_bytes(patch)
    (out / "changed-envs.txt").write_text("".join(f"{env}\n" for env in changed))
    (out / "pr-body.md").write_text(pr_body(reports, plans, changed, checks, diff, audits))
    failed = [env for env, report in checks.items() if not report.get("ok")]
    if failed:
        print(
            f"relock: the check of {', '.join(failed)} failed; see {out / 'pr-body.md'}",
            file=sys.stderr,
        )
        return True, 4
    print(f"relock: {', '.join(changed)} changed; body in {out / 'pr-body.md'}", file=sys.stderr)
    return True, 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("."), help="the project (a git checkout)")
    parser.add_argument(
        "--envs", default="", help="env names, space or comma separated (default: every env)"
    )
    parser.add_argument(
        "--update", default="", help="source names to move, or 'all' (default: the drifted ones)"
    )
    parser.add_argument("--out", type=Path, default=Path("relock-out"), help="where the outputs go")
    parser.add_argument(
        "--base", default="HEAD", help="the revision the patch and the diff compare with"
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if args.base.startswith("-"):
            raise Failed(f"--base {args.base!r}: a revision, not an option", 2)
        changed, code = relock(
            root,
            args.out.resolve(),
            names(args.envs, "--envs"),
            names(args.update, "--update"),
            args.base,
        )
    except Failed as exc:
        print(f"relock: {exc}", file=sys.stderr)
        return exc.code
    if "GITHUB_OUTPUT" in os.environ:
        with open(os.environ["GITHUB_OUTPUT"], "a") as output:
            output.write(f"changed={'true' if changed else 'false'}\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
