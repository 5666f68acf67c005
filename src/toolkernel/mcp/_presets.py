"""What the tools of the MCP reference servers touch, so their calls claim only that.

A preset names, for each tool of one server, the arguments holding paths a call reads and
writes, and how it holds the server's own state (its device: shared, or exclusive for a tool
that changes state the server keeps, such as the memory server's graph). A tool whose entry
names no path touches no file of the workspace.

Presets are found by the name the server gives itself when it starts (``serverInfo.name``), or
chosen with ``preset=`` of :func:`~toolkernel.mcp.stdio_tools`. A tool the preset does not know
(a newer release's) is left to inference or, failing that, is a barrier; an entry whose path
argument the server's schema lacks is not used.

Path arguments are keyed only where the server reads paths as the kernel does (see
``_claims``): relative paths against its root (``relative_to_root``, the filesystem server's
rule) or against its working directory (the others).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from ..locks import Mode

__all__ = ["Effects", "Preset", "PRESETS", "preset_for"]

_SHARED, _EXCLUSIVE = Mode.SHARED, Mode.EXCLUSIVE


@attrs.frozen
class Effects:
    """What a call of one tool touches: the arguments holding paths it reads and writes (a
    path, or a list of paths), and how it holds the server's own state."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    server: Mode = _SHARED

    @property
    def path_arguments(self) -> tuple[str, ...]:
        return (*self.reads, *self.writes)


@attrs.frozen
class Preset:
    """The effects of one server's tools, by the server's names for them."""

    name: str
    tools: Mapping[str, Effects]
    relative_to_root: bool = False
    """Whether the server resolves a relative path against its root rather than its working
    directory."""


def _reader(*arguments: str) -> Effects:
    return Effects(reads=arguments)


def _writer(*arguments: str) -> Effects:
    return Effects(writes=arguments)


_NO_FILES = Effects()
_CHANGES_STATE = Effects(server=_EXCLUSIVE)

FILESYSTEM = Preset(
    "filesystem",
    {
        **dict.fromkeys(
            (
                "read_file",
                "read_text_file",
                "read_media_file",
                "list_directory",
                "list_directory_with_sizes",
                "directory_tree",
                "search_files",
                "get_file_info",
            ),
            _reader("path"),
        ),
        "read_multiple_files": _reader("paths"),
        "write_file": _writer("path"),
        "edit_file": _writer("path"),
        "create_directory": _writer("path"),
        "move_file": _writer("source", "destination"),
        "list_allowed_directories": _NO_FILES,
    },
    relative_to_root=True,
)

GIT = Preset(
    "git",
    {
        **dict.fromkeys(
            (
                "git_status",
                "git_diff_unstaged",
                "git_diff_staged",
                "git_diff",
                "git_log",
                "git_show",
                "git_branch",
            ),
            _reader("repo_path"),
        ),
        **dict.fromkeys(
            ("git_commit", "git_add", "git_reset", "git_create_branch", "git_checkout"),
            _writer("repo_path"),
        ),
    },
)

FETCH = Preset("fetch", {"fetch": _NO_FILES})

MEMORY = Preset(
    "memory",
    {
        **dict.fromkeys(("read_graph", "search_nodes", "open_nodes"), _NO_FILES),
        **dict.fromkeys(
            (
                "create_entities",
                "create_relations",
                "add_observations",
                "delete_entities",
                "delete_observations",
                "delete_relations",
            ),
            _CHANGES_STATE,
        ),
    },
)

TIME = Preset("time", {"get_current_time": _NO_FILES, "convert_time": _NO_FILES})

PRESETS: dict[str, Preset] = {
    preset.name: preset for preset in (FILESYSTEM, GIT, FETCH, MEMORY, TIME)
}

# The names the reference servers give themselves in ``serverInfo``.
_BY_SERVER_NAME = {
    "secure-filesystem-server": FILESYSTEM,
    "mcp-git": GIT,
    "mcp-fetch": FETCH,
    "memory-server": MEMORY,
    "mcp-time": TIME,
}


def preset_for(server_name: str | None) -> Preset | None:
    """The preset of a reference server by the name it gives itself, if it is one."""
    return _BY_SERVER_NAME.get(server_name) if server_name else None
