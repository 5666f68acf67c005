"""Search at native speed: Grep, Glob, Read and ListDir against the programs they stand in for.

Each built-in tool runs through a kernel as applications run it (a workspace root and
``max_concurrency=16``), one call at a time, alternating with the program it replaces on the
same tree in the same run; each figure is the median of a few repetitions, after a warm-up run
of each (so both read from the page cache). The programs are timed as a model's shell would run
them: one process each, start-up included.

- ``Grep`` (``files_with_matches``, ``content``, ``count``; with ``glob``, with ``type``, with
  ``context=2``, ``multiline``, ``ignore_case``, an alternation ``a|b``) against ``grep -rlE``
  / ``grep -rnE`` / ``grep -rcE`` (``--include``, ``-C2``, ``-lzP``, ``-i``); ``Glob`` of names
  (``**/*.py``) against ``find -name`` and of paths (``src/**/*.txt``) against ``find -path``.
  Target: <= 2x.
- ``Read`` of a big file (the first 2,000 lines shown) against ``head -n 2000``, and of 2,000
  lines in its middle against ``sed -n``; ``ListDir`` of a big directory against ``ls -1p``.
  Target: <= 2x.

Trees: generated source-like text of 1,000, 10,000 and 100,000 files (the last only in the full
run), 20 files a directory, a rare word in one file of 200 (so results stay under the tools'
1,000-line limit and both sides do the same work), and a ``.gitignore``'d ``build/`` directory
that the programs are told to skip too (``--exclude-dir``, ``-prune``); then real trees if
present: the installed sources of pip, setuptools, trio, pydantic, hypothesis, attrs, anyio, h11
and httpx (those installed; about 1,300 files, copied into a scratch directory so the figures do
not depend on the environment's layout), searched in every mode for a rare identifier
(``open_memory_channel``), a common word with thousands of matching lines (``self``), a regex
(``class \\w+Error``), a word ignoring case, with context lines, and globbed; counted also
ignoring case and filtered by ``glob`` and ``type``; in the full run
also trio's sources alone with the generated trees' cases, and the whole ``site-packages``.
Benchmarks are never asserted as tests: read the PASS/MISS lines.

    .venv/bin/python benchmarks/search.py            # full run (a few minutes)
    .venv/bin/python benchmarks/search.py --quick    # smoke run (1,000 files and the real
                                                     # tree, one run each)
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import trio

import toolkernel as tk
from toolkernel.tools import builtin_tools

MAX_CONCURRENCY = 16
TARGET = 2.0
RARE = "needle_"
WORDS = (
    "value result items config handler request response buffer index count total state "
    "record parser token stream cache client server batch event"
).split()


def source_file(rng: random.Random, rare: bool) -> str:
    """About 60 lines of Python-like text; ``rare`` puts the rare word on one line."""
    lines = [f'"""Module {rng.choice(WORDS)} of the {rng.choice(WORDS)} service."""', ""]
    lines += ["import os", "import sys", ""]
    for number in range(rng.randint(3, 6)):
        name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}"
        lines += [f"class {name.title().replace('_', '')}{number}:", '    """A class."""', ""]
        for _ in range(rng.randint(2, 4)):
            args = ", ".join(rng.sample(WORDS, 2))
            lines.append(f"    def {rng.choice(WORDS)}_{number}(self, {args}):")
            lines.append(
                f"        {rng.choice(WORDS)} = {rng.choice(WORDS)} + {rng.randint(0, 99)}"
            )
            lines.append(f"        return {rng.choice(WORDS)}")
            lines.append("")
    if rare:
        lines.insert(rng.randint(5, len(lines) - 1), f"    # {RARE}{rng.randint(0, 999)} here")
    return "\n".join(lines) + "\n"


def build_tree(root: pathlib.Path, files: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    per_directory = 20
    for index in range(files):
        directory = root / "src" / f"d{index // (per_directory * 20):03}" / f"m{index // 20:04}"
        directory.mkdir(parents=True, exist_ok=True)
        suffix = ".py" if index % 5 else ".txt"
        (directory / f"f{index:06}{suffix}").write_text(source_file(rng, index % 200 == 7))
    ignored = root / "build" / "lib"
    ignored.mkdir(parents=True)
    for index in range(max(files // 20, 5)):
        (ignored / f"g{index:05}.py").write_text(source_file(rng, True))
    (root / ".gitignore").write_text("build/\n*.pyc\n")


class Runner:
    """One kernel over one tree; times a tool call and a command alternately."""

    def __init__(self, kernel: tk.Kernel, root: pathlib.Path, reps: int) -> None:
        self.kernel, self.root, self.reps = kernel, root, reps
        self.rows: list[tuple[str, float, float]] = []

    async def tool(self, name: str, arguments: dict[str, Any]) -> float:
        started = time.perf_counter()
        (result,) = await self.kernel.run([tk.ToolCall("c", name, arguments)])
        took = time.perf_counter() - started
        if result.status is not tk.Status.OK:
            raise RuntimeError(f"{name} {arguments}: {result.status.name} {result.error}")
        return took

    def command(self, argv: Sequence[str]) -> float:
        started = time.perf_counter()
        subprocess.run(argv, cwd=self.root, stdout=subprocess.DEVNULL, check=False)
        return time.perf_counter() - started

    async def compare(
        self, label: str, name: str, arguments: dict[str, Any], argv: list[str]
    ) -> None:
        await self.tool(name, arguments)  # warm-up, both
        self.command(argv)
        ours, theirs = [], []
        for _ in range(self.reps):
            ours.append(await self.tool(name, arguments))
            theirs.append(await trio.to_thread.run_sync(self.command, argv))
        row = (label, statistics.median(ours), statistics.median(theirs))
        self.rows.append(row)
        report(*row)


def find_files(start: str, *test: str) -> list[str]:
    """``find`` listing the files under ``start`` that pass ``test``, pruning what the tools
    skip (``build``, ``.git``)."""
    prune = ["(", "-name", "build", "-o", "-name", ".git", ")", "-prune", "-o"]
    return ["find", start, *prune, "-type", "f", *test, "-print"]


def report(label: str, ours: float, theirs: float) -> None:
    ratio = ours / theirs
    verdict = "PASS" if ratio <= TARGET else "MISS"
    print(f"  {label:<44} {ours * 1e3:9.1f} ms {theirs * 1e3:9.1f} ms {ratio:6.2f}x  {verdict}")
    sys.stdout.flush()


def header(title: str) -> None:
    print(f"\n{title}")
    print(f"  {'case':<44} {'tool':>12} {'program':>12} {'ratio':>7}")


GREP_E = ["grep", "-r", "-E", "--exclude-dir=build", "--exclude-dir=.git"]


async def search_cases(
    runner: Runner, pattern: str, generated: bool, alternative: str, directory: str
) -> None:
    grep_pattern = pattern
    await runner.compare(
        "Grep files_with_matches  | grep -rl",
        "Grep",
        {"pattern": pattern},
        [*GREP_E, "-l", grep_pattern, "."],
    )
    await runner.compare(
        "Grep content             | grep -rn",
        "Grep",
        {"pattern": pattern, "output_mode": "content"},
        [*GREP_E, "-n", grep_pattern, "."],
    )
    await runner.compare(
        "Grep count               | grep -rc",
        "Grep",
        {"pattern": pattern, "output_mode": "count"},
        [*GREP_E, "-c", grep_pattern, "."],
    )
    await runner.compare(
        "Grep content, glob=*.py  | grep -rn --include",
        "Grep",
        {"pattern": pattern, "output_mode": "content", "glob": "*.py"},
        [*GREP_E, "-n", "--include=*.py", grep_pattern, "."],
    )
    await runner.compare(
        "Grep content, type=py    | grep -rn --include",
        "Grep",
        {"pattern": pattern, "output_mode": "content", "type": "py"},
        [*GREP_E, "-n", "--include=*.py", "--include=*.pyi", grep_pattern, "."],
    )
    # A tenth of the rare lines, so that with their context they stay under the 1,000 lines.
    rarer = pattern.replace("[0-9]+", "[0-9]*0 ") if generated else pattern
    await runner.compare(
        "Grep content, context=2  | grep -rn -C2",
        "Grep",
        {"pattern": rarer, "output_mode": "content", "context": 2},
        [*GREP_E, "-n", "-C2", rarer, "."],
    )
    # Rare too, or both would stop at the first 1,000 files.
    spanning = RARE + r"[0-9]+ here\n\s+\w" if generated else r"def \w+\(self\)[^:\n]*:\n\s+\"\"\""
    await runner.compare(
        "Grep multiline           | grep -rlzP",
        "Grep",
        {"pattern": spanning, "multiline": True},
        [
            "grep",
            "-r",
            "-l",
            "-z",
            "-P",
            "--exclude-dir=build",
            "--exclude-dir=.git",
            spanning,
            ".",
        ],
    )
    await runner.compare(
        "Grep ignore_case         | grep -rli",
        "Grep",
        {"pattern": pattern, "ignore_case": True},
        [*GREP_E, "-l", "-i", grep_pattern, "."],
    )
    either = f"{pattern}|{alternative}"
    await runner.compare(
        "Grep content, a|b        | grep -rn",
        "Grep",
        {"pattern": either, "output_mode": "content"},
        [*GREP_E, "-n", either, "."],
    )
    await runner.compare(
        "Glob **/*.py             | find -name",
        "Glob",
        {"pattern": "**/*.py"},
        find_files(".", "-name", "*.py"),
    )
    suffix = "txt" if generated else "py"
    await runner.compare(
        f"Glob {directory}/**/*.{suffix:<13}| find -path",
        "Glob",
        {"pattern": f"{directory}/**/*.{suffix}"},
        find_files(directory, "-path", f"{directory}/*.{suffix}"),
    )


PACKAGES = "pip setuptools trio pydantic hypothesis attr attrs anyio h11 httpx".split()
"""The installed packages copied as the real tree (those installed): about 1,300 files."""


def copy_packages(site: pathlib.Path, root: pathlib.Path) -> list[str]:
    """Copy the sources of :data:`PACKAGES` found in ``site`` into ``root``; their names."""
    copied = []
    for name in PACKAGES:
        if (site / name).is_dir():
            shutil.copytree(site / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
            copied.append(name)
    return copied


async def real_cases(runner: Runner) -> None:
    """Real sources: bigger files, long lines, and words with thousands of matching lines."""
    rare, common, expression, folded = (
        "open_memory_channel",
        "self",
        r"class \w+Error",
        "deprecated",
    )
    for label, pattern in (("rare", rare), ("common", common), ("regex", expression)):
        for mode, flag in (("files_with_matches", "-l"), ("content", "-n"), ("count", "-c")):
            await runner.compare(
                f"Grep {mode}, {label:<{25 - len(mode)}}| grep -r{flag[1]}",
                "Grep",
                {"pattern": pattern, "output_mode": mode},
                [*GREP_E, flag, pattern, "."],
            )
    for mode, flag in (("files_with_matches", "-l"), ("content", "-n"), ("count", "-c")):
        await runner.compare(
            f"Grep {mode}, {'-i':<{25 - len(mode)}}| grep -r{flag[1]}i",
            "Grep",
            {"pattern": folded, "output_mode": mode, "ignore_case": True},
            [*GREP_E, flag, "-i", folded, "."],
        )
    # Counting goes through every matching line: a common word ignoring case, and filtered.
    await runner.compare(
        "Grep count, common -i      | grep -rci",
        "Grep",
        {"pattern": common, "output_mode": "count", "ignore_case": True},
        [*GREP_E, "-c", "-i", common, "."],
    )
    await runner.compare(
        "Grep count, common, glob   | grep -rc --include",
        "Grep",
        {"pattern": common, "output_mode": "count", "glob": "*.py"},
        [*GREP_E, "-c", "--include=*.py", common, "."],
    )
    await runner.compare(
        "Grep count, regex, type=py | grep -rc --include",
        "Grep",
        {"pattern": expression, "output_mode": "count", "type": "py"},
        [*GREP_E, "-c", "--include=*.py", "--include=*.pyi", expression, "."],
    )
    await runner.compare(
        "Grep content, context=2    | grep -rn -C2",
        "Grep",
        {"pattern": rare, "output_mode": "content", "context": 2},
        [*GREP_E, "-n", "-C2", rare, "."],
    )
    await runner.compare(
        "Glob **/*.py               | find -name",
        "Glob",
        {"pattern": "**/*.py"},
        find_files(".", "-name", "*.py"),
    )
    await runner.compare(
        "Glob trio/**/*.py          | find -path",
        "Glob",
        {"pattern": "trio/**/*.py"},
        find_files("trio", "-path", "trio/*.py"),
    )


async def read_and_list_cases(runner: Runner, root: pathlib.Path, lines: int, entries: int) -> None:
    big = root / "big.txt"
    with big.open("w") as file:
        for number in range(lines):
            file.write(f"line {number} of a big file: {WORDS[number % len(WORDS)]} " * 2 + "\n")
    await runner.compare(
        f"Read big.txt ({big.stat().st_size >> 20} MiB)       | head -n 2000",
        "Read",
        {"file_path": "big.txt"},
        ["head", "-n", "2000", "big.txt"],
    )
    middle = lines // 2
    await runner.compare(
        f"Read big.txt, offset={middle:<7}  | sed -n",
        "Read",
        {"file_path": "big.txt", "offset": middle},
        ["sed", "-n", f"{middle},{middle + 1999}p;{middle + 1999}q", "big.txt"],
    )
    many = root / "many"
    many.mkdir()
    for number in range(entries):
        (many / f"entry{number:06}.txt").touch()
    await runner.compare(
        f"ListDir of {entries:,} entries       | ls -1p",
        "ListDir",
        {"path": "many"},
        ["ls", "-1p", "many"],
    )


async def measure(
    root: pathlib.Path,
    reps: int,
    title: str,
    pattern: str,
    generated: bool,
    alternative: str,
    directory: str,
) -> list[tuple[str, float, float]]:
    async with tk.open_kernel(
        builtin_tools(), root=root, max_concurrency=MAX_CONCURRENCY
    ) as kernel:
        runner = Runner(kernel, root, reps)
        header(title)
        await search_cases(runner, pattern, generated, alternative, directory)
        return runner.rows


async def run(quick: bool, sizes: list[int] | None, whole_site: bool) -> int:
    reps = 1 if quick else 5
    sizes = sizes or ([1_000] if quick else [1_000, 10_000, 100_000])
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="toolkernel-search-") as scratch:
        for size in sizes:
            root = pathlib.Path(scratch) / f"tree{size}"
            started = time.perf_counter()
            build_tree(root, size)
            print(f"\n(built {size:,} files in {time.perf_counter() - started:.1f} s)")
            rows += await measure(
                root,
                reps,
                f"generated tree, {size:,} files",
                RARE + "[0-9]+",
                True,
                "nowhere_[0-9]+",
                "src",
            )
        site = pathlib.Path(sysconfig.get_paths()["purelib"])
        real = pathlib.Path(scratch) / "real"
        copied = copy_packages(site, real)
        if copied:
            count = sum(len(files) for _, _, files in os.walk(real))
            async with tk.open_kernel(
                builtin_tools(), root=real, max_concurrency=MAX_CONCURRENCY
            ) as kernel:
                runner = Runner(kernel, real, reps)
                header(f"real tree: {', '.join(copied)} ({count:,} files)")
                await real_cases(runner)
                rows += runner.rows
        trio_tree = real / "trio"
        if not quick and trio_tree.is_dir():
            count = sum(len(files) for _, _, files in os.walk(trio_tree))
            rows += await measure(
                trio_tree,
                reps,
                f"trio's sources ({count:,} files)",
                r"def [a-z_]+_nowait",
                False,
                r"class \w+Error",
                "_core",
            )
        if not quick and whole_site:
            count = sum(len(files) for _, _, files in os.walk(site))
            rows += await measure(
                site,
                reps,
                f"site-packages ({count:,} files)",
                r"def [a-z_]+_nowait",
                False,
                r"class \w+Error",
                "trio",
            )
        extra = pathlib.Path(scratch) / "files"
        extra.mkdir()
        async with tk.open_kernel(
            builtin_tools(), root=extra, max_concurrency=MAX_CONCURRENCY
        ) as kernel:
            runner = Runner(kernel, extra, reps)
            header("Read and ListDir")
            if quick:
                await read_and_list_cases(runner, extra, 20_000, 2_000)
            else:
                await read_and_list_cases(runner, extra, 200_000, 100_000)
            rows += runner.rows
    missed = [label for label, ours, theirs in rows if ours / theirs > TARGET]
    print(
        f"\n{len(rows) - len(missed)} of {len(rows)} within {TARGET:g}x"
        + (f"; missed: {', '.join(missed)}" if missed else "")
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 1,000 generated files and the real tree, one run of each",
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", help="the generated trees' sizes (files), instead"
    )
    options = parser.parse_args(argv)
    whole_site = pathlib.Path(sysconfig.get_paths()["purelib"]).is_dir()
    return trio.run(run, options.quick, options.sizes, whole_site)


if __name__ == "__main__":
    raise SystemExit(main())
