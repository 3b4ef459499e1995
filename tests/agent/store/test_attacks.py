"""Attacks on what users believe the store guarantees: budgets across rewinds and forks, records
edited by hand, symlinks and shared directories, hostile JSON, and secrets in replay output."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from ra.agent import StopReason
from ra.agent.store import FileSessionStore, StoreError, load_record
from ra.agent.store.record import SessionRecord
from ra.llm.pricing import ModelPrice
from ra.llm.testing import Step
from ra.llm.types import ToolCall, Usage

from .support import Rig

USAGE = Usage(input_tokens=100_000, output_tokens=50_000)
PRICE = ModelPrice(1.0, 2.0)  # USD per million: a call with USAGE costs $0.20


def tool_step(n: int) -> Step:
    return Step(tool_calls=[ToolCall(f"call-{n}", "echo", {"text": "x"})], usage=USAGE)


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path: Path, entries: list[dict]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


# -- budget ------------------------------------------------------------------------------------------------------


async def spent_session(store: FileSessionStore, rig: Rig) -> str:
    """A session that spent $0.60 in three priced calls (budget $1, stopped by the turn limit)."""
    first = rig.session(store, max_budget_usd=1.0, max_turns_per_input=3)
    result = await first.submit("work")
    assert result.stop_reason is StopReason.TURN_LIMIT and first.total_cost_usd == pytest.approx(0.6)
    await first.close()
    return first.id


async def test_a_rewind_to_an_early_entry_does_not_forget_the_money_spent_after_it(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(n) for n in range(1, 30)], price=PRICE)
    sid = await spent_session(store, rig)
    record = await load_record(store, sid)
    early = record.turn_ids[1]  # the first answer: $0.20 spent on the path up to it
    rewound = await rig.open(store, rig.config(max_budget_usd=1.0), resume=sid, resume_at=early)
    # The $0.40 of the abandoned branch was really spent: the budget counts it.
    assert rewound.total_cost_usd == pytest.approx(0.6)
    before = len(rig.model.requests)
    result = await rewound.submit("again")
    assert result.stop_reason is StopReason.BUDGET_LIMIT
    assert len(rig.model.requests) - before == 2  # $0.60 + 2 x $0.20 crosses $1.00
    await rewound.close()
    # Rewinding again to the same point does not reset it either.
    again = await rig.open(store, rig.config(max_budget_usd=1.0), resume=sid, resume_at=early)
    assert again.total_cost_usd == pytest.approx(1.0)
    await again.close()


async def test_a_fork_at_an_early_entry_inherits_all_the_parents_spend(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(n) for n in range(1, 30)], price=PRICE)
    sid = await spent_session(store, rig)
    record = await load_record(store, sid)
    fork = await rig.open(
        store, rig.config(max_budget_usd=1.0), resume=sid, fork_session=True, resume_at=record.turn_ids[1]
    )
    assert fork.total_cost_usd == pytest.approx(0.6)
    await fork.close()


async def test_a_rewind_keeps_the_abandoned_branchs_unpriced_calls(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(n) for n in range(1, 30)], price=PRICE)
    sid = await spent_session(store, rig)
    path = store.path_of(sid)
    assert path is not None
    entries = lines_of(path)
    last_answer = [e for e in entries if e["type"] == "assistant"][-1]
    last_answer["cost_usd"] = None  # a call whose price was unknown, on the later part
    write_lines(path, entries)
    record = await load_record(store, sid)
    rewound = await rig.open(store, rig.config(max_budget_usd=5.0), resume=sid, resume_at=record.turn_ids[1])
    assert rewound.unpriced_calls == 1
    result = await rewound.submit("more")
    assert result.stop_reason is StopReason.ERROR and "no known price" in str(result.error)
    await rewound.close()


@pytest.mark.parametrize(
    "edit",
    [-5.0, "0", None, 0.0, float("nan")],
    ids=["negative", "string", "null", "lowered-last", "nan"],
)
async def test_a_hand_edited_last_total_does_not_lower_the_spend_below_the_entries_costs(
    tmp_path: Path, edit: object
) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(n) for n in range(1, 30)], price=PRICE)
    sid = await spent_session(store, rig)
    path = store.path_of(sid)
    assert path is not None
    entries = lines_of(path)
    for entry in entries:
        if "total_cost_usd" in entry:
            entry["total_cost_usd"] = edit
    # json.dumps writes NaN for nan (Python's reader accepts it): what a careless script leaves.
    write_lines(path, entries)
    record = await load_record(store, sid)
    assert record.total_cost_usd == pytest.approx(0.6)
    resumed = await rig.open(store, rig.config(max_budget_usd=0.7), resume=sid)
    assert resumed.total_cost_usd == pytest.approx(0.6)
    result = await resumed.submit("more")
    assert result.stop_reason is StopReason.BUDGET_LIMIT
    await resumed.close()


@pytest.mark.parametrize("value", ["Infinity", "1e400"])
async def test_an_infinite_total_is_not_a_number_and_the_record_stays_writable(tmp_path: Path, value: str) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(n) for n in range(1, 30)], price=PRICE)
    sid = await spent_session(store, rig)
    path = store.path_of(sid)
    assert path is not None
    text, count = re.subn(r'"total_cost_usd":[0-9.e-]+', f'"total_cost_usd":{value}', path.read_text())
    assert count >= 3
    path.write_text(text)
    resumed = await rig.open(store, rig.config(max_budget_usd=5.0), resume=sid)
    assert resumed.total_cost_usd == pytest.approx(0.6)  # the costs of the entries still count
    await resumed.submit("more")
    await resumed.close()
    assert (await load_record(store, sid)).total_cost_usd > 0.6  # the new entries were written


def test_a_hand_lowered_total_on_every_entry_is_the_users_call_but_not_below_the_costs() -> None:
    header = {"type": "session", "version": 1, "id": "s", "cwd": "/"}
    entries = [header]
    parent = None
    for n in range(3):
        entry = {
            "type": "assistant",
            "id": f"0000000{n}",
            "parent_id": parent,
            "content": "",
            "tool_calls": [],
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
            "cost_usd": 0.25,
            "total_cost_usd": 0.01,
        }
        entries.append(entry)
        parent = entry["id"]
    assert SessionRecord.from_entries(entries).total_cost_usd == pytest.approx(0.75)
