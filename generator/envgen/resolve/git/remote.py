"""A git remote's refs: `git ls-remote`, a ref resolved to its commit, the environment every git
call runs in."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import msgspec

from envgen import network
from envgen.commits import is_full_commit
from envgen.credentials import Credentials, split_credential
from envgen.errors import NetworkError, ResolutionError, Unreached
from envgen.model import Source
from envgen.process import TimedOut, run
from envgen.redact import redact_text, redact_url

logger = logging.getLogger(__name__)


GIT_PROTOCOLS = "https:http:ssh:file"


GIT_MIRROR = '`git config --global url."<mirror>/".insteadOf "<host>/"`'
MIRROR_HINT = (
    "check the URL and your network; if the host is blocked, point git at a mirror with "
    f"{GIT_MIRROR} (see docs/mirrors.md)"
)


class GitEnv(msgspec.Struct, frozen=True):
    """What every git call runs with: the user's variables (so their git config, insteadOf mirrors
    and credentials apply) as the command read them, and envgen's network limits."""

    variables: Mapping[str, str]
    limits: network.Limits

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> GitEnv:
        """The git environment of a command run in `environ`."""
        return cls(MappingProxyType(dict(environ)), network.limits(environ))

    def environ(
        self,
        extra: Mapping[str, str] | None = None,
        *,
        url: str | None = None,
    ) -> dict[str, str]:
        """git's environment: never prompting, within the network limits.

        When `url` carries `user:password@`, git gets it as an `http.<url>.extraHeader` in the
        environment (`bare_url` is what git is given instead), so no config file, command line or
        reflog holds it."""
        env = dict(self.variables)
        # Only the transports a source URL may name: `ext::` and other helpers would run a command.
        env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_ALLOW_PROTOCOL=GIT_PROTOCOLS)
        env.update(network.git_environment(self.limits))
        env.update(extra or {})
        credential = split_credential(url)[1] if url else None
        return Credentials((credential,)).git_environment(env) if credential else env


def bare_url(url: str) -> str:
    """The URL git is given: an http(s) URL without its credentials (`GitEnv.environ` carries
    those)."""
    return split_credential(url)[0]


def ls_remote(url: str, git: GitEnv, *, source: str | None = None) -> dict[str, str]:
    """Every ref the remote advertises (`HEAD`, `refs/heads/…`, `refs/tags/…`) -> commit, tags
    peeled."""
    proc = remote_git(["ls-remote", "--", bare_url(url)], git, url=url, source=source)
    if proc.returncode != 0:
        raise unreachable(url, source, proc.stderr, git.limits)
    return parse_ls_remote(proc.stdout)


def remote_git(
    args: list[str], git: GitEnv, *, url: str, source: str | None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """A git command that talks to `url` (its credentials in the environment, see
    `GitEnv.environ`): within the network budget, which ends it as the remote's failure."""
    limits = git.limits
    env = git.environ(url=url)
    try:
        return run(["git", *args], cwd=cwd, env=env, timeout=limits.budget, check=False)
    except TimedOut as exc:
        who = f"source {source}: " if source else ""
        shown = redact_url(url)
        late = f"did not finish `git {args[0]}` within {network.seconds('budget', limits)}"
        raise NetworkError(
            f"{who}git remote {shown} {late}",
            hint=f"{MIRROR_HINT}; {network.raise_hint('budget', limits)}",
            hosts=[Unreached(shown, late)],
        ) from exc


def parse_ls_remote(text: str) -> dict[str, str]:
    """`git ls-remote` output as ref -> commit; an annotated tag maps to the commit its `^{}` line
    names."""
    refs: dict[str, str] = {}
    peeled: dict[str, str] = {}
    for line in text.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.endswith("^{}"):
            peeled[ref[:-3]] = sha
        elif ref:
            refs[ref] = sha
    refs.update(peeled)
    return dict(sorted(refs.items()))


def resolve_ref(refs: Mapping[str, str], ref: str, *, url: str, source: str) -> str:
    """The commit `ref` names among `refs` (a full ref, `HEAD`, a tag, then a branch, as git looks
    them up)."""
    tag, branch = refs.get(f"refs/tags/{ref}"), refs.get(f"refs/heads/{ref}")
    if tag and branch and tag != branch:
        logger.warning(
            "source %s: %r is both a tag and a branch at %s; using the tag",
            source,
            ref,
            redact_url(url),
        )
    found = refs.get(ref) if ref == "HEAD" or ref.startswith("refs/") else tag or branch
    if found:
        return found
    names = sorted(
        {r.removeprefix("refs/heads/").removeprefix("refs/tags/") for r in refs if _named(r)}
    )
    import difflib  # imported here: only a ref the remote does not have needs it

    close = difflib.get_close_matches(ref, names, n=3, cutoff=0.5)
    hint = (
        f"closest branches/tags: {', '.join(close)}"
        if close
        else "no branch or tag has a similar name"
    )
    raise ResolutionError(
        f"source {source}: ref {ref!r} not found at {redact_url(url)}",
        hint=f"{hint}; fix `ref` in the matrix, or give a full 40-hex commit",
        host=redact_url(url),
    )


def upstream_commit(source: Source, git: GitEnv) -> str:
    """The commit the source's ref names upstream now (a full-sha ref names itself)."""
    if is_full_commit(source.ref):
        return source.ref.lower()
    refs = ls_remote(source.url, git, source=source.name)
    return resolve_ref(refs, source.ref, url=source.url, source=source.name)


def _named(ref: str) -> bool:
    return ref.startswith(("refs/heads/", "refs/tags/"))


def unreachable(url: str, source: str | None, stderr: str, limits: network.Limits) -> NetworkError:
    """One line naming the remote and why: git's first `fatal:` line, or the read timeout it ran
    into."""
    who = f"source {source}: " if source else ""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = redact_text(
        next((line for line in lines if line.startswith("fatal:")), lines[0] if lines else "")
    )
    hint = MIRROR_HINT
    if network.timed_out(said):
        said = f"no data for {network.seconds('read', limits)} ({said})"
        hint = f"{MIRROR_HINT}; {network.raise_hint('read', limits)}"
    detail = f": {said}" if said else " (git said nothing)"
    shown = redact_url(url)
    return NetworkError(
        f"{who}cannot reach git remote {shown}{detail}",
        hint=hint,
        hosts=[Unreached(shown, said or "git said nothing")],
    )
