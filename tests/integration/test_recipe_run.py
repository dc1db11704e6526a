"""The rendered install.sh run for real: local git repos of tiny projects, a real venv, real pip and
git."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import msgspec
import pytest
from envgen.cherry_picks import PICK_ENV, PICK_FLAGS
from envgen.example.gitrepos import GitRepo, side_commit
from envgen.example.srcprojects import backend_project
from envgen.example.wheels import FixtureDist, build_wheel
from envgen.model import Cann, Lock, LockedSource, Profile, Source
from envgen.recipe.render import render_recipe
from uv import find_uv_bin

from tests.support.builders import make_lock
from tests.support.shared import build_once
from tests.support.submodules import NestedSubmodules, locked_parent, shared_nested_submodules
from tests.support.venvs import fresh_venv


def demo_lock(*sources: LockedSource, env: str = "demo", **fields: object) -> Lock:
    return make_lock(env, sources=sources, **fields)


def run_recipe(
    lock: Lock, prefix: Path, *args: str, env: dict[str, str] | None = None, uv: bool = False
) -> subprocess.CompletedProcess[str]:
    """The recipe of `lock` run on `prefix`; with `uv`, given `--uv` (uv installs the sources, its
    cache beside the env), for tests whose subject is not pip's own install path: uv builds and
    installs a source in a fraction of the second pip takes. The tests without it keep pip's path
    covered: a source's build variables, a pythonpath source, CANN's script with build isolation
    off, a server refusing fetches by SHA."""
    script = prefix.parent / f"{lock.env}.install.sh"
    script.write_text(render_recipe(lock))
    full = dict(os.environ)
    full.update(env or {})
    if uv:
        args = ("--uv", find_uv_bin(), *args)
        full["UV_CACHE_DIR"] = str(prefix.parent / "uv-cache")
    return subprocess.run(
        ["sh", str(script), "--prefix", str(prefix), *args],
        capture_output=True,
        text=True,
        env=full,
    )


def in_env(prefix: Path, code: str, *, activate: bool = False) -> subprocess.CompletedProcess[str]:
    """Run python code in the venv, after sourcing its bin/activate when asked."""
    setup = f'. "{prefix}/bin/activate"; ' if activate else ""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        ["sh", "-c", f'{setup}exec "{prefix}/bin/python" -c "$0"', code],
        capture_output=True,
        text=True,
        env=env,
    )


def locked(repo: GitRepo, source: Source) -> LockedSource:
    commit = repo.rev()
    return LockedSource(source, commit, tree=repo.git("rev-parse", f"{commit}^{{tree}}"))


@pytest.fixture
def venv(tmp_path: Path, pip_site_packages: Path) -> Path:
    return fresh_venv(tmp_path / "env", pip_site_packages)


def test_source_that_needs_a_build_variable_fails_without_it_and_installs_with_it(
    tmp_path: Path, venv: Path
) -> None:
    repo = backend_project(
        tmp_path / "vllmfix", "vllmfix", "0.23.0", require_env={"VLLM_TARGET_DEVICE": "empty"}
    )
    bare = locked(repo, Source("vllmfix", repo.url, "main", "vllmfix"))
    failed = run_recipe(demo_lock(bare), venv)
    assert failed.returncode != 0
    assert "vllmfix refuses to build: set VLLM_TARGET_DEVICE=empty" in failed.stderr + failed.stdout

    with_env = Source(
        "vllmfix", repo.url, "main", "vllmfix", env=(("VLLM_TARGET_DEVICE", "empty"),)
    )
    proc = run_recipe(demo_lock(locked(repo, with_env)), venv)
    assert proc.returncode == 0, proc.stderr
    shown = in_env(
        venv,
        "import vllmfix, importlib.metadata as m; print(vllmfix.__file__, m.version('vllmfix'))",
    )
    assert shown.stdout.split() == [
        str((venv / "src" / "vllmfix" / "vllmfix" / "__init__.py").resolve()),
        "0.23.0",
    ]
    assert (venv / "src" / "vllmfix" / ".git").is_dir()


def msfix_lock(where: Path) -> Lock:
    """A lock of a pythonpath source (msfix, served from `where`), an activation variable and a
    `quiet` profile."""
    repo = backend_project(where / "msfix", "msfix", "0.1.0", importable=False)
    source = Source("msfix", repo.url, "main", "msfix", editable=False, pythonpath=True)
    return demo_lock(
        locked(repo, source),
        activation_env=(("DEMO_MODE", "on"),),
        profiles=(Profile("quiet", "quiet logs", (("TRANSFORMERS_VERBOSITY", "error"),)),),
    )


def bare_python(prefix: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The env's python from a shell with nothing sourced (`env -i PATH=/usr/bin:/bin`), as a cron
    job, a Ray worker or an IDE starts it; from /, whose '' on sys.path holds nothing importable."""
    assignments = [f"{k}={v}" for k, v in env.items()]
    return subprocess.run(
        [
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            *assignments,
            str(prefix / "bin" / "python"),
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        cwd="/",
    )


def test_pythonpath_source_imports_with_nothing_activated_and_the_hooks_keep_the_variables(
    tmp_path: Path, venv: Path
) -> None:
    """Before: msfix (importable only from its checkout) imported after the activation hook had set
    PYTHONPATH, and was ModuleNotFoundError from a plain shell while pip listed it."""
    lock = msfix_lock(tmp_path)
    proc = run_recipe(lock, venv, "--profile", "quiet")
    assert proc.returncode == 0, proc.stderr
    checkout = (venv / "src" / "msfix").resolve()
    shown = bare_python(venv, "import msfix; print(msfix.__version__, msfix.__file__)")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["0.1.0", str(checkout / "msfix" / "__init__.py")]
    # Where PYTHONPATH put it: after the script's directory, ahead of PYTHONPATH's own entries.
    order = bare_python(venv, "import sys; print(*sys.path[:3])", PYTHONPATH="/keep")
    assert order.stdout.split() == [str(checkout), "/keep"]  # '' first: printed as nothing

    code = "import os; print(os.environ.get('DEMO_MODE'), os.environ.get('TRANSFORMERS_VERBOSITY'))"
    assert in_env(venv, code).stdout.split() == ["None", "None"]
    assert in_env(venv, code, activate=True).stdout.split() == ["on", "error"]
    hooks = venv / "etc" / "conda"
    restored = subprocess.run(
        [
            "sh",
            "-c",
            f'PYTHONPATH=/keep; . "{hooks}/activate.d/envgen-demo.sh";'
            ' echo "$PYTHONPATH $DEMO_MODE";'
            f' . "{hooks}/deactivate.d/envgen-demo.sh"; echo "$PYTHONPATH ${{DEMO_MODE-unset}}"',
        ],
        capture_output=True,
        text=True,
    )
    assert restored.stdout.splitlines() == ["/keep on", "/keep unset"]


def test_a_pythonpath_source_wins_over_an_installed_distribution_of_its_import_name(
    tmp_path: Path, venv: Path
) -> None:
    """As on PYTHONPATH, the checkout comes before site-packages, where a wheel of another
    distribution installs a module of the same name; a lock whose source lost pythonpath = true
    removes the .pth file, and the wheel's module is what imports then."""
    lock = msfix_lock(tmp_path)
    assert run_recipe(lock, venv, uv=True).returncode == 0
    shadow = FixtureDist(
        "msfix-wheel", "9.9.9", files=(("msfix/__init__.py", "__version__ = '9.9.9'\n"),)
    )
    wheel = build_wheel(shadow, "py3-none-any", tmp_path / "wheels")
    subprocess.run(
        [find_uv_bin(), "pip", "install", "--no-config", "--offline", "--python",
         str(venv / "bin" / "python"), "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")},
    )  # fmt: skip
    site = bare_python(venv, "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    in_site = (
        "import importlib.machinery as m, sys; "
        "print(m.PathFinder.find_spec('msfix', [sys.argv[1]]).origin)"
    )
    found = subprocess.run(
        [venv / "bin" / "python", "-c", in_site, site.stdout.strip()],
        capture_output=True,
        text=True,
    )
    assert found.stdout.strip() == str(Path(site.stdout.strip()) / "msfix" / "__init__.py")

    code = "import msfix; print(msfix.__version__)"
    assert bare_python(venv, code).stdout.strip() == "0.1.0"

    plain = msgspec.structs.replace(
        lock.sources[0], source=msgspec.structs.replace(lock.sources[0].source, pythonpath=False)
    )
    again = run_recipe(msgspec.structs.replace(lock, sources=(plain,)), venv, uv=True)
    assert again.returncode == 0, again.stderr
    assert "removed" in again.stderr and not list(
        venv.glob("lib/python*/site-packages/envgen-*.pth")
    )
    assert bare_python(venv, code).stdout.strip() == "9.9.9"


