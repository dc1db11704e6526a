"""Lock → locks/<env>.install.sh: the POSIX sh recipe that installs the git sources into an env
(pure)."""

from __future__ import annotations

import hashlib
import json
import pkgutil
import re
from shlex import quote

from envgen.cherry_picks import PICK_ENV, PICK_FLAGS
from envgen.errors import InputError
from envgen.inputs.untrusted import lock_problems, one_line
from envgen.model import (
    DEFAULT_CANN_SET_ENV,
    ArchiveMember,
    Index,
    Link,
    Lock,
    LockedArchive,
    LockedSource,
    Source,
)
from envgen.recipe.usage import has_cann, usage
from envgen.redact import strip_credentials


def _package_text(name: str) -> str:
    data = pkgutil.get_data("envgen.recipe", name)
    if data is None:  # a loader that reads no package data: envgen is installed incompletely
        raise ImportError(f"envgen.recipe: cannot read its {name}")
    return data.decode("utf-8")


# Shell functions every recipe shares (package data, kept as shell so it reads as shell); the
# env-specific parts are rendered around them. Read through its package's loader (pkgutil), which
# importlib.resources' readers (zipfile, tempfile) would add about 5 ms to.
_FUNCTIONS = _package_text("functions.sh")


def render_recipe(lock: Lock) -> str:
    """The install.sh text of `lock`: the same inputs give the same bytes.

    Every value from the lock enters the script through `quote` (one sh word, never a command);
    comments name values too, so a lock holding a control character or a name that is not a name is
    refused.
    """
    unsafe = lock_problems(lock)
    if unsafe:
        raise InputError(
            f"cannot render the recipe of {lock.env!r}: {unsafe[0]}",
            hint="fix the matrix and re-lock",
        )
    cann_sources = [s.source.name for s in lock.sources if s.source.needs_cann]
    set_env = lock.cann.set_env if lock.cann else DEFAULT_CANN_SET_ENV
    parts = [
        _header(lock),
        usage(lock, cann_sources, set_env),
        _FUNCTIONS if has_cann(lock) else _without_cann(_FUNCTIONS),
        _profile_names(lock),
        _arguments(lock, cann_sources, set_env),
        *_archive_blocks(lock),
        *(_source_block(lock, i, s) for i, s in enumerate(lock.sources, 1)),
        *_link_lines(lock.links),
        _PTH,
        _hooks(lock),
    ]
    return "\n".join(parts)


def install_key(lock: Lock, locked: LockedSource) -> str:
    """A digest of everything that shapes one source's install, so a changed lock reinstalls it."""
    src = locked.source
    data = {
        "commit": locked.commit,
        "tree": locked.tree,
        "picks": list(src.cherry_picks),
        "picked": list(locked.picked),
        "editable": src.editable,
        "build_isolation": src.build_isolation,
        "env": sorted(src.env),
        "index": _index_args(lock, src.build_index),
        # only when there are any: the keys of sources without submodules stay what they were
        **(
            {"submodules": [[s.path, s.commit] for s in locked.submodules]}
            if locked.submodules
            else {}
        ),
        **({"layout": _layout(src)} if src.subdirectory or src.extras or src.replacements else {}),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _layout(src: Source) -> list[object]:
    return [src.subdirectory, list(src.extras), [[r.source, r.target] for r in src.replacements]]


def archive_key(archive: LockedArchive) -> str:
    """A digest of an archive's locked wheels, so a changed lock installs them again."""
    data = [archive.url, archive.sha256, [[m.path, m.sha256] for m in archive.members]]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16]


def hook_prefix(env: str) -> str:
    """The prefix of the variables the activation hook keeps old values in, e.g.
    `_ENVGEN_A5_OLD_`."""
    return f"_ENVGEN_{re.sub(r'[^A-Za-z0-9]', '_', env).upper()}_OLD_"


def _header(lock: Lock) -> str:
    return (
        "#!/bin/sh\n"
        f"# locks/{lock.env}.install.sh: installs the git sources of env {lock.env} "
        "into a conda env or venv.\n"
        f"# Rendered by `envgen lock` from locks/{lock.env}.yml and "
        f"locks/{lock.env}.sources.toml: never edit it;\n"
        "# change env-templates/ and re-lock. Run it with --help for what it does.\n"
        "set -eu\n\n"
        f"ENVGEN_ENV={quote(lock.env)}\n"
        # The identity, date and flags the lock committed each cherry-pick with, so the same commit
        # comes out.
        f"PICK_NAME={quote(PICK_ENV['GIT_COMMITTER_NAME'])}\n"
        f"PICK_EMAIL={quote(PICK_ENV['GIT_COMMITTER_EMAIL'])}\n"
        f"PICK_DATE={quote(PICK_ENV['GIT_COMMITTER_DATE'])}\n"
        f"PICK_FLAGS={quote(' '.join(PICK_FLAGS))}\n"
    )


