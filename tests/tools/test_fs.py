"""FileAccess: every access checked against the call's claims, every write atomic."""

from __future__ import annotations

import os
import pathlib
import re
import stat

import anyio
import anyio.from_thread
import pytest

from toolkernel._errors import InvalidClaimError, PathEscapeError, UndeclaredAccessError
from toolkernel.locks import EVERYTHING, Claim, device, exclusive, pool, reads, shared, units
from toolkernel.locks import writes as writes_claim
from toolkernel.tools import FileAccess, FileAccessed, Workspace


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> Workspace:
    root = tmp_path / "root"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n")
    (root / "src" / "pkg" / "b.py").write_text("b = 2\n")
    (root / "b.txt").write_text("bee")
    return Workspace(root, fold_case=False, unicode_form="none")


def fs_with(ws: Workspace, *claims: Claim) -> FileAccess:
    return FileAccess(ws, claims)


def leftovers(directory: pathlib.Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".tktmp"))


# -- coverage -------------------------------------------------------------------------------------


async def test_a_read_needs_a_declared_claim(ws: Workspace) -> None:
    fs = fs_with(ws, reads("src/a.py"))
    assert await fs.read_text("src/a.py") == "a = 1\n"
    with pytest.raises(UndeclaredAccessError) as info:
        await fs.read_text("b.txt")
    assert str(info.value) == "can't read 'b.txt': the call did not declare it"
    assert isinstance(info.value, PermissionError)


async def test_a_write_under_only_a_shared_claim_is_refused(ws: Workspace) -> None:
    fs = fs_with(ws, reads("src/a.py"))
    with pytest.raises(UndeclaredAccessError) as info:
        await fs.write_text("src/a.py", "clobbered")
    assert str(info.value) == (
        "can't write 'src/a.py': the call declared only a shared lease on it"
    )
    assert (ws.root / "src" / "a.py").read_text() == "a = 1\n"


async def test_the_refusal_names_a_shared_ancestor(ws: Workspace) -> None:
    fs = fs_with(ws, reads("src"))
    with pytest.raises(UndeclaredAccessError, match="only a shared lease on 'src'"):
        await fs.write_text("src/a.py", "x")


async def test_a_claim_on_an_ancestor_covers_the_subtree(ws: Workspace) -> None:
    fs = fs_with(ws, reads("src"), writes_claim("out"))
    assert await fs.read_text("src/pkg/b.py") == "b = 2\n"
    await fs.write_text("out/deep/report.md", "ok", parents=True)
    assert (ws.root / "out" / "deep" / "report.md").read_text() == "ok"


async def test_a_sibling_with_a_longer_name_is_not_covered(ws: Workspace) -> None:
    (ws.root / "srcs").mkdir()
    (ws.root / "srcs" / "x").write_text("x")
    fs = fs_with(ws, exclusive("src"))
    with pytest.raises(UndeclaredAccessError):
        await fs.read_text("srcs/x")


async def test_a_claim_on_a_child_does_not_cover_its_parent(ws: Workspace) -> None:
    fs = fs_with(ws, exclusive("src/a.py"))
    with pytest.raises(UndeclaredAccessError):
        await fs.listdir("src")


async def test_exclusive_everything_covers_all(ws: Workspace) -> None:
    fs = fs_with(ws, exclusive(EVERYTHING))
    assert await fs.read_text("b.txt") == "bee"
    await fs.write_text("src/pkg/new.py", "n")
    await fs.delete("b.txt")
    assert not (ws.root / "b.txt").exists()


async def test_shared_everything_covers_reads_only(ws: Workspace) -> None:
    fs = fs_with(ws, shared(EVERYTHING))
    assert await fs.read_text("src/pkg/b.py") == "b = 2\n"
    with pytest.raises(UndeclaredAccessError, match="only a shared lease on everything"):
        await fs.write_text("b.txt", "x")


async def test_device_and_pool_claims_cover_no_path(ws: Workspace) -> None:
    fs = fs_with(ws, exclusive(device("android")), units(pool("network"), 1))
    with pytest.raises(UndeclaredAccessError):
        await fs.read_text("b.txt")


async def test_the_strongest_of_duplicate_claims_counts(ws: Workspace) -> None:
    fs = fs_with(ws, reads("b.txt"), writes_claim("b.txt"), reads("b.txt"))
    await fs.write_text("b.txt", "ok")
    assert (ws.root / "b.txt").read_text() == "ok"