def hooked_venv(factory: pytest.TempPathFactory, pip_from: Path) -> Path:
    """A venv the recipe ran on twice, with the `quiet` profile and then without (it stays on): a
    pythonpath source (msfix), an activation variable and the profile's, made once per session for
    the shells that source it (read only). The second run leaves bin/activate as the first left it:
    a re-run edits it once, not twice."""

    def build(path: Path) -> None:
        lock = msfix_lock(path)
        venv = fresh_venv(path / "env", pip_from)
        assert run_recipe(lock, venv, "--profile", "quiet", uv=True).returncode == 0
        activate = (venv / "bin" / "activate").read_bytes()
        assert run_recipe(lock, venv, uv=True).returncode == 0
        assert (venv / "bin" / "activate").read_bytes() == activate

    return build_once(factory, "recipe-run-hooked-venv", build) / "env"


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_venv_deactivate_restores_what_the_hooks_set(
    tmp_path_factory: pytest.TempPathFactory, pip_site_packages: Path, shell: str
) -> None:
    """Before: in a venv, `deactivate` left the hooks' variables set (conda runs deactivate.d; a
    venv's bin/activate knew nothing of it). The hooks leave PYTHONPATH alone: the pythonpath
    source is on sys.path through a .pth file. The venv the recipe made is the session's one
    (hooked_venv), each shell only sourcing its scripts."""
    venv = hooked_venv(tmp_path_factory, pip_site_packages)
    show = (
        "echo "
        '"${PYTHONPATH-unset}|${DEMO_MODE-unset}|${TRANSFORMERS_VERBOSITY-unset}|$(env | '
        'grep -c _ENVGEN_)"'
    )
    script = (
        f'SETUP; before=$({show}); . "{venv}/bin/activate"; {show};'
        # Sourcing activate again (as a user re-activating does) must not save a variable's old
        # value twice.
        f' . "{venv}/bin/activate"; {show}; deactivate; after=$({show}); echo "$after";'
        ' [ "$before" = "$after" ] && echo same'
    )
    for setup, keep in (
        ("export PYTHONPATH=/keep TRANSFORMERS_VERBOSITY=warning; unset DEMO_MODE", "/keep"),
        ("unset PYTHONPATH DEMO_MODE TRANSFORMERS_VERBOSITY", None),
    ):
        proc = subprocess.run(
            [shell, "-c", script.replace("SETUP", setup)], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        active, again, after, same = proc.stdout.splitlines()
        # the old value of TRANSFORMERS_VERBOSITY, when it had one
        saved = 1 if keep else 0
        assert active == again == f"{keep or 'unset'}|on|error|{saved}"
        assert after == ("/keep|unset|warning|0" if keep else "unset|unset|unset|0")
        assert same == "same"


def test_source_needing_cann_stops_when_set_env_is_missing_and_builds_with_it(
    tmp_path: Path, venv: Path
) -> None:
    home = tmp_path / "Ascend"
    repo = backend_project(
        tmp_path / "ascendfix", "ascendfix", require_env={"ASCEND_HOME_PATH": str(home)}
    )
    source = Source(
        "ascendfix", repo.url, "main", "ascendfix", needs_cann=True, build_isolation=False
    )
    missing = tmp_path / "nowhere" / "set_env.sh"
    lock = demo_lock(locked(repo, source), cann=Cann("8.5.0", str(missing)))

    proc = run_recipe(lock, venv)
    assert proc.returncode != 0
    assert f"source ascendfix needs CANN, but {missing} does not exist" in proc.stderr
    assert "ASCEND_SET_ENV" in proc.stderr

    skipped = run_recipe(lock, venv, "--skip-cann")
    assert skipped.returncode == 0, skipped.stderr
    assert "ascendfix: skipped (needs CANN; --skip-cann)" in skipped.stderr
    assert in_env(venv, "import ascendfix").returncode != 0

    set_env = tmp_path / "cann" / "set_env.sh"
    set_env.parent.mkdir()
    # Like CANN's own script: exports the toolkit home and reads variables that may be unset.
    set_env.write_text(
        f'export ASCEND_HOME_PATH="{home}"\nexport LD_LIBRARY_PATH="$home_unset:$LD_LIBRARY_PATH"\n'
    )
    built = run_recipe(lock, venv, env={"ASCEND_SET_ENV": str(set_env)})
    assert built.returncode == 0, built.stderr
    assert in_env(venv, "import ascendfix").returncode == 0
    hook = (venv / "etc" / "conda" / "activate.d" / "envgen-demo.sh").read_text()
    assert f". '{set_env}'" in hook


def test_several_cann_scripts_are_sourced_in_order(tmp_path: Path, venv: Path) -> None:
    """CANN 9's toolkit script, then NNAL's: the build sees what both set, the second seeing the
    first."""
    home = tmp_path / "Ascend"
    toolkit, nnal = (
        tmp_path / "ascend-toolkit" / "set_env.sh",
        tmp_path / "nnal" / "atb" / "set_env.sh",
    )
    repo = backend_project(
        tmp_path / "ascendfix",
        "ascendfix",
        require_env={"ASCEND_HOME_PATH": str(home), "ATB_HOME_PATH": f"{home}/atb"},
    )
    source = Source(
        "ascendfix", repo.url, "main", "ascendfix", needs_cann=True, build_isolation=False
    )
    lock = demo_lock(locked(repo, source), cann=Cann("9.1.0", f"{toolkit}:{nnal}"))
    toolkit.parent.mkdir(parents=True)
    toolkit.write_text(f'export ASCEND_HOME_PATH="{home}"\n')

    proc = run_recipe(lock, venv, uv=True)
    assert proc.returncode != 0
    assert f"source ascendfix needs CANN, but {nnal} does not exist" in proc.stderr

    nnal.parent.mkdir(parents=True)
    # unset unless the toolkit's came first
    nnal.write_text('export ATB_HOME_PATH="$ASCEND_HOME_PATH/atb"\n')
    built = run_recipe(lock, venv, uv=True)
    assert built.returncode == 0, built.stderr
    order = [line for line in built.stderr.splitlines() if "sourcing CANN's environment" in line]
    assert [line.rsplit(" ", 1)[-1] for line in order] == [str(toolkit), str(nnal)]
    assert in_env(venv, "import ascendfix").returncode == 0
    hook = (venv / "etc" / "conda" / "activate.d" / "envgen-demo.sh").read_text().splitlines()
    assert hook.index(f". '{toolkit}'") + 1 == hook.index(f". '{nnal}'")


@pytest.fixture(scope="session")
def submodules(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[NestedSubmodules, LockedSource]:
    """The session's nested submodules (shared_nested_submodules: the recipe only clones and
    fetches them) and their parent as `envgen lock` pins it, resolved once per worker into a git
    cache of the worker's own; the tests below only read both."""
    repos = shared_nested_submodules(tmp_path_factory)
    return repos, locked_parent(repos, tmp_path_factory.mktemp("submodules-cache"))


def test_submodules_are_checked_out_recursively_at_the_recorded_commits(
    submodules: tuple[NestedSubmodules, LockedSource], venv: Path
) -> None:
    """The parent's commit fixes its submodules (gitlinks): later commits on their branches stay
    out. Their URLs are relative, so they resolve against the parent's locked URL as they did when
    locking."""
    repos, parent = submodules
    # the fixtures are file:// remotes, which git refuses for submodules unless allowed
    allow = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "protocol.file.allow",
        "GIT_CONFIG_VALUE_0": "always",
    }

    assert parent.submodules == repos.recorded
    proc = run_recipe(demo_lock(parent), venv, env=allow, uv=True)
    assert proc.returncode == 0, proc.stderr
    checkout = venv / "src" / "parentpkg"
    assert (checkout / "csrc" / "kernels" / "kernel.txt").read_text() == "locked\n"
    assert (
        checkout / "csrc" / "kernels" / "third_party" / "grand" / "grand.txt"
    ).read_text() == "locked\n"
    kernels = GitRepo(checkout / "csrc" / "kernels")
    assert kernels.rev() == repos.child_locked
    assert (
        GitRepo(checkout / "csrc" / "kernels" / "third_party" / "grand").rev() == repos.grand_locked
    )
    assert in_env(venv, "import parentpkg").returncode == 0
    again = run_recipe(demo_lock(parent), venv, env=allow, uv=True)
    assert again.returncode == 0, again.stderr

    plain = run_recipe(
        demo_lock(msgspec.structs.replace(parent, submodules=())), venv, env=allow, uv=True
    )
    assert plain.returncode == 0, plain.stderr
    assert (
        "submodules at the commits" in proc.stderr
        and "submodules at the commits" not in plain.stderr
    )


def test_a_submodule_commit_the_tree_does_not_record_fails_the_recipe(
    submodules: tuple[NestedSubmodules, LockedSource], venv: Path
) -> None:
    """A lock whose recorded submodule commit was altered (or a tree whose gitlink differs from the
    lock's) stops the recipe before pip runs, naming the submodule and both commits."""
    repos, parent = submodules
    allow = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "protocol.file.allow",
        "GIT_CONFIG_VALUE_0": "always",
    }
    moved = repos.child.rev()
    kernels, grand = parent.submodules
    tampered = msgspec.structs.replace(
        parent, submodules=(msgspec.structs.replace(kernels, commit=moved), grand)
    )
    proc = run_recipe(demo_lock(tampered), venv, env=allow)
    assert proc.returncode != 0
    assert (
        f"csrc/kernels {repos.child_locked}" in proc.stderr
        and f"csrc/kernels {moved}" in proc.stderr
    )
    assert "are not those the lock recorded" in proc.stderr and "pip install" not in proc.stderr
    assert in_env(venv, "import parentpkg").returncode != 0

    missing = run_recipe(
        demo_lock(msgspec.structs.replace(parent, submodules=(kernels,))), venv, env=allow
    )
    assert missing.returncode != 0 and "csrc/kernels/third_party/grand" in missing.stderr


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_a_re_run_keeps_the_profiles_an_earlier_run_enabled_until_dropped(
    tmp_path: Path, venv: Path
) -> None:
    """Before: a re-run without --profile silently dropped the profile the first run had enabled."""
    repo = backend_project(tmp_path / "p", "p")
    quiet = Profile("quiet", "quiet logs", (("TRANSFORMERS_VERBOSITY", "error"),))
    loud = Profile("loud", "loud logs", (("DEMO_LOUD", "1"),))
    lock = demo_lock(locked(repo, Source("p", repo.url, "main", "p")), profiles=(quiet, loud))
    code = "import os; print(os.environ.get('TRANSFORMERS_VERBOSITY'), os.environ.get('DEMO_LOUD'))"
    first = run_recipe(lock, venv, "--profile", "quiet", uv=True)
    assert first.returncode == 0, first.stderr
    assert in_env(venv, code, activate=True).stdout.split() == ["error", "None"]
    again = run_recipe(lock, venv, uv=True)
    assert again.returncode == 0 and "profiles: quiet" in again.stderr
    assert in_env(venv, code, activate=True).stdout.split() == ["error", "None"]
    more = run_recipe(lock, venv, "--profile", "loud", uv=True)
    assert more.returncode == 0 and in_env(venv, code, activate=True).stdout.split() == [
        "error",
        "1",
    ]
    fewer = run_recipe(lock, venv, "--no-profile", "quiet", uv=True)
    assert fewer.returncode == 0 and "profiles: loud" in fewer.stderr
    assert in_env(venv, code, activate=True).stdout.split() == ["None", "1"]
    bad = run_recipe(lock, venv, "--no-profile", "nope", uv=True)
    assert bad.returncode != 0 and "unknown profile nope (known: quiet loud)" in bad.stderr


