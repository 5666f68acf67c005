"""Bash in the sandbox: a command runs on a copy-on-write view of the workspace, and what it
really changed is committed under leases, whatever its prediction said.

Real processes, so the real clock (short waits). The commands include a small script,
``writer``, found on PATH, under rules that describe it wrongly on purpose.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

import toolkernel as tk
from toolkernel import sandbox
from toolkernel.kernel import CallProgress
from toolkernel.shell import analyse
from toolkernel.shell._confine import Launch
from toolkernel.tools import ShellRules, builtin_tools

from ..shell.helpers import needs_landlock
from .privileges import as_a_user

pytestmark = pytest.mark.skipif(
    sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}"
)

WRITER = '#!/bin/sh\necho mine > "$1"\necho other > other.txt\n'


@pytest.fixture(autouse=True)
def writer_on_path(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    programs = tmp_path_factory.mktemp("programs")
    writer = programs / "writer"
    writer.write_text(WRITER)
    writer.chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def anyio_backend() -> str:
    """asyncio, the loop most agents run (the sandbox knows no loop: the Bash tool's process
    code runs on both, tests/tools/test_bash_processes.py)."""
    return "asyncio"


def snapshot(root: pathlib.Path) -> dict[str, Any]:
    """Every entry under ``root``: a file's content and mode, a link's target, a directory."""
    found: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_dir():
            found[name] = ("dir", path.stat().st_mode & 0o7777)
        else:
            found[name] = ("file", path.read_bytes(), path.stat().st_mode & 0o7777)
    return found


async def bash(kernel: tk.Kernel, command: str, **arguments: Any) -> tk.ToolResult:
    (result,) = await kernel.run([tk.ToolCall("b", "Bash", {"command": command, **arguments})])
    return result


@pytest.fixture
async def wrong_kernel(tmp_path: pathlib.Path) -> AsyncIterator[tuple[tk.Kernel, Any]]:
    """Bash whose rule says ``writer`` only reads its operand (it writes it, and other.txt)."""
    (tmp_path / "a.txt").write_text("A\n")
    rules = ShellRules.default().extended('[writer]\noperands = "read"\n')
    tools = builtin_tools(bash=True, shell_rules=rules)
    async with tk.open_kernel(tools, root=tmp_path) as kernel:
        yield kernel, tools[-1]


async def test_writes_the_prediction_missed_are_committed_reported_and_counted(
    wrong_kernel: tuple[tk.Kernel, Any], tmp_path: pathlib.Path
) -> None:
    kernel, tool = wrong_kernel
    events: list[object] = []
    kernel.add_listener(events.append)
    result = await bash(kernel, "writer a.txt")
    assert result.status is tk.Status.OK, result.error
    assert (tmp_path / "a.txt").read_text() == "mine\n"
    assert (tmp_path / "other.txt").read_text() == "other\n"
    assert "also changed a.txt, other.txt, which its claims did not cover" in result.text()
    (miss,) = [e for e in events if isinstance(e, CallProgress)]
    assert miss.data["unpredicted"] == ["a.txt", "other.txt"]
    assert tool.statistics.misses == 1 and tool.statistics.missed_paths == 2
    assert tool.statistics.committed == 1 and tool.statistics.reruns == 0


async def test_a_missed_write_waits_for_the_earlier_call_that_holds_its_file(
    wrong_kernel: tuple[tk.Kernel, Any], tmp_path: pathlib.Path
) -> None:
    # A Read of other.txt emitted before the command runs beside it (the prediction says
    # nothing of other.txt); the command's write of other.txt is committed only after it.
    kernel, _ = wrong_kernel
    (tmp_path / "other.txt").write_text("before\n")
    read, command = await kernel.run(
        [
            tk.ToolCall("r", "Read", {"file_path": "other.txt"}),
            tk.ToolCall("b", "Bash", {"command": "sleep 0.2; writer a.txt"}),
        ]
    )
    assert read.status is tk.Status.OK and command.status is tk.Status.OK
    assert "before" in read.text()
    assert read.finished_at <= command.finished_at
    assert (tmp_path / "other.txt").read_text() == "other\n"


def _running(argv: list[str]) -> bool:
    """Whether a process with exactly this command line runs now."""
    wanted = "\0".join(argv).encode() + b"\0"
    for entry in pathlib.Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == wanted:
                return True
        except OSError:  # it ended meanwhile
            continue
    return False


async def test_a_path_changed_underneath_makes_the_command_run_again_and_say_so(
    tmp_path: pathlib.Path,
) -> None:
    target = tmp_path / "f.txt"
    target.write_text("one\n")
    command = 'sleep 0.517; echo "$(cat f.txt)+bash" > f.txt'

    def someone_else() -> None:  # a person, or another agent: outside the kernel
        # Once the command runs (its sleep has begun), however long the sandbox took to start.
        deadline = time.monotonic() + 30
        while not _running(["sleep", "0.517"]) and time.monotonic() < deadline:
            time.sleep(0.005)
        replacement = tmp_path / "f.txt.new"
        replacement.write_text("theirs\n")
        os.replace(replacement, target)

    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as kernel:
        writer = threading.Thread(target=someone_else)
        writer.start()
        try:
            result = await bash(kernel, command)
        finally:
            await anyio.to_thread.run_sync(writer.join)
    assert result.status is tk.Status.OK, result.error
    assert "f.txt changed while the command ran" in result.text()
    assert "holding the whole workspace" in result.text()
    assert target.read_text() == "theirs+bash\n"  # not one+bash: their write is not lost


async def test_a_command_that_times_out_commits_nothing_and_says_so(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "a.txt").write_text("A\n")
    before = snapshot(tmp_path)
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as kernel:
        result = await bash(kernel, "echo new > a.txt; touch b.txt; sleep 5", timeout=400)
    assert result.status is tk.Status.ERROR
    assert "nothing it changed in the workspace was kept" in (result.error or "")
    assert snapshot(tmp_path) == before


async def test_a_cancelled_command_commits_nothing(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.txt").write_text("A\n")
    before = snapshot(tmp_path)
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as kernel:
        handle = kernel.submit(
            tk.ToolCall("b", "Bash", {"command": "echo new > a.txt; rm -f a.txt; sleep 5"})
        )
        await anyio.sleep(0.5)
        handle.cancel()
        result = await handle.wait_finished()
    assert result.status is tk.Status.CANCELLED
    assert snapshot(tmp_path) == before


async def test_contents_modes_times_deletions_links_and_directories_are_committed(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "keep.txt").write_text("keep\n")
    (tmp_path / "mode.txt").write_text("mode\n")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "x.txt").write_text("x\n")
    (tmp_path / "swap").mkdir()
    (tmp_path / "swap" / "gone.txt").write_text("gone\n")
    script = textwrap.dedent(
        """
        chmod 600 mode.txt
        touch -d 2001-02-03T04:05:06 keep.txt
        rm -r old
        rm -r swap && mkdir swap && echo new > swap/new.txt
        mkdir -p deep/er && echo d > deep/er/d.txt
        ln -s keep.txt link
        mkfifo pipe
        """
    )
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as kernel:
        result = await bash(kernel, script)
    assert result.status is tk.Status.OK, result.error
    assert (tmp_path / "mode.txt").stat().st_mode & 0o777 == 0o600
    assert time.gmtime((tmp_path / "keep.txt").stat().st_mtime)[:3] == (2001, 2, 3)
    assert not (tmp_path / "old").exists()
    assert sorted(os.listdir(tmp_path / "swap")) == ["new.txt"]
    assert (tmp_path / "deep" / "er" / "d.txt").read_text() == "d\n"
    assert os.readlink(tmp_path / "link") == "keep.txt"
    assert (tmp_path / "pipe").is_fifo()


def plain_shell(command: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, capture_output=True, text=True, check=False
    )


def comparable(root: pathlib.Path, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    found = snapshot(root)
    return {
        name: value
        for name, value in found.items()
        if not any(name == s or name.startswith(s + "/") for s in skip)
    }


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo")
async def test_cargo_build_and_test_in_a_fresh_project_leave_the_tree_a_plain_shell_leaves(
    tmp_path: pathlib.Path,
) -> None:
    made = plain_shell("cargo new --vcs none --quiet hello", tmp_path)
    assert made.returncode == 0, made.stderr
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    shutil.copytree(tmp_path / "hello", ours)
    shutil.copytree(tmp_path / "hello", theirs)
    async with tk.open_kernel(builtin_tools(bash=True), root=ours) as kernel:
        built = await bash(kernel, "cargo build --quiet --offline && cargo test --quiet --offline")
    plain = plain_shell("cargo build --quiet --offline && cargo test --quiet --offline", theirs)
    assert built.status is tk.Status.OK, built.error
    assert plain.returncode == 0, plain.stderr
    # target/ holds build products with times and hashes of their own: its presence is what
    # compares; everything else byte for byte (Cargo.lock included).
    assert (ours / "target" / "debug").is_dir()
    assert comparable(ours, ("target",)) == comparable(theirs, ("target",))


@pytest.mark.skipif(shutil.which("npm") is None, reason="needs npm")
async def test_npm_init_install_and_test_leave_the_tree_a_plain_shell_leaves(
    tmp_path: pathlib.Path,
) -> None:
    ours, theirs = tmp_path / "ours" / "app", tmp_path / "theirs" / "app"  # npm names it so
    for place in (ours, theirs):
        place.mkdir(parents=True)
        (place / "index.test.js").write_text(
            "const assert = require('node:assert');\n"
            "require('node:test')('adds', () => assert.equal(1 + 1, 2));\n"
        )
    command = (
        "npm init -y > /dev/null && npm pkg set scripts.test='node --test' && "
        "npm install --offline --no-audit --no-fund > /dev/null && npm test"
    )
    async with tk.open_kernel(builtin_tools(bash=True), root=ours) as kernel:
        result = await bash(kernel, command)
    plain = plain_shell(command, theirs)
    assert result.status is tk.Status.OK, result.error
    assert plain.returncode == 0, plain.stderr
    assert "pass 1" in result.text()
    assert "package-lock.json" in comparable(ours)
    assert comparable(ours) == comparable(theirs)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_a_commit_whose_hook_rewrites_and_stages_a_file_commits_what_a_shell_would(
    tmp_path: pathlib.Path,
) -> None:
    identity = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com"}
    identity |= {"GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com"}
    hook = "#!/bin/sh\nsed -i 's/draft/final/' notes.txt && git add notes.txt\n"
    for name in ("ours", "theirs"):
        place = tmp_path / name
        place.mkdir()
        (place / "notes.txt").write_text("draft\n")
        plain_shell("git init -q && git add notes.txt", place)
        (place / ".git" / "hooks" / "pre-commit").write_text(hook)
        (place / ".git" / "hooks" / "pre-commit").chmod(0o755)
    command = "git commit -q -m first && git show HEAD:notes.txt"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in identity.items():
            patch.setenv(name, value)
        async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path / "ours") as kernel:
            result = await bash(kernel, command)
        plain = plain_shell(command, tmp_path / "theirs")
    assert result.status is tk.Status.OK, result.error
    assert result.text().endswith(plain.stdout) and plain.stdout == "final\n"
    assert (tmp_path / "ours" / "notes.txt").read_text() == "final\n"


def test_the_sandbox_is_detected_once_and_can_be_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert sandbox.unavailable() is None
    monkeypatch.setenv("TOOLKERNEL_SANDBOX", "off")
    sandbox.unavailable.cache_clear()
    try:
        assert sandbox.unavailable() == "the sandbox is turned off (TOOLKERNEL_SANDBOX=off)"
    finally:
        monkeypatch.delenv("TOOLKERNEL_SANDBOX")
        sandbox.unavailable.cache_clear()


# A process whose seccomp filter refuses unshare(2), as Docker's default profile does for an
# unprivileged container: the sandbox is found missing, and Bash still runs commands.
REFUSING = textwrap.dedent(
    """
    import ctypes, struct, sys
    libc = ctypes.CDLL(None, use_errno=True)
    ARCH, UNSHARE = 0xC000003E, 272  # x86_64
    program = [
        (0x20, 0, 0, 4), (0x15, 0, 3, ARCH), (0x20, 0, 0, 0), (0x15, 0, 1, UNSHARE),
        (0x06, 0, 0, 0x00050000 | 1), (0x06, 0, 0, 0x7FFF0000),
    ]
    code = b"".join(struct.pack("HBBI", *op) for op in program)
    buffer = ctypes.create_string_buffer(code)
    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    filt = Program(len(program), ctypes.cast(buffer, ctypes.c_void_p))
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
    assert libc.prctl(22, 2, ctypes.byref(filt), 0, 0) == 0  # seccomp filter
    import anyio
    import toolkernel as tk
    from toolkernel import sandbox
    from toolkernel.tools import builtin_tools
    print(sandbox.unavailable())
    async def main():
        async with tk.open_kernel(builtin_tools(bash=True), root=sys.argv[1]) as kernel:
            (result,) = await kernel.run([tk.ToolCall("b", "Bash", {"command": "echo hi > a"})])
        print(result.status.value, open(sys.argv[1] + "/a").read().strip())
    anyio.run(main)
    """
)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the filter is written for x86_64")
def test_where_namespaces_are_refused_the_fallback_is_used_and_named(
    tmp_path: pathlib.Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", REFUSING, str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    said, ran = done.stdout.strip().splitlines()
    assert said == "toolkernel sandbox: can't make namespaces: Operation not permitted"
    assert ran == "ok hi"


@pytest.fixture
def nobodys() -> Iterator[pathlib.Path]:
    """A directory of nobody's, where nobody can reach it (not under root's pytest tree)."""
    place = pathlib.Path(tempfile.mkdtemp(prefix="toolkernel-nobody-"))
    try:
        place.chmod(0o755)
        for name in ("root", "upper", "work"):
            (place / name).mkdir()
        (place / "root" / "a.txt").write_text("A\n")
        for path in (place, *place.rglob("*")):
            shutil.chown(path, "nobody", "nogroup")
        yield place
    finally:
        sandbox.Overlay(str(place / "root"), str(place), 0).discard()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or not os.path.exists("/usr/bin/python3"),
    reason="needs root, setpriv and a system python3 to become an unprivileged user",
)
def test_an_unprivileged_user_gets_the_same_overlay_in_a_user_namespace(
    nobodys: pathlib.Path,
) -> None:
    launcher = sandbox.LAUNCHER[-1]
    root, upper, work = (str(nobodys / name) for name in ("root", "upper", "work"))
    nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    launch = ["/usr/bin/python3", "-I", "-S", launcher, "--overlay", root, upper, work]
    done = subprocess.run(
        [*nobody, *launch, "--", "/bin/sh", "-c", "echo new > a.txt && touch b.txt && id -u"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "65534"
    assert (nobodys / "root" / "a.txt").read_text() == "A\n"  # untouched until committed
    overlay = sandbox.Overlay(root, str(nobodys), 0)
    assert [(c.path, c.kind) for c in overlay.changes()] == [
        ("a.txt", sandbox.ChangeKind.FILE),
        ("b.txt", sandbox.ChangeKind.FILE),
    ]


def test_a_command_running_the_projects_code_is_a_barrier_only_where_nothing_would_see_it(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (bash_tool,) = [t for t in builtin_tools(bash=True) if t.name == "Bash"]
    command = {"command": "pytest -q"}
    with tk.Workspace(tmp_path) as workspace:
        predicted = bash_tool.claims(command, workspace.key)
        assert tk.exclusive(tk.path(".")) not in (predicted or ())  # what it waits for
        monkeypatch.setenv("TOOLKERNEL_SANDBOX", "off")
        sandbox.unavailable.cache_clear()
        try:
            assert bash_tool.claims(command, workspace.key) == [tk.exclusive(tk.path("."))]
            # A command whose effects the rules know whole keeps its claims either way.
            assert bash_tool.claims({"command": "cat a.txt"}, workspace.key) == [
                tk.shared(tk.path("a.txt"))
            ]
        finally:
            monkeypatch.delenv("TOOLKERNEL_SANDBOX")
            sandbox.unavailable.cache_clear()


async def test_commands_making_files_side_by_side_all_commit_without_running_again(
    tmp_path: pathlib.Path,
) -> None:
    tools = builtin_tools(bash=True)
    async with tk.open_kernel(tools, root=tmp_path) as kernel:
        results = await kernel.run(
            [
                tk.ToolCall(f"c{n}", "Bash", {"command": f"sleep 0.{n}; echo {n} > f{n}.txt"})
                for n in range(1, 5)
            ]
        )
    assert all(r.status is tk.Status.OK for r in results), [r.error for r in results]
    assert all("ran again" not in r.text() for r in results)
    assert sorted(os.listdir(tmp_path)) == ["f1.txt", "f2.txt", "f3.txt", "f4.txt"]
    assert tools[-1].statistics.reruns == 0  # type: ignore[attr-defined]


@pytest.mark.skipif(shutil.which("go") is None, reason="needs go")
async def test_go_build_and_test_in_a_fresh_module_leave_the_tree_a_plain_shell_leaves(
    tmp_path: pathlib.Path,
) -> None:
    ours, theirs = tmp_path / "ours" / "hello", tmp_path / "theirs" / "hello"
    for place in (ours, theirs):
        place.mkdir(parents=True)
        made = plain_shell("go mod init example.com/hello", place)
        assert made.returncode == 0, made.stderr
        (place / "main.go").write_text(
            'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hi") }\n'
        )
        (place / "main_test.go").write_text(
            'package main\n\nimport "testing"\n\nfunc TestNothing(t *testing.T) {}\n'
        )
    command = "go build && go test ./... && go vet ./..."
    async with tk.open_kernel(builtin_tools(bash=True), root=ours) as kernel:
        result = await bash(kernel, command, timeout=300_000)
    plain = plain_shell(command, theirs)
    assert result.status is tk.Status.OK, result.error
    assert plain.returncode == 0, plain.stderr
    assert (ours / "hello").is_file()
    assert sorted(comparable(ours)) == sorted(comparable(theirs))


async def test_directories_made_on_the_way_to_a_held_path_are_no_miss(
    tmp_path: pathlib.Path,
) -> None:
    # The rule says `builder` writes out/debug; making `out` first is part of that.
    programs = tmp_path.parent / f"{tmp_path.name}-bin"
    programs.mkdir()
    builder = programs / "builder"
    builder.write_text("#!/bin/sh\nmkdir -p out/debug && echo built > out/debug/app\n")
    builder.chmod(0o755)
    rules = ShellRules.default().extended('[builder]\nwrites = ["out/debug"]\n')
    tools = builtin_tools(bash=True, shell_rules=rules)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")
        async with tk.open_kernel(tools, root=tmp_path) as kernel:
            result = await bash(kernel, "builder")
    assert result.status is tk.Status.OK, result.error
    assert "also changed" not in result.text()
    assert (tmp_path / "out" / "debug" / "app").read_text() == "built\n"
    assert tools[-1].statistics.misses == 0  # type: ignore[attr-defined]


# -- wrong rules beside other calls of the batch -------------------------------------------------


def project_rule(root: pathlib.Path, text: str) -> None:
    (root / ".toolkernel").mkdir(exist_ok=True)
    (root / ".toolkernel" / "shell.toml").write_text(text)


@pytest.mark.parametrize("batch", [1, 2])
async def test_a_command_whose_rule_predicts_no_claims_but_writes_is_committed(
    tmp_path: pathlib.Path, batch: int
) -> None:
    # The call holds nothing, so it had no place among the leases: asking for the ones of
    # what it wrote is a wait like any other, not a crash of the kernel.
    project_rule(tmp_path, '[writer]\noperands = "text..."\n')
    calls = [tk.ToolCall("b", "Bash", {"command": "writer out.txt"})]
    calls += [tk.ToolCall("r", "Read", {"file_path": "a.txt"})] * (batch - 1)
    (tmp_path / "a.txt").write_text("A\n")
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as kernel:
        command, *_ = await kernel.run(calls)
        assert command.status is tk.Status.OK, command.error
        assert "also changed other.txt, out.txt" in command.text()
        (again,) = await kernel.run([tk.ToolCall("b2", "Bash", {"command": "cat out.txt"})])
    assert again.status is tk.Status.OK and again.text() == "mine\n"
    assert (tmp_path / "other.txt").read_text() == "other\n"


async def test_a_file_made_in_a_directory_deleted_meanwhile_does_not_bring_it_back(
    tmp_path: pathlib.Path,
) -> None:
    # The command's rule says nothing of d/new.txt, so a Delete of d runs beside it. Whatever
    # the order they end up in, d is gone: had the command run first, the Delete removes what
    # it made; had the Delete, the command finds no d.
    project_rule(tmp_path, '[writer]\noperands = "text..."\n')
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "old.txt").write_text("old\n")
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as kernel:
        command = kernel.submit(
            tk.ToolCall("b", "Bash", {"command": "writer d/new.txt; sleep 0.6"})
        )
        await anyio.sleep(0.35)  # the command has made d/new.txt in its overlay
        delete = kernel.submit(tk.ToolCall("del", "Delete", {"path": "d"}))
        deleted, ran = await delete.wait_finished(), await command.wait_finished()
    assert deleted.status is tk.Status.OK, deleted.error
    assert ran.status is tk.Status.OK, ran.error
    assert not (tmp_path / "d").exists()


APPENDER = '#!/bin/sh\nexec 3>> b.txt\nsleep "${DELAY:-0.3}"\ncat "$1" >&3\n'


@pytest.mark.parametrize("order", ["command first", "edit first"])
@pytest.mark.parametrize("delay", ["0", "0.3"])
async def test_a_write_the_rule_missed_is_not_lost_beside_an_edit_of_the_file(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, order: str, delay: str
) -> None:
    # The rule says `appender` only reads its operand; it appends to b.txt, opened at once
    # and written after a delay. An Edit of b.txt runs beside it; either serial order ends
    # with both changes.
    programs = tmp_path / "programs"
    programs.mkdir()
    (programs / "appender").write_text(APPENDER)
    (programs / "appender").chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DELAY", delay)
    root = tmp_path / "root"
    root.mkdir()
    project_rule(root, '[appender]\noperands = "read"\n')
    (root / "a.txt").write_text("alpha\n")
    (root / "b.txt").write_text("b\n")
    command = tk.ToolCall("b", "Bash", {"command": "appender a.txt"})
    edit = tk.ToolCall("e", "Edit", {"file_path": "b.txt", "old_string": "b", "new_string": "B"})
    async with tk.open_kernel(builtin_tools(bash=True), root=root) as kernel:
        results = await kernel.run([command, edit] if order == "command first" else [edit, command])
    assert [r.status for r in results] == [tk.Status.OK] * 2, [r.error for r in results]
    assert (root / "b.txt").read_text() == "B\nalpha\n"


async def test_a_builtin_the_hash_table_names_stays_the_builtin_as_in_bash(
    tmp_path: pathlib.Path,
) -> None:
    # BASH_CMDS gives a path to a name for lookups, but a builtin is found before it: `true`
    # stays true, in a plain shell as here. The Edit is all that changes b.txt.
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("b\n")
    command = "BASH_CMDS[true]=/usr/bin/tee; sleep 0.3; true -a b.txt < a.txt"
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(tmp_path / "b.txt", plain / "b.txt")
    shutil.copy(tmp_path / "a.txt", plain / "a.txt")
    assert plain_shell(command, plain).returncode == 0
    assert (plain / "b.txt").read_text() == "b\n"
    edit = tk.ToolCall("e", "Edit", {"file_path": "b.txt", "old_string": "b", "new_string": "B"})
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as kernel:
        results = await kernel.run([tk.ToolCall("c", "Bash", {"command": command}), edit])
    assert [r.status for r in results] == [tk.Status.OK] * 2
    assert (tmp_path / "b.txt").read_text() == "B\n"


# -- a write outside the workspace is refused, and the result says so and how to allow it -----

REFUSED = {
    "echo x > {E}/f.txt": "{E}/f.txt",
    "touch {E}/t.txt": "{E}/t.txt",
    "LC_ALL=C.UTF-8 mkdir {E}/d": "{E}/d",  # the name between U+2018 and U+2019
    "LC_ALL=C mkdir {E}/d": "{E}/d",
    "cp a.txt {E}/c.txt": "{E}/c.txt",
    "python3 -c \"open('{E}/p.txt', 'w')\"": "{E}/p.txt",
    "echo x > '{E}/my file'": "{E}/my file",
    "mkdir -p '{E}/a b/c'": "{E}/a b",
}


@needs_landlock
@pytest.mark.parametrize(("command", "refused"), REFUSED.items())
async def test_a_write_outside_the_workspace_is_refused_naming_the_place_and_the_option(
    tmp_path: pathlib.Path, tmp_path_factory: pytest.TempPathFactory, command: str, refused: str
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (tmp_path / "a.txt").write_text("A\n")
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as kernel:
        result = await bash(kernel, command.replace("{E}", str(elsewhere)))
    assert result.status is tk.Status.ERROR
    assert "Permission denied" in (result.error or "")
    place = refused.replace("{E}", str(elsewhere))
    assert f"the sandbox refused writing {place}: outside the workspace" in (result.error or "")
    assert "builtin_tools(bash=True, shell_writable=[...])" in (result.error or "")
    assert os.listdir(elsewhere) == []


@needs_landlock
@pytest.mark.parametrize(
    ("program", "command"),
    [
        ("rustc", "echo 'fn main() {}' | rustc -o {E}/a.out -"),  # "couldn't", then the path
        ("cargo", "cargo new --vcs none --offline --quiet {E}/hello"),  # the path lines above
        ("node", "node -e \"require('fs').writeFileSync('{E}/n.txt', 'x')\""),
    ],
)
async def test_a_toolchains_refused_write_is_named_too(
    tmp_path: pathlib.Path, tmp_path_factory: pytest.TempPathFactory, program: str, command: str
) -> None:
    if shutil.which(program) is None:
        pytest.skip(f"needs {program}")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as kernel:
        result = await bash(kernel, command.replace("{E}", str(elsewhere)), timeout=120_000)
    assert result.status is tk.Status.ERROR
    assert f"the sandbox refused writing {elsewhere}/" in (result.error or ""), result.error


@needs_landlock
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or not os.path.exists("/usr/bin/python3"),
    reason="needs root, setpriv and a system python3 to become an unprivileged user",
)
@pytest.mark.parametrize(("command", "refused"), REFUSED.items())
def test_an_unprivileged_users_refused_write_outside_is_named_too(
    nobodys: pathlib.Path,
    shared_directory: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    refused: str,
) -> None:
    # A directory outside the workspace the user may write: only the sandbox refuses it.
    root, upper, work = (str(nobodys / name) for name in ("root", "upper", "work"))
    home = nobodys / "home"  # the user's, whose caches the command may write
    home.mkdir()
    shutil.chown(home, "nobody", "nogroup")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    command = command.replace("{E}", str(shared_directory)).replace("python3", "/usr/bin/python3")
    launch = Launch.prepare(command, analyse(command), root, ["--overlay", root, upper, work])
    try:
        launcher = sandbox.LAUNCHER[-1]
        at = launch.argv.index(launcher)
        argv = [*as_a_user(), "/usr/bin/python3", "-I", "-S", *launch.argv[at:]]
        done = subprocess.run(
            argv, cwd=root, env=launch.env, capture_output=True, text=True, check=False
        )
        assert done.returncode != 0, done.stdout + done.stderr
        message = launch.explain(done.stdout + done.stderr, root)
    finally:
        launch.finish()
    place = refused.replace("{E}", str(shared_directory))
    assert message is not None, done.stdout + done.stderr
    assert message.startswith(f"the sandbox refused writing {place}: outside the workspace")
    assert os.listdir(shared_directory) == []