def _profile_names(lock: Lock) -> str:
    names = [p.name for p in lock.profiles]
    pattern = "|".join(quote(n) for n in names)
    body = (
        f"\tcase $1 in\n\t\t{pattern}) return 0 ;;\n\tesac\n\treturn 1\n"
        if names
        else "\treturn 1\n"
    )
    return f"KNOWN_PROFILES={quote(' '.join(names) or '(none)')}\nknown_profile() {{\n{body}}}\n"


# The recipe's command line, parsed in POSIX sh (the values checked after the loop).
_PARSE_ARGUMENTS = (
    "while [ $# -gt 0 ]; do",
    "\tcase $1 in",
    '\t\t--prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift 2 ;;',
    "\t\t--prefix=*) prefix=${1#*=}; shift ;;",
    '\t\t--src) [ $# -ge 2 ] || die "--src needs a directory"; src=$2; shift 2 ;;',
    "\t\t--src=*) src=${1#*=}; shift ;;",
    '\t\t--profile) [ $# -ge 2 ] || die "--profile needs a name"; add_profile "$2"; shift 2 ;;',
    '\t\t--profile=*) add_profile "${1#*=}"; shift ;;',
    '\t\t--no-profile) [ $# -ge 2 ] || die "--no-profile needs a name"; drop_profile '
    '"$2"; shift 2 ;;',
    '\t\t--no-profile=*) drop_profile "${1#*=}"; shift ;;',
    "\t\t--skip-cann) skip_cann=1; shift ;;",
    '\t\t--bundle) [ $# -ge 2 ] || die "--bundle needs a file"; bundle=$2; shift 2 ;;',
    "\t\t--bundle=*) bundle=${1#*=}; shift ;;",
    '\t\t--archives) [ $# -ge 2 ] || die "--archives needs a directory"; archives_dir=$2',
    "\t\t\tshift 2 ;;",
    "\t\t--archives=*) archives_dir=${1#*=}; shift ;;",
    '\t\t--uv) [ $# -ge 2 ] || die "--uv needs the path of uv"; uv=$2; shift 2 ;;',
    '\t\t--uv=*) uv=${1#*=}; [ -n "$uv" ] || die "--uv needs the path of uv"; shift ;;',
    "\t\t-h | --help) usage; exit 0 ;;",
    '\t\t*) die "unknown argument $1 (see --help)" ;;',
    "\tesac",
    "done",
)


def _without_cann(text: str) -> str:
    """`text` without its CANN lines: the CANN functions (from `# cann_scripts:` to the next
    function's comment) and the lines naming $skip_cann or $cann_set_env (an env without CANN)."""
    start = text.find("# cann_scripts:")
    if start >= 0:
        end = text.index("\n# ", text.index("# use_cann ", start)) + 1
        text = text[:start] + text[end:].lstrip("\n")
    cann = ("skip_cann", "cann_set_env", "cann_sourced")
    return "".join(line for line in text.splitlines(True) if not any(w in line for w in cann))