def test_second_run_changes_nothing(tmp_path: Path, venv: Path) -> None:
    one = backend_project(tmp_path / "one", "one")
    two = backend_project(tmp_path / "two", "two", importable=False)
    lock = demo_lock(
        locked(one, Source("one", one.url, "main", "one")),
        locked(two, Source("two", two.url, "main", "two", editable=False, pythonpath=True)),
    )
    first = run_recipe(lock, venv, uv=True)
    assert first.returncode == 0, first.stderr
    assert "one: pip install" in first.stderr and "two: pip install" in first.stderr
    before = _snapshot(venv)
    second = run_recipe(lock, venv, uv=True)
    assert second.returncode == 0, second.stderr
    assert ": pip install" not in second.stderr
    assert "one: already at" in second.stderr and "two: already installed at" in second.stderr
    assert _snapshot(venv) == before
    activate = (venv / "bin" / "activate").read_text()
    assert activate.count("# >>> envgen demo >>>") == 2  # in deactivate (), and at the end


def test_cherry_picks_reproduce_the_locked_head_and_a_wrong_tree_fails(
    tmp_path: Path, venv: Path
) -> None:
    repo = backend_project(tmp_path / "picky", "picky", "1.0.0")
    base = repo.rev()
    fix = side_commit(repo, "fix", {"picky/fix.py": "FIXED = True\n"}, "a fix", start=base)
    # What the lock records: the commit and tree of the pick, applied as envgen.cherry_picks says.
    scratch = GitRepo(tmp_path / "scratch")
    subprocess.run(["git", "clone", "-q", repo.url, str(scratch.path)], check=True)
    scratch.git("checkout", "-q", "--detach", base)
    scratch.git("cherry-pick", *PICK_FLAGS, fix, env=PICK_ENV)
    head, tree = scratch.rev(), scratch.git("rev-parse", "HEAD^{tree}")
    source = Source("picky", repo.url, "main", "picky", cherry_picks=(fix,))

    wrong = demo_lock(LockedSource(source, base, tree="0" * 40))
    failed = run_recipe(wrong, venv, uv=True)
    assert failed.returncode != 0 and f"the lock recorded {'0' * 40}" in failed.stderr

    good = demo_lock(LockedSource(source, base, tree=tree, picked=(head,)))
    proc = run_recipe(good, venv, "--src", str(tmp_path / "elsewhere"), uv=True)
    assert proc.returncode == 0, proc.stderr
    checkout = tmp_path / "elsewhere" / "picky"
    assert (
        subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        == head
    )
    assert in_env(venv, "import picky.fix; print(picky.fix.FIXED)").stdout.strip() == "True"


