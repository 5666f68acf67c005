"""LeaseTable reuses a pruned trie node for the next node it makes: nothing may carry over."""

from __future__ import annotations

from toolkernel.locks import LeaseTable, pool, reads, units, writes

NET = pool("net")


def test_a_pool_node_pruned_and_reused_for_a_path_carries_no_units_or_holders() -> None:
    table = LeaseTable(pools={"net": 2})
    table.release(table.request([units(NET, 2)]))
    # Releasing "a" prunes the pool's nodes (kept from the release before), to be reused.
    table.release(table.request([writes("a")]))
    writer = table.request([writes("b/c")])
    assert table.is_held(writer)
    assert table.is_held(table.request([units(NET, 2)]))  # no units left over
    reader = table.request([reads("b")])
    assert not table.is_held(reader)
    assert table.release(writer) == (reader,)
    statistics = table.statistics()
    assert (statistics.held, statistics.waiting) == (2, 0)
    assert statistics.pool_units_held == (("net", 2),)


def test_files_of_one_directory_taken_in_turn_still_conflict_with_it() -> None:
    table = LeaseTable()
    for i in range(5):
        table.release(table.request([writes(f"d/f{i}")]))
    held = table.request([reads("d/f5")])
    writer = table.request([writes("d")])
    assert table.is_held(held) and not table.is_held(writer)
    assert table.waits_for(writer) == (held,)
    assert table.request_nowait([reads("d/f5")]) is None  # behind the waiting writer
    assert table.release(held) == (writer,)
    assert table.request_nowait([writes("e")]) is not None
