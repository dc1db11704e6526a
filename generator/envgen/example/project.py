"""The bundled A5-shaped example (data in example/data/): its artifacts, servers and project, for
`envgen demo`."""

from __future__ import annotations

import shutil
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from envgen.errors import InputError
from envgen.example.condapkgs import CondaPackage, demo_packages, write_channel
from envgen.example.gitrepos import GitRepo, side_commit
from envgen.example.http import serve_directory
from envgen.example.releases import build_releases
from envgen.example.srcprojects import backend_project, npu_project
from envgen.example.wheels import FixtureDist, build_index

EXAMPLE_DIR = Path(__file__).resolve().parent / "data"
GITHUB = "https://github.com/envgen-demo/"
ENV = "demo"

# The python the example is made for: its matrix asks for python 3.11.*, its platform wheels are
# cp311, and its conda python launches the interpreter running envgen, which must be a 3.11 then.
PYTHON = (3, 11)
_TAG_AARCH64 = "cp311-cp311-manylinux_2_28_aarch64"
_TAG_X86_64 = "cp311-cp311-manylinux_2_28_x86_64"

# "pypi": the main index, with a decoy demo-triton of a higher version than the one on "extra".
PYPI_DISTS = (
    FixtureDist(
        "demo-torch", "2.10.0", tags=(_TAG_AARCH64, _TAG_X86_64), requires=("demo-numpy>=1.26",)
    ),
    FixtureDist(
        "demo-torch", "2.10.1", tags=(_TAG_AARCH64, _TAG_X86_64), requires=("demo-numpy>=1.26",)
    ),
    FixtureDist("demo-numpy", "1.26.4", tags=(_TAG_AARCH64, _TAG_X86_64)),
    FixtureDist("demo-transformers", "4.57.6", requires=("demo-tokenizers>=0.20",)),
    FixtureDist("demo-transformers", "5.5.4", requires=("demo-tokenizers>=0.21",)),
    FixtureDist("demo-tokenizers", "0.21.0"),
    # The newest demo-peft needs transformers 5: the override on transformers makes the resolver
    # keep 0.17.0.
    FixtureDist("demo-peft", "0.17.0", requires=("demo-transformers>=4.50",)),
    FixtureDist("demo-peft", "0.18.0", requires=("demo-transformers>=5.0",)),
    FixtureDist("demo-bridge", "0.1.0"),
    FixtureDist(
        "demo-bridge", "0.2.0", requires=("demo-x86-helper ; platform_machine == 'x86_64'",)
    ),
    FixtureDist("demo-x86-helper", "1.0.0", tags=(_TAG_X86_64,)),
    FixtureDist("demo-triton", "9.9.9"),
    # Declared by the serving source, left out by the matrix on purpose (the SGLang route's timm).
    FixtureDist("demo-timm", "1.0.16", requires=("demo-torch",)),
    # Asked only by the serving source's extra.
    FixtureDist("demo-sampler", "0.3.0"),
)
# Where the pypi server's root serves the release archives (the matrix names them by URL).
RELEASES = "releases"
EXTRA_DISTS = (FixtureDist("demo-triton", "3.2.2", tags=(_TAG_AARCH64, _TAG_X86_64)),)


@dataclass(frozen=True)
class Example:
    """A served example: the project to run envgen in, the git config that maps GitHub to local
    repos."""

    root: Path
    gitconfig: Path
    repos: dict[str, GitRepo]
    pypi_url: str
    extra_url: str
    channel_url: str

    @property
    def matrix(self) -> Path:
        return self.root / "env-templates" / f"{ENV}.toml"


