"""The two steps of .github/workflows/npu-check.yml that are plain logic: the job matrix and the
summary table.

    python ci/npu_check.py matrix [--root DIR] [--config ci/npu-runners.toml] [--changed FILE]
        The env x runner-label pairs of the config whose env has a lock, as JSON on stdout; with
        $GITHUB_OUTPUT set, also `include=<json>`, `count=<n>` and `queue-minutes=<m>` there. With
        --changed (the paths a pull request changes, one a line), only the envs whose lock files
        changed; every env when a matrix in env-templates/ changed (one may extend another). Notes
        (an env without a lock, without runners, or not touched) go to stderr and to
        $GITHUB_STEP_SUMMARY.
    python ci/npu_check.py summary --include JSON --results DIR
        The table env x runner x verdict from the `envgen check --json` results in DIR
        (<artifact>/<env>.json), as markdown on stdout and appended to $GITHUB_STEP_SUMMARY; exit 1
        unless every pair passed.

A config, a --changed file or an --include that cannot be used is one line on stderr and exit 2.
Standard library only, so the workflow runs it with any Python 3.11.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

# Labels and env names end up in `runs-on:` and artifact names: plain names only.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
DEFAULT_QUEUE_MINUTES = 30


class ConfigError(Exception):
    """The runner config is malformed: the message names the file and key."""


class UsageError(Exception):
    """An argument the workflow passed is unusable (a file that cannot be read, JSON that is not):
    the message names it."""


def read_text(path: Path, what: str) -> str:
    """The UTF-8 text of `path`; UsageError naming it (`what`) when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{what} {path}: {_why(exc)}") from exc


def _why(exc: OSError | UnicodeDecodeError) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else "not UTF-8"


def read_config(path: Path) -> tuple[dict[str, list[str]], int]:
    """{env: [labels]} and the queue minutes from ci/npu-runners.toml, every name checked."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    minutes = data.get("queue-minutes", DEFAULT_QUEUE_MINUTES)
    if not isinstance(minutes, int) or isinstance(minutes, bool) or not 1 <= minutes <= 1440:
        raise ConfigError(f"{path}: queue-minutes must be a whole number of minutes from 1 to 1440")
    envs = data.get("envs")
    if not isinstance(envs, dict):
        raise ConfigError(f"{path}: no [envs] table (env name = [runner labels])")
    labels: dict[str, list[str]] = {}
    for env, value in envs.items():
        if not NAME.fullmatch(env):
            raise ConfigError(f"{path}: envs.{env}: not an env name")
        if not isinstance(value, list) or not all(
            isinstance(v, str) and NAME.fullmatch(v) for v in value
        ):
            raise ConfigError(
                f"{path}: envs.{env}: a list of runner labels (letters, digits, '.', '_', '-')"
            )
        labels[env] = list(value)
    return labels, minutes


def artifact_name(env: str, runner: str) -> str:
    return f"npu-check-{env}-{runner}"


def touched(envs: Sequence[str], changed: Sequence[str]) -> set[str]:
    """The envs a pull request's changed paths concern: any matrix means all (extends), else each
    lock's files."""
    if any(path.startswith("env-templates/") for path in changed):
        return set(envs)
    names = [path.removeprefix("locks/") for path in changed if path.startswith("locks/")]
    return {e for e in envs if any(n.startswith((f"{e}.", f"pylock.{e}-")) for n in names)}


def plan(
    labels: dict[str, list[str]], locked: Sequence[str], only: set[str] | None = None
) -> tuple[list[dict[str, str]], list[str]]:
    """The matrix entries (env, runner, artifact) for the envs that have a lock (and are in `only`,
    when given), and a note for each gap."""
    include, notes = [], []
    for env in sorted(set(labels) | set(locked)):
        if only is not None and env not in only:
            notes.append(f"{env}: not touched by this change; not checked")
        elif env not in labels:
            notes.append(f"{env}: has a lock but no entry in ci/npu-runners.toml; not checked")
        elif env not in locked:
            notes.append(f"{env}: no locks/{env}.yml yet; not checked")
        elif not labels[env]:
            notes.append(f"{env}: no runner label configured in ci/npu-runners.toml; not checked")
        else:
            include += [
                {"env": env, "runner": r, "artifact": artifact_name(env, r)} for r in labels[env]
            ]
    return include, notes


def _is_result(result: object) -> bool:
    """A check result: an object whose `steps` is a list of objects, each with a string name and
    status."""
    if not isinstance(result, dict) or not isinstance(result.get("steps", []), list):
        return False
    return all(
        isinstance(s, dict) and isinstance(s.get("name"), str) and isinstance(s.get("status"), str)
        for s in result.get("steps", [])
    )


