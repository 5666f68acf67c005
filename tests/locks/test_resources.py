"""Resources, claims and the conflict relation: plain values, no table."""

from __future__ import annotations

import random
from pathlib import PurePosixPath

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkernel._errors import InvalidClaimError, PathEscapeError, ToolkernelError
from toolkernel.locks import (
    EVERYTHING,
    Claim,
    Device,
    LeaseTable,
    Mode,
    Path,
    Pool,
    canonical_claims,
    claims_overlap,
    device,
    exclusive,
    path,
    pool,
    reads,
    shared,
    units,
    writes,
)

from ..strategies import resource_claims

# -- path() ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spelling", "parts"),
    [
        ("a/b", ("a", "b")),
        ("./a/b", ("a", "b")),
        ("a//b", ("a", "b")),
        ("a/b/", ("a", "b")),
        ("a/./b/.", ("a", "b")),
        (".//a///b//", ("a", "b")),
        ("a/x/../b", ("a", "b")),
        ("a/b/c/../..", ("a",)),
        ("a/..", ()),
        (".", ()),
        ("", ()),
        ("a/b..c/.d", ("a", "b..c", ".d")),
    ],
)
def test_path_normalizes_the_spelling(spelling: str, parts: tuple[str, ...]) -> None:
    assert path(spelling) == Path(parts)
    assert path(spelling).parts == parts


def test_path_joins_segments_and_accepts_path_objects() -> None:
    assert path("src", "pkg/", "./a.py") == path("src/pkg/a.py")
    assert path(PurePosixPath("src/pkg/a.py")) == Path(("src", "pkg", "a.py"))
    assert path("src", "..", "b") == Path(("b",))


@pytest.mark.parametrize("spelling", ["..", "../a", "a/../..", "a/b/../../../c", "./.."])
def test_path_climbing_above_the_root_is_refused(spelling: str) -> None:
    with pytest.raises(PathEscapeError, match="climbs above the root"):
        path(spelling)


@pytest.mark.parametrize("spelling", ["/", "/etc/passwd", "//a"])
def test_absolute_paths_are_refused(spelling: str) -> None:
    with pytest.raises(PathEscapeError, match="absolute"):
        path(spelling)


def test_an_absolute_later_segment_is_refused() -> None:
    with pytest.raises(PathEscapeError):
        path("a", "/b")


def test_nul_bytes_are_refused() -> None:
    with pytest.raises(InvalidClaimError, match="NUL"):
        path("a\x00b")
    with pytest.raises(InvalidClaimError, match="NUL"):
        device("ph\x00ne")
    with pytest.raises(InvalidClaimError, match="NUL"):
        pool("n\x00t")


def test_claim_errors_refine_the_builtins() -> None:
    # Callers catching ValueError keep working.
    assert issubclass(PathEscapeError, InvalidClaimError)
    assert issubclass(InvalidClaimError, ValueError)
    assert issubclass(InvalidClaimError, ToolkernelError)
    with pytest.raises(ValueError):
        path("..")


# -- devices, pools, claims ---------------------------------------------------------------------


def test_empty_device_and_pool_names_are_refused() -> None:
    with pytest.raises(InvalidClaimError):
        device("")
    with pytest.raises(InvalidClaimError):
        pool("")


def test_unit_counts_are_checked() -> None:
    assert units(pool("net"), 3).units == 3
    assert shared(pool("net")).units == 1
    with pytest.raises(InvalidClaimError):
        units(pool("net"), 0)
    with pytest.raises(InvalidClaimError):
        units(pool("net"), True)
    with pytest.raises(InvalidClaimError):
        units(device("phone"), 2)  # type: ignore[arg-type]
    with pytest.raises(InvalidClaimError):
        Claim(path("a"), Mode.SHARED, units=2)


def test_claims_need_a_resource_and_a_mode() -> None:
    with pytest.raises(InvalidClaimError):
        Claim("a", Mode.SHARED)  # type: ignore[arg-type]
    with pytest.raises(InvalidClaimError):
        Claim(path("a"), "shared")  # type: ignore[arg-type]


def test_helpers_build_the_claims_they_name() -> None:
    assert reads("a/b") == Claim(path("a/b"), Mode.SHARED)
    assert writes("a/b") == Claim(path("a/b"), Mode.EXCLUSIVE)
    assert shared("a") == reads("a")
    assert exclusive(path("a")) == writes("a")
    assert exclusive(device("phone")).mode is Mode.EXCLUSIVE
    assert writes(path("x/./y")) == writes("x/y")


