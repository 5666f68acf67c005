"""Generated commands that mix the shell's constructs, checked two ways.

A small grammar builds commands from programs that write (redirections in every form, ``sed``
scripts and ``-i``, ``sort -o``, ``tee``, ``cp``, ``touch``, ``rm``...) nested in wrappers,
``bash -c`` strings, substitutions, subshells, loops, conditions, heredocs and ``cd sub &&``.
Each case knows the files it writes, relative to where it starts:

- its claims cover every one of them exclusively (or it is the barrier, which covers all);
- run for real in a scratch directory, by bash (the Bash tool's shell) and by ``/bin/sh`` (its
  shell where there is no bash; dash reads ``&>`` differently), every path it changed is covered.
"""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import tempfile

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolkernel as tk
from toolkernel.locks import Mode, Path
from toolkernel.shell._confine import SHELL
from toolkernel.tools import shell_claims

from .helpers import changed, snapshot

SHELLS = sorted({SHELL, "/bin/sh"})


@attrs.frozen
class Case:
    command: str
    writes: tuple[str, ...]


TARGETS = ("out", "o.txt", "sub/out", "sub/deep/o", "new dir/f")


def quoted(target: str) -> str:
    return shlex.quote(target)


def leaf(writer: str, target: str) -> Case:
    q = quoted(target)
    commands = {
        ">": f"echo hi > {q}",
        ">>": f"echo hi >> {q}",
        ">|": f"echo hi >| {q}",
        "&>": f"ls &> {q}",
        "&>>": f"ls &>> {q}",
        "2>": f"ls missing 2> {q}",
        "1>": f"echo x 1>{q}",
        "{fd}>": f"echo x {{fd}}> {q}",
        ">&": f"echo x >& {q}",
        "heredoc": f"cat <<EOF > {q}\nline $(echo x)\nEOF",
        "quoted-heredoc": f"cat <<'EOF' > {q}\n`x` $(y)\nEOF",
        "tee": f"echo x | tee {q}",
        "tee -a": f"echo x | tee -a {q} > /dev/null",
        "sort -o": f"sort -o {q} a",
        "sort --out": f"sort --out={q} a",
        "sed w": f"sed -n {shlex.quote('w ' + target)} a",
        "sed s///w": f"sed {shlex.quote('s/a/b/w ' + target)} a",
        "sed -i": f"cp a {q} && sed -i s/a/b/ {q}",
        "sed -i.bak": f"cp a {q} && sed -i.bl s/a/b/ {q}",
        "cp": f"cp a {q}",
        "touch": f"touch {q}",
        "mkdir -p": f"mkdir -p {q}",
        "rm": f"rm -f {q}",
        "mv": f"cp a {q}.tmp && mv {q}.tmp {q}",
        "truncate": f"truncate -s 0 {q}",
        "find -fprint": f"find a -fprint {q}",
        "uniq": f"uniq a {q}",
    }
    return Case(commands[writer], (target,))


WRITERS = (
    ">",
    ">>",
    ">|",
    "&>",
    "&>>",
    "2>",
    "1>",
    "{fd}>",
    ">&",
    "heredoc",
    "quoted-heredoc",
    "tee",
    "tee -a",
    "sort -o",
    "sort --out",
    "sed w",
    "sed s///w",
    "sed -i",
    "sed -i.bak",
    "cp",
    "touch",
    "mkdir -p",
    "rm",
    "mv",
    "truncate",
    "find -fprint",
    "uniq",
)
READERS = ("cat a", "ls", "grep -n a a", "wc -l a", "head -1 a", "true", "sed -n 1p a")

leaves = st.builds(leaf, st.sampled_from(WRITERS), st.sampled_from(TARGETS)) | st.builds(
    lambda command: Case(command, ()), st.sampled_from(READERS)
)


def in_sub(case: Case) -> Case:
    return Case(f"(cd sub && {case.command})", tuple(f"sub/{t}" for t in case.writes))


