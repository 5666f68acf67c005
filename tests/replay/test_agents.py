"""Recorded turns replayed by two agent processes on one tree through a real lease service:
every edit lands."""

from __future__ import annotations

from pathlib import Path

from toolkernel._replay._agents import expected_edits, replay_agents
from toolkernel._replay._turns import capped, load_turns

SAMPLE = Path(__file__).with_name("two_agents_sample.jsonl")


def test_two_agents_on_one_tree_lose_no_edit() -> None:
    turns = capped(load_turns(SAMPLE))
    per_agent = sum(expected_edits(turns).values())
    assert per_agent >= 5  # the sample edits files, some of them in several turns
    report = replay_agents(SAMPLE, agents=2, scale=0.001, compare=False)
    assert report.failures == ()
    assert report.edits == 2 * per_agent
    assert report.landed == report.edits
