"""The schema of locks/<env>.sources.toml: the file's own shape as pydantic models, which
lockio/sources_toml.py both writes the file from and reads it back through.

Strict (no key beyond the schema's, no coercion: a TOML integer is no string), and with the rules of
`inputs/untrusted.py` on every string that reaches git or the recipe, since a lock arrives as
untrusted as a matrix: a string holds no control character (prose may span lines), names, URLs,
refs, commits and paths are each what git and the recipe may be given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from envgen.inputs.untrusted import (
    archive_url_problem,
    commit_problem,
    control_problem,
    git_url_problem,
    host_problem,
    input_hash_problem,
    redirect_host_problem,
    ref_problem,
    requirement_problem,
    submodule_path_problem,
    tree_path_problem,
    url_word_problem,
    variable_problem,
)
from envgen.model import DEPENDENCY_MODES, METADATA
from envgen.names import env_name_problem, name_problem


def _rule(problem: Callable[[str], str | None]) -> AfterValidator:
    """A string rule of `inputs/untrusted.py` as a validator: its problem becomes the validation
    error."""

    def check(value: str) -> str:
        found = problem(value)
        if found:
            raise ValueError(found)
        return value

    return AfterValidator(check)


Text = Annotated[str, _rule(control_problem)]  # one line: no control character
Prose = Annotated[str, _rule(lambda text: control_problem(text, prose=True))]  # may span lines
Commit = Annotated[Text, _rule(commit_problem)]
GitUrl = Annotated[Text, _rule(git_url_problem)]
Variable = Annotated[Text, _rule(variable_problem)]
Environment = dict[Variable, Text]
TreePath = Annotated[Text, _rule(tree_path_problem)]
Sha256 = Annotated[Text, _rule(lambda sha: input_hash_problem(sha))]


def _python_problem(version: str) -> str | None:
    if re.fullmatch(r"\d+\.\d+", version):
        return None
    return f"'{version}' is not a major.minor Python version such as \"3.11\""


def _optional_path(path: str) -> str | None:
    return tree_path_problem(path) if path else None


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class _Row(BaseModel):
    """A table of the file: its keys and no other, each of its type (a TOML integer is no
    string)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, alias_generator=_kebab)


class RequirementRow(_Row):
    text: Annotated[Text, _rule(requirement_problem)]
    file: Text
    key: Text | None = None
    line: int | None = None
    source: Text | None = None
    constraint: bool = False


class SubmoduleRow(_Row):
    path: Annotated[Text, _rule(submodule_path_problem)]
    url: GitUrl
    commit: Commit


class ReplacementRow(_Row):
    source: TreePath = Field(alias="from")
    target: TreePath = Field(alias="to")


class SourceRow(_Row):
    name: Annotated[Text, _rule(lambda name: name_problem(name, "source name"))]
    url: GitUrl
    ref: Annotated[Text, _rule(ref_problem)]
    commit: Commit
    distribution: Text
    cherry_picks: list[Commit] = []
    picked: list[Commit] = []
    tree: Annotated[Text, _rule(lambda tree: commit_problem(tree) if tree else None)] = ""
    editable: bool = True
    pythonpath: bool = False
    env: Environment = {}
    build_isolation: bool = True
    needs_cann: bool = False
    submodules: list[SubmoduleRow] = []
    # Written only for a source that opts out: it checks out no submodules then.
    submodules_reason: Text | None = None
    build_index: Text | None = None
    requirement_files: list[Text] = []
    dependencies: Annotated[Text, _rule(lambda mode: _one_of(mode, DEPENDENCY_MODES))] = METADATA
    dependencies_reason: Text | None = None
    metadata_fallback: Text | None = None
    origin: Text | None = None
    digest: Text = ""
    requirements: list[RequirementRow] = []
    subdirectory: Annotated[Text, _rule(_optional_path)] = ""
    extras: list[Annotated[Text, _rule(lambda extra: name_problem(extra, "extra"))]] = []
    replace: list[ReplacementRow] = []

    @model_validator(mode="after")
    def _submodules_once(self) -> SourceRow:
        if self.submodules and self.submodules_reason is not None:
            raise ValueError("a source with submodules-reason checks out no submodules")
        paths = [sub.path for sub in self.submodules]
        if len(set(paths)) != len(paths):
            raise ValueError("a submodule path is recorded twice")
        return self