def build_repos(where: Path) -> dict[str, GitRepo]:
    """The example's upstream repositories, with deterministic commits (so the matrix can name a
    sha)."""
    rollout = backend_project(
        where / "rollout", "rollout", "0.23.0", require_env={"ROLLOUT_TARGET_DEVICE": "empty"}
    )
    rollout.commit({"requirements.txt": "demo-transformers>=5.0\ndemo-bridge\n"}, "requirements")
    rollout.tag("v0.23.0", message="rollout 0.23.0")

    trainer = backend_project(where / "trainer", "trainer", "0.12.0", importable=False)
    trainer.branch("core_r0.12.0")

    post = backend_project(where / "post", "post", "0.7.0")
    post.commit(
        {
            "requirements-npu.txt": (
                "demo-triton==3.2.2\n"
                f"demo-queue @ git+{GITHUB}queue.git@main\n"
                "--extra-index-url https://example.invalid/simple\n"
            )
        },
        "npu requirements",
    )
    side_commit(
        post, "fix", {"post/fix.py": "FIXED = True\n"}, "fix: a patch not yet merged", start="main"
    )

    queue = backend_project(where / "queue", "demo-queue", "0.1.0", module="demo_queue")
    serving = npu_project(
        where / "serving",
        "demo-serving",
        "0.5.10",
        subdirectory="python",
        dependencies=("demo-torch", "demo-timm==1.0.16"),
        optional={"srt_npu": ("demo-sampler",)},
    )
    serving.tag("v0.5.10", message="serving 0.5.10")
    return {
        "rollout": rollout,
        "trainer": trainer,
        "post": post,
        "queue": queue,
        "serving": serving,
    }


def write_gitconfig(path: Path, repos: dict[str, GitRepo]) -> Path:
    """A git config sending the canonical GitHub URLs to the local repositories (a user's mirror
    setup)."""
    lines = []
    for name, repo in sorted(repos.items()):
        lines += [f'[url "{repo.url}"]', f"\tinsteadOf = {GITHUB}{name}.git"]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_project(root: Path, example_dir: Path, urls: dict[str, str], post_fix: str) -> Path:
    """The project envgen runs in: the example matrix plus channel files naming the loopback
    servers."""
    if not (example_dir / "env-templates" / f"{ENV}.toml").is_file():
        raise InputError(
            f"the bundled example is missing: {example_dir}",
            hint="it ships inside the envgen package: reinstall envgen (pip install "
            "--force-reinstall envgen)",
        )
    (root / "env-templates").mkdir(parents=True, exist_ok=True)
    (root / "channels").mkdir(exist_ok=True)
    (root / "locks").mkdir(exist_ok=True)
    matrix = (example_dir / "env-templates" / f"{ENV}.toml").read_text()
    # The release archives are fetched without credentials: from their own URL where one is given.
    releases = urls.get("releases", f"{urls['pypi']}/{RELEASES}")
    matrix = matrix.replace("@POST_FIX@", post_fix).replace("@RELEASES@", releases)
    (root / "env-templates" / f"{ENV}.toml").write_text(matrix)
    channels = {
        "demo-forge": f'kind = "conda"\nurl = "{urls["conda"]}"\n',
        "pypi": f'kind = "pip"\nurl = "{urls["pypi"]}/simple"\n',
        "extra": f'kind = "pip"\nurl = "{urls["extra"]}/simple"\nexplicit = true\n',
    }
    for name, text in channels.items():
        (root / "channels" / f"{name}.toml").write_text(text)
    return root


def build_example(workdir: Path) -> None:
    """Every artifact of the example under `workdir`: upstream/ (git repos), pypi/ and extra/
    (wheel indexes; pypi/releases/ the release archives), conda/ (a channel). The same bytes every
    time, so a copy serves as well as a new build."""
    build_repos(workdir / "upstream")
    build_index(workdir / "pypi", PYPI_DISTS)
    build_releases(workdir / "pypi" / RELEASES)
    build_index(workdir / "extra", EXTRA_DISTS)
    write_channel(workdir / "conda", demo_packages())


@contextmanager
def serve_example(workdir: Path, example_dir: Path = EXAMPLE_DIR) -> Iterator[Example]:
    """Build every artifact of the example under `workdir`, serve it on 127.0.0.1, yield the
    project."""
    build_example(workdir)
    with serve_built_example(workdir, example_dir) as example:
        yield example


@contextmanager
def serve_built_example(workdir: Path, example_dir: Path = EXAMPLE_DIR) -> Iterator[Example]:
    """Serve the artifacts build_example left in `workdir` (or a copy of them) on 127.0.0.1, yield
    the project."""
    repos = {path.name: GitRepo(path) for path in sorted((workdir / "upstream").iterdir())}
    with ExitStack() as stack:
        urls = {
            name: stack.enter_context(serve_directory(workdir / name))
            for name in ("pypi", "extra", "conda")
        }
        post_fix = repos["post"].rev("fix")
        root = write_project(workdir / "project", example_dir, urls, post_fix)
        yield Example(
            root=root,
            gitconfig=write_gitconfig(workdir / "gitconfig", repos),
            repos=repos,
            pypi_url=urls["pypi"],
            extra_url=urls["extra"],
            channel_url=urls["conda"],
        )


