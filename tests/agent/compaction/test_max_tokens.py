"""A response cut at the output token limit (agentic-loop-go-port-spec 7)."""

from __future__ import annotations

from ra.agent import StopReason
from ra.agent.events import EventKind as E
from ra.agent.history import AssistantTurn, ContextTurn, ToolResultsTurn
from ra.agent.output_limit import CONTINUE_MESSAGE, CUT_CALL_RESULT, MAX_CUT_RESPONSES
from ra.llm.testing import Step, calls, reply
from ra.llm.types import ToolCall

from ..support import Recorder, make_session
from .helpers import pairing_problems


async def test_a_text_cut_mid_way_is_kept_and_continued() -> None:
    session, model = make_session(
        [Step(text="The answer is forty", finish_reason="length"), reply("-two, as computed.")]
    )
    rec = Recorder(session)
    result = await session.submit("what is it?")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.text == "The answer is forty-two, as computed."
    second = model.requests[1]
    assert second.messages[-2].text == "The answer is forty"  # the partial text stays in the context
    assert second.messages[-1].text == CONTINUE_MESSAGE
    assert [t.content for t in session.history if isinstance(t, ContextTurn)] == [CONTINUE_MESSAGE]
    assert [w["code"] for w in rec.of(E.WARNING)] == ["max_tokens"]


async def test_a_tool_call_cut_mid_way_is_not_run_but_the_complete_ones_are() -> None:
    ran: list[str] = []
    from ..support import default_tools

    tools = default_tools()
    tools.add(
        "note",
        "Note it.",
        {"type": "object", "properties": {"text": {"type": "string"}}},
        lambda a, c: ran.append(a.get("text", "?")) or "noted",
    )
    cut = calls(
        ("note", {"text": "first"}), ("note", {"text": "second"}), ("note", {"text": "thi"}), finish_reason="length"
    )
    session, model = make_session([cut, reply("ok")], tools=tools)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.COMPLETED and result.text == "ok"
    assert ran == ["first", "second"]
    results = next(t for t in session.history if isinstance(t, ToolResultsTurn)).results
    assert [r.is_error for r in results] == [False, False, True]
    assert results[2].content == CUT_CALL_RESULT
    ends = rec.of(E.TOOL_CALL_END)
    assert [bool(e.get("skipped")) for e in ends] == [False, False, True]
    assert pairing_problems(model.requests[1]) == []


async def test_a_single_call_cut_mid_way_is_answered_and_the_model_retries() -> None:
    broken = ToolCall("c1", "echo", {}, raw_arguments='{"text": "hal', arguments_error="not valid JSON")
    session, model = make_session([calls(broken, finish_reason="length"), reply("retried smaller")])
    result = await session.submit("go")
    assert result.text == "retried smaller"
    last = model.requests[1].messages[-1]
    assert last.content[0].tool_result is not None and "cut off at the output token limit" in str(
        last.content[0].tool_result.content
    )


async def test_cut_responses_are_continued_a_bounded_number_of_times_in_a_row() -> None:
    steps = [Step(text=f"part{i} ", finish_reason="length") for i in range(MAX_CUT_RESPONSES + 3)]
    session, model = make_session(steps)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.MAX_TOKENS
    assert len(model.requests) == MAX_CUT_RESPONSES + 1
    assert result.text == "".join(f"part{i} " for i in range(MAX_CUT_RESPONSES + 1))
    # The count starts over with a response that was not cut.
    session2, _model2 = make_session(
        [Step(text="a", finish_reason="length")] * MAX_CUT_RESPONSES
        + [reply("b")]
        + [Step(text="c", finish_reason="length")] * MAX_CUT_RESPONSES
        + [reply("d")]
    )
    first = await session2.submit("one")
    second = await session2.submit("two")
    assert first.stop_reason is second.stop_reason is StopReason.COMPLETED
    assert second.text == "c" * MAX_CUT_RESPONSES + "d"
    assert sum(isinstance(t, AssistantTurn) for t in session2.history) == 2 * (MAX_CUT_RESPONSES + 1)