def test_claims_are_frozen_values() -> None:
    claim = writes("a")
    assert claim == writes("./a/") and hash(claim) == hash(writes("./a/"))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        claim.mode = Mode.SHARED  # type: ignore[misc]


# -- overlap and conflict -----------------------------------------------------------------------


def test_a_sibling_with_a_longer_name_is_not_inside() -> None:
    assert not claims_overlap(writes("a/b"), writes("a/bc"))
    assert not path("a/bc").is_relative_to(path("a/b"))
    table = LeaseTable()
    first = table.request([writes("a/b")])
    second = table.request([writes("a/bc")])
    assert table.is_held(first) and table.is_held(second)


def test_a_write_on_a_directory_conflicts_with_a_read_deep_inside() -> None:
    assert claims_overlap(writes("a"), reads("a/b/c"))
    assert path("a/b/c").is_relative_to(path("a"))

    table = LeaseTable()
    writer = table.request([writes("a")])
    reader = table.request([reads("a/b/c")])
    assert table.is_held(writer) and table.is_waiting(reader)
    assert table.release(writer) == (reader,)

    # And the other way round: a read deep inside holds off a write on the directory.
    table = LeaseTable()
    reader = table.request([reads("a/b/c")])
    writer = table.request([writes("a")])
    assert table.is_held(reader) and table.is_waiting(writer)


def test_reads_share_and_writes_exclude() -> None:
    table = LeaseTable()
    assert table.is_held(table.request([reads("a")]))
    assert table.is_held(table.request([reads("a/b")]))
    assert table.is_waiting(table.request([writes("a/b/c")]))


def test_resources_of_different_kinds_never_overlap() -> None:
    assert not claims_overlap(writes("phone"), exclusive(device("phone")))
    assert not claims_overlap(exclusive(device("net")), exclusive(pool("net")))
    assert not claims_overlap(exclusive(device("a")), exclusive(device("b")))
    assert claims_overlap(exclusive(device("a")), shared(device("a")))


def test_everything_overlaps_every_resource() -> None:
    barrier = exclusive(EVERYTHING)
    for claim in (reads("a"), writes(""), shared(device("phone")), units(pool("net"), 1)):
        assert claims_overlap(barrier, claim)
        assert claims_overlap(claim, barrier)


# -- canonical_claims ---------------------------------------------------------------------------


def test_duplicate_claims_merge_to_the_strongest_mode() -> None:
    assert canonical_claims([reads("a"), writes("a"), reads("a")]) == (writes("a"),)
    assert canonical_claims([writes("a"), reads("./a/")]) == (writes("a"),)
    assert canonical_claims([reads("a"), reads("a")]) == (reads("a"),)
    phone = device("phone")
    assert canonical_claims([shared(phone), exclusive(phone)]) == (exclusive(phone),)


def test_units_on_one_pool_add_up_unless_the_pool_is_taken_whole() -> None:
    net = pool("net")
    assert canonical_claims([units(net, 2), units(net, 1)]) == (units(net, 3),)
    assert canonical_claims([shared(net), units(net, 2)]) == (units(net, 3),)
    assert canonical_claims([units(net, 2), exclusive(net)]) == (exclusive(net),)


def test_claims_covered_by_an_exclusive_ancestor_are_dropped() -> None:
    assert canonical_claims([reads("a/b/c"), writes("a/b"), writes("a/b/d"), reads("a/bc")]) == (
        writes("a/b"),
        reads("a/bc"),
    )
    # A shared ancestor covers nothing: the write below it is still needed.
    assert canonical_claims([reads("a"), writes("a/b")]) == (reads("a"), writes("a/b"))
    everything = [writes("a"), exclusive(device("phone")), units(pool("net"), 2)]
    assert canonical_claims([*everything, exclusive(EVERYTHING)]) == (exclusive(EVERYTHING),)
    assert canonical_claims([*everything, shared(EVERYTHING)]) == (
        shared(EVERYTHING),
        exclusive(device("phone")),
        writes("a"),
        units(pool("net"), 2),
    )


def test_canonical_claims_refuses_non_claims() -> None:
    with pytest.raises(InvalidClaimError):
        canonical_claims([writes("a"), "b"])  # type: ignore[list-item]


@given(claims=st.lists(resource_claims, max_size=6), rng=st.randoms(use_true_random=False))
def test_canonical_form_ignores_order_and_repetition(
    claims: list[Claim], rng: random.Random
) -> None:
    canonical = canonical_claims(claims)
    shuffled = list(claims)
    rng.shuffle(shuffled)
    assert canonical_claims(shuffled) == canonical
    assert canonical_claims(canonical) == canonical  # idempotent
    nodes = [claim.node for claim in canonical]
    assert nodes == sorted(set(nodes))  # one claim per resource, sorted


