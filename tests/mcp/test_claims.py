"""What a call of an MCP tool claims, from the tool as a server lists it (the SDK's own ``Tool``
type), without a server: the user's word, a preset, inference from the schema, else a barrier.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator
from typing import Any

import mcp_types
import pytest

import toolkernel as tk
from toolkernel.mcp import MCPTool
from toolkernel.mcp._claims import ServerPlace
from toolkernel.mcp._presets import PRESETS
from toolkernel.mcp._tool import ServerConnection

SERVER = tk.device("mcp:fs")
READ_ONLY = mcp_types.ToolAnnotations(read_only_hint=True)


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


STRING = {"type": "string"}
STRINGS = {"type": "array", "items": {"type": "string"}}


def make(
    name: str = "edit",
    input_schema: dict[str, Any] | None = None,
    annotations: mcp_types.ToolAnnotations | None = None,
    *,
    place: ServerPlace | None = None,
    preset: str | None = None,
    serial: bool = False,
    **options: Any,
) -> MCPTool:
    spec = mcp_types.Tool(
        name=name,
        description=f"{name}, for the tests",
        input_schema=input_schema or schema(text=STRING),
        annotations=annotations,
    )
    connection = ServerConnection(
        "fs",
        ["fs-server"],
        place=place,
        preset=PRESETS[preset] if preset else None,
        serial=serial,
    )
    return MCPTool(connection, spec, **options)


@pytest.fixture
def workspace(tmp_path: pathlib.Path) -> Iterator[tk.Workspace]:
    (tmp_path / "src").mkdir()
    with tk.Workspace(tmp_path) as opened:
        yield opened


def at_root(workspace: tk.Workspace, *, cwd: str | None = "root") -> ServerPlace:
    """A server told the workspace as its root, working in it (or elsewhere, or unknown)."""
    root = str(workspace.root)
    where = root if cwd == "root" else cwd
    return ServerPlace(roots=(root,), cwd=where)


# -- the barrier --------------------------------------------------------------------------------


def test_a_tool_that_says_nothing_holds_the_workspace_and_its_server(
    workspace: tk.Workspace,
) -> None:
    not_read_only = mcp_types.ToolAnnotations(read_only_hint=False)
    everything = tk.path(".")
    for tool in (make(), make(annotations=not_read_only)):  # the spec's default: not read-only
        assert tool.claims({"text": "x"}, workspace.key) == [
            tk.exclusive(everything),
            tk.exclusive(SERVER),
        ]
    assert make(annotations=READ_ONLY).claims({"text": "x"}, workspace.key) == [
        tk.shared(everything),
        tk.shared(SERVER),
    ]
    # Without a workspace the root of all paths stands for it.
    assert make().claims({"text": "x"}, tk.path) == [
        tk.exclusive(tk.path(".")),
        tk.exclusive(SERVER),
    ]


def test_the_barrier_conflicts_with_every_file_tool_and_a_read_only_one_only_with_writes(
    workspace: tk.Workspace,
) -> None:
    writer = make().claims({"text": "x"}, workspace.key) or []
    reader = make(annotations=READ_ONLY).claims({"text": "x"}, workspace.key) or []
    table = tk.locks.LeaseTable()
    table.request(writer)
    assert table.request_nowait([tk.reads("src/a.py")]) is None
    table = tk.locks.LeaseTable()
    table.request(reader)
    assert table.request_nowait([tk.reads("src/a.py")]) is not None
    assert table.request_nowait([tk.writes("src/a.py")]) is None


# -- the user's claims --------------------------------------------------------------------------


def test_declared_paths_are_keyed_through_the_workspace_beside_a_shared_server_lease(
    workspace: tk.Workspace,
) -> None:
    tool = make(input_schema=schema(path=STRING, text=STRING), writes=["path"])
    spelled = os.path.join(str(workspace.root), "src", "..", "src", "a.py")  # absolute, with ..
    claims = tool.claims({"path": spelled}, workspace.key)
    assert set(claims or ()) == {tk.shared(SERVER), tk.writes("src/a.py")}
    # A path argument the call leaves out claims nothing.
    reader = make("search", schema(root=STRING), reads=["root"])
    assert reader.claims({}, tk.path) == [tk.shared(SERVER)]
    assert set(reader.claims({"root": "docs"}, tk.path) or ()) == {
        tk.shared(SERVER),
        tk.reads("docs"),
    }


def test_claims_functions_per_tool_or_for_every_tool(workspace: tk.Workspace) -> None:
    per_tool = make(claims=lambda args: [tk.exclusive(tk.device(f"file:{args['text']}"))])
    assert per_tool.claims({"text": "a"}, tk.path) == [
        tk.shared(SERVER),
        tk.exclusive(tk.device("file:a")),
    ]

    def every_tool(tool: MCPTool, args: Any) -> list[tk.Claim] | None:
        return [tk.writes(args["text"])] if tool.remote_name == "edit" else None

    assert make(tool_claims=every_tool).claims({"text": "b"}, tk.path) == [
        tk.shared(SERVER),
        tk.writes("b"),
    ]
    # None leaves the call to what follows: here, the barrier.
    assert make("other", tool_claims=every_tool).claims({"text": "b"}, workspace.key) == [
        tk.exclusive(tk.path(".")),
        tk.exclusive(SERVER),
    ]
    # An empty list: the call needs nothing but its share of the server.
    assert make(claims=lambda args: []).claims({"text": "b"}, tk.path) == [tk.shared(SERVER)]


def test_a_serial_server_is_held_alone_by_every_call(workspace: tk.Workspace) -> None:
    place = at_root(workspace)
    assert make(claims=lambda args: [], serial=True).claims({}, tk.path) == [tk.exclusive(SERVER)]
    reader = make("read", schema(path=STRING), READ_ONLY, place=place, serial=True)
    assert set(reader.claims({"path": "a.txt"}, workspace.key) or ()) == {
        tk.exclusive(SERVER),
        tk.reads("a.txt"),
    }
    assert make(annotations=READ_ONLY, serial=True).claims({"text": "x"}, workspace.key) == [
        tk.shared(tk.path(".")),
        tk.exclusive(SERVER),
    ]


# -- inference from the schema ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argument",
    ["path", "file_path", "filePath", "filename", "repo_path", "output_dir", "directory", "root"],
)
def test_an_argument_named_as_a_path_is_read_or_written_per_the_read_only_hint(
    workspace: tk.Workspace, argument: str
) -> None:
    place = at_root(workspace)
    writer = make("put", schema(**{argument: STRING, "content": STRING}), place=place)
    assert writer.claims({argument: "src/a.py", "content": "x"}, workspace.key) == [
        tk.shared(SERVER),
        tk.writes("src/a.py"),
    ]
    reader = make("get", schema(**{argument: STRING}), READ_ONLY, place=place)
    assert reader.claims({argument: "src/a.py"}, workspace.key) == [
        tk.shared(SERVER),
        tk.reads("src/a.py"),
    ]


def test_lists_of_paths_and_a_source_beside_a_destination_are_paths(
    workspace: tk.Workspace,
) -> None:
    place = at_root(workspace)
    several = make("get_all", schema(paths=STRINGS), READ_ONLY, place=place)
    assert set(several.claims({"paths": ["a", "src/b"]}, workspace.key) or ()) == {
        tk.shared(SERVER),
        tk.reads("a"),
        tk.reads("src/b"),
    }
    mover = make("move", schema(source=STRING, destination=STRING), place=place)
    assert set(mover.claims({"source": "a", "destination": "b"}, workspace.key) or ()) == {
        tk.shared(SERVER),
        tk.writes("a"),
        tk.writes("b"),
    }


@pytest.mark.parametrize(
    "properties",
    [
        {"source": STRING},  # source code, as likely as a path
        {"xpath": STRING, "document": STRING},
        {"path": {"type": "integer"}},
        {"path": STRING, "command": STRING},  # it runs whatever it is told
        {"cwd": STRING, "script": STRING},
    ],
)
def test_no_inference_without_a_path_argument_or_beside_a_command(
    workspace: tk.Workspace, properties: dict[str, Any]
) -> None:
    tool = make("tool", schema(**properties), place=at_root(workspace))
    assert tool.effects is None
    arguments = {name: "src/a.py" for name in properties}
    assert tool.claims(arguments, workspace.key) == [
        tk.exclusive(tk.path(".")),
        tk.exclusive(SERVER),
    ]


def test_paths_are_keyed_only_where_the_server_reads_them_as_the_kernel_does(
    workspace: tk.Workspace, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = str(tmp_path_factory.mktemp("elsewhere"))
    inside = os.path.join(str(workspace.root), "src", "a.py")
    barrier = [tk.exclusive(tk.path(".")), tk.exclusive(SERVER)]
    keyed = [tk.shared(SERVER), tk.writes("src/a.py")]
    properties = schema(path=STRING, content=STRING)

    def claims(place: ServerPlace, path: str | None) -> list[tk.Claim] | None:
        tool = make("write", properties, place=place)
        arguments = {"content": "x"} if path is None else {"path": path, "content": "x"}
        found = tool.claims(arguments, workspace.key)
        return None if found is None else list(found)

    assert claims(at_root(workspace), "src/a.py") == keyed
    assert claims(at_root(workspace), inside) == keyed
    # Working elsewhere, or unknown (a server reached over HTTP): a relative path is a barrier,
    # an absolute one is keyed.
    for cwd in (elsewhere, None):
        assert claims(at_root(workspace, cwd=cwd), "src/a.py") == barrier
        assert claims(at_root(workspace, cwd=cwd), inside) == keyed
    # Told another root, or none, or two: the server's paths are not the kernel's.
    assert claims(ServerPlace(roots=(elsewhere,), cwd=str(workspace.root)), "src/a.py") == barrier
    assert claims(ServerPlace(roots=(), cwd=str(workspace.root)), "src/a.py") == barrier
    two = ServerPlace(roots=(str(workspace.root), elsewhere), cwd=str(workspace.root))
    assert claims(two, "src/a.py") == barrier
    # Outside the workspace, the server's home, or left out: a barrier, never refused.
    for path in (os.path.join(elsewhere, "x"), "../x", "~/notes.txt", None, ""):
        assert claims(at_root(workspace), path) == barrier
    # With no workspace at all, nothing is keyed.
    tool = make("write", properties, place=at_root(workspace))
    assert tool.claims({"path": "a.py", "content": "x"}, tk.path) == [
        tk.exclusive(tk.path(".")),
        tk.exclusive(SERVER),
    ]


# -- presets ------------------------------------------------------------------------------------


def test_the_filesystem_preset_reads_and_writes_its_path_arguments_relative_to_its_root(
    workspace: tk.Workspace, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The filesystem server resolves a relative path against its root, wherever it runs.
    place = at_root(workspace, cwd=str(tmp_path_factory.mktemp("elsewhere")))
    read = make("read_text_file", schema(path=STRING), READ_ONLY, place=place, preset="filesystem")
    assert read.claims({"path": "src/a.py"}, workspace.key) == [
        tk.shared(SERVER),
        tk.reads("src/a.py"),
    ]
    several = make(
        "read_multiple_files", schema(paths=STRINGS), READ_ONLY, place=place, preset="filesystem"
    )
    assert set(several.claims({"paths": ["a", "b"]}, workspace.key) or ()) == {
        tk.shared(SERVER),
        tk.reads("a"),
        tk.reads("b"),
    }
    move = make(
        "move_file", schema(source=STRING, destination=STRING), place=place, preset="filesystem"
    )
    assert set(move.claims({"source": "a", "destination": "src/b"}, workspace.key) or ()) == {
        tk.shared(SERVER),
        tk.writes("a"),
        tk.writes("src/b"),
    }
    listed = make("list_allowed_directories", schema(), READ_ONLY, place=place, preset="filesystem")
    assert listed.claims({}, workspace.key) == [tk.shared(SERVER)]


def test_presets_for_servers_that_touch_no_file_or_keep_state_of_their_own(
    workspace: tk.Workspace,
) -> None:
    place = at_root(workspace)
    time = make("get_current_time", schema(timezone=STRING), place=place, preset="time")
    assert time.claims({"timezone": "UTC"}, workspace.key) == [tk.shared(SERVER)]
    fetch = make("fetch", schema(url=STRING), place=place, preset="fetch")
    assert fetch.claims({"url": "https://example.org"}, workspace.key) == [tk.shared(SERVER)]
    # The memory server's graph is its own: changes hold the server alone, reads share it.
    create = make("create_entities", schema(entities=STRINGS), place=place, preset="memory")
    assert create.claims({"entities": []}, workspace.key) == [tk.exclusive(SERVER)]
    search = make("search_nodes", schema(query=STRING), READ_ONLY, place=place, preset="memory")
    assert search.claims({"query": "x"}, workspace.key) == [tk.shared(SERVER)]
    git = make("git_commit", schema(repo_path=STRING, message=STRING), place=place, preset="git")
    assert git.claims({"repo_path": ".", "message": "m"}, workspace.key) == [
        tk.shared(SERVER),
        tk.writes("."),
    ]


def test_a_preset_entry_the_schema_does_not_match_is_not_used(workspace: tk.Workspace) -> None:
    # A newer release renamed the argument: the preset's entry would claim nothing for it.
    tool = make("write_file", schema(target=STRING), place=at_root(workspace), preset="filesystem")
    assert tool.effects is None
    assert tool.claims({"target": "a"}, workspace.key) == [
        tk.exclusive(tk.path(".")),
        tk.exclusive(SERVER),
    ]
