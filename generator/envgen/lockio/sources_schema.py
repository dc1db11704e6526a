"""The schema of locks/<env>.sources.toml: the file's own shape as msgspec Structs, which
lockio/sources_toml.py both writes the file from and reads it back through (lockio/strict_schema.py
reads it).

Strict (no key beyond the schema's, no coercion: a TOML integer is no string), and with the rules of
`inputs/untrusted.py` on every string that reaches git or the recipe, since a lock arrives as
untrusted as a matrix: a string holds no control character (prose may span lines), names, URLs,
refs, commits and paths are each what git and the recipe may be given. Building a row checks
nothing: the writer's strings are judged when the file is read back.
"""

# No `from __future__ import annotations`: the rules in the annotations are lambdas over this
# module's names, which msgspec could not resolve from the annotations' text.
import re
from collections.abc import Sequence
from typing import Annotated

import msgspec

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
from envgen.lockio.strict_schema import Rule
from envgen.model import DEPENDENCY_MODES, METADATA
from envgen.names import env_name_problem, name_problem

Text = Annotated[str, Rule(control_problem)]  # one line: no control character
Prose = Annotated[str, Rule(lambda text: control_problem(text, prose=True))]  # may span lines
Commit = Annotated[Text, Rule(commit_problem)]
GitUrl = Annotated[Text, Rule(git_url_problem)]
Variable = Annotated[Text, Rule(variable_problem)]
Environment = dict[Variable, Text]
TreePath = Annotated[Text, Rule(tree_path_problem)]
Sha256 = Annotated[Text, Rule(lambda sha: input_hash_problem(sha))]


def _python_problem(version: str) -> str | None:
    if re.fullmatch(r"\d+\.\d+", version):
        return None
    return f"'{version}' is not a major.minor Python version such as \"3.11\""


def _optional_path(path: str) -> str | None:
    return tree_path_problem(path) if path else None


class _Row(
    msgspec.Struct,
    forbid_unknown_fields=True,
    frozen=True,
    rename="kebab",
    omit_defaults=True,
):
    """A table of the file: its keys (a field's name, `-` for `_`) and no other, each of its type
    (a TOML integer is no string); a key holding its default is not written. (Each subclass says
    `frozen=True` again, as msgspec would not need: mypy reads each class's own arguments.)"""


class RequirementRow(_Row, frozen=True):
    text: Annotated[Text, Rule(requirement_problem)]
    file: Text
    key: Text | None = None
    line: int | None = None
    source: Text | None = None
    constraint: bool = False


class SubmoduleRow(_Row, frozen=True):
    path: Annotated[Text, Rule(submodule_path_problem)]
    url: GitUrl
    commit: Commit


class ReplacementRow(_Row, frozen=True):
    source: TreePath = msgspec.field(name="from")
    target: TreePath = msgspec.field(name="to")


class SourceRow(_Row, frozen=True):
    name: Annotated[Text, Rule(lambda name: name_problem(name, "source name"))]
    url: GitUrl
    ref: Annotated[Text, Rule(ref_problem)]
    commit: Commit
    distribution: Text
    cherry_picks: list[Commit] = []
    picked: list[Commit] = []
    tree: Annotated[Text, Rule(lambda tree: commit_problem(tree) if tree else None)] = ""
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
    dependencies: Annotated[Text, Rule(lambda mode: _one_of(mode, DEPENDENCY_MODES))] = METADATA
    dependencies_reason: Text | None = None
    metadata_fallback: Text | None = None
    origin: Text | None = None
    digest: Text = ""
    requirements: list[RequirementRow] = []
    subdirectory: Annotated[Text, Rule(_optional_path)] = ""
    extras: list[Annotated[Text, Rule(lambda extra: name_problem(extra, "extra"))]] = []
    replace: list[ReplacementRow] = []

    def problem(self) -> str | None:
        """The rule over the whole row (lockio/strict_schema.py applies it when reading)."""
        if self.submodules and self.submodules_reason is not None:
            return "a source with submodules-reason checks out no submodules"
        paths = [sub.path for sub in self.submodules]
        if len(set(paths)) != len(paths):
            return "a submodule path is recorded twice"
        return None


class MemberRow(_Row, frozen=True):
    path: TreePath
    name: Annotated[Text, Rule(lambda name: name_problem(name, "distribution"))]
    version: Text
    sha256: Sha256
    requires: list[Text] = []


class ArchiveRow(_Row, frozen=True):
    name: Annotated[Text, Rule(lambda name: name_problem(name, "archive name"))]
    platform: Text
    url: Annotated[Text, Rule(archive_url_problem)]
    sha256: Sha256
    redirect_hosts: list[Annotated[Text, Rule(redirect_host_problem)]] = []
    members: list[MemberRow] = []


class LinkRow(_Row, frozen=True, kw_only=True):  # a required key after an optional one
    target: Annotated[Text, Rule(lambda path: tree_path_problem(path, pattern=True))]
    directory: Annotated[Text, Rule(_optional_path)] = ""
    reason: Prose


class ExcludedRow(_Row, frozen=True):
    name: Text
    reason: Prose
    platforms: list[Text] = []


class ChannelRow(_Row, frozen=True):
    name: Text
    url: Text


class IndexRow(_Row, frozen=True):
    name: Text
    url: Annotated[Text, Rule(url_word_problem)]
    explicit: bool = False
    trusted_host: Annotated[Text, Rule(host_problem)] | None = None
    file_hosts: list[Text] = []


class CannRow(_Row, frozen=True):
    version: Text
    set_env: Text
    note: Prose | None = None


class ProfileRow(_Row, frozen=True):
    name: Annotated[Text, Rule(lambda name: name_problem(name, "profile name"))]
    description: Prose
    env: Environment = {}


class ActivationRow(_Row, frozen=True):
    env: Environment = {}
    profiles: list[ProfileRow] = []


class PipIndexRow(_Row, frozen=True):
    platform: Text
    package: Text
    index: Text


class OverrideRow(_Row, frozen=True):
    name: Text
    requirement: Annotated[Text, Rule(requirement_problem)]
    reason: Prose
    transitive: bool = False
    replaced: list[RequirementRow] = []
    violates: list[Text] = []


class PendingRow(_Row, frozen=True):
    name: Text
    note: Prose


class CheckRow(_Row, frozen=True):
    module: Text
    distribution: Text | None = None
    version: Text | None = None
    needs: Text = "none"


class SourcesDocument(_Row, frozen=True):
    """The whole file."""

    schema_version: int = msgspec.field(name="schema")
    env: Annotated[Text, Rule(env_name_problem)]
    input_hash: Annotated[Text, Rule(input_hash_problem)]
    # The interpreter of a lock without a conda part (major.minor); none where conda holds it.
    python: Annotated[Text, Rule(_python_problem)] | None = None
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