def _arguments(lock: Lock, cann_sources: list[str], set_env: str) -> str:
    lines = [
        "prefix=${CONDA_PREFIX:-${VIRTUAL_ENV:-}}",
        "src=",
        "profiles=",
        "dropped=",
        "skip_cann=0",
        "bundle=",
        "archives_dir=",
        "uv=",
        *_PARSE_ARGUMENTS,
        "",
        '[ -n "$prefix" ] || die "no env to install into: pass --prefix DIR, or '
        'activate a conda env or venv"',
        '[ -d "$prefix" ] || die "$prefix is not a directory: create the env first '
        "(envgen install $ENVGEN_ENV "
        '--prefix DIR)"',
        'prefix=$(cd "$prefix" && pwd -P)',
        "python=$prefix/bin/python",
        '[ -x "$python" ] || die "no python at $python: install the locked packages '
        'into $prefix first"',
        # A python that is not the prefix's own (a stand-in running another interpreter) would
        # install elsewhere.
        '"$python" -c \'import os, sys; sys.exit(os.path.realpath(sys.prefix) != '
        "os.path.realpath(sys.argv[1]))' "
        '"$prefix" || die "$python does not run in $prefix (its sys.prefix differs): '
        'pip would install elsewhere"',
        "pip_tool=pip",
        'if [ -n "$uv" ]; then',
        '\t[ -f "$uv" ] && [ -x "$uv" ] || die "--uv: $uv is not an executable file"',
        "\tpip_tool=uv",
        "fi",
        "src=${src:-$prefix/src}",
        'mkdir -p "$src"',
        'src=$(cd "$src" && pwd -P)',
        # The checkouts of pythonpath sources are named in a .pth file: refused before any clone.
        *(['pth_check "$src"'] if any(s.source.pythonpath for s in lock.sources) else []),
        "state=$prefix/etc/envgen/$ENVGEN_ENV",
        'mkdir -p "$state"',
        "settle_profiles",
        f"cann_set_env=${{ASCEND_SET_ENV:-{quote(set_env)}}}",
        "cann_sourced=0",
        "pth_dirs=",
    ]
    if cann_sources:
        # Fail before any clone or build when the toolkit is missing, naming the first source that
        # needs it.
        lines += [
            'if [ "$skip_cann" = 0 ] && [ -n "$(cann_missing)" ]; then',
            f"\tdie {quote(f'source {cann_sources[0]} needs CANN, but')} "
            f'"$(cann_missing)" {_CANN_MISSING}',
            "fi",
        ]
    lines.append('say "installing into $prefix (sources in $src)"')
    lines += _archive_arguments(lock)
    lines.append('if [ -n "$bundle" ]; then use_bundle "$bundle"; fi')
    text = "\n".join(lines) + "\n"
    return text if has_cann(lock) else _without_cann(text)


def _archive_arguments(lock: Lock) -> list[str]:
    """The directory --archives names, made absolute; the platform whose archives are installed."""
    if not lock.archives:
        return []
    return [
        'if [ -n "$archives_dir" ]; then archives_dir=$(cd "$archives_dir" && pwd -P) || die '
        '"--archives: $archives_dir is not a directory"; fi',
        "platform=$(bundle_platform)",
    ]


_CANN_MISSING = quote(
    "does not exist: install the CANN toolkit, set ASCEND_SET_ENV to its set_env.sh "
    "(several: separated by ':'), "
    "or pass --skip-cann"
)


def _index_args(lock: Lock, name: str | None) -> list[str]:
    if name is None:
        return []
    index = next((i for i in lock.indexes if i.name == name), None)
    if index is None:
        return []
    return _index_flags(index)


def _index_flags(index: Index) -> list[str]:
    flags = ["--extra-index-url", strip_credentials(index.url)]
    if index.trusted_host:
        flags += ["--trusted-host", index.trusted_host]
    return flags


def _source_block(lock: Lock, number: int, locked: LockedSource) -> str:
    src = locked.source
    name = quote(src.name)
    pip = [
        "pip_install",
        # The build's variables, for this install only: pip_install hands them to env(1).
        *(quote(f"{k}={v}") for k, v in src.env),
        "-- --no-deps",
        *([] if src.build_isolation else ["--no-build-isolation"]),
        *(quote(a) for a in _index_args(lock, src.build_index)),
        *(["-e"] if src.editable else []),
        f'"$src"/{name}' + (f"/{quote(_project(src))}" if _project(src) else ""),
    ]
    checkout = " ".join(
        [
            "checkout",
            name,
            quote(strip_credentials(src.url)),
            quote(locked.commit),
            quote(locked.tree),
            quote(locked.picked[-1] if locked.picked else ""),
            *map(quote, src.cherry_picks),
        ]
    )
    body = [checkout]
    if locked.submodules:
        pairs = (f"{quote(s.path)} {quote(s.commit)}" for s in locked.submodules)
        body.append(f"submodules {name} {quote(strip_credentials(src.url))} {' '.join(pairs)}")
    if src.replacements:
        replaced = " ".join(f"{quote(r.source)} {quote(r.target)}" for r in src.replacements)
        body.append(f"replace_files {name} {replaced}")
    if src.needs_cann:
        body.append(f"use_cann {name}")
    body += [
        f"if installed {name} {quote(src.distribution)} {install_key(lock, locked)}; then",
        f"\tsay {quote(f'{src.name}: already installed at {locked.commit}')}",
        "else",
        f"\tsay {quote(f'{src.name}: pip install')}",
        "\t" + " ".join(pip),
        f"\tmark_installed {name} {install_key(lock, locked)}",
        "fi",
    ]
    if src.pythonpath:
        tail = f"/{quote(src.subdirectory)}" if src.subdirectory else ""
        body.append(f'add_pythonpath "$src"/{name}{tail}')
    origin = f" (from {src.origin})" if src.origin else ""
    head = f"# {number}. {src.name}: {strip_credentials(src.url)} {src.ref}{origin}\n"
    if not src.needs_cann:
        return head + "\n".join(body) + "\n"
    indented = "\n".join("\t" + line for line in body)
    return (
        head
        + 'if [ "$skip_cann" = 1 ]; then\n'
        + f"\tsay {quote(f'{src.name}: skipped (needs CANN; --skip-cann)')}\n"
        + "else\n"
        + indented
        + "\nfi\n"
    )