async def test_every_spelling_is_checked_by_its_key(ws: Workspace) -> None:
    (ws.root / "alias").symlink_to("src")
    fs = fs_with(ws, writes_claim("src/a.py"))
    await fs.write_text("alias/../src/./a.py", "one")
    await fs.write_text(str(ws.root / "alias" / "a.py"), "two")
    assert (ws.root / "src" / "a.py").read_text() == "two"
    # The link itself is untouched: the write went to the file the key names.
    assert (ws.root / "alias").is_symlink()
    # And a claim on the link's spelling does not open up anything else.
    with pytest.raises(UndeclaredAccessError):
        await fs.read_text("alias/pkg/b.py")


async def test_paths_outside_the_root_are_refused_before_any_check(
    ws: Workspace, tmp_path: pathlib.Path
) -> None:
    fs = fs_with(ws, exclusive(EVERYTHING))
    (tmp_path / "outside.txt").write_text("secret")
    with pytest.raises(PathEscapeError):
        await fs.read_text("../outside.txt")
    (ws.root / "sneaky").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(PathEscapeError):
        await fs.write_text("sneaky", "overwritten")
    assert (tmp_path / "outside.txt").read_text() == "secret"


def test_can_read_and_can_write(ws: Workspace) -> None:
    fs = fs_with(ws, reads("src"), writes_claim("src/a.py"))
    assert fs.can_read("src/pkg/b.py")
    assert not fs.can_write("src/pkg/b.py")
    assert fs.can_write("./src//a.py")
    assert not fs.can_read("b.txt")
    with pytest.raises(PathEscapeError):
        fs.can_read("../x")


def test_claims_are_kept_and_checked(ws: Workspace) -> None:
    claims = [reads("a"), writes_claim("b")]
    assert fs_with(ws, *claims).claims == tuple(claims)
    with pytest.raises(InvalidClaimError):
        FileAccess(ws, ["a.txt"])  # type: ignore[list-item]


# -- reading --------------------------------------------------------------------------------------


async def test_read_errors_are_the_usual_os_errors(ws: Workspace) -> None:
    fs = fs_with(ws, reads("."))
    with pytest.raises(FileNotFoundError):
        await fs.read_bytes("missing.txt")
    with pytest.raises(IsADirectoryError):
        await fs.read_bytes("src")
    with pytest.raises(NotADirectoryError):
        await fs.read_bytes("b.txt/inside")


