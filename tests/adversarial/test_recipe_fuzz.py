"""No string in a lock ever becomes a command of install.sh or of the activation hook it writes.

Each example renders the recipe twice: once from arbitrary strings in every field, once with every
free-text field replaced by a plain placeholder (names, which must match a strict pattern, are
kept). Both scripts run for real under `bash --posix -x` against stub `git` and `python`
executables; the xtrace of the two runs must be the same sequence of commands, and so must the trace
of sourcing the activation hook each wrote. A value that ended a line, closed a quote or ran
`$(...)` would add, drop or rename a traced command. The hook must also export every value byte for
byte.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import msgspec
import pytest
from envgen.errors import InputError
from envgen.inputs.untrusted import lock_problems
from envgen.model import Cann, Index, Lock, LockedSource, Profile, Source
from envgen.recipe.render import render_recipe
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from tests.support import budget
from tests.support.builders import make_lock

pytestmark = pytest.mark.adversarial

COMMIT = "0123456789abcdef0123456789abcdef01234567"
# Stub git: `init` makes the checkout, `checkout` records the commit so `rev-parse HEAD` answers it.
GIT_STUB = """#!/bin/sh
if [ "$1" = init ]; then mkdir -p "$3/.git"; exit 0; fi
dir=.
if [ "$1" = -C ]; then dir=$2; shift 2; fi
while [ "$1" = -c ]; do shift 2; done
case $1 in
	checkout) for arg; do last=$arg; done; printf '%s\\n' "$last" >"$dir/.git/stub-head" ;;
	rev-parse) cat "$dir/.git/stub-head" 2>/dev/null || true ;;