class MemberRow(_Row):
    path: TreePath
    name: Annotated[Text, _rule(lambda name: name_problem(name, "distribution"))]
    version: Text
    sha256: Sha256
    requires: list[Text] = []


class ArchiveRow(_Row):
    name: Annotated[Text, _rule(lambda name: name_problem(name, "archive name"))]
    platform: Text
    url: Annotated[Text, _rule(archive_url_problem)]
    sha256: Sha256
    redirect_hosts: list[Annotated[Text, _rule(redirect_host_problem)]] = []
    members: list[MemberRow] = []


class LinkRow(_Row):
    target: Annotated[Text, _rule(lambda path: tree_path_problem(path, pattern=True))]
    directory: Annotated[Text, _rule(_optional_path)] = ""
    reason: Prose


class ExcludedRow(_Row):
    name: Text
    reason: Prose
    platforms: list[Text] = []


class ChannelRow(_Row):
    name: Text
    url: Text


class IndexRow(_Row):
    name: Text
    url: Annotated[Text, _rule(url_word_problem)]
    explicit: bool = False
    trusted_host: Annotated[Text, _rule(host_problem)] | None = None
    file_hosts: list[Text] = []


class CannRow(_Row):
    version: Text
    set_env: Text
    note: Prose | None = None


class ProfileRow(_Row):
    name: Annotated[Text, _rule(lambda name: name_problem(name, "profile name"))]
    description: Prose
    env: Environment = {}


class ActivationRow(_Row):
    env: Environment = {}
    profiles: list[ProfileRow] = []


class PipIndexRow(_Row):
    platform: Text
    package: Text
    index: Text


class OverrideRow(_Row):
    name: Text
    requirement: Annotated[Text, _rule(requirement_problem)]
    reason: Prose
    transitive: bool = False
    replaced: list[RequirementRow] = []
    violates: list[Text] = []


class PendingRow(_Row):
    name: Text
    note: Prose


class CheckRow(_Row):
    module: Text
    distribution: Text | None = None
    version: Text | None = None
    needs: Text = "none"


class SourcesDocument(_Row):
    """The whole file."""

    schema_version: int = Field(alias="schema")
    env: Annotated[Text, _rule(env_name_problem)]
    input_hash: Annotated[Text, _rule(input_hash_problem)]
    # The interpreter of a lock without a conda part (major.minor); none where conda holds it.
    python: Annotated[Text, _rule(_python_problem)] | None = None
    # Filled in by `seal` once the three files are rendered (lockio/seal.py); a lock without one is
    # the integrity check's to report (lockio/integrity.py), so it still reads.
    content_hash: Text | None = None
    # The derived files' one sha256 (lockio/seal.py), sealed with the rest; a lock written before
    # it was recorded has none.
    derived_hash: Sha256 | None = None
    inputs: dict[str, str] = {}
    channels: list[ChannelRow] = []
    indexes: list[IndexRow] = []
    cann: CannRow | None = None
    activation: ActivationRow | None = None
    sources: list[SourceRow] = []
    pip_indexes: list[PipIndexRow] = []
    overrides: list[OverrideRow] = []
    pending: list[PendingRow] = []
    checks: list[CheckRow] = []
    archives: list[ArchiveRow] = []
    links: list[LinkRow] = []
    excluded: list[ExcludedRow] = []


def _one_of(value: str, allowed: Sequence[str]) -> str | None:
    return None if value in allowed else f"must be one of {', '.join(allowed)}"
