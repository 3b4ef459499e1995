"""Records read back: every turn kind round-trips through a real file, the tree, paths and totals."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ra.agent.history import (
    AssistantTurn,
    CompactionTurn,
    ContextTurn,
    SteeringTurn,
    SystemTurn,
    ToolResultsTurn,
    UserTurn,
)
from ra.agent.store import FileSessionStore, RecordFormatError, SessionNotFoundError, SessionRecord, load_record
from ra.agent.store.format import header, turn_to_entry
from ra.llm.types import ContentPart, ImageData, Message, Role, ThinkingData, ToolCall, ToolResult, Usage

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))


def every_turn_kind() -> list:
    call = ToolCall("c1", "echo", {"text": "hi"}, None, "function", None, {"item_id": "fc_1"})
    message = Message(
        Role.ASSISTANT,
        [
            ContentPart.of_thinking(ThinkingData("thinking...", "sig-abc")),
            ContentPart.of_text("Let me look."),
            ContentPart.of_tool_call(call.to_data()),
        ],
    )
    return [
        SystemTurn("be brief", 1.0),
        UserTurn("look at this", 2.0, (ImageData(data=PNG, media_type="image/png"),)),
        ContextTurn("project notes", "SessionStart", 3.0),
        AssistantTurn("Let me look.", [call], "thinking...", Usage(10, 5, 15, 2, 3, 1), "resp-1", 4.0, message),
        ToolResultsTurn([ToolResult("c1", "echo: hi", False, PNG, "image/png")], 5.0, ["echo"]),
        SteeringTurn("actually, stop", 6.0),
        CompactionTurn("summary", 2, 900, 300, "manual", ["look at this"], {"read_files": ["a.py"]}, 7.0),
        AssistantTurn("done", usage=Usage(3, 1, 4), timestamp=8.0),
    ]


async def test_every_turn_kind_round_trips_through_a_file(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    turns = every_turn_kind()
    entries, parent = [], None
    for index, turn in enumerate(turns):
        entry = turn_to_entry(turn, f"{index:08x}", parent)
        entries.append(entry)
        parent = entry["id"]
    head = header("rt", cwd="/p", model="m", provider="p", profile="g", ra_version="t", timestamp=0.0)
    await store.append("rt", [head, *entries[:3]])
    await store.append("rt", entries[3:])
    record = await load_record(store, "rt")
    assert record.turns == turns
    assert record.turn_ids == [f"{i:08x}" for i in range(len(turns))]
    assert record.turn_count == 2 and record.usage.input_tokens == 13 and record.title == "look at this"


def _chain(*specs: tuple[str, str | None, dict]) -> list[dict]:
    head = header("t", cwd="/p", model="m0", provider="p0", profile="g", ra_version="t", timestamp=0.0)
    return [head, *({"id": i, "parent_id": p, "timestamp": "1970-01-01T00:00:01Z", **body} for i, p, body in specs)]


U = {"type": "user", "content": "q"}


def A(cost: float | None, total: float | None, n: int = 1) -> dict:
    out: dict = {"type": "assistant", "content": "a", "tool_calls": [], "usage": {"input_tokens": n}}
    out["cost_usd"] = cost
    if total is not None:
        out["total_cost_usd"] = total
    return out


def test_the_leaf_is_the_last_entry_and_a_branch_leaves_the_old_path_out() -> None:
    entries = _chain(
        ("u1", None, U),
        ("a1", "u1", A(0.1, 0.1)),
        ("u2", "a1", {**U, "content": "old branch"}),
        ("a2", "u2", A(0.2, 0.3)),
        ("u3", "a1", {**U, "content": "new branch"}),  # a rewind to a1
        ("a3", "u3", A(0.05, 0.35)),
    )
    record = SessionRecord.from_entries(entries)
    assert record.leaf_id == "a3" and [e["id"] for e in record.path] == ["u1", "a1", "u3", "a3"]
    assert [getattr(t, "content", None) for t in record.turns] == ["q", "a", "new branch", "a"]
    assert record.turn_count == 2 and record.total_cost_usd == pytest.approx(0.35)
    assert sorted(record.leaves()) == ["a2", "a3"]
    old = record.with_leaf("a2")
    assert [e["id"] for e in old.path] == ["u1", "a1", "u2", "a2"]
    # The spend is the record's, on every branch: reading another branch does not give money back.
    assert old.total_cost_usd == pytest.approx(0.35)


def test_totals_model_and_unpriced_calls_come_from_the_path() -> None:
    entries = _chain(
        ("u1", None, U),
        ("c1", "u1", {"type": "config", "model": "m1", "provider": "p1"}),
        ("a1", "c1", A(None, 0.0, 7)),
        ("e1", "a1", {"type": "input_end", "reason": "completed", "total_cost_usd": 0.5}),
        ("x1", "e1", {"type": "label", "label": "checkpoint"}),
        ("z1", "x1", {"type": "some_future_entry", "whatever": 1}),
    )
    record = SessionRecord.from_entries(entries)
    assert (record.model, record.provider) == ("m1", "p1")
    assert record.unpriced_calls == 1 and record.total_cost_usd == 0.5 and record.usage.input_tokens == 7
    assert len(record.turns) == 2


def test_without_totals_the_spend_is_the_sum_of_the_calls() -> None:
    entries = _chain(("u1", None, U), ("a1", "u1", A(0.25, None)), ("a2", "a1", A(0.5, None)))
    record = SessionRecord.from_entries(entries)
    assert record.total_cost_usd == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ([{"type": "user", "id": "u"}], "not a session header"),
        (_chain(("u1", "u2", U), ("u2", "u1", U)), "cycle"),
        (_chain(("u1", "gone", U)), "names no entry"),
        (_chain(("u1", None, {"type": "user"})), "content"),
        ([{**_chain()[0], "version": 99}], "format version 99"),
        ([{**_chain()[0], "version": "1"}], "header.version"),
    ],
)
def test_records_that_are_not_the_documented_shape_are_refused_clearly(entries: list, match: str) -> None:
    with pytest.raises(RecordFormatError, match=match):
        SessionRecord.from_entries(entries)


def test_an_unknown_leaf_is_session_not_found() -> None:
    with pytest.raises(SessionNotFoundError, match="no entry 'nope'"):
        SessionRecord.from_entries(_chain(("u1", None, U)), "nope")


async def test_a_ten_thousand_turn_record_loads(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    entries, parent = [], None
    for index in range(10_000):
        turn = UserTurn(f"q{index}") if index % 2 == 0 else AssistantTurn(f"a{index}", usage=Usage(1, 1, 2))
        entry = turn_to_entry(turn, f"{index:08x}", parent)
        entries.append(entry)
        parent = entry["id"]
    head = header("big", cwd="/p", model="m", provider="p", profile="g", ra_version="t", timestamp=time.time())
    await store.append("big", [head, *entries])
    record = await load_record(store, "big")
    assert len(record.turns) == 10_000 and record.turn_count == 5_000
    path = store.path_of("big")
    assert path is not None and len(path.read_text().splitlines()) == 10_001
    assert json.loads(path.read_text().splitlines()[-1])["id"] == f"{9_999:08x}"