esac
exit 0
"""
PYTHON_STUB = "#!/bin/sh\nexit 0\n"
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_NAME = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,8}", fullmatch=True)
# Prefixed, so no draw is one of the shell's own variables ($_, PATH, IFS) that the dump script
# relies on.
_VARIABLE = st.from_regex(r"V[A-Z0-9_]{0,8}", fullmatch=True)
# Printable text (most examples render and run), hostile snippets, and anything at all (refused
# ones).
_PRINTABLE = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=30)
_SNIPPETS = st.sampled_from(
    ["$(touch PWNED)", "`touch PWNED`", "'; touch PWNED; '", '"; touch PWNED; "', "}", "\\"]
)
_URL_PATH = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=20
)


def _strings(hostile: bool) -> st.SearchStrategy[str]:
    return (
        st.one_of(_PRINTABLE, _SNIPPETS, st.text(max_size=10))
        if hostile
        else st.one_of(_PRINTABLE, _SNIPPETS)
    )


@st.composite
def fuzzed_locks(draw: st.DrawFn) -> Lock:
    # One example in five may hold anything anywhere (it is mostly refused); the others stay
    # renderable except where a hostile value is drawn on purpose.
    hostile = draw(st.integers(0, 4)) == 0
    text = _strings(hostile)
    name = st.one_of(_NAME, text) if hostile else _NAME

    def env() -> tuple[tuple[str, str], ...]:
        names = draw(st.lists(_VARIABLE, max_size=2, unique=True))
        return tuple((name, draw(text)) for name in sorted(names))

    index = Index(draw(name), "https://i.example/" + draw(text), trusted_host=draw(text))
    sources = tuple(
        LockedSource(
            Source(
                name=f"s{i}-{draw(name)}",
                url="https://h.example/" + draw(_URL_PATH) + ".git",
                ref=draw(st.one_of(st.just("main"), _URL_PATH)),
                distribution=draw(text),
                env=env(),
                needs_cann=draw(st.booleans()),
                build_index=index.name if draw(st.booleans()) else None,
                pythonpath=draw(st.booleans()),
                origin=draw(st.one_of(st.none(), text)),
            ),
            commit=COMMIT if not hostile else draw(st.one_of(st.just(COMMIT), text)),
        )
        for i in range(draw(st.integers(1, 2)))
    )
    profiles = tuple(
        Profile(f"p{i}-{draw(name)}", draw(text), env()) for i in range(draw(st.integers(0, 2)))
    )
    return make_lock(
        draw(name),
        input_hash="1" * 64,
        sources=sources,
        indexes=(index,),
        cann=Cann("pending", draw(text)),
        activation_env=env(),
        profiles=profiles,
    )


def placeholders(lock: Lock) -> Lock:
    """`lock` with every free-text value plain; names, commits and variable names kept."""
    set_env = lock.cann.set_env if lock.cann else ""

    def env(values: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        return tuple((name, "v") for name, _ in values)

    sources = tuple(
        msgspec.structs.replace(
            s,
            source=msgspec.structs.replace(
                s.source,
                url="https://h.example/x.git",
                ref="main",
                distribution="d",
                env=env(s.source.env),
                origin=None if s.source.origin is None else "o",
            ),
        )
        for s in lock.sources
    )
    return msgspec.structs.replace(
        lock,
        sources=sources,
        indexes=tuple(
            # A trusted host adds two arguments to the install command: keep whether there is one.
            msgspec.structs.replace(
                i, url="https://i.example/", trusted_host="h" if i.trusted_host else ""
            )
            for i in lock.indexes
        ),
        # CANN's scripts are ':'-separated and each is looked at: keep their number.
        cann=Cann(
            "pending",
            ":".join("/nonexistent/set_env.sh" if part else "" for part in set_env.split(":")),
        ),
        activation_env=env(lock.activation_env),
        profiles=tuple(
            msgspec.structs.replace(p, description="d", env=env(p.env)) for p in lock.profiles
        ),
    )


def skeleton(trace: str) -> list[tuple[int, str]]:
    """The traced commands as (nesting depth, command name or assigned variable), their arguments
    dropped.

    Sorted: the members of a pipeline run at once and trace in either order; a command added or
    renamed by a value still shows.
    """
    out = []
    for line in trace.splitlines():
        plus = len(line) - len(line.lstrip("+"))
        words = line[plus:].strip()
        assign = _ASSIGN.match(words)
        out.append((plus, f"{assign.group(1)}=" if assign else words.split(" ", 1)[0]))
    return sorted(out)


def traced(work: Path, argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    trace = work / "trace"
    with trace.open("w") as handle:
        proc = subprocess.run(
            ["bash", "--posix", "-x", *argv],
            env={**env, "BASH_XTRACEFD": str(handle.fileno()), "PS4": "+ "},
            pass_fds=(handle.fileno(),),
            capture_output=True,
            text=True,
            cwd=work,
            timeout=60,
        )
    # The two runs differ in their directory only.
    return proc.returncode, trace.read_text().replace(str(work), "WORK")


Skeleton = list[tuple[int, str]]


def run_recipe(
    lock: Lock, work: Path, skip_cann: bool
) -> tuple[int, Skeleton, Skeleton, dict[str, str]]:
    """Install with `lock`'s recipe into a stub prefix, then source the hook it wrote (if it got
    that far).

    The install's exit code, the skeletons of both traces and the values the hook exports.
    """
    stubs, prefix = work / "stubs", work / "prefix"
    (prefix / "bin").mkdir(parents=True)
    stubs.mkdir()
    for path, text in ((stubs / "git", GIT_STUB), (prefix / "bin" / "python", PYTHON_STUB)):
        path.write_text(text)
        path.chmod(0o755)
    script = work / "install.sh"
    script.write_text(render_recipe(lock))
    assert subprocess.run(["sh", "-n", str(script)], capture_output=True).returncode == 0
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(work), "LC_ALL": "C"}
    args = [str(script), "--prefix", str(prefix), *(["--skip-cann"] if skip_cann else [])]
    args += [a for p in lock.profiles for a in ("--profile", p.name)]
    status, install = traced(work, args, env)
    hook = prefix / "etc" / "conda" / "activate.d" / f"envgen-{lock.env}.sh"
    if not hook.is_file():
        return status, skeleton(install), [], {}
    names = sorted(
        {k for k, _ in lock.activation_env} | {k for p in lock.profiles for k, _ in p.env}
    )
    dump = work / "dump.sh"
    dump.write_text(f". {hook}\n" + "".join(f"printf '%s\\0' \"${name}\"\n" for name in names))
    code, activation = traced(work, [str(dump)], env)
    assert code == 0
    out = subprocess.run(
        ["bash", "--posix", str(dump)], env=env, capture_output=True, text=True
    ).stdout
    exported = dict(zip(names, out.split("\0"), strict=False))
    return status, skeleton(install), skeleton(activation), exported


@settings(
    max_examples=budget.examples(25),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(fuzzed_locks(), st.booleans())
@example(
    make_lock(
        "x",
        input_hash="1" * 64,
        sources=(
            LockedSource(
                Source(
                    "s",
                    "https://h.example/$(touch${IFS}PWNED).git",
                    "`touch`",
                    "'; touch PWNED; '",
                    origin="}",
                ),
                COMMIT,
            ),
        ),
        cann=Cann("pending", "$(touch PWNED)}'"),
        activation_env=(("A", "'\"$(touch PWNED)`touch PWNED`\\"),),
        profiles=(Profile("p", "ENVGEN_USAGE_END", (("B", "}; touch PWNED"),)),),
    ),
    False,
)
def test_no_string_in_a_lock_becomes_a_command(lock: Lock, skip_cann: bool) -> None:
    if lock_problems(lock):
        event("refused")
        with pytest.raises(InputError):
            render_recipe(lock)
        return
    event("rendered and run")
    with tempfile.TemporaryDirectory() as fuzzed, tempfile.TemporaryDirectory() as plain:
        status, install, activation, exported = run_recipe(lock, Path(fuzzed), skip_cann)
        expected = run_recipe(placeholders(lock), Path(plain), skip_cann)
        assert not (Path(fuzzed) / "PWNED").exists()
        assert not any(name == "PWNED" for _, _, names in os.walk(fuzzed) for name in names)
    assert (status, install, activation) == expected[:3]
    # stopped before the hooks (a source needs CANN, which is absent): nothing to export
    if not activation:
        return
    wanted = dict(lock.activation_env)
    for profile in lock.profiles:
        wanted.update(profile.env)
    assert exported == wanted
