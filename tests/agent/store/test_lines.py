"""The recorder's per-step lines: the same text as the entry's dict encoded, for every field and
odd value; a provider message that repeats the text and calls is left out, any other is kept."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ra.agent.history import AssistantTurn, ToolResultsTurn, UserTurn, turn_messages
from ra.agent.store.encoding import EntryEncodeError, encode_entry
from ra.agent.store.format import is_plain_message, turn_from_entry, turn_to_entry
from ra.agent.store.lines import extra_json, turn_line
from ra.llm.types import ContentKind, ContentPart, Message, Role, ThinkingData, ToolCall, ToolResult, Usage

ODD = 'quote " backslash \\ newline \n tab \t nul \x00 é ü 中 \U0001f600 \u2028'


def plain(text: str, calls: list[ToolCall]) -> Message:
    parts = [ContentPart(ContentKind.TEXT, text=text)] if text else []
    parts.extend(ContentPart.of_tool_call(call.to_data()) for call in calls)
    return Message(Role.ASSISTANT, parts)


CALL = ToolCall("call_1", "read_file", {"path": "a.py", "n": [1, 2.5, None, True]})
RAW = ToolCall("call_2", "edit", {}, "{oops", "function", "arguments are not valid JSON", None)
ODD_CALL = ToolCall(ODD, ODD, {ODD: {ODD: [ODD]}}, ODD, "custom", ODD, {"item_id": ODD, "n": 1.5e-7})
PD = ToolCall("call_3", "noop", {"i": 1}, provider_data={"raw_arguments": '{"i": 1}'})
USAGE = Usage(103, 12, 115, 4, 5, 6, raw={"ignored": True})

ASSISTANTS = [
    AssistantTurn("", [], timestamp=0.0),
    AssistantTurn("hello", [], usage=Usage(1, 2, 3), timestamp=1_795_000_000.9995),
    AssistantTurn("", [PD], usage=USAGE, response_id="chatcmpl-1", timestamp=1.5, message=plain("", [PD])),
    AssistantTurn("Reading.", [CALL, RAW], response_id=ODD, timestamp=2.0, message=plain("Reading.", [CALL, RAW])),
    AssistantTurn(ODD, [ODD_CALL], ODD, USAGE, ODD, 3.25, None),
    # Kept: thinking, a text part that is not the content, a name, calls that differ, reasoning.
    AssistantTurn(
        "a",
        [CALL],
        "why",
        timestamp=4.0,
        message=Message(
            Role.ASSISTANT, [ContentPart.of_thinking(ThinkingData("why", "sig")), *plain("a", [CALL]).content]
        ),
    ),
    AssistantTurn("a", [], timestamp=5.0, message=Message(Role.ASSISTANT, [ContentPart.of_text("b")])),
    AssistantTurn("a", [], timestamp=6.0, message=Message(Role.ASSISTANT, plain("a", []).content, name="bot")),
    AssistantTurn("", [CALL], timestamp=7.0, message=plain("", [PD])),
    AssistantTurn("a", [], "why", timestamp=8.0, message=plain("a", [])),
    AssistantTurn("", [], timestamp=9.0, message=Message(Role.ASSISTANT, [ContentPart.of_text("")])),
]
RESULTS = [
    ToolResultsTurn([ToolResult("c1", "ok")], 10.0, ["noop"]),
    ToolResultsTurn([ToolResult("c1", ODD, True), ToolResult("c2", {"k": [ODD, 1]}, False)], 11.0, [ODD]),
    ToolResultsTurn([ToolResult("c1", ["a", {"b": None}], False, b"\x89PNG\x00\xff", "image/png")], 12.0, [""]),
    ToolResultsTurn([], 13.0),
]
EXTRAS: list[dict[str, Any]] = [
    {},
    {"model": "m", "provider": None, "cost_usd": None, "total_cost_usd": 0.0},
    {"model": ODD, "provider": "p", "cost_usd": 1.25e-05, "total_cost_usd": 3},
    {"total_cost_usd": 0.1 + 0.2},
]


@pytest.mark.parametrize("turn", ASSISTANTS + RESULTS + [UserTurn(ODD, 14.0)])
@pytest.mark.parametrize("extra", EXTRAS)
@pytest.mark.parametrize("parent", [None, "0000abcd", ODD])
def test_a_line_is_the_entry_encoded(turn: Any, extra: dict[str, Any], parent: str | None) -> None:
    expected = encode_entry(turn_to_entry(turn, "1234abcd", parent, **extra))
    assert turn_line(turn, "1234abcd", parent, extra) == expected
    assert turn_line(turn, "1234abcd", parent, extra, extra_json(extra)) == expected
    assert json.loads(expected)["id"] == "1234abcd"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1, 2}, b"bytes"])
def test_what_json_cannot_hold_is_refused_the_same_way(bad: Any) -> None:
    turn = AssistantTurn("x", [ToolCall("c", "t", {"v": bad})])
    with pytest.raises(EntryEncodeError):
        turn_line(turn, "1234abcd", None, {})
    with pytest.raises(EntryEncodeError):
        turn_line(AssistantTurn("x"), "1234abcd", None, {"cost_usd": bad})
    with pytest.raises(EntryEncodeError):
        encode_entry(turn_to_entry(turn, "1234abcd", None))


def test_a_message_that_repeats_the_text_and_calls_is_left_out_and_rebuilt_the_same() -> None:
    left_out = [turn for turn in ASSISTANTS if turn.message is not None and is_plain_message(turn)]
    kept = [turn for turn in ASSISTANTS if turn.message is not None and not is_plain_message(turn)]
    assert len(left_out) == 2 and len(kept) == 6
    for turn in ASSISTANTS:
        entry = turn_to_entry(turn, "1234abcd", None)
        assert ("message" in entry) == (turn in kept)
        back = turn_from_entry(json.loads(turn_line(turn, "1234abcd", None, {})))
        # What the model is sent from the turn read back is what the live turn gave.
        assert turn_messages(back) == turn_messages(turn)
        assert (back.message is None) == (turn.message is None or turn in left_out)


def test_a_plain_tool_call_step_writes_its_call_once() -> None:
    """The size of the entry of every tool-calling step: the call (id, name, arguments,
    provider data) is in ``tool_calls`` only, not again in a ``message``."""
    turn = ASSISTANTS[2]
    line = turn_line(turn, "1234abcd", "0000abcd", {"model": "m", "provider": "p", "cost_usd": None})
    assert line.count("call_3") == 1 and line.count("raw_arguments") == 1
    assert len(line.encode()) < 450  # 600 with the message written out too


def _near_misses() -> list[AssistantTurn]:
    """Messages one field away from plain, in every field the check looks at (and plain ones)."""
    base = plain("a", [CALL, RAW])
    text, call, raw = base.content
    data = call.tool_call
    assert data is not None

    def swap(part: ContentPart, **fields: Any) -> ContentPart:
        return ContentPart(**{**{f: getattr(part, f) for f in ContentPart.__dataclass_fields__}, **fields})

    def calldata(**fields: Any) -> ContentPart:
        values = {f: getattr(data, f) for f in type(data).__dataclass_fields__}
        return swap(call, tool_call=type(data)(**{**values, **fields}))

    class Part(ContentPart):
        pass

    variants = [
        [text, call, raw],
        [call, raw],
        [text, raw, call],
        [text, call],
        [text, call, raw, raw],
        [swap(text, text="b"), call, raw],
        [swap(text, kind="text"), call, raw],
        [swap(text, kind=ContentKind.THINKING), call, raw],
        [swap(text, tool_call=data), call, raw],
        [swap(text, thinking=ThinkingData("t")), call, raw],
        [swap(text, image=object()), call, raw],
        [Part(ContentKind.TEXT, text="a"), call, raw],
        [text, swap(call, text="x"), raw],
        [text, swap(call, kind=ContentKind.TEXT), raw],
        [text, swap(call, tool_call=None), raw],
        [text, calldata(id="other"), raw],
        [text, calldata(name="other"), raw],
        [text, calldata(arguments={"path": "b.py"}), raw],
        [text, calldata(arguments={"path": "a.py", "n": [1, 2.5, None, 1]}), raw],
        [text, calldata(type="custom"), raw],
        [text, calldata(provider_data={}), raw],
        [text, call, swap(raw, tool_call=None)],
    ]
    turns = [AssistantTurn("a", [CALL, RAW], message=Message(Role.ASSISTANT, parts)) for parts in variants]
    turns.append(AssistantTurn("", [CALL, RAW], message=Message(Role.ASSISTANT, [call, raw])))
    turns.append(AssistantTurn("", [CALL, RAW], message=Message(Role.ASSISTANT, [text, call, raw])))
    turns.append(AssistantTurn("a", [CALL, RAW], message=Message(Role.USER, [text, call, raw])))
    turns.append(AssistantTurn("a", [CALL, RAW], message=Message(Role.ASSISTANT, [text, call, raw], tool_call_id="x")))
    return turns


@pytest.mark.parametrize("turn", ASSISTANTS + _near_misses())
def test_the_plain_check_is_its_definition(turn: AssistantTurn) -> None:
    from ra.agent.history import plain_assistant_parts

    message = turn.message
    expected = (
        message is not None
        and turn.reasoning is None
        and message.role == Role.ASSISTANT
        and message.name is None
        and message.tool_call_id is None
        and message.content == plain_assistant_parts(turn)
    )
    assert is_plain_message(turn) == expected


def test_near_misses_are_mostly_not_plain() -> None:
    answers = [is_plain_message(turn) for turn in _near_misses()]
    # The first variant and the two-call message without text are plain; so are, as the
    # dataclass comparison has it, a kind given as the string "text" (equal to the enum member)
    # and an argument 1 where the call has True (1 == True).
    assert [i for i, plain in enumerate(answers) if plain] == [0, 6, 18, 22], answers
