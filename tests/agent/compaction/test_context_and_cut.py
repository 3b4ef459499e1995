"""The pure parts: where a compaction cuts, and the context rebuilt from the turns."""

from __future__ import annotations

import random

import pytest

from ra.agent.compaction import context_from_turns
from ra.agent.compaction.context import select_user_messages, summary_message
from ra.agent.compaction.cut import find_cut
from ra.agent.history import (
    AssistantTurn,
    CompactionTurn,
    ContextTurn,
    History,
    SteeringTurn,
    ToolResultsTurn,
    Turn,
    UserTurn,
    turn_messages,
)
from ra.llm.types import Request, Role, ToolCall, ToolResult

from .helpers import pairing_problems


def random_history(rng: random.Random, size: int) -> list[Turn]:
    """A valid conversation: every assistant turn with calls is followed by their results."""
    turns: list[Turn] = [UserTurn("first request " + "u" * rng.randint(0, 200))]
    serial = 0
    while len(turns) < size:
        kind = rng.random()
        if kind < 0.1:
            turns.append(UserTurn("later request " + "u" * rng.randint(0, 300)))
        elif kind < 0.15:
            turns.append(SteeringTurn("steer " + "s" * rng.randint(0, 50)))
        elif kind < 0.18:
            turns.append(ContextTurn("context " + "c" * rng.randint(0, 50), source="hook"))
        else:
            calls = []
            for _ in range(rng.choice([0, 1, 1, 2, 3])):
                serial += 1
                calls.append(ToolCall(f"c{serial}", "echo", {"text": "a" * rng.randint(0, 100)}))
            turns.append(AssistantTurn("thinking " + "t" * rng.randint(0, 200), calls))
            if calls:
                results = [ToolResult(c.id, "r" * rng.randint(0, 2000)) for c in calls]
                turns.append(ToolResultsTurn(results, names=["echo"] * len(calls)))
    return turns


@pytest.mark.parametrize("seed", range(200))
def test_a_cut_never_separates_a_call_from_its_result(seed: int) -> None:
    rng = random.Random(seed)
    turns = random_history(rng, rng.randint(2, 60))
    start = 0
    # Up to three compactions in a row over the same history, as a long session does.
    for _ in range(3):
        cut = find_cut(turns, start, rng.randint(1, 3000))
        if cut is None:
            break
        assert start < cut < len(turns)
        assert not isinstance(turns[cut], ToolResultsTurn | CompactionTurn)
        users = [t.content for t in turns[:cut] if isinstance(t, UserTurn)]
        turns.append(CompactionTurn("summary", cut, user_messages=users[:1]))
        messages = context_from_turns(turns)
        assert pairing_problems(Request(model="m", messages=messages)) == []
        assert messages[0].role == Role.USER and "summary" in messages[0].text
        # The newest exchange is always kept.
        newest = next(t for t in reversed(turns) if not isinstance(t, CompactionTurn))
        tail = turn_messages(newest)
        assert messages[len(messages) - len(tail) :] == tail
        start = cut
        turns.extend(random_history(rng, rng.randint(1, 20))[1:])


def test_a_history_that_is_one_exchange_has_nothing_to_summarise() -> None:
    call = ToolCall("c1", "echo", {"text": "x"})
    turns: list[Turn] = [UserTurn("do it"), AssistantTurn("", [call]), ToolResultsTurn([ToolResult("c1", "y" * 9000)])]
    # Only the user's request lies before the newest exchange: it is repeated verbatim anyway.
    assert find_cut(turns, 0, 1) is None
    assert find_cut([UserTurn("only")], 0, 1) is None
    turns += [AssistantTurn("done"), UserTurn("next"), AssistantTurn("ok")]
    assert find_cut(turns, 0, 1) == 5  # everything before the newest exchange
    assert find_cut(turns, 5, 1) is None  # nothing after the last cut but the newest exchange


def test_context_from_turns_without_a_compaction_is_every_turns_messages() -> None:
    history = History()
    for turn in random_history(random.Random(7), 30):
        history.append(turn)
    assert context_from_turns(history.turns) == history.messages


def test_context_after_the_last_compaction_is_summary_user_messages_then_the_kept_turns() -> None:
    turns = random_history(random.Random(3), 40)
    first_cut = find_cut(turns, 0, 500)
    assert first_cut is not None
    turns.append(CompactionTurn("old summary", first_cut, user_messages=["old"]))
    turns.extend(random_history(random.Random(4), 20)[1:])
    second_cut = find_cut(turns, first_cut, 200)
    assert second_cut is not None
    turns.append(
        CompactionTurn(
            "new summary",
            second_cut,
            user_messages=["first request", "a later one"],
            details={"read_files": ["a.py", "b.py"], "modified_files": ["b.py"], "omitted_user_messages": 2},
        )
    )
    messages = context_from_turns(turns)
    head = messages[0].text
    assert "new summary" in head and "old summary" not in head
    assert "- a.py" in head and "Files changed earlier:\n- b.py" in head  # b.py changed, so not under read
    assert "2 other message(s)" in head
    assert [m.text for m in messages[1:3]] == ["first request", "a later one"]
    kept = [m for t in turns[second_cut:] if not isinstance(t, CompactionTurn) for m in turn_messages(t)]
    assert messages[3:] == kept
    # Pure: the same turns give the same messages.
    assert context_from_turns(turns) == messages
    assert summary_message(turns[-1]).text == head  # type: ignore[arg-type]


def test_the_first_request_is_always_kept_and_the_newest_fill_the_budget() -> None:
    candidates = ["FIRST", "a" * 40, "b" * 40, "c" * 40]
    kept, omitted = select_user_messages(candidates, budget_tokens=25)  # 100 characters
    assert kept == ["FIRST", "b" * 40, "c" * 40] and omitted == 1
    kept, omitted = select_user_messages(["F" * 1000, "new"], budget_tokens=50)
    assert kept[0].startswith("F" * 10) and "characters left out" in kept[0] and len(kept[0]) <= 200
    assert select_user_messages([], 10) == ([], 0)
