"""render_recipe: golden output, valid POSIX sh, --help, arguments and quoting (no git, no pip)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import venv
from pathlib import Path

import msgspec
import pytest
from envgen.model import Cann, Index, Lock, LockedSource, Profile, Source, Submodule
from envgen.recipe.render import hook_prefix, install_key, render_recipe

from tests.support.builders import make_lock

GOLDEN = Path(__file__).parent.parent / "data" / "golden"
SHA = "0123456789abcdef0123456789abcdef01234567"
PICK = "89abcdef0123456789abcdef0123456789abcdef"


def a5_like_lock() -> Lock:
    """The shape of the A5 lock: env vars, no build isolation, a build index with credentials, CANN,
    profiles."""
    sources = (
        LockedSource(
            Source(
                "vllm",
                "https://github.com/vllm-project/vllm.git",
                "v0.23.0",
                "vllm",
                env=(("VLLM_TARGET_DEVICE", "empty"),),
            ),
            commit="a" * 40,
            tree="b" * 40,
        ),
        LockedSource(
            Source(
                "vllm-ascend",
                "https://github.com/vllm-project/vllm-ascend.git",
                "releases/v0.23.0",
                "vllm_ascend",
                build_isolation=False,
                needs_cann=True,
                build_index="triton-ascend",
                env=(("SOC_VERSION", "ascend950dt_9582"),),
                cherry_picks=(PICK,),
            ),
            commit=SHA,
            tree="c" * 40,
            picked=("d" * 40,),
            submodules=(
                Submodule(
                    "csrc/third_party/catlass", "https://gitcode.com/cann/catlass.git", "9" * 40
                ),
                Submodule(
                    "csrc/third_party/catlass/docs theme",
                    "https://github.com/x/theme.git",
                    "8" * 40,
                ),
            ),
        ),
        LockedSource(
            Source(
                "mindspeed",
                "https://gitcode.com/Ascend/MindSpeed.git",
                SHA,
                "mindspeed",
                pythonpath=True,
            ),
            commit=SHA,
            tree="e" * 40,
        ),
        LockedSource(
            Source(
                "transferqueue",
                "https://github.com/Ascend/TransferQueue.git",
                "main",
                "TransferQueue",
                editable=False,
                origin="verl:requirements-npu.txt:7",
            ),
            commit="f" * 40,
        ),
    )
    return make_lock(
        "a5",
        platforms=("linux-aarch64", "linux-64"),
        sources=sources,
        indexes=(
            Index("pypi", "https://pypi.org/simple"),
            Index(
                "triton-ascend",
                "https://user:s3cret@triton-ascend.osinfra.cn/pypi/simple/",
                True,
                "triton-ascend.osinfra.cn",
            ),
        ),
        cann=Cann("pending", "/usr/local/Ascend/cann/set_env.sh"),
        activation_env=(("TOKENIZERS_PARALLELISM", "false"),),
        profiles=(
            Profile(
                "checkpoint-engine",
                "HCCL whitelist",
                (
                    ("HCCL_WHITELIST_DISABLE", "0"),
                    ("HCCL_WHITELIST_FILE", "/path/to/whitelist.json"),
                ),
            ),
            Profile(
                "quiet-transformers",
                "filter transformers' warnings",
                (("TRANSFORMERS_VERBOSITY", "error"),),
            ),
        ),
    )


def minimal_lock() -> Lock:
    return make_lock("tiny", input_hash="1" * 64)


@pytest.mark.parametrize(("name", "lock"), [("a5", a5_like_lock()), ("minimal", minimal_lock())])
def test_rendering_matches_golden(name: str, lock: Lock) -> None:
    """REGEN_GOLDEN=1 rewrites the golden files (as the other golden tests do): review the diff."""
    if os.environ.get("REGEN_GOLDEN") == "1":
        (GOLDEN / f"recipe.{name}.sh").write_text(render_recipe(lock))
    assert render_recipe(lock) == (GOLDEN / f"recipe.{name}.sh").read_text()


def test_rendering_is_deterministic_and_free_of_credentials() -> None:
    text = render_recipe(a5_like_lock())
    assert text == render_recipe(a5_like_lock())
    assert "s3cret" not in text and "user:" not in text
    assert (
        "--extra-index-url https://triton-ascend.osinfra.cn/pypi/simple/ "
        "--trusted-host triton-ascend.osinfra.cn" in text
    )


def test_source_credentials_stay_out_of_the_recipe() -> None:
    """git's own credential helpers supply them at clone time; the recipe file is committed."""
    lock = a5_like_lock()
    first = lock.sources[0]
    private = msgspec.structs.replace(
        first.source, url="https://ci-bot:t0ken@gitcode.com/Ascend/MindSpeed.git"
    )
    text = render_recipe(
        msgspec.structs.replace(lock, sources=(msgspec.structs.replace(first, source=private),))
    )
    assert "t0ken" not in text and "ci-bot" not in text
    assert "checkout vllm https://gitcode.com/Ascend/MindSpeed.git " in text


@pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")
@pytest.mark.parametrize("lock", [a5_like_lock(), minimal_lock()], ids=["a5", "minimal"])
def test_recipe_parses_under_dash(lock: Lock, tmp_path: Path) -> None:
    script = tmp_path / "install.sh"
    script.write_text(render_recipe(lock))
    proc = subprocess.run(["dash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _run(
    script: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(script), *args],
        capture_output=True,
        text=True,
        env=env or {"PATH": "/usr/bin:/bin"},
    )


def test_help_explains_options_sources_and_profiles(tmp_path: Path) -> None:
    script = tmp_path / "install.sh"
    script.write_text(render_recipe(a5_like_lock()))
    proc = _run(script, "--help")
    assert proc.returncode == 0
    for expected in (
        "--prefix DIR",
        "--src DIR",
        "--profile NAME",
        "--skip-cann",
        "checkpoint-engine",
        "vllm-ascend",
        "needs CANN",
        "ASCEND_SET_ENV",
        "transferqueue",
        "plain",
        # The researcher's path the README gives: conda-lock first, then this script in the
        # activated env.
        "conda-lock install -n NAME locks/a5.yml",
        "sh locks/a5.install.sh",
    ):
        assert expected in proc.stdout


def test_no_prefix_is_an_error_naming_the_fix(tmp_path: Path) -> None:
    script = tmp_path / "install.sh"
    script.write_text(render_recipe(minimal_lock()))
    proc = _run(script)
    assert proc.returncode != 0
    assert "pass --prefix DIR, or activate a conda env or venv" in proc.stderr


def test_unknown_profile_and_argument_are_errors(tmp_path: Path) -> None:
    script = tmp_path / "install.sh"
    script.write_text(render_recipe(a5_like_lock()))
    proc = _run(script, "--profile", "nope")
    assert (
        proc.returncode != 0
        and "unknown profile nope (known: checkpoint-engine quiet-transformers)" in proc.stderr
    )
    proc = _run(script, "--frobnicate")
    assert proc.returncode != 0 and "unknown argument --frobnicate" in proc.stderr


def test_prefix_without_python_is_an_error(tmp_path: Path) -> None:
    script = tmp_path / "install.sh"
    script.write_text(render_recipe(minimal_lock()))
    proc = _run(script, "--prefix", str(tmp_path))
    assert proc.returncode != 0 and f"no python at {tmp_path.resolve()}/bin/python" in proc.stderr


def test_a_python_of_another_prefix_is_refused(tmp_path: Path) -> None:
    """A stand-in python (here a symlink to the host's) would make pip install outside the env."""
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(shutil.which("python3") or "/usr/bin/python3")
    script = tmp_path / "install.sh"
    script.write_text(render_recipe(minimal_lock()))
    proc = _run(script, "--prefix", str(prefix))
    assert proc.returncode != 0
    assert "does not run in" in proc.stderr and "pip would install elsewhere" in proc.stderr


