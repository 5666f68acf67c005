"""Workspace keys: one key for every spelling of a file, none for anything outside the root."""

from __future__ import annotations

import os
import pathlib
import threading
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkernel._errors import InvalidClaimError, PathEscapeError
from toolkernel.locks import Path, path
from toolkernel.tools import Workspace

from ..strategies import path_noise


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    """root/a/f (a file), root/a/sub/g, and nothing else."""
    root = tmp_path / "root"
    (root / "a" / "sub").mkdir(parents=True)
    (root / "a" / "f").write_text("f")
    (root / "a" / "sub" / "g").write_text("g")
    return root


@pytest.fixture
def ws(tree: pathlib.Path) -> Workspace:
    return Workspace(tree, fold_case=False, unicode_form="none")


# -- construction ---------------------------------------------------------------------------------


def test_root_is_resolved_to_a_real_absolute_directory(
    tree: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = tree.parent / "root-link"
    link.symlink_to(tree)
    monkeypatch.chdir(tree.parent)
    ws = Workspace("root-link/a/..")
    assert ws.root == tree.resolve()
    assert ws.root.is_absolute()


def test_root_must_exist_and_be_a_directory(tree: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError):
        Workspace(tree / "missing")
    with pytest.raises(NotADirectoryError):
        Workspace(tree / "a" / "f")


def test_bad_mode_arguments_are_refused(tree: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="unicode_form"):
        Workspace(tree, unicode_form="NFKD")
    with pytest.raises(TypeError, match="fold_case"):
        Workspace(tree, fold_case="yes")  # type: ignore[arg-type]


def test_forced_modes_are_reported(tree: pathlib.Path) -> None:
    ws = Workspace(tree, fold_case=True, unicode_form="NFC")
    assert (ws.fold_case, ws.unicode_form) == (True, "NFC")
    ws = Workspace(tree, fold_case=False, unicode_form="none")
    assert (ws.fold_case, ws.unicode_form) == (False, None)


def test_probe_agrees_with_the_file_system_and_leaves_nothing_behind(
    tmp_path: pathlib.Path,
) -> None:
    # What the file system under tmp_path really does, found independently of the probe.
    witness = tmp_path / "witness"
    witness.mkdir()
    (witness / "Case").touch()
    folds_case = (witness / "cASE").exists()
    (witness / "caf\u00e9").touch()
    folds_unicode = (witness / unicodedata.normalize("NFD", "caf\u00e9")).exists()

    root = tmp_path / "probed"
    root.mkdir()
    ws = Workspace(root)
    assert ws.fold_case is folds_case
    assert ws.unicode_form == ("NFC" if folds_unicode else None)
    assert os.listdir(root) == []


# -- aliasing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    ["a/f", "./a/../a/f", "a//f", "a/f/", "a/./f", "a/sub/../f", "./a/sub/./..//f/", "new/../a/f"],
)
def test_relative_spellings_give_one_key(ws: Workspace, spelling: str) -> None:
    assert ws.key(spelling) == path("a/f")


def test_absolute_path_inside_the_root_gives_the_relative_key(ws: Workspace) -> None:
    assert ws.key(str(ws.root / "a" / "f")) == path("a/f")
    assert ws.key(ws.root / "a" / "f") == path("a/f")
    assert ws.key(str(ws.root)) == Path(())
    assert ws.key(f"{ws.root}//a/./sub/") == path("a/sub")


def test_pathlike_is_accepted(ws: Workspace) -> None:
    assert ws.key(pathlib.PurePosixPath("a", "f")) == path("a/f")


def test_dot_is_the_root(ws: Workspace) -> None:
    assert ws.key(".") == Path(())
    assert ws.key("./") == Path(())
    assert ws.key("a/..") == Path(())


def test_leaving_and_reentering_the_root_is_the_same_file(ws: Workspace) -> None:
    assert ws.key(f"../{ws.root.name}/a/f") == path("a/f")


