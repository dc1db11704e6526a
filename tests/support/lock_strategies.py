"""Hypothesis strategies for Locks with every field set or left out, and any text where a lock holds
a string: for the writers of the lock files, which must write whatever a Lock holds as TOML and
YAML."""

from __future__ import annotations

import string

from envgen.model import (
    AppliedOverride,
    Cann,
    Channel,
    Env,
    ImportCheck,
    Index,
    Lock,
    LockedSource,
    Origin,
    Override,
    Pending,
    PipEntry,
    Profile,
    Source,
    Submodule,
    TracedRequirement,
)
from hypothesis import strategies as st

from tests.support.builders import conda_entry, make_lock

PLATFORMS = ("linux-64", "linux-aarch64")
NAME = st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=12)
# Any text at all: quotes, backslashes, control characters, unicode, the empty string.
ANY = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=16)
# A key as TOML would write it bare, or one it must quote (any text, the empty key too).
KEY = st.one_of(st.text(string.ascii_letters + string.digits + "-_", min_size=1, max_size=8), ANY)
# Text a TOML comment may hold (no control characters): the env's name is written in the first
# line's comment.
COMMENTABLE = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12
)
URL = st.one_of(ANY, st.builds(lambda n, f: f"https://u:p@files.example.org/{n}/{f}", NAME, ANY))
_MAYBE = st.one_of(st.none(), ANY)
_HEX = st.text("0123456789abcdef", min_size=64, max_size=64)


@st.composite
def pip_entries(draw: st.DrawFn, indexes: tuple[str, ...]) -> PipEntry:
    return PipEntry(
        name=draw(NAME),
        version=draw(ANY),
        platform=draw(st.sampled_from(PLATFORMS)),
        url=draw(URL),
        sha256=draw(ANY),
        depends=tuple((d, ">=1") for d in draw(st.lists(NAME, max_size=3))),
        index=draw(st.sampled_from((None, *indexes))),
        sdist=draw(st.booleans()),
    )


def envs() -> st.SearchStrategy[Env]:
    return st.lists(st.tuples(KEY, ANY), max_size=3).map(tuple)


@st.composite
def requirements(draw: st.DrawFn) -> TracedRequirement:
    origin = Origin(
        draw(ANY),
        draw(_MAYBE),
        draw(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))),
        draw(_MAYBE),
    )
    return TracedRequirement(draw(ANY), origin, constraint=draw(st.booleans()))


@st.composite
def locked_sources(draw: st.DrawFn) -> LockedSource:
    texts = st.lists(ANY, max_size=3).map(tuple)
    with_submodules = draw(st.booleans())
    source = Source(
        name=draw(ANY),
        url=draw(URL),
        ref=draw(ANY),
        distribution=draw(ANY),
        cherry_picks=draw(texts),
        editable=draw(st.booleans()),
        pythonpath=draw(st.booleans()),
        env=draw(envs()),
        build_isolation=draw(st.booleans()),
        needs_cann=draw(st.booleans()),
        build_index=draw(_MAYBE),
        requirements=draw(texts),
        origin=draw(_MAYBE),
        submodules=with_submodules,
        dependencies=draw(st.one_of(st.sampled_from(["metadata", "requirements", "none"]), ANY)),
        dependencies_reason=draw(_MAYBE),
        submodules_reason=draw(_MAYBE),
    )
    return LockedSource(
        source=source,
        commit=draw(ANY),
        requirements=tuple(draw(st.lists(requirements(), max_size=3))),
        digest=draw(ANY),
        tree=draw(ANY),
        picked=draw(texts),
        metadata_fallback=draw(_MAYBE),
        submodules=tuple(draw(st.lists(st.builds(Submodule, ANY, URL, ANY), max_size=2)))
        if with_submodules
        else (),
    )


@st.composite
def applied_overrides(draw: st.DrawFn) -> AppliedOverride:
    override = Override(draw(ANY), draw(ANY), draw(ANY), transitive=draw(st.booleans()))
    replaced = tuple(draw(st.lists(requirements(), max_size=2)))
    return AppliedOverride(override, replaced, tuple(draw(st.lists(ANY, max_size=2))))


@st.composite
def locks(draw: st.DrawFn, *, only_yml: bool = False) -> Lock:
    """A lock over both platforms with any of its fields set, any text in its strings. With
    `only_yml`, only the fields the yml writer (lockio/conda_lock_yml.render_lock_yml) reads are
    drawn: the env, the input hash, the pip and conda entries, the channels (and the indexes the pip
    entries name); the sources, overrides and the rest, which the yml does not hold, are left empty.
    Drawing them is most of an example's cost, and for a test of the yml alone no value of theirs
    can change what it checks."""
    indexes = tuple(
        Index(name, draw(URL), draw(st.booleans()), draw(_MAYBE))
        for name in draw(st.lists(NAME, max_size=3, unique=True))
    )
    python = draw(st.one_of(st.none(), st.sampled_from(["3.11.9", "3.12.1"])))
    many = st.integers(0, 3)
    env = draw(st.one_of(NAME, COMMENTABLE))
    input_hash = draw(st.one_of(_HEX, COMMENTABLE))  # the pylock header writes it in a comment
    pip = tuple(draw(st.lists(pip_entries(tuple(i.name for i in indexes)), max_size=8)))
    conda = (conda_entry("python", python, PLATFORMS[0]),) if python else ()
    if only_yml:
        channels = tuple(Channel(draw(ANY), draw(URL)) for _ in range(draw(many)))
        return make_lock(
            env,
            platforms=PLATFORMS,
            input_hash=input_hash,
            pip=pip,
            conda=conda,
            channels=channels,
            indexes=indexes,
        )
    return make_lock(
        env,
        platforms=PLATFORMS,
        input_hash=input_hash,
        pip=pip,
        conda=conda,
        sources=tuple(draw(locked_sources()) for _ in range(draw(many))),
        overrides=tuple(draw(applied_overrides()) for _ in range(draw(many))),
        pending=tuple(Pending(draw(ANY), draw(ANY)) for _ in range(draw(many))),
        channels=tuple(Channel(draw(ANY), draw(URL)) for _ in range(draw(many))),
        indexes=indexes,
        cann=draw(st.one_of(st.none(), st.builds(Cann, ANY, ANY, _MAYBE))),
        activation_env=draw(envs()),
        profiles=tuple(Profile(draw(ANY), draw(ANY), draw(envs())) for _ in range(draw(many))),
        checks=tuple(
            ImportCheck(
                draw(ANY),
                draw(_MAYBE),
                draw(_MAYBE),
                draw(st.sampled_from(["none", "cann", "npu"])),
            )
            for _ in range(draw(many))
        ),
        inputs=draw(st.lists(st.tuples(KEY, ANY), max_size=4).map(tuple)),
    )