def test_a_failed_checkout_is_retried_in_place(tmp_path: Path, venv: Path) -> None:
    """After a conflicting pick or a tree the lock does not match, a rerun works on the same
    --src."""
    repo = backend_project(tmp_path / "clash", "clash", "1.0.0")
    start = repo.rev()
    theirs = side_commit(
        repo, "theirs", {"clash/extra.py": "SIDE = 'theirs'\n"}, "theirs", start=start
    )
    ours = repo.commit({"clash/extra.py": "SIDE = 'ours'\n"}, "ours")
    source = Source("clash", repo.url, "main", "clash", cherry_picks=(theirs,))
    conflicting = demo_lock(LockedSource(source, ours, tree="0" * 40))
    for _ in range(2):
        failed = run_recipe(conflicting, venv, uv=True)
        assert (
            failed.returncode != 0
            and f"clash: cherry-pick of {theirs} onto {ours} failed" in failed.stderr
        )
        assert "holds other work" not in failed.stderr

    # The lock is fixed (re-locked at a commit the pick applies to) after a wrong tree was recorded
    # for it.
    plain = Source("clash", repo.url, "main", "clash")
    failed = run_recipe(demo_lock(LockedSource(plain, start, tree="0" * 40)), venv, uv=True)
    assert failed.returncode != 0 and f"the lock recorded {'0' * 40}" in failed.stderr
    proc = run_recipe(demo_lock(locked(repo, plain)), venv, uv=True)
    assert proc.returncode == 0, proc.stderr
    assert in_env(venv, "import clash.extra; print(clash.extra.SIDE)").stdout.strip() == "ours"