def test_missing_cann_stops_before_any_clone_naming_the_source(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    venv.create(prefix, with_pip=False)
    script = tmp_path / "install.sh"
    script.write_text(render_recipe(a5_like_lock()))
    missing = tmp_path / "no-cann" / "set_env.sh"
    proc = _run(
        script,
        "--prefix",
        str(prefix),
        env={"PATH": "/usr/bin:/bin", "ASCEND_SET_ENV": str(missing)},
    )
    assert proc.returncode != 0
    assert f"source vllm-ascend needs CANN, but {missing} does not exist" in proc.stderr
    assert not (prefix / "src" / "vllm").exists()


def test_quoting_survives_hostile_values(tmp_path: Path) -> None:
    """Values with quotes, `$` and spaces reach the hook verbatim and are never executed."""
    value = 'it\'s $(touch pwned) `x` "q" a b'
    lock = make_lock("odd", input_hash="2" * 64, activation_env=(("ODD", value),))
    script = tmp_path / "install.sh"
    script.write_text(render_recipe(lock))
    prefix = tmp_path / "env"
    venv.create(prefix, with_pip=False)
    proc = _run(script, "--prefix", str(prefix))
    assert proc.returncode == 0, proc.stderr
    hook = prefix / "etc" / "conda" / "activate.d" / "envgen-odd.sh"
    shown = subprocess.run(
        ["sh", "-c", f'. "{hook}"; printf %s "$ODD"'], capture_output=True, text=True, cwd=tmp_path
    )
    assert shown.stdout == value
    assert not (tmp_path / "pwned").exists()


def test_install_key_changes_with_what_shapes_the_install() -> None:
    lock = a5_like_lock()
    base = lock.sources[0]
    moved = LockedSource(base.source, "9" * 40, tree=base.tree)
    assert install_key(lock, base) == install_key(lock, base)
    assert install_key(lock, base) != install_key(lock, moved)


def test_hook_prefix_is_a_valid_variable_prefix() -> None:
    assert hook_prefix("a2a3-vllm") == "_ENVGEN_A2A3_VLLM_OLD_"


def _pip_install(tmp_path: Path, shell: str, uv: bool, *args: str) -> list[str]:
    """What `pip_install ARGS` of the recipe runs, as a stand-in for the env's python (or uv)
    records it: its argv, one per line, then $src and $uv as that command's environment has them;
    then the script's own $src and $uv after the call."""
    stub = tmp_path / "tool"
    stub.write_text('#!/bin/sh\nprintf "%s\\n" "$0" "$@" "src=${src-unset}" "uv=${uv-unset}"\n')
    stub.chmod(0o755)
    functions = Path(__file__).parents[2] / "generator" / "envgen" / "recipe" / "functions.sh"
    script = (
        f". {functions}\npython={stub}\nuv={stub if uv else ''}\nsrc=/checkouts\n"
        'pip_install "$@"\nprintf "%s\\n" "after src=$src uv=$uv"\n'
    )
    proc = subprocess.run([shell, "-c", script, "sh", *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize("shell", [s for s in ("dash", "bash") if shutil.which(s)])
def test_a_sources_build_variables_reach_only_the_install_command(
    tmp_path: Path, shell: str
) -> None:
    """A lock's source env names any variable, the recipe's own among them (`src`, `uv`): it must
    reach pip or uv's environment and never the script's, so it can pick neither the command run
    nor the directory installed."""
    stub = str(tmp_path / "tool")
    pairs = ("src=/elsewhere", "uv=/bin/false", "VLLM_TARGET_DEVICE=empty")
    seen = _pip_install(tmp_path, shell, False, *pairs, "--", "--no-deps", "-e", "/checkouts/x")
    assert seen == [
        stub, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "-e",
        "/checkouts/x", "src=/elsewhere", "uv=/bin/false", "after src=/checkouts uv=",
    ]  # fmt: skip


@pytest.mark.parametrize("shell", [s for s in ("dash", "bash") if shutil.which(s)])
def test_with_uv_pips_own_flags_become_uvs(tmp_path: Path, shell: str) -> None:
    stub = str(tmp_path / "tool")
    args = ("--", "-q", "--no-input", "--trusted-host", "h.example", "--no-index", "-r", "req.txt")
    seen = _pip_install(tmp_path, shell, True, *args)
    assert seen[:-3] == [
        stub, "pip", "install", "--no-config", "--python", stub, "-q",
        "--allow-insecure-host", "h.example", "--no-index", "--offline", "-r", "req.txt",
    ]  # fmt: skip
    assert seen[-1] == f"after src=/checkouts uv={stub}"


def test_the_usage_counts_one_cherry_pick_and_one_submodule_in_the_singular() -> None:
    """Before: "1 cherry-picks"."""
    lock = a5_like_lock()
    ascend = next(s for s in lock.sources if s.source.name == "vllm-ascend")
    one = msgspec.structs.replace(ascend, submodules=ascend.submodules[:1])
    sources = tuple(one if s is ascend else s for s in lock.sources)
    text = render_recipe(msgspec.structs.replace(lock, sources=sources))
    assert "(editable, needs CANN, 1 cherry-pick, 1 submodule)" in text
    assert "1 cherry-picks" not in render_recipe(lock)
    assert "2 submodules" in render_recipe(lock)


FUNCTIONS = Path(__file__).parents[2] / "generator" / "envgen" / "recipe" / "functions.sh"


def _write_pth(prefix: Path, *dirs: str) -> subprocess.CompletedProcess[str]:
    """The recipe's add_pythonpath for each of `dirs`, then write_pth, with the env at `prefix`."""
    script = (
        f'. "{FUNCTIONS}"\nENVGEN_ENV=demo\npython="{prefix}/bin/python"\nuv=\npth_dirs=\n'
        'for dir; do add_pythonpath "$dir"; done\nwrite_pth\n'
    )
    return subprocess.run(["sh", "-c", script, "sh", *dirs], capture_output=True, text=True)


def _pth(prefix: Path) -> Path:
    (site,) = prefix.glob("lib/python*/site-packages")
    return site / "envgen-demo.pth"


def test_the_pth_file_puts_the_pythonpath_checkouts_first_and_goes_with_the_last_of_them(
    tmp_path: Path,
) -> None:
    """site-packages/envgen-ENV.pth: one `import` line inserting the checkouts at the front of
    sys.path, as PYTHONPATH did (after the script's directory: '' for -c); a second write changes
    nothing; no pythonpath source left, no file."""
    prefix = tmp_path / "env"
    venv.create(prefix, with_pip=False)
    dirs = (str(tmp_path / "src" / "megatron-lm"), str(tmp_path / "src dir" / 'mind"speed' / "x"))
    proc = _write_pth(prefix, *dirs)
    assert proc.returncode == 0, proc.stderr
    pth = _pth(prefix)
    comment, line = pth.read_text().splitlines()
    assert comment.startswith("# envgen demo: ")
    assert line == (
        f"import sys; sys.path[:] = list(dict.fromkeys(['{dirs[0]}', '{dirs[1]}'] + sys.path))"
    )
    shown = subprocess.run(
        [prefix / "bin" / "python", "-c", "import sys; print(sys.path)"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": "/keep"},
    )
    path = ast.literal_eval(shown.stdout)
    assert path[:4] == ["", *dirs, "/keep"]
    assert path.count(dirs[0]) == 1
    written = pth.stat().st_mtime_ns, pth.stat().st_ino
    assert _write_pth(prefix, *dirs).returncode == 0
    assert (pth.stat().st_mtime_ns, pth.stat().st_ino) == written

    gone = _write_pth(prefix)
    assert gone.returncode == 0, gone.stderr
    assert not pth.exists() and "removed" in gone.stderr


@pytest.mark.parametrize(
    "bad", ["/src/it's", "/src/back\\slash", "/src/new\nline", "/src/tab\there", "/src/caf\u00e9"]
)
def test_a_checkout_path_that_is_no_plain_string_literal_is_refused(
    tmp_path: Path, bad: str
) -> None:
    """A quote or backslash would end or escape the literal, a line break would start a line that
    site.py may run: refused, naming the fix, and no .pth is written."""
    prefix = tmp_path / "env"
    venv.create(prefix, with_pip=False)
    proc = _write_pth(prefix, "/src/fine", bad)
    assert proc.returncode != 0
    assert f"cannot put {bad} on the env's python path" in proc.stderr
    assert "no quote ('), backslash or newline" in proc.stderr and "--src DIR" in proc.stderr
    assert not _pth(prefix).exists()


def test_a_src_directory_with_a_quote_is_refused_before_any_clone(tmp_path: Path) -> None:
    """The checkouts of pythonpath sources lie in --src: a name there a .pth cannot hold stops the
    recipe first."""
    prefix = tmp_path / "env"
    venv.create(prefix, with_pip=False)
    script = tmp_path / "install.sh"
    script.write_text(render_recipe(a5_like_lock()))
    src = tmp_path / "it's"
    proc = _run(script, "--prefix", str(prefix), "--src", str(src), "--skip-cann")
    assert proc.returncode != 0
    assert f"cannot put {src} on the env's python path" in proc.stderr
    assert not any(src.iterdir())


def test_the_recipe_names_pythonpath_checkouts_for_the_pth_and_the_hook_no_pythonpath() -> None:
    text = render_recipe(a5_like_lock())
    assert 'add_pythonpath "$src"/mindspeed\n' in text
    assert text.count("add_pythonpath ") == 1 + text.count("add_pythonpath() {")
    assert "write_pth\n" in render_recipe(minimal_lock())  # removes a file an earlier lock left
    hook = text[text.index("activate_hook() {") :]
    assert "PYTHONPATH" not in hook[: hook.index("\n}\n")]