def wrapped(case: Case, shape: str) -> Case:
    if shape in ("bash -c", "sh -c"):
        return Case(f"{shape} {shlex.quote(case.command)}", case.writes)
    return Case(shape.format(case.command), case.writes)


def joined(pair: tuple[Case, Case], operator: str) -> Case:
    left, right = pair
    return Case(f"{left.command} {operator} {right.command}", left.writes + right.writes)


def redirected(case: Case, target: str) -> Case:
    return Case(f"{{ {case.command}\n}} > {quoted(target)}", (*case.writes, target))


SHAPES = (
    "( {} )",
    "{{ {}; }}",
    "echo $({})",
    'echo "$({})"',
    "cat <({})",
    "timeout 5 {}",
    "nice -n 1 {}",
    "nohup {} 2>/dev/null",
    "env A=1 {}",
    "command {}",
    "! {}",
    "if true; then {}; fi",
    "if false; then :; else {}; fi",
    "for i in 1; do {}; done",
    "while true; do {}; break; done",
    "case x in x) {};; esac",
    "bash -c",
    "sh -c",
    "x=$({}); echo $x",
)


def extend(children: st.SearchStrategy[Case]) -> st.SearchStrategy[Case]:
    return st.one_of(
        st.builds(joined, st.tuples(children, children), st.sampled_from(["&&", "||", ";", "|"])),
        st.builds(wrapped, children, st.sampled_from(SHAPES)),
        st.builds(redirected, children, st.sampled_from(TARGETS)),
        st.builds(in_sub, children),
    )


cases = st.recursive(leaves, extend, max_leaves=5)


def covered_exclusively(target: str, claims: list[tk.Claim]) -> bool:
    key = tk.path(os.path.normpath(target))
    return any(
        claim.mode is Mode.EXCLUSIVE
        and isinstance(claim.resource, Path)
        and key.parts[: len(claim.resource.parts)] == claim.resource.parts
        for claim in claims
    )


@settings(max_examples=300, deadline=None)
@given(cases)
def test_every_write_of_a_mixed_command_is_claimed(case: Case) -> None:
    claims = shell_claims(case.command)
    for target in case.writes:
        assert covered_exclusively(target, claims), (case.command, target, claims)


def leads_to_a_claim(place: str, claims: list[tk.Claim]) -> bool:
    parts = tk.path(place).parts
    return any(
        claim.mode is Mode.EXCLUSIVE
        and isinstance(claim.resource, Path)
        and claim.resource.parts[: len(parts)] == parts
        for claim in claims
    )


def scratch(root: pathlib.Path) -> None:
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "new dir").mkdir()
    (root / "a").write_text("a\nb\na\n")
    (root / "sub" / "a").write_text("a\n")
    (root / "sub" / "deep" / "a").write_text("a\n")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@pytest.mark.parametrize("shell", SHELLS)
@given(case=cases)
def test_what_a_mixed_command_changes_when_run_is_claimed(shell: str, case: Case) -> None:
    check_a_real_run(shell, case)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    "command",
    [
        # dash reads `a && b &> f && c` as `a && b &` and `> f && c`: c runs where a began.
        "(cd sub && ls &> out && echo hi > o.txt)",
        "cd sub && ls &>> out || echo hi > o.txt",
        "cd sub && ls &> out | cat && touch o.txt",
    ],
)
def test_what_follows_a_backgrounding_redirect_in_dash_is_claimed(shell: str, command: str) -> None:
    check_a_real_run(shell, Case(command, ()))


def check_a_real_run(shell: str, case: Case) -> None:
    claims = shell_claims(case.command)
    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        scratch(root)
        before = snapshot(root)
        subprocess.run(
            [shell, "-c", case.command],
            cwd=root,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
        after = snapshot(root)
        for place in changed(before, after):
            # As everywhere: an exclusive claim covers making the directories that lead to it.
            made_on_the_way = place not in before and after[place][0] == "dir"
            assert covered_exclusively(place, claims) or (
                made_on_the_way and leads_to_a_claim(place, claims)
            ), (case.command, place, claims)