async def test_read_text_keeps_line_endings_and_honours_errors(ws: Workspace) -> None:
    (ws.root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n\xff")
    fs = fs_with(ws, reads("crlf.txt"))
    assert await fs.read_bytes("crlf.txt") == b"one\r\ntwo\r\n\xff"
    assert await fs.read_text("crlf.txt", errors="replace") == "one\r\ntwo\r\n\ufffd"
    with pytest.raises(UnicodeDecodeError):
        await fs.read_text("crlf.txt")
    assert await fs.read_text("crlf.txt", encoding="latin-1") == "one\r\ntwo\r\n\xff"


async def test_exists_is_file_is_dir_and_stat(ws: Workspace) -> None:
    fs = fs_with(ws, reads("src"))
    assert await fs.exists("src/a.py")
    assert not await fs.exists("src/nope.py")
    assert await fs.is_file("src/a.py")
    assert not await fs.is_file("src/pkg")
    assert await fs.is_dir("src/pkg")
    assert not await fs.is_dir("src/a.py")
    assert (await fs.stat("src/a.py")).st_size == len("a = 1\n")
    with pytest.raises(UndeclaredAccessError):
        await fs.exists("b.txt")


async def test_listdir_is_sorted_and_needs_the_directory(ws: Workspace) -> None:
    (ws.root / "src" / "Z.py").touch()
    fs = fs_with(ws, reads("src"))
    assert await fs.listdir("src") == ["Z.py", "a.py", "pkg"]
    with pytest.raises(UndeclaredAccessError):
        await fs.listdir(".")
    with pytest.raises(NotADirectoryError):
        await fs.listdir("src/a.py")


async def test_walk_lists_files_below_as_relative_paths(ws: Workspace) -> None:
    fs = fs_with(ws, reads("."))
    assert await fs.walk(".") == ["b.txt", "src/a.py", "src/pkg/b.py"]
    assert await fs.walk("src/") == ["src/a.py", "src/pkg/b.py"]
    assert await fs.walk("src/a.py") == ["src/a.py"]
    with pytest.raises(FileNotFoundError):
        await fs.walk("nope")


async def test_walk_needs_a_read_claim_on_the_subtree(ws: Workspace) -> None:
    fs = fs_with(ws, reads("src/pkg"))
    assert await fs.walk("src/pkg") == ["src/pkg/b.py"]
    with pytest.raises(UndeclaredAccessError):
        await fs.walk("src")


async def test_walk_does_not_follow_links_out_of_the_root_or_the_lease(
    ws: Workspace, tmp_path: pathlib.Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (ws.root / "src" / "out-dir").symlink_to(outside)
    (ws.root / "src" / "out-file").symlink_to(outside / "secret.txt")
    (ws.root / "src" / "loop").symlink_to(ws.root / "src")
    (ws.root / "src" / "to-b").symlink_to("../b.txt")  # inside the root, outside the lease
    (ws.root / "src" / "to-a").symlink_to("a.py")  # inside the lease
    fs = fs_with(ws, reads("src"))
    files = await fs.walk("src")
    assert files == ["src/a.py", "src/pkg/b.py", "src/to-a"]
    for name in files:
        await fs.read_bytes(name)


# -- writing: coverage and shape ------------------------------------------------------------------


async def test_write_creates_and_replaces(ws: Workspace) -> None:
    fs = fs_with(ws, writes_claim("new.txt"), writes_claim("b.txt"))
    await fs.write_text("new.txt", "fresh\r\n")
    assert (ws.root / "new.txt").read_bytes() == b"fresh\r\n"
    await fs.write_bytes("b.txt", b"\x00\x01")
    assert (ws.root / "b.txt").read_bytes() == b"\x00\x01"
    assert leftovers(ws.root) == []


async def test_write_needs_parents_unless_asked(ws: Workspace) -> None:
    fs = fs_with(ws, writes_claim("x"))
    with pytest.raises(FileNotFoundError):
        await fs.write_text("x/y/z.txt", "z")
    await fs.write_text("x/y/z.txt", "z", parents=True)
    assert (ws.root / "x" / "y" / "z.txt").read_text() == "z"


async def test_writing_over_a_directory_fails_cleanly(ws: Workspace) -> None:
    fs = fs_with(ws, exclusive(EVERYTHING))
    with pytest.raises(IsADirectoryError):
        await fs.write_text("src/pkg", "x")
    with pytest.raises(IsADirectoryError):
        await fs.write_text(".", "x")
    assert leftovers(ws.root / "src") == []
    assert leftovers(ws.root.parent) == []


async def test_write_rejects_the_wrong_data_type(ws: Workspace) -> None:
    fs = fs_with(ws, writes_claim("b.txt"))
    with pytest.raises(TypeError):
        await fs.write_bytes("b.txt", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await fs.write_text("b.txt", b"bytes")  # type: ignore[arg-type]
    assert (ws.root / "b.txt").read_text() == "bee"


async def test_write_replaces_the_file_rather_than_rewriting_it(ws: Workspace) -> None:
    # A reader holding the old file open keeps reading the old content: the write renamed a new
    # inode into place instead of truncating the old one.
    target = ws.root / "b.txt"
    fs = fs_with(ws, writes_claim("b.txt"))
    with target.open("rb") as reader:
        await fs.write_text("b.txt", "a much longer new content")
        assert reader.read() == b"bee"
    assert target.read_text() == "a much longer new content"


async def test_write_keeps_the_permission_bits_of_the_file_it_replaces(ws: Workspace) -> None:
    fs = fs_with(ws, exclusive(EVERYTHING))
    # A read-only file is refused to anyone but root (test_hostile_files), as open() would.
    for mode in (0o755, 0o640, 0o604, *((0o444,) if os.geteuid() == 0 else ())):
        target = ws.root / f"mode-{mode:o}"
        target.write_text("old")
        target.chmod(mode)
        await fs.write_text(target.name, "new")
        assert stat.S_IMODE(target.stat().st_mode) == mode
        assert target.read_text() == "new"


async def test_a_new_file_gets_default_permissions(ws: Workspace) -> None:
    fs = fs_with(ws, writes_claim("new.txt"))
    await fs.write_text("new.txt", "n")
    (ws.root / "plain.txt").write_text("p")  # created the ordinary way, through the umask
    assert stat.S_IMODE((ws.root / "new.txt").stat().st_mode) == stat.S_IMODE(
        (ws.root / "plain.txt").stat().st_mode
    )


async def test_writing_through_a_symlink_writes_its_target(ws: Workspace) -> None:
    (ws.root / "link.txt").symlink_to("b.txt")
    fs = fs_with(ws, writes_claim("b.txt"))
    await fs.write_text("link.txt", "via link")
    assert (ws.root / "link.txt").is_symlink()
    assert (ws.root / "b.txt").read_text() == "via link"


# -- writing: failure and cancellation ------------------------------------------------------------


async def test_a_write_failing_at_the_rename_leaves_the_old_content_and_no_temp_file(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_replace(src: object, dst: object, **kwargs: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", broken_replace)
    fs = fs_with(ws, writes_claim("b.txt"))
    with pytest.raises(OSError, match="disk on fire"):
        await fs.write_text("b.txt", "new content")
    assert (ws.root / "b.txt").read_text() == "bee"
    assert leftovers(ws.root) == []


async def test_a_write_failing_mid_file_leaves_the_old_content_and_no_temp_file(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    calls = 0

    def failing_write(fd: int, data: bytes) -> int:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise OSError(28, "no space left on device")
        return real_write(fd, bytes(data)[:10])  # a short write, then the disk fills up

    monkeypatch.setattr(os, "write", failing_write)
    fs = fs_with(ws, writes_claim("b.txt"))
    with pytest.raises(OSError, match="no space"):
        await fs.write_bytes("b.txt", b"x" * 100)
    assert calls == 2
    assert (ws.root / "b.txt").read_text() == "bee"
    assert leftovers(ws.root) == []


async def test_a_write_failing_at_fsync_leaves_no_temp_file(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_fsync(fd: int) -> None:
        raise OSError(5, "i/o error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    fs = fs_with(ws, writes_claim("new.txt"))
    with pytest.raises(OSError, match="i/o error"):
        await fs.write_text("new.txt", "n")
    assert not (ws.root / "new.txt").exists()
    assert leftovers(ws.root) == []


async def test_a_write_cancelled_mid_way_leaves_the_old_content_and_no_temp_file(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync
    with anyio.CancelScope() as scope:

        def fsync_then_cancel(fd: int) -> None:
            # The data is in the temporary file; now the caller gives up on the write.
            real_fsync(fd)
            anyio.from_thread.run_sync(scope.cancel)

        monkeypatch.setattr(os, "fsync", fsync_then_cancel)
        fs = fs_with(ws, writes_claim("b.txt"))
        await fs.write_text("b.txt", "new content that must never land")
    assert scope.cancelled_caught
    assert (ws.root / "b.txt").read_text() == "bee"
    assert leftovers(ws.root) == []


async def test_a_big_write_cancelled_between_chunks_leaves_no_partial_file(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    chunks = 0
    with anyio.CancelScope() as scope:

        def write_then_cancel(fd: int, data: bytes) -> int:
            nonlocal chunks
            chunks += 1
            if chunks == 1:
                anyio.from_thread.run_sync(scope.cancel)
            return real_write(fd, data)

        monkeypatch.setattr(os, "write", write_then_cancel)
        fs = fs_with(ws, writes_claim("big.bin"))
        await fs.write_bytes("big.bin", b"z" * (3 << 20))
    assert scope.cancelled_caught
    assert chunks == 1  # it stopped at the first check, not after writing everything
    assert not (ws.root / "big.bin").exists()
    assert leftovers(ws.root) == []


async def test_a_write_in_an_already_cancelled_scope_does_nothing(ws: Workspace) -> None:
    fs = fs_with(ws, writes_claim("b.txt"))
    with anyio.CancelScope() as scope:
        scope.cancel()
        await fs.write_text("b.txt", "never")
    assert scope.cancelled_caught
    assert (ws.root / "b.txt").read_text() == "bee"
    assert leftovers(ws.root) == []


# -- mkdir, delete, move --------------------------------------------------------------------------


async def test_mkdir_needs_an_exclusive_claim(ws: Workspace) -> None:
    fs = fs_with(ws, reads("docs"), writes_claim("build"))
    with pytest.raises(UndeclaredAccessError, match=re.escape("can't create 'docs'")):
        await fs.mkdir("docs")
    await fs.mkdir("build/a/b")
    assert (ws.root / "build" / "a" / "b").is_dir()
    await fs.mkdir("build/a/b")  # exist_ok by default
    with pytest.raises(FileExistsError):
        await fs.mkdir("build/a/b", exist_ok=False)
    with pytest.raises(FileNotFoundError):
        await fs.mkdir("build/x/y", parents=False)


async def test_delete_removes_files_and_trees(ws: Workspace) -> None:
    fs = fs_with(ws, writes_claim("src"), writes_claim("b.txt"))
    await fs.delete("b.txt")
    await fs.delete("src")
    assert sorted(os.listdir(ws.root)) == []
    with pytest.raises(FileNotFoundError):
        await fs.delete("b.txt")


async def test_delete_needs_an_exclusive_claim_and_spares_the_root(ws: Workspace) -> None:
    with pytest.raises(UndeclaredAccessError, match=re.escape("can't delete 'src/a.py'")):
        await fs_with(ws, reads("src")).delete("src/a.py")
    with pytest.raises(PermissionError, match="workspace root"):
        await fs_with(ws, exclusive(EVERYTHING)).delete(".")
    assert (ws.root / "src" / "a.py").exists()


async def test_delete_of_a_tree_does_not_follow_links_inside_it(
    ws: Workspace, tmp_path: pathlib.Path
) -> None:
    (ws.root / "src" / "pkg" / "to-b").symlink_to(ws.root / "b.txt")
    await fs_with(ws, writes_claim("src")).delete("src")
    assert (ws.root / "b.txt").read_text() == "bee"


async def test_move_needs_exclusive_claims_on_both_ends(ws: Workspace) -> None:
    fs = fs_with(ws, writes_claim("b.txt"), reads("src"))
    with pytest.raises(UndeclaredAccessError, match=re.escape("can't move to 'src/b.txt'")):
        await fs.move("b.txt", "src/b.txt")
    with pytest.raises(UndeclaredAccessError, match=re.escape("can't move 'src/a.py'")):
        await fs.move("src/a.py", "b.txt")
    assert (ws.root / "b.txt").read_text() == "bee"
    assert (ws.root / "src" / "a.py").exists()


async def test_move_renames_files_and_directories(ws: Workspace) -> None:
    fs = fs_with(ws, writes_claim("src"), writes_claim("lib"), writes_claim("b.txt"))
    await fs.move("src/pkg", "lib/pkg", parents=True)
    assert (ws.root / "lib" / "pkg" / "b.py").read_text() == "b = 2\n"
    await fs.move("src/a.py", "b.txt")  # replaces an existing file
    assert (ws.root / "b.txt").read_text() == "a = 1\n"
    assert not (ws.root / "src" / "a.py").exists()
    with pytest.raises(PermissionError):
        await fs_with(ws, exclusive(EVERYTHING)).move(".", "elsewhere")


# -- folding --------------------------------------------------------------------------------------


async def test_folded_keys_reach_the_real_file(tmp_path: pathlib.Path) -> None:
    (tmp_path / "Docs").mkdir()
    (tmp_path / "Docs" / "README.md").write_text("read me")
    ws = Workspace(tmp_path, fold_case=True, unicode_form="none")
    fs = FileAccess(ws, [writes_claim(ws.key("DOCS"))])
    assert await fs.read_text("docs/readme.md") == "read me"
    await fs.write_text("docs/Readme.MD", "rewritten")
    assert os.listdir(tmp_path / "Docs") == ["README.md"]
    assert (tmp_path / "Docs" / "README.md").read_text() == "rewritten"
    assert await fs.walk("docs") == ["Docs/README.md"]


# -- observing -----------------------------------------------------------------------------


async def test_an_observer_is_told_of_every_access_checked_allowed_or_refused(
    ws: Workspace,
) -> None:
    seen: list[FileAccessed] = []
    claims = [reads("src"), writes_claim("out")]
    fs = FileAccess(ws, claims, call_id="c7", observer=seen.append)
    await fs.read_text("./src/a.py")
    await fs.write_text("out/x.txt", "x", parents=True)
    await fs.move("out/x.txt", "out/y.txt")
    with pytest.raises(UndeclaredAccessError):
        await fs.write_text("src/a.py", "no")
    assert [(a.call_id, a.verb, str(a.path), a.write, a.allowed) for a in seen] == [
        ("c7", "read", "src/a.py", False, True),
        ("c7", "write", "out/x.txt", True, True),
        ("c7", "move", "out/x.txt", True, True),
        ("c7", "move to", "out/y.txt", True, True),
        ("c7", "write", "src/a.py", True, False),
    ]