def test_root_spelled_through_a_symlink_is_inside(ws: Workspace, tmp_path: pathlib.Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(ws.root)
    assert ws.key(str(alias / "a" / "f")) == path("a/f")


def test_files_that_do_not_exist_yet_have_keys(ws: Workspace) -> None:
    assert ws.key("new.txt") == path("new.txt")
    assert ws.key("x/y/../z/new.txt") == path("x/z/new.txt")
    assert ws.key("a/sub/deeper/new.txt") == path("a/sub/deeper/new.txt")
    # A path "under" a regular file can't exist, but it still gets its lexical key.
    assert ws.key("a/f/inside") == path("a/f/inside")


def test_noisy_spellings_of_one_file_give_one_key(ws: Workspace) -> None:
    (ws.root / "d").symlink_to("a")
    components = ["a", "sub", "g"]

    @given(
        # The first piece of noise must not make a relative spelling absolute.
        first=path_noise.filter(lambda n: not n.startswith("/")),
        noise=st.lists(path_noise, min_size=3, max_size=3),
        via_link=st.booleans(),
        absolute=st.booleans(),
        trailing=st.booleans(),
    )
    def check(first: str, noise: list[str], via_link: bool, absolute: bool, trailing: bool) -> None:
        noise = [first, *noise]
        spelled = ["d" if via_link else "a", *components[1:]]
        text = "".join(n + c + "/" for n, c in zip(noise, spelled, strict=False)) + noise[3]
        if not trailing:
            text = text.rstrip("/") or "."
        if absolute:
            text = f"{ws.root}/{text}"
        assert ws.key(text) == path("a/sub/g"), text

    check()


def test_a_symlink_and_its_target_give_one_key(ws: Workspace) -> None:
    (ws.root / "rel-link").symlink_to("a/f")
    (ws.root / "abs-link").symlink_to(ws.root / "a" / "f")
    (ws.root / "a" / "sub" / "up-link").symlink_to("../f")
    assert ws.key("rel-link") == path("a/f")
    assert ws.key("abs-link") == path("a/f")
    assert ws.key("a/sub/up-link") == path("a/f")


def test_a_chain_of_symlinks_resolves_to_the_end(ws: Workspace) -> None:
    (ws.root / "one").symlink_to("two")
    (ws.root / "two").symlink_to("a/sub")
    assert ws.key("one/g") == path("a/sub/g")


def test_paths_through_a_directory_symlink_take_the_targets_key(ws: Workspace) -> None:
    (ws.root / "d").symlink_to("a")
    assert ws.key("d") == path("a")
    assert ws.key("d/f") == path("a/f")
    assert ws.key("d/sub/g") == path("a/sub/g")
    assert ws.key("d/not-yet/new.txt") == path("a/not-yet/new.txt")
    # Climbing back out of a component that does not exist lands on real ground again, where
    # links are followed as usual.
    assert ws.key("not-yet/../d/f") == path("a/f")
    assert ws.key("a/../d/f") == path("a/f")


def test_the_links_a_spelling_passes_through_are_noted_while_asked(
    ws: Workspace, tmp_path: pathlib.Path
) -> None:
    """Each link's own entry (its directories resolved), in the order met; none for a path
    with no link, none for a link outside the root, none in another thread, none once it
    stops."""
    (ws.root / "two").symlink_to("a/sub")
    (ws.root / "one").symlink_to("two")
    (ws.root / "a" / "up").symlink_to("..")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(ws.root / "a")
    noted: list[Path] = []
    assert ws.note_links(noted) is None
    assert ws.key("a/f") == path("a/f") and noted == []
    assert ws.key("one/g") == path("a/sub/g")
    assert noted == [path("one"), path("two")]
    noted.clear()
    assert ws.key("a/up/two/g") == path("a/sub/g")
    assert noted == [path("a/up"), path("two")]
    noted.clear()
    assert ws.key(str(tmp_path / "out" / "f")) == path("a/f") and noted == []
    elsewhere: list[Path] = []
    thread = threading.Thread(target=lambda: elsewhere.append(ws.key("one/g")))
    thread.start()
    thread.join()
    assert elsewhere == [path("a/sub/g")] and noted == []
    assert ws.note_links(None) is noted
    assert ws.key("one/g") == path("a/sub/g") and noted == []


def test_dotdot_after_a_symlink_climbs_out_of_the_target(ws: Workspace) -> None:
    # Physical semantics, as the kernel opens it: d/../x is a/sub/../x = a/x, not x.
    (ws.root / "d").symlink_to("a/sub")
    assert ws.key("d/../f") == path("a/f")
    assert (ws.root / "d" / ".." / "f").read_text() == "f"


def test_a_dangling_symlink_takes_its_targets_key(ws: Workspace) -> None:
    (ws.root / "dangling").symlink_to("a/future.txt")
    assert ws.key("dangling") == path("a/future.txt")


def test_a_symlink_loop_is_refused(ws: Workspace) -> None:
    (ws.root / "loop1").symlink_to("loop2")
    (ws.root / "loop2").symlink_to("loop1")
    with pytest.raises(InvalidClaimError, match="symbolic links"):
        ws.key("loop1/x")


# -- escapes --------------------------------------------------------------------------------------


def test_dotdot_out_of_the_root_is_refused(ws: Workspace) -> None:
    with pytest.raises(PathEscapeError) as info:
        ws.key("../x")
    message = str(info.value)
    assert "'../x'" in message
    assert str(ws.root) in message
    assert message[0].islower()
    with pytest.raises(PathEscapeError):
        ws.key("a/../../x")
    with pytest.raises(PathEscapeError):
        ws.key("a/sub/../../..")


def test_absolute_path_outside_the_root_is_refused(ws: Workspace, tmp_path: pathlib.Path) -> None:
    with pytest.raises(PathEscapeError, match="outside the workspace root"):
        ws.key(str(tmp_path / "elsewhere.txt"))
    with pytest.raises(PathEscapeError):
        ws.key("/")
    with pytest.raises(PathEscapeError):
        # A sibling whose name extends the root's is not inside it.
        ws.key(str(ws.root) + "-sibling/x")


def test_a_symlink_pointing_outside_is_refused(ws: Workspace, tmp_path: pathlib.Path) -> None:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "secret").write_text("s")
    (ws.root / "to-file").symlink_to(outside / "secret")
    (ws.root / "to-dir").symlink_to(outside)
    (ws.root / "relative-out").symlink_to("../outside")
    for spelling in ["to-file", "to-dir", "to-dir/secret", "to-dir/new", "relative-out/secret"]:
        with pytest.raises(PathEscapeError):
            ws.key(spelling)