def _project(src: Source) -> str:
    """What pip installs of the checkout: its subdirectory, the extras asked (`python[srt_npu]`)."""
    extras = f"[{','.join(src.extras)}]" if src.extras else ""
    return f"{src.subdirectory or '.'}{extras}" if extras else src.subdirectory


def _archive_blocks(lock: Lock) -> list[str]:
    """Per archive, the wheels of this host's platform (the platforms it has no build for: none)."""
    blocks = []
    for name in dict.fromkeys(a.name for a in lock.archives):
        locked = [a for a in lock.archives if a.name == name]
        lines = [f"# archive {name}: wheels from a release archive", "case $platform in"]
        for archive in locked:
            members = " ".join(_member_words(m) for m in archive.members)
            hosts = quote(" ".join(archive.redirect_hosts))
            where = f"{quote(archive.url)} {quote(archive.sha256)} {archive_key(archive)} {hosts}"
            call = f"archive {quote(name)} {where}"
            lines.append(f"\t{quote(archive.platform)}) {call} {members} ;;")
        lines.append(f"\t*) say {quote(f'archive {name}: none for this platform')} ;;")
        lines.append("esac")
        blocks.append("\n".join(lines) + "\n")
    return blocks


def _member_words(member: ArchiveMember) -> str:
    return f"{quote(member.path)} {quote(member.sha256)} {quote(member.name)}"


def _link_lines(links: tuple[Link, ...]) -> list[str]:
    if not links:
        return []
    lines = ["# Links in site-packages, made after everything is installed."]
    for link in links:
        lines.append(f"# {one_line(link.reason)}")
        lines.append(f"link {quote(link.target)} {quote(link.directory)}")
    return ["\n".join(lines) + "\n"]


# The checkouts of the sources with pythonpath = true, ahead of site-packages for the env's python
# in any shell (or no file, when there are none).
_PTH = "# The sources with pythonpath = true, on sys.path without activation.\nwrite_pth\n"


def _hooks(lock: Lock) -> str:
    env = lock.env
    written = f"# envgen {env}: activation hook written by install.sh; rerun that to change it."
    lines = [
        "# Activation hooks: "
        + "CANN, " * (lock.cann is not None)
        + "the env's variables and the chosen profiles.",
        f"hook_prefix={quote(hook_prefix(env))}",
        "hook_vars=",
        "activate_hook() {",
        f"\tprintf '%s\\n' {quote(written)}",
    ]
    if lock.cann is not None:
        # Sourced at activation when present at install time; deactivation cannot undo what it sets.
        lines += [
            "\tcann_scripts | while IFS= read -r script; do",
            '\t\tif [ -f "$script" ]; then printf \'. %s\\n\' "$(quote "$script")"; fi',
            "\tdone",
        ]
    lines += [f"\texport_var {quote(k)} {quote(v)}" for k, v in lock.activation_env]
    for profile in lock.profiles:
        lines.append(f"\tif has_profile {quote(profile.name)}; then")
        lines += [f"\t\texport_var {quote(k)} {quote(v)}" for k, v in profile.env] or ["\t\t:"]
        lines.append("\tfi")
    lines += [
        "}",
        "",
        "hooks=$prefix/etc/conda",
        'mkdir -p "$hooks/activate.d" "$hooks/deactivate.d"',
        "activate=$hooks/activate.d/envgen-$ENVGEN_ENV.sh",
        # Both hooks come from one shell so deactivate.d knows which variables activate.d set.
        '{ activate_hook >"$activate.tmp"; deactivate_hook '
        '>"$hooks/deactivate.d/envgen-$ENVGEN_ENV.sh.tmp"; }',
        'replace "$activate.tmp" "$activate"',
        'replace "$hooks/deactivate.d/envgen-$ENVGEN_ENV.sh.tmp" '
        '"$hooks/deactivate.d/envgen-$ENVGEN_ENV.sh"',
        'if [ -f "$prefix/pyvenv.cfg" ] && [ -f "$prefix/bin/activate" ]; then venv_hooks; fi',
        "remember_profiles",
        'say "done: reactivate the env to pick up $activate"',
    ]
    return "\n".join(lines) + "\n"