# -- hostile inputs -------------------------------------------------------------------------------


def test_an_exclusive_pool_claim_takes_no_unit_count() -> None:
    # It holds the whole pool; a count would make two equal-looking claims compare unequal.
    assert Claim(pool("net"), Mode.EXCLUSIVE, units=1) == exclusive(pool("net"))
    for count in (0, 2, 7):
        with pytest.raises(InvalidClaimError, match="whole pool"):
            Claim(pool("net"), Mode.EXCLUSIVE, units=count)


@pytest.mark.parametrize("target", [5, None, 1.5, ["a"], device("phone"), pool("net")])
def test_a_path_of_the_wrong_type_is_an_invalid_claim(target: object) -> None:
    for make in (path, reads, writes):
        with pytest.raises(InvalidClaimError, match="path must be a string"):
            make(target)  # type: ignore[arg-type]
    if not isinstance(target, Device | Pool):  # shared() and exclusive() take those as they are
        for make in (shared, exclusive):
            with pytest.raises(InvalidClaimError, match="path must be a string"):
                make(target)  # type: ignore[arg-type]


def test_climbing_above_the_root_quotes_the_whole_path() -> None:
    with pytest.raises(PathEscapeError, match=r"'a/\.\./\.\.'"):
        path("a", "..", "..")


@pytest.mark.parametrize("claims", [writes("a"), "a/b"])
def test_a_lone_claim_or_a_string_in_place_of_a_claim_list_is_refused(claims: object) -> None:
    with pytest.raises(InvalidClaimError, match="a list of claims"):
        canonical_claims(claims)  # type: ignore[arg-type]
    table = LeaseTable()
    with pytest.raises(InvalidClaimError, match="a list of claims"):
        table.request(claims)  # type: ignore[arg-type]
    with pytest.raises(InvalidClaimError, match="a list of claims"):
        table.request_nowait(claims)  # type: ignore[arg-type]
    assert table.statistics().held == 0


@pytest.mark.parametrize(
    "parts",
    [
        "src/a.py",
        PurePosixPath("src/a.py"),
        ["src", "a.py"],
        ("src/a.py",),
        ("src", "", "a.py"),
        ("src", ".", "a.py/"),
        ("src", "pkg", "..", "a.py"),
    ],
)
def test_a_path_key_built_by_hand_is_keyed_like_the_one_path_builds(parts: object) -> None:
    # Path("src/a.py") used to take the string as its tuple: the key ('s', 'r', 'c', '/', ...)
    # overlapped nothing the file's real key overlaps, so two writers could hold it at once.
    key = Path(parts)  # type: ignore[arg-type]
    assert key == path("src/a.py") and key.parts == ("src", "a.py")
    table = LeaseTable()
    table.request([writes("src")])
    assert not table.is_held(table.request([exclusive(key)]))


@pytest.mark.parametrize("parts", [("..",), ("a", "..", ".."), ("a\x00",), (1,), ("/etc",), 5])
def test_a_path_key_built_by_hand_is_refused_where_path_would_be(parts: object) -> None:
    with pytest.raises(InvalidClaimError):
        Path(parts)  # type: ignore[arg-type]


def test_a_path_key_built_by_hand_equals_the_one_path_builds() -> None:
    assert Path(("src", "a.py")) == path("src/a.py")
    assert Path(()) == path(".") == Path([]) == Path("")  # type: ignore[arg-type]
    assert hash(Path(("é",))) == hash(path("é"))


@pytest.mark.parametrize("name", ["", "n\x00", 3, None])
def test_device_and_pool_names_are_checked_when_built_by_hand(name: object) -> None:
    with pytest.raises(InvalidClaimError):
        Device(name)  # type: ignore[arg-type]
    with pytest.raises(InvalidClaimError):
        Pool(name)  # type: ignore[arg-type]
    assert Device("gpu") == device("gpu") and Pool("net") == pool("net")


def test_canonical_claims_of_a_very_deep_path_are_worked_out_in_linear_time() -> None:
    # Every prefix of every claim used to be sliced and hashed: at 50,000 components that
    # was seconds of work for one request (a model can send such a path); now milliseconds.
    deep = "/".join(["d"] * 50_000)
    claims = [reads(deep + "/x"), writes(deep), reads("e"), units(pool("net"), 1)]
    assert canonical_claims(claims) == (writes(deep), reads("e"), units(pool("net"), 1))
