"""Real commands in a temporary git repository: everything a command changed was covered by one
of its exclusive claims, and the command succeeded while confined to them (Landlock).

As with the Write tool, an exclusive claim on a path covers creating the directories that lead
to it (``mkdir -p build/out`` makes ``build``): what is created there conflicts with any claim
on an ancestor, which is what could have seen it appear.

Each command runs through the Bash tool, so under the confinement its claims give it; a rule
that missed a write makes the command fail (``Permission denied``) and the test with it. The
file-tree snapshot before and after is also checked against the claims directly, so a rule that
is wrong is caught even where Landlock would have let the write through.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

import toolkernel as tk
from toolkernel.locks import Mode, Path
from toolkernel.shell import analyse
from toolkernel.tools import builtin_tools, shell_claims

from .helpers import changed, needs_landlock, run_bash, snapshot

pytestmark = [
    needs_landlock,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
]


@pytest.fixture
def anyio_backend() -> str:
    """asyncio alone: what is tested is the claims and the commands, which know no loop (the
    Bash tool's process code runs on both, tests/tools/test_bash_processes.py)."""
    return "asyncio"


FILES = {
    "README.md": "# demo\n",
    "src/app.py": "import os\n\n\ndef double(x):\n    return x * 2\n",
    "tests/test_app.py": "def test_double():\n    assert 2 * 2 == 4\n",
    "sub/notes.txt": "one\ntwo\n",
    "sub/old.txt": "old\n",
    "sub/junk.tmp": "junk\n",
}

COMMANDS = [
    "git status",
    "git status --short && git diff --stat && git log --oneline -3",
    "git branch -a && git rev-parse HEAD",
    "echo '# more' >> src/app.py && git add src/app.py && git commit -qm change",
    "git checkout -q -b topic",
    "pytest -q tests",
    "python -m pytest -q -p no:randomly tests/test_app.py",
    "ruff check --exit-zero src",
    "ruff check --fix src",
    "ruff format src/app.py",
    "ruff format --check src; true",
    "sed -i 's/one/ONE/' sub/notes.txt",
    "sed -n 1p sub/notes.txt",
    "cd sub && ls > listing.txt && cat notes.txt",
    "cd sub && echo hi > hello.txt; cat ../README.md",
    "mkdir -p build/out && cp README.md build/out/",
    "rm sub/old.txt",
    "find . -name '*.tmp' -delete",
    "cat README.md | tee copy.md > /dev/null",
    "grep -rn double src > found.txt",
    "touch sub/new.txt && mv sub/new.txt sub/renamed.txt",
    "false && echo never > never.txt; true",
    # git init and clone write the repository where they are told to, or where they run.
    "cd sub && git --bare init -q",
    "cd sub && git init -q --bare",
    "git init -q --bare sub/bare.git",
    "git init -q --shared sub/shared",
    "git init -q -b trunk sub/fresh",
    "cd sub && git init -q",
    "git init -q --separate-git-dir sub/apart.git sub/tree",
    "git clone -q --no-hardlinks . sub/copy",
    "git clone -q --no-hardlinks --bare . sub/copy.git",
    "git clone -q --no-hardlinks --separate-git-dir sub/cloned.git . sub/cloned",
    # Python's bytecode goes where -X pycache_prefix says, not where the environment says; -E
    # and -I ignore the environment, so it goes beside the sources.
    "python3 -X pycache_prefix=sub/pc -m pytest -q -p no:randomly tests/test_app.py",
    "python3 -X pycache_prefix -m pytest -q -p no:randomly tests/test_app.py",
    "python3 -E -m pytest -q -p no:randomly tests/test_app.py",
]


@pytest.fixture
async def repository(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    # The environment's programs (pytest, ruff) first on PATH, as in an activated virtualenv.
    monkeypatch.setenv("PATH", f"{pathlib.Path(sys.executable).parent}:{os.environ['PATH']}")
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    def git(*arguments: str) -> None:
        subprocess.run(["git", *arguments], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q", "-b", "main", ".")
    git("config", "user.email", "dev@example.org")
    git("config", "user.name", "Dev")
    git("add", ".")
    git("commit", "-qm", "start")
    return tmp_path


@pytest.fixture
async def kernel(repository: pathlib.Path) -> AsyncIterator[tk.Kernel]:
    async with tk.open_kernel(builtin_tools(bash=True), root=repository) as opened:
        yield opened


def git_output(repository: pathlib.Path, *arguments: str) -> str:
    done = subprocess.run(
        ["git", *arguments], cwd=repository, check=True, capture_output=True, text=True
    )
    return done.stdout


def covered(place: str, claims: list[tk.Claim]) -> bool:
    parts = tuple(place.split("/"))
    return any(
        claim.mode is Mode.EXCLUSIVE
        and isinstance(claim.resource, Path)
        and parts[: len(claim.resource.parts)] == claim.resource.parts
        for claim in claims
    )


def leads_to_a_claim(
    place: str,
    before: dict[str, tuple[str, str]],
    after: dict[str, tuple[str, str]],
    claims: list[tk.Claim],
) -> bool:
    """True for a directory created on the way to an exclusively claimed path."""
    parts = tuple(place.split("/"))
    return (
        place not in before
        and after.get(place, ("", ""))[0] == "dir"
        and any(
            claim.mode is Mode.EXCLUSIVE
            and isinstance(claim.resource, Path)
            and claim.resource.parts[: len(parts)] == parts
            for claim in claims
        )
    )


@pytest.mark.parametrize("command", COMMANDS)
async def test_every_change_a_real_command_makes_is_covered_by_its_claims(
    kernel: tk.Kernel, repository: pathlib.Path, command: str
) -> None:
    assert analyse(command).barrier is None
    claims = shell_claims(command)
    before = snapshot(repository)
    result = await run_bash(kernel, command)
    after = snapshot(repository)
    assert result.status is tk.Status.OK, result.error
    missed = sorted(
        p
        for p in changed(before, after)
        if not covered(p, claims) and not leads_to_a_claim(p, before, after, claims)
    )
    assert not missed, f"{command!r} changed {missed} outside its claims {claims}"


async def test_a_read_only_git_command_changes_nothing(
    kernel: tk.Kernel, repository: pathlib.Path
) -> None:
    (repository / "src/app.py").write_text("changed\n")  # so status would refresh the index
    before = snapshot(repository)
    for command in ("git status", "git diff", "git log -p -1"):
        result = await run_bash(kernel, command)
        assert result.status is tk.Status.OK, result.error
    assert changed(before, snapshot(repository)) == set()


async def test_git_writes_the_directory_a_linked_worktree_points_to(tmp_path: pathlib.Path) -> None:
    main = tmp_path / "main"
    main.mkdir()

    def git(*arguments: str, cwd: pathlib.Path = main) -> None:
        subprocess.run(["git", *arguments], cwd=cwd, check=True, capture_output=True)

    git("init", "-q", "-b", "main", ".")
    git("config", "user.email", "dev@example.org")
    git("config", "user.name", "Dev")
    (main / "a.txt").write_text("a\n")
    git("add", ".")
    git("commit", "-qm", "start")
    git("worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    side = tmp_path / "side"
    assert (side / ".git").is_file()  # "gitdir: .../main/.git/worktrees/side"
    async with tk.open_kernel(builtin_tools(bash=True), root=side) as kernel:
        result = await run_bash(kernel, "echo b > b.txt && git add b.txt && git commit -qm b")
    assert result.status is tk.Status.OK, result.error
    assert " b\n" in git_output(main, "log", "--oneline", "side")