def test_dotdot_through_a_symlink_that_leaves_the_root_is_refused(
    ws: Workspace, tmp_path: pathlib.Path
) -> None:
    # Lexically "deep-link/../a/f" is "a/f", inside; physically it is outside/a/f.
    (tmp_path / "outside" / "deep").mkdir(parents=True)
    (ws.root / "deep-link").symlink_to(tmp_path / "outside" / "deep")
    with pytest.raises(PathEscapeError, match="outside"):
        ws.key("deep-link/../a/f")


# -- invalid spellings ----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", "a\x00b", "\x00"])
def test_empty_and_nul_paths_are_invalid(ws: Workspace, bad: str) -> None:
    with pytest.raises(InvalidClaimError):
        ws.key(bad)


def test_invalid_errors_are_not_escapes(ws: Workspace) -> None:
    with pytest.raises(InvalidClaimError) as info:
        ws.key("a\x00b")
    assert not isinstance(info.value, PathEscapeError)
    assert "nul" in str(info.value).lower()


@pytest.mark.parametrize("bad", [None, 3, b"a/f", ["a", "f"], path("a/f")])
def test_non_path_types_are_invalid(ws: Workspace, bad: object) -> None:
    with pytest.raises(InvalidClaimError, match="a path must be"):
        ws.key(bad)  # type: ignore[arg-type]


def test_bytes_pathlike_is_invalid(ws: Workspace) -> None:
    class BytesPath:
        def __fspath__(self) -> bytes:
            return b"a/f"

    with pytest.raises(InvalidClaimError, match="str"):
        ws.key(BytesPath())  # type: ignore[arg-type]


def test_over_long_paths_are_invalid(ws: Workspace) -> None:
    many = "/".join(["d" * 200] * 25)  # 5,024 bytes, every component fine
    with pytest.raises(InvalidClaimError, match="4096"):
        ws.key(many)
    with pytest.raises(InvalidClaimError, match="255"):
        ws.key("x" * 256)
    # Multi-byte characters count in bytes: 128 x "é" is 256 bytes.
    with pytest.raises(InvalidClaimError, match="255"):
        ws.key("\u00e9" * 128)
    assert ws.key("x" * 255) == path("x" * 255)


# -- case and Unicode folding ---------------------------------------------------------------------


def test_forced_case_folding_makes_spellings_one_key(tree: pathlib.Path) -> None:
    (tree / "Docs").mkdir()
    (tree / "Docs" / "README.md").write_text("r")
    ws = Workspace(tree, fold_case=True, unicode_form="none")
    key = ws.key("Docs/README.md")
    assert ws.key("docs/readme.md") == key
    assert ws.key("DOCS/ReadMe.MD") == key
    assert key == path("docs/readme.md")
    # The key is folded but the file is found under its real spelling.
    assert ws.real_path(key) == tree / "Docs" / "README.md"
    assert ws.real_path(ws.key("docs/new.md")) == tree / "Docs" / "new.md"


