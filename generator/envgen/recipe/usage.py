"""The recipe's --help text, `usage()` in sh: how to run it, its options, the env's sources, links
and archives (pure)."""

from __future__ import annotations

from shlex import quote

from envgen.commits import short_commit
from envgen.inputs.untrusted import one_line
from envgen.model import Lock, LockedSource
from envgen.redact import strip_credentials

# The options the same in every recipe, before and after the lines that name the env's profiles
# and CANN sources.
_OPTIONS_DIRECTORIES = (
    "Options:",
    "  --prefix DIR    the env to install into (default: $CONDA_PREFIX, else $VIRTUAL_ENV)",
    "  --src DIR       where the sources are cloned (default: <prefix>/src)",
    "  --profile NAME  also set an optional activation profile (repeatable; "
    "remembered for re-runs):",
)
_OPTIONS_OFFLINE = (
    "  --bundle FILE   offline: take the pip part and the sources from a bundle "
    "(envgen bundle), every",
    "                  member checked against its bundle.json (sha256sum) first; "
    "needs tar, sha256sum,",
    "                  git, pip (and zstd for .tar.zst), not envgen. The conda "
    "part stays conda-lock's.",
    "  --archives DIR  take the wheels of the release archives from DIR (by file name) instead",
    "                  of fetching the archives; each is checked against the lock's sha256 too",
    "  --uv UV         install with `UV pip install --python <the env's python>` "
    "instead of the env's",
    "                  own pip (what `envgen install --installer uv` passes); uv "
    "reads no config file",
    "  -h, --help      show this help",
)


def usage(lock: Lock, cann_sources: list[str], set_env: str) -> str:
    """The sh function `usage` printing the recipe's help, each line one quoted word; an env
    without CANN has neither --skip-cann nor ASCEND_SET_ENV."""
    env = lock.env
    cann = has_cann(lock)
    lines = [
        f"Usage: sh locks/{env}.install.sh [--prefix DIR] [--src DIR] [--profile "
        "NAME]... [--no-profile NAME]...",
        "       " + "[--skip-cann] " * cann + "[--bundle FILE] [--archives DIR] [--uv UV]",
        "",
        f"Installs the git sources of env {env} at their locked commits, in order, each with",
        "`python -m pip install --no-deps` of the env's own python (uv with --uv), "
        "then writes activation hooks",
        f"(etc/conda/activate.d/envgen-{env}.sh and deactivate.d/; in a venv also a "
        "block in bin/activate)",
        f"and site-packages/envgen-{env}.pth: the sources on sys.path import by the env's "
        "python with no activation.",
        "Install the locked packages first, then run this script in that env:",
        *_first_steps(lock),
        f"  sh locks/{env}.install.sh",
        f"`envgen install {env} --prefix DIR{' --venv' * (not lock.has_conda)}` does both steps. "
        "Running this script again changes nothing and",
        "keeps the profiles an earlier run enabled (--no-profile NAME drops one); "
        "reactivate the env afterwards",
        "so the activation hooks ("
        + "CANN, " * cann
        + "the env's variables, profiles) take effect.",
        "",
        *_OPTIONS_DIRECTORIES,
        *(f"                    {p.name}: {one_line(p.description)}" for p in lock.profiles),
        *(["                    (this env defines none)"] if not lock.profiles else []),
        "  --no-profile NAME  drop a profile an earlier run enabled (repeatable)",
        *([_skip_cann(cann_sources)] if cann else []),
        *_OPTIONS_OFFLINE,
        "",
        *_usage_archives(lock),
        "Sources, in install order:",
        *(_usage_source(s) for s in lock.sources),
        *(["  (none)"] if not lock.sources else []),
        *(["", "Then links in site-packages:"] if lock.links else []),
        *(f"  {link.directory or '.'}: -> {link.target}" for link in lock.links),
        *(_environment(set_env) if cann else []),
    ]
    body = " \\\n".join(f"\t\t{quote(line.rstrip())}" for line in lines)
    return f"usage() {{\n\tprintf '%s\\n' \\\n{body}\n}}\n"


def _first_steps(lock: Lock) -> list[str]:
    """How the locked packages are installed: conda-lock's install, or for a lock without a conda
    part a venv of its python and pip."""
    env = lock.env
    if lock.has_conda:
        return [
            f"  conda-lock install -n NAME locks/{env}.yml   (or -p DIR)",
            "  conda activate NAME",
        ]
    return [
        f"  python{lock.python} -m venv DIR && . DIR/bin/activate   (the lock has no conda part)",
        "  python -m pip install --require-hashes --no-deps -r "
        f"locks/{env}.PLATFORM.requirements.txt",
    ]


def has_cann(lock: Lock) -> bool:
    """Whether the recipe of `lock` deals with CANN: the env has it (or a source needs it)."""
    return lock.cann is not None or any(s.source.needs_cann for s in lock.sources)


def _skip_cann(cann_sources: list[str]) -> str:
    return "  --skip-cann     skip the sources that need CANN" + (
        f" ({', '.join(cann_sources)}): the env is then incomplete"
        if cann_sources
        else " (none in this env)"
    )


def _environment(set_env: str) -> list[str]:
    return [
        "",
        "Environment:",
        "  ASCEND_SET_ENV  CANN's set_env.sh; several are separated by ':' and "
        f"sourced in order (default: {set_env})",
    ]


def _usage_source(locked: LockedSource) -> str:
    src = locked.source
    flags = [
        "editable" if src.editable else "plain",
        *(["on sys.path"] if src.pythonpath else []),
        *(["needs CANN"] if src.needs_cann else []),
        *([_count(len(src.cherry_picks), "cherry-pick")] if src.cherry_picks else []),
        *([_count(len(locked.submodules), "submodule")] if locked.submodules else []),
    ]
    return (
        f"  {src.name}: {strip_credentials(src.url)} {src.ref} = "
        f"{short_commit(locked.commit)} ({', '.join(flags)})"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _usage_archives(lock: Lock) -> list[str]:
    if not lock.archives:
        return []
    lines = ["Wheels from release archives, first (each checked against its sha256):"]
    for archive in lock.archives:
        wheels = ", ".join(m.filename for m in archive.members)
        lines.append(f"  {archive.name} ({archive.platform}): {archive.url}: {wheels}")
    return [*lines, ""]