def check_result(document: object) -> dict | None:
    """The one result of an `envgen check --json` envelope; a check that stopped with an error (no
    lock, a malformed file) becomes a failed result naming it. None when `document` is no such
    envelope."""
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        return None
    if document["results"]:
        result = document["results"][0]
        return result if _is_result(result) else None
    error = document.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return {"ok": False, "steps": [{"name": str(message or "no result"), "status": "failed"}]}


def read_result(path: Path) -> dict | str | None:
    """The check result a job left at `path`: None when it left none, a reason when unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot be read ({_why(exc)})"
    try:
        result = check_result(json.loads(text))
    except (ValueError, RecursionError):
        result = None
    return "is not `envgen check --json` output" if result is None else result


def verdict(result: dict | str | None) -> str:
    """One table cell from an `envgen check --json` result (None: the job left no result; a string:
    why the result it left is unusable)."""
    if result is None:
        return "no result: no runner picked the job up in time, or it stopped before the check"
    if isinstance(result, str):
        return f"**failed**: the result {result}"
    steps = result.get("steps", [])
    if result.get("ok"):
        skipped = sum(1 for s in steps if s["status"] == "skipped")
        return f"ok ({len(steps) - skipped} steps" + (f", {skipped} skipped)" if skipped else ")")
    failed = [s["name"] for s in steps if s["status"] == "failed"]
    return "**failed**: " + ", ".join(f"`{name}`" for name in failed)


def summary(include: Sequence[dict[str, str]], results: Path) -> tuple[str, bool]:
    """The markdown table env x runner x verdict, and whether every pair passed."""
    lines = [
        "## NPU checks (`envgen check ENV --require-npu`)",
        "",
        "| env | runner | verdict |",
        "|---|---|---|",
    ]
    passed = True
    for entry in include:
        result = read_result(results / entry["artifact"] / f"{entry['env']}.json")
        passed = passed and isinstance(result, dict) and bool(result.get("ok"))
        lines.append(f"| {entry['env']} | `{entry['runner']}` | {verdict(result)} |")
    if not include:
        lines.append("| - | - | no env has both a lock and a runner label |")
    return "\n".join(lines) + "\n", passed


def read_include(text: str) -> list[dict[str, str]]:
    """`--include` as `matrix` printed it: a JSON list of {env, runner, artifact}, plain names."""
    try:
        include = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"--include is not JSON: {exc}") from exc
    if not isinstance(include, list) or not all(map(_is_entry, include)):
        raise UsageError("--include is not a list of {env, runner, artifact} as `matrix` prints")
    return include


def _is_entry(entry: object) -> bool:
    keys = ("env", "runner", "artifact")
    if not isinstance(entry, dict):
        return False
    return all(isinstance(entry.get(k), str) and NAME.fullmatch(entry[k]) for k in keys)


def _append(variable: str, text: str) -> None:
    if variable in os.environ:
        with open(os.environ[variable], "a") as out:
            out.write(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    matrix = sub.add_parser("matrix")
    matrix.add_argument("--root", type=Path, default=Path("."))
    matrix.add_argument("--config", type=Path, default=Path("ci/npu-runners.toml"))
    matrix.add_argument("--changed", type=Path, help="a file listing the changed paths, one a line")
    table = sub.add_parser("summary")
    table.add_argument(
        "--include", required=True, help="the matrix entries, as `matrix` printed them"
    )
    table.add_argument(
        "--results", type=Path, required=True, help="where the result artifacts were downloaded"
    )
    args = parser.parse_args(argv)
    try:
        return _summary(args) if args.command == "summary" else _matrix(args)
    except (ConfigError, UsageError) as exc:
        print(f"npu-check: {exc}", file=sys.stderr)
        return 2


def _summary(args: argparse.Namespace) -> int:
    text, passed = summary(read_include(args.include), args.results)
    print(text, end="")
    _append("GITHUB_STEP_SUMMARY", text)
    return 0 if passed else 1


def _matrix(args: argparse.Namespace) -> int:
    labels, minutes = read_config(args.root / args.config)
    # A pull request names its lock files: only env names are envs (the rest reach no summary, no
    # matrix).
    names = (p.name.removesuffix(".yml") for p in (args.root / "locks").glob("*.yml"))
    locked = sorted(name for name in names if NAME.fullmatch(name))
    changed = read_text(args.changed, "--changed").splitlines() if args.changed else None
    only = touched(locked, changed) if changed is not None else None
    include, notes = plan(labels, locked, only)
    for note in notes:
        print(f"npu-check: {note}", file=sys.stderr)
    _append("GITHUB_STEP_SUMMARY", "".join(f"- {note}\n" for note in notes))
    print(json.dumps(include, indent=2))
    _append(
        "GITHUB_OUTPUT",
        f"include={json.dumps(include)}\ncount={len(include)}\nqueue-minutes={minutes}\n",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
