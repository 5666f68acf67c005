"""No write from a stale view: Write, Edit and MultiEdit refuse a file that changed since this
agent last read or wrote it, and (for a model's calls) one it never read."""

from __future__ import annotations

import os
import pathlib

import hypothesis.strategies as st
import pytest
import trio
from hypothesis import HealthCheck, given, settings

import toolkernel as tk
from toolkernel.agent import ScriptedModel, Turn, run_agent
from toolkernel.tools import StaleRule, _fileops, builtin_tools


def call(id: str, name: str, /, **arguments: object) -> tk.ToolCall:
    return tk.ToolCall(id, name, arguments)


def edit(id: str, old: str, new: str, **options: object) -> tk.ToolCall:
    return tk.ToolCall(
        id, "Edit", {"file_path": "a.txt", "old_string": old, "new_string": new}, **options
    )


def read(id: str, **options: object) -> tk.ToolCall:
    return tk.ToolCall(id, "Read", {"file_path": "a.txt"}, **options)


def person_appends(root: pathlib.Path, text: bytes) -> None:
    fd = os.open(root / "a.txt", os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, text)
    finally:
        os.close(fd)


async def test_a_change_by_a_person_between_read_and_edit_is_refused(tmp_path: pathlib.Path):
    (tmp_path / "a.txt").write_text("one\n")
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        assert (await kernel.run([read("r1")]))[0].ok
        person_appends(tmp_path, b"two\n")
        [refused] = await kernel.run([edit("e1", "one", "ONE")])
        assert refused.status is tk.Status.ERROR
        assert refused.error_type == "StaleViewError"
        assert "modified since this agent last read" in (refused.error or "")
        assert "Read it again" in (refused.error or "")
        assert (tmp_path / "a.txt").read_text() == "one\ntwo\n"  # nothing lost
        assert (await kernel.run([read("r2")]))[0].ok
        assert (await kernel.run([edit("e2", "one", "ONE")]))[0].ok
    assert (tmp_path / "a.txt").read_text() == "ONE\ntwo\n"


async def test_own_successive_edits_need_no_read_between(tmp_path: pathlib.Path):
    (tmp_path / "a.txt").write_text("a b c\n")
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        await kernel.run([read("r1")])
        results = await kernel.run(
            [
                edit("e1", "a", "A"),
                edit("e2", "b", "B"),
                tk.ToolCall(
                    "m1",
                    "MultiEdit",
                    {"file_path": "a.txt", "edits": [{"old_string": "c", "new_string": "C"}]},
                ),
            ]
        )
        assert [r.status for r in results] == [tk.Status.OK] * 3
        assert (await kernel.run([call("w1", "Write", file_path="a.txt", content="x")]))[0].ok
    assert (tmp_path / "a.txt").read_text() == "x"


async def test_another_kernel_is_another_agent(tmp_path: pathlib.Path):
    (tmp_path / "a.txt").write_text("one\n")
    async with (
        tk.open_kernel(builtin_tools(), root=tmp_path) as first,
        tk.open_kernel(builtin_tools(), root=tmp_path) as second,
    ):
        await first.run([read("r1")])
        await second.run([read("r1")])
        assert (await second.run([edit("e1", "one", "uno")]))[0].ok
        [refused] = await first.run([edit("e1", "one", "eins")])
        assert refused.error_type == "StaleViewError"
    assert (tmp_path / "a.txt").read_text() == "uno\n"


async def test_two_named_agents_on_one_kernel(tmp_path: pathlib.Path):
    (tmp_path / "a.txt").write_text("one\n")
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        await kernel.run([read("r1", agent="alice"), read("r2", agent="bob")])
        assert (await kernel.run([edit("e1", "one", "uno", agent="alice")]))[0].ok
        [refused] = await kernel.run([edit("e2", "one", "eins", agent="bob")])
        assert refused.error_type == "StaleViewError"
        # alice's own write is hers: she goes on without reading again
        assert (await kernel.run([edit("e3", "uno", "un", agent="alice")]))[0].ok


async def test_a_bash_change_makes_the_view_stale(tmp_path: pathlib.Path):
    (tmp_path / "a.txt").write_text("one\n")
    async with tk.open_kernel(builtin_tools(bash=True), root=tmp_path) as kernel:
        await kernel.run([read("r1")])
        [ran] = await kernel.run([call("b1", "Bash", command="echo two >> a.txt")])
        assert ran.ok, ran.error
        [refused] = await kernel.run([edit("e1", "one", "ONE")])
        assert refused.error_type == "StaleViewError"  # the model saw the output, not the file
        assert (tmp_path / "a.txt").read_text() == "one\ntwo\n"


async def test_a_change_just_after_the_agents_own_write_is_not_taken_for_its_own(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / "a.txt").write_text("one\n")
    placed = _fileops._placed

    def person_first(parent: int, name: str, as_written: os.stat_result) -> os.stat_result:
        # After the rename that put the agent's write in place, before its version is taken.
        person_appends(tmp_path, b"two\n")
        return placed(parent, name, as_written)

    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        await kernel.run([read("r1")])
        monkeypatch.setattr(_fileops, "_placed", person_first)
        assert (await kernel.run([edit("e1", "one", "ONE")]))[0].ok
        monkeypatch.undo()
        [refused] = await kernel.run([edit("e2", "ONE", "uno")])
        assert refused.error_type == "StaleViewError"
    assert (tmp_path / "a.txt").read_text() == "ONE\ntwo\n"