def test_case_is_kept_apart_without_folding(tree: pathlib.Path) -> None:
    ws = Workspace(tree, fold_case=False, unicode_form="none")
    assert ws.key("A/B.txt") != ws.key("a/b.txt")


def test_forced_case_folding_for_files_not_yet_created(tree: pathlib.Path) -> None:
    ws = Workspace(tree, fold_case=True, unicode_form="none")
    assert ws.key("A/B.txt") == ws.key("a/b.txt")


def test_forced_case_folding_follows_symlinks_under_any_case(tree: pathlib.Path) -> None:
    (tree / "Link").symlink_to("a/sub")
    ws = Workspace(tree, fold_case=True, unicode_form="none")
    assert ws.key("LINK/G") == path("a/sub/g")


def test_forced_case_folding_checks_the_root_prefix_folded(tree: pathlib.Path) -> None:
    ws = Workspace(tree, fold_case=True, unicode_form="none")
    assert ws.key(str(tree / "a" / "f")) == path("a/f")


def test_forced_unicode_normalization_makes_nfc_and_nfd_one_key(tree: pathlib.Path) -> None:
    nfc, nfd = "caf\u00e9", unicodedata.normalize("NFD", "caf\u00e9")
    assert nfc != nfd
    (tree / nfd).write_text("x")
    ws = Workspace(tree, fold_case=False, unicode_form="NFC")
    assert ws.key(nfc) == ws.key(nfd) == Path((nfc,))
    assert ws.real_path(ws.key(nfc)) == tree / nfd


def test_unicode_forms_are_kept_apart_without_normalization(tree: pathlib.Path) -> None:
    ws = Workspace(tree, fold_case=False, unicode_form="none")
    assert ws.key("caf\u00e9") != ws.key(unicodedata.normalize("NFD", "caf\u00e9"))


def test_case_and_unicode_folding_together(tree: pathlib.Path) -> None:
    ws = Workspace(tree, fold_case=True, unicode_form="NFC")
    upper_nfd = unicodedata.normalize("NFD", "CAF\u00c9")
    assert ws.key(upper_nfd) == ws.key("caf\u00e9") == Path(("caf\u00e9",))


# -- real_path and display ------------------------------------------------------------------------


def test_real_path_and_display(ws: Workspace) -> None:
    key = ws.key("a//sub/./g")
    assert ws.real_path(key) == ws.root / "a" / "sub" / "g"
    assert ws.display(key) == "a/sub/g"
    assert ws.display(ws.key(".")) == "."
    assert ws.real_path(ws.key(".")) == ws.root


def test_locate_returns_the_key_and_the_resolved_file(ws: Workspace) -> None:
    (ws.root / "d").symlink_to("a")
    assert ws.locate("d/f") == (path("a/f"), ws.root / "a" / "f")


def forged_key(parts: tuple[str, ...]) -> Path:
    """A key with raw components: ``Path(...)`` would normalize them, so bypass it."""
    key = object.__new__(Path)
    object.__setattr__(key, "parts", parts)
    return key


@pytest.mark.parametrize("bad", ["a/f", ("..", "x"), ("a/b",)])
def test_real_path_refuses_what_is_not_a_canonical_key(ws: Workspace, bad: object) -> None:
    with pytest.raises(InvalidClaimError):
        ws.real_path(bad if isinstance(bad, str) else forged_key(bad))  # type: ignore[arg-type]


def test_every_call_of_a_batch_keyed_through_a_link_claims_the_link(ws: Workspace) -> None:
    """A batch is keyed at one moment, each spelling once (``KeyLog``): a spelling through a
    link is not remembered, so the second call spelled so claims the link too."""
    from toolkernel.kernel._admission import KeyLog, compute_claims
    from toolkernel.tools import builtin_tools

    (ws.root / "L").symlink_to("a")
    write = next(tool for tool in builtin_tools() if tool.name == "Write")
    arguments = write.parse_arguments({"file_path": "L/f", "content": ""})
    once = KeyLog(ws.key, once=True)
    for keyed in (None, [], None):
        claims = compute_claims(write, arguments, once, {}, keyed)
        assert [(str(c.resource), c.mode.name) for c in claims] == [
            ("L", "SHARED"),
            ("a/f", "EXCLUSIVE"),
        ]
    arguments = write.parse_arguments({"file_path": "a/f", "content": ""})
    assert [str(c.resource) for c in compute_claims(write, arguments, once, {})] == ["a/f"]
