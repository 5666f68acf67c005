"""Deleting or moving a symbolic link acts on the link, as ``rm`` and ``mv`` do, never on what it
points to; reading and writing through one reach its target, inside the workspace only.

A pnpm or yarn workspace links ``node_modules/foo`` to ``../packages/foo``: deleting the link
must not delete the package's source, and a link that dangles, loops or leads outside the root
must still be deletable.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

import toolkernel as tk
from toolkernel._errors import PathChangedError, PathEscapeError, UndeclaredAccessError
from toolkernel.kernel import KeyFunction, ToolContext
from toolkernel.locks import Claim, Path, exclusive, path, reads
from toolkernel.locks import writes as writes_claim
from toolkernel.tools import FileAccess, Workspace, builtin_tools
from toolkernel.tools._declare import FunctionTool
from toolkernel.tools._fs import entry_keys


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> Iterator[Workspace]:
    root = tmp_path / "root"
    (root / "packages" / "foo" / "src").mkdir(parents=True)
    (root / "packages" / "foo" / "src" / "index.js").write_text("precious source\n")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "foo").symlink_to("../packages/foo")
    (root / "real.txt").write_text("real\n")
    (root / "alias").symlink_to("real.txt")
    (root / "dangling").symlink_to("missing.txt")
    (root / "loop").symlink_to("loop")
    (tmp_path / "outside.txt").write_text("outside\n")
    (root / "out").symlink_to(tmp_path / "outside.txt")
    with Workspace(root, fold_case=False, unicode_form="none") as workspace:
        yield workspace


def everything_but_links_intact(ws: Workspace) -> None:
    assert (ws.root / "packages" / "foo" / "src" / "index.js").read_text() == "precious source\n"
    assert (ws.root / "real.txt").read_text() == "real\n"
    assert (ws.root.parent / "outside.txt").read_text() == "outside\n"


def claiming(ws: Workspace, *spellings: str) -> FileAccess:
    """Access holding what a Delete or Move of ``spellings`` claims (``entry_keys``)."""
    claims = [exclusive(k) for s in spellings for k in entry_keys(ws.key, s)]
    return FileAccess(ws, claims)


# -- FileAccess ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "link", ["node_modules/foo", "node_modules/foo/", "alias", "dangling", "loop", "out"]
)
async def test_delete_removes_the_link_not_its_target(ws: Workspace, link: str) -> None:
    await claiming(ws, link).delete(link)
    name = ws.root / link.rstrip("/")
    assert not name.is_symlink() and not name.exists()
    everything_but_links_intact(ws)


async def test_delete_and_move_holding_everything_leave_the_targets(ws: Workspace) -> None:
    fs = FileAccess(ws, [exclusive(tk.EVERYTHING)])
    await fs.delete("node_modules/foo")
    await fs.delete("alias")
    await fs.move("dangling", "moved")
    everything_but_links_intact(ws)
    assert os.readlink(ws.root / "moved") == "missing.txt"
    assert sorted(os.listdir(ws.root)) == [
        "loop",
        "moved",
        "node_modules",
        "out",
        "packages",
        "real.txt",
    ]


async def test_deleting_a_link_needs_a_claim_on_the_link_not_on_its_target(ws: Workspace) -> None:
    # The target's key is what the link's spelling keys to; holding it does not allow changing
    # the directory holding the link.
    fs = FileAccess(ws, [writes_claim("packages/foo"), writes_claim("real.txt")])
    with pytest.raises(UndeclaredAccessError, match="can't delete 'node_modules/foo'"):
        await fs.delete("node_modules/foo")
    with pytest.raises(UndeclaredAccessError, match="can't delete 'alias'"):
        await fs.delete("alias")
    assert (ws.root / "node_modules" / "foo").is_symlink() and (ws.root / "alias").is_symlink()
    everything_but_links_intact(ws)


async def test_a_link_on_the_way_is_still_followed(ws: Workspace) -> None:
    # Only the last component names the entry: a parent that is a link is resolved, as ever.
    fs = claiming(ws, "node_modules/foo/src/index.js")
    assert fs.entry_key("node_modules/foo/src/index.js") == path("packages/foo/src/index.js")
    await fs.delete("node_modules/foo/src/index.js")
    assert not (ws.root / "packages" / "foo" / "src" / "index.js").exists()
    assert (ws.root / "node_modules" / "foo").is_symlink()


async def test_move_renames_the_link_itself(ws: Workspace) -> None:
    fs = claiming(ws, "node_modules/foo", "node_modules/bar", "alias", "alias2")
    await fs.move("node_modules/foo", "node_modules/bar")
    await fs.move("alias", "alias2")
    assert os.readlink(ws.root / "node_modules" / "bar") == "../packages/foo"
    assert os.readlink(ws.root / "alias2") == "real.txt"
    assert not (ws.root / "node_modules" / "foo").is_symlink()
    assert not (ws.root / "alias").is_symlink()
    everything_but_links_intact(ws)


async def test_a_dangling_link_at_the_destination_is_there(ws: Workspace) -> None:
    # Renaming onto "dangling" must not create "missing.txt" through it.
    fs = claiming(ws, "real.txt", "dangling")
    with pytest.raises(FileExistsError):
        await fs.move("real.txt", "dangling", replace=False)
    assert not (ws.root / "missing.txt").exists()
    await fs.move("real.txt", "dangling")  # replaces the link, as rename(2) does
    assert (ws.root / "dangling").read_text() == "real\n"
    assert not (ws.root / "dangling").is_symlink()
    assert not (ws.root / "missing.txt").exists()


async def test_exists_without_following_sees_every_link(ws: Workspace) -> None:
    fs = claiming(ws, "dangling", "loop", "out", "nothing-here")
    for link in ("dangling", "loop", "out"):
        assert await fs.exists(link, follow_links=False)
    assert not await fs.exists("dangling")  # followed: nothing there
    assert not await fs.exists("nothing-here", follow_links=False)


def test_the_entry_key_of_a_link_is_its_own_name(ws: Workspace) -> None:
    fs = FileAccess(ws, [])
    assert fs.entry_key("node_modules/foo") == path("node_modules/foo")
    assert fs.entry_key("./node_modules//foo/") == path("node_modules/foo")
    assert fs.entry_key("out") == path("out")  # leads outside: not followed, not refused
    assert fs.entry_key("real.txt") == ws.key("real.txt")
    assert fs.entry_key("node_modules/foo/..") == ws.key("packages")  # ".." names no entry
    with pytest.raises(PathEscapeError):
        fs.entry_key("../outside.txt")


async def test_a_link_replaced_by_a_directory_after_the_check_is_not_deleted(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = claiming(ws, "alias")
    found = FileAccess._locate_entry

    def then_swap(self: FileAccess, p: Any) -> tuple[Path, tuple[str, ...], bool]:
        located = found(self, p)
        (ws.root / "alias").unlink()
        (ws.root / "alias").mkdir()
        (ws.root / "alias" / "kept.txt").write_text("kept")
        return located

    monkeypatch.setattr(FileAccess, "_locate_entry", then_swap)
    with pytest.raises(PathChangedError, match="no longer a symbolic link"):
        await fs.delete("alias")
    assert (ws.root / "alias" / "kept.txt").read_text() == "kept"


# -- writing through a link ------------------------------------------------------------------


async def test_a_write_through_a_dangling_link_creates_its_target_under_its_claim(
    ws: Workspace,
) -> None:
    # As `echo > dangling` does; the claim must cover the target, the file written.
    with pytest.raises(UndeclaredAccessError, match=re.escape("can't write 'missing.txt'")):
        await FileAccess(ws, [writes_claim("dangling")]).write_text("dangling", "x\n")
    assert not (ws.root / "missing.txt").exists()
    await FileAccess(ws, [exclusive(ws.key("dangling"))]).write_text("dangling", "x\n")
    assert (ws.root / "missing.txt").read_text() == "x\n"
    assert (ws.root / "dangling").is_symlink()


async def test_a_write_through_a_link_leading_outside_is_refused(
    ws: Workspace, tmp_path: pathlib.Path
) -> None:
    (ws.root / "out-dangling").symlink_to(tmp_path / "planted.txt")
    fs = FileAccess(ws, [exclusive(tk.EVERYTHING)])
    for link in ("out", "out-dangling"):
        with pytest.raises(PathEscapeError):
            await fs.write_text(link, "overwritten\n")
    assert not (tmp_path / "planted.txt").exists()
    everything_but_links_intact(ws)


# -- claims ----------------------------------------------------------------------------------


def test_entry_keys_claim_the_entry_and_the_target_of_a_link(ws: Workspace) -> None:
    assert entry_keys(ws.key, "real.txt") == (path("real.txt"),)
    assert entry_keys(ws.key, "./packages//foo/") == (path("packages/foo"),)
    assert entry_keys(ws.key, "new/file.txt") == (path("new/file.txt"),)
    assert entry_keys(ws.key, "node_modules/foo") == (
        path("node_modules/foo"),
        path("packages/foo"),
    )
    assert entry_keys(ws.key, "alias") == (path("alias"), path("real.txt"))
    assert entry_keys(ws.key, "dangling") == (path("dangling"), path("missing.txt"))
    assert entry_keys(ws.key, "out") == (path("out"),)  # its target is no key
    assert entry_keys(ws.key, "loop") == (path("loop"),)
    with pytest.raises(PathEscapeError):
        entry_keys(ws.key, "../outside.txt")


def test_entry_keys_cover_the_entry_however_the_workspace_folds(tmp_path: pathlib.Path) -> None:
    (tmp_path / "Docs").mkdir()
    (tmp_path / "Link").symlink_to("Docs")
    for fold_case in (False, True):
        with Workspace(tmp_path, fold_case=fold_case, unicode_form="none") as ws:
            claims = [exclusive(k) for k in entry_keys(ws.key, "Link")]
            fs = FileAccess(ws, claims)
            assert fs.can_write("Link")  # the target
            assert fs._refusal(fs.entry_key("Link"), write=True) is None
            assert fs._refusal(fs.entry_key("LINK" if fold_case else "Link"), write=True) is None


# -- through the kernel ----------------------------------------------------------------------


class EntryTool(FunctionTool):
    """Delete and Move claiming what they change (``entry_keys``), as the built-ins should."""

    def claims(self, arguments: Mapping[str, Any], key: KeyFunction) -> Sequence[Claim] | None:
        return [exclusive(k) for name in self.writes for k in entry_keys(key, arguments[name])]


async def _delete(ctx: ToolContext, path: str) -> str:
    fs = ctx.fs
    assert isinstance(fs, FileAccess)
    if not await fs.exists(path, follow_links=False):
        return f"{path} does not exist"
    await fs.delete(path)
    return f"deleted {path}"


async def _list(ctx: ToolContext, path: str) -> list[str]:
    fs = ctx.fs
    assert isinstance(fs, FileAccess)
    return [entry.name for entry in await fs.list_entries(path)]


async def test_a_delete_of_a_link_is_ordered_with_a_listing_of_its_directory(
    ws: Workspace,
) -> None:
    tools = [
        EntryTool(_delete, writes=["path"], name="Remove"),
        tk.tool(reads=["path"], name="List")(_list),
    ]
    async with tk.open_kernel(tools, root=ws.root) as kernel:
        results = await kernel.run(
            [
                tk.ToolCall("1", "Remove", {"path": "node_modules/foo"}),
                tk.ToolCall("2", "List", {"path": "node_modules"}),
                tk.ToolCall("3", "Remove", {"path": "out"}),
                tk.ToolCall("4", "Remove", {"path": "dangling"}),
                tk.ToolCall("5", "Remove", {"path": "dangling"}),
            ]
        )
    assert [r.output for r in results] == [
        "deleted node_modules/foo",
        [],
        "deleted out",
        "deleted dangling",
        "dangling does not exist",
    ], [r.error for r in results]
    everything_but_links_intact(ws)


async def test_the_built_in_delete_and_move_act_on_links(ws: Workspace) -> None:
    async with tk.open_kernel(builtin_tools(), root=ws.root) as kernel:
        results = await kernel.run(
            [
                tk.ToolCall("1", "Delete", {"path": "node_modules/foo"}),
                tk.ToolCall("2", "Move", {"source": "alias", "destination": "alias2"}),
                tk.ToolCall("3", "Delete", {"path": "dangling"}),
                tk.ToolCall("4", "Delete", {"path": "out"}),
            ]
        )
    assert all(r.ok for r in results), [r.error for r in results]
    everything_but_links_intact(ws)
    assert os.readlink(ws.root / "alias2") == "real.txt"


async def test_a_read_only_claim_can_not_delete_a_link(ws: Workspace) -> None:
    fs = FileAccess(ws, [reads("."), exclusive(ws.key("node_modules/foo"))])
    with pytest.raises(UndeclaredAccessError):
        await fs.delete("node_modules/foo")
    assert (ws.root / "node_modules" / "foo").is_symlink()