async def test_a_partial_read_counts_as_a_read(tmp_path: pathlib.Path):
    (tmp_path / "a.txt").write_text("".join(f"line {n}\n" for n in range(100)))
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        partial = tk.ToolCall("r1", "Read", {"file_path": "a.txt", "offset": 50, "limit": 2})
        assert (await kernel.run([partial]))[0].ok
        [edited] = await kernel.run([edit("e1", "line 50\n", "L50\n", read_first=True)])
        assert edited.ok, edited.error
        await kernel.run([partial])
        person_appends(tmp_path, b"more\n")
        [refused] = await kernel.run([edit("e2", "line 51\n", "L51\n", read_first=True)])
        assert refused.error_type == "StaleViewError"


async def test_never_read_is_allowed_for_programs_refused_for_models(tmp_path: pathlib.Path):
    (tmp_path / "a.txt").write_text("one\n")
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        [refused] = await kernel.run([edit("e1", "one", "ONE", read_first=True)])
        assert refused.error_type == "StaleViewError"
        assert "has not read it yet" in (refused.error or "")
        assert "rule: not read" in (refused.error or "")
        [write] = await kernel.run(
            [tk.ToolCall("w1", "Write", {"file_path": "a.txt", "content": "x"}, read_first=True)]
        )
        assert write.error_type == "StaleViewError"
        assert (tmp_path / "a.txt").read_text() == "one\n"
        # a new file never needs a read
        [created] = await kernel.run(
            [tk.ToolCall("w2", "Write", {"file_path": "b.txt", "content": "b"}, read_first=True)]
        )
        assert created.ok
        # a program may overwrite what it never read
        assert (await kernel.run([edit("e2", "one", "ONE", agent="program")]))[0].ok


async def test_run_agent_refuses_a_file_the_model_never_read(tmp_path: pathlib.Path):
    (tmp_path / "a.txt").write_text("one\n")
    model = ScriptedModel(
        [
            Turn("edit", [edit("c1", "one", "ONE")]),
            Turn("read", [read("c2")]),
            Turn("edit again", [edit("c3", "one", "ONE")]),
        ]
    )
    async with tk.open_kernel(builtin_tools(), root=tmp_path) as kernel:
        outcome = await run_agent(model, kernel, "edit a.txt", agent="coder")
    first, _, third = (step.results[0] for step in outcome.steps[:3])
    assert first.error_type == "StaleViewError"
    assert third.ok, third.error
    assert (tmp_path / "a.txt").read_text() == "ONE\n"


def test_the_rules_as_a_transcript():
    view = tk.tools.FileView(limit=2)
    v1 = tk.tools.FileVersion(1, 2, 3, 4, 5)
    v2 = v1._replace(mtime_ns=6)
    view.check(("a",), None, read_first=True, shown="a")  # a new file
    view.check(("a",), v1, read_first=False, shown="a")  # never read, a program's call
    try:
        view.check(("a",), v1, read_first=True, shown="a")
    except tk.StaleViewError as exc:
        assert exc.rule is StaleRule.NOT_READ
    else:
        raise AssertionError("not refused")
    view.saw(("a",), v1)
    view.check(("a",), v1, read_first=True, shown="a")
    try:
        view.check(("a",), v2, read_first=False, shown="a")
    except tk.StaleViewError as exc:
        assert exc.rule is StaleRule.CHANGED
    else:
        raise AssertionError("not refused")
    view.saw(("b",), v1)
    view.saw(("c",), v1)  # bounded: "a", used least recently, falls out
    assert len(view) == 2 and view.version(("a",)) is None


# Operations: (agent, "read" | "edit") or ("outside", None).
_ops = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["alice", "bob"]), st.sampled_from(["read", "edit"])),
        st.just(("outside", "write")),
    ),
    max_size=12,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_ops)
def test_no_write_from_a_stale_view_in_any_interleaving(tmp_path_factory, ops):
    root = tmp_path_factory.mktemp("views")
    # The edits replace the first line, which the counters appended below never repeat (a
    # first line "0" recurred in "10", and the edit then failed as not unique).
    (root / "a.txt").write_text("head\n")

    async def main() -> None:
        # What each agent last saw: the content it read or wrote.
        seen: dict[str, str] = {}
        counter = 0
        async with tk.open_kernel(builtin_tools(), root=root) as kernel:
            for agent, op in ops:
                counter += 1
                before = (root / "a.txt").read_text()
                if agent == "outside":
                    person_appends(root, f"{counter}\n".encode())
                    continue
                if op == "read":
                    assert (await kernel.run([read(f"r{counter}", agent=agent)]))[0].ok
                    seen[agent] = before
                    continue
                new = before.splitlines()[0] + f"+{agent}{counter}"
                [result] = await kernel.run(
                    [edit(f"e{counter}", before.splitlines()[0], new, agent=agent, read_first=True)]
                )
                after = (root / "a.txt").read_text()
                if result.ok:
                    # It wrote over exactly what it had last seen.
                    assert seen.get(agent) == before
                    seen[agent] = after
                else:
                    assert result.error_type == "StaleViewError"
                    assert seen.get(agent) != before
                    assert after == before  # nothing lost

    trio.run(main)