def test_server_refusing_sha_fetches_falls_back_to_full_fetch(tmp_path: Path, venv: Path) -> None:
    repo = backend_project(tmp_path / "strict", "strict")
    repo.git("config", "uploadpack.allowReachableSHA1InWant", "false")
    repo.git("config", "uploadpack.allowAnySHA1InWant", "false")
    old = repo.rev()
    repo.commit({"strict/later.py": "X = 1\n"}, "later")
    lock = demo_lock(LockedSource(Source("strict", repo.url, "main", "strict"), old))
    proc = run_recipe(
        lock,
        venv,
        env={
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "protocol.version",
            "GIT_CONFIG_VALUE_0": "0",
        },
    )
    assert proc.returncode == 0, proc.stderr
    assert "refused a fetch of" in proc.stderr
    checkout = venv / "src" / "strict"
    assert (
        subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        == old
    )


def test_edited_checkout_is_never_clobbered_by_a_new_lock(tmp_path: Path, venv: Path) -> None:
    repo = backend_project(tmp_path / "mine", "mine")
    first = demo_lock(locked(repo, Source("mine", repo.url, "main", "mine")))
    assert run_recipe(first, venv, uv=True).returncode == 0
    work = venv / "src" / "mine" / "mine" / "__init__.py"
    work.write_text("__version__ = 'my edits'\n")
    repo.commit({"mine/new.py": "\n"}, "upstream moved")
    proc = run_recipe(
        demo_lock(locked(repo, Source("mine", repo.url, "main", "mine"))), venv, uv=True
    )
    assert proc.returncode != 0 and "holds other work" in proc.stderr
    assert work.read_text() == "__version__ = 'my edits'\n"


def test_an_untouched_checkout_follows_a_new_lock(tmp_path: Path, venv: Path) -> None:
    repo = backend_project(tmp_path / "moving", "moving", "1.0.0")
    source = Source("moving", repo.url, "main", "moving")
    assert run_recipe(demo_lock(locked(repo, source)), venv, uv=True).returncode == 0
    config = json.loads((repo.path / "fixture.json").read_text())
    config["version"] = "1.1.0"
    repo.commit(
        {
            "moving/__init__.py": '__version__ = "1.1.0"\n',
            "fixture.json": json.dumps(config, indent=2),
        },
        "release 1.1.0",
    )
    proc = run_recipe(demo_lock(locked(repo, source)), venv, uv=True)
    assert proc.returncode == 0, proc.stderr
    assert "moving: pip install" in proc.stderr
    shown = in_env(
        venv,
        "import moving, importlib.metadata as m; print(moving.__version__, m.version('moving'))",
    )
    assert shown.stdout.split() == ["1.1.0", "1.1.0"]