# The directories the example serves, and the channel file of its project that names each.
SERVED = {"pypi": "pypi", "extra": "extra", "conda": "demo-forge"}


@contextmanager
def serve_kept_example(workdir: Path) -> Iterator[Example]:
    """Serve again a directory `envgen demo --keep` left, as it is (its matrix, locks and git
    history are the user's now): each index and the channel on the port its project's channel file
    names, so the URLs its locks record still hold. A port taken meanwhile is replaced by a free
    one, written into that channel file."""
    root = workdir / "project"
    needed = [
        *SERVED,
        "upstream",
        "gitconfig",
        *(f"project/channels/{c}.toml" for c in SERVED.values()),
    ]
    missing = [name for name in needed if not (workdir / name).exists()]
    if missing:
        raise InputError(
            f"{workdir} is not a directory `envgen demo --keep` kept: it has no "
            f"{', '.join(missing)}",
            hint="run `envgen demo --keep` and pass the directory it prints at the end",
        )
    repos = {path.name: GitRepo(path) for path in sorted((workdir / "upstream").iterdir())}
    with ExitStack() as stack:
        urls = {
            name: stack.enter_context(
                _serve_again(workdir / name, root / "channels" / f"{channel}.toml")
            )
            for name, channel in SERVED.items()
        }
        yield Example(
            root, workdir / "gitconfig", repos, urls["pypi"], urls["extra"], urls["conda"]
        )


@contextmanager
def _serve_again(directory: Path, channel_file: Path) -> Iterator[str]:
    """`directory` served on the port `channel_file`'s URL names, else on a free one written into
    the file."""
    text = channel_file.read_text()
    written = urlsplit(tomllib.loads(text).get("url", ""))
    with ExitStack() as stack:
        try:
            url = stack.enter_context(serve_directory(directory, port=written.port or 0))
        # taken since: a free port, and the project follows it (its locks then read as stale)
        except OSError:
            url = stack.enter_context(serve_directory(directory))
        old = f"{written.scheme}://{written.netloc}"
        if url != old:
            channel_file.write_text(text.replace(f'"{old}', f'"{url}'))
        yield url


def bump_version(example: Example, package: str, old: str, new: str) -> None:
    """Edit the example matrix: `package` pinned at `old` becomes `new` (the demo's version bump),
    and an import check expecting `old` of it expects `new` (a bump leaves a lock whose own check
    passes)."""
    text = example.matrix.read_text()
    before = f'{package} = {{ version = "=={old}" }}'
    if before not in text:
        raise InputError(file=str(example.matrix), reason=f"no pin {package}=={old} to bump")
    text = text.replace(before, f'{package} = {{ version = "=={new}" }}')
    expected = f'distribution = "{package}"\nversion = "{old}"'
    example.matrix.write_text(
        text.replace(expected, f'distribution = "{package}"\nversion = "{new}"')
    )


def republish(
    example: Example,
    *,
    pypi: Sequence[FixtureDist] | None = None,
    conda: Sequence[CondaPackage] | None = None,
) -> None:
    """Replace what the served "pypi" index or conda channel offers (a release published, or one
    removed)."""
    workdir = example.root.parent
    if pypi is not None:
        shutil.rmtree(workdir / "pypi" / "simple")
        shutil.rmtree(workdir / "pypi" / "files")
        build_index(workdir / "pypi", pypi)
    if conda is not None:
        shutil.rmtree(workdir / "conda")
        write_channel(workdir / "conda", conda)


def advance_branch(example: Example, repo: str, branch: str) -> str:
    """A new upstream commit on `branch` of `repo` (a moving branch moves); returns its sha."""
    upstream = example.repos[repo]
    return upstream.commit(
        {f"CHANGES-{branch.replace('/', '-')}.txt": "moved upstream\n"},
        "upstream moves",
        branch=branch,
    )
