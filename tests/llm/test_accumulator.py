"""StreamAccumulator (spec 4.4): events fold back into the Response complete() would give."""

from __future__ import annotations

import pytest

from ra.llm.accumulator import StreamAccumulator
from ra.llm.testing import ScriptedAdapter, Step, calls, reply
from ra.llm.types import (
    ContentKind,
    FinishReason,
    Message,
    Request,
    Response,
    StreamEvent,
    StreamEventType,
    ThinkingData,
    ToolCall,
    Usage,
    Warning,
)

T = StreamEventType


def _feed(events: list[StreamEvent], **kwargs: str) -> StreamAccumulator:
    acc = StreamAccumulator(**kwargs)
    for event in events:
        acc.process(event)
    return acc


def test_text_deltas_concatenate() -> None:
    acc = _feed(
        [
            StreamEvent(T.STREAM_START),
            StreamEvent(T.TEXT_START, text_id="t"),
            StreamEvent(T.TEXT_DELTA, delta="Hel", text_id="t"),
            StreamEvent(T.TEXT_DELTA, delta="lo", text_id="t"),
            StreamEvent(T.TEXT_END, text_id="t"),
            StreamEvent(T.FINISH, finish_reason=FinishReason("stop", "end_turn"), usage=Usage(3, 2, 5)),
        ],
        provider="p",
        model="m",
        response_id="r1",
    )
    response = acc.response()
    assert response.text == "Hello" and acc.text == "Hello"
    assert (response.id, response.model, response.provider) == ("r1", "m", "p")
    assert response.finish_reason == FinishReason("stop", "end_turn")
    assert response.usage == Usage(3, 2, 5)


def test_segments_keep_the_order_in_which_they_started() -> None:
    thinking = ThinkingData("step by step", signature="sig-1")
    call = ToolCall("c1", "read", {"path": "a"}, '{"path": "a"}')
    acc = _feed(
        [
            StreamEvent(T.REASONING_START),
            StreamEvent(T.REASONING_DELTA, reasoning_delta="step by "),
            StreamEvent(T.REASONING_DELTA, reasoning_delta="step"),
            StreamEvent(T.REASONING_END, thinking=thinking),
            StreamEvent(T.TEXT_DELTA, delta="Reading.", text_id="0"),
            StreamEvent(T.TOOL_CALL_START, tool_call=ToolCall("c1", "read")),
            StreamEvent(T.TOOL_CALL_DELTA, tool_call=ToolCall("c1", "read"), delta='{"path"'),
            StreamEvent(T.TOOL_CALL_DELTA, tool_call=ToolCall("c1", "read"), delta=': "a"}'),
            StreamEvent(T.TOOL_CALL_END, tool_call=call),
        ]
    )
    message = acc.message()
    assert [p.kind for p in message.content] == [ContentKind.THINKING, ContentKind.TEXT, ContentKind.TOOL_CALL]
    assert message.content[0].thinking == thinking  # signature preserved for the round trip
    assert message.tool_calls[0].arguments == {"path": "a"}
    # No FINISH: the reason is inferred from the content.
    assert acc.response().finish_reason.reason == "tool_calls"


def test_interleaved_text_segments_by_id() -> None:
    acc = _feed(
        [
            StreamEvent(T.TEXT_DELTA, delta="a1", text_id="a"),
            StreamEvent(T.TEXT_DELTA, delta="b1", text_id="b"),
            StreamEvent(T.TEXT_DELTA, delta="a2", text_id="a"),
            StreamEvent(T.TEXT_END, text_id="a"),
            StreamEvent(T.TEXT_DELTA, delta="b2", text_id="b"),
        ]
    )
    texts = [p.text for p in acc.message().content]
    assert texts == ["a1a2", "b1b2"]
    assert acc.response().finish_reason.reason == "stop"


def test_tool_call_built_from_deltas_when_no_end_event() -> None:
    head = ToolCall("c7", "grep")
    acc = _feed(
        [
            StreamEvent(T.TOOL_CALL_DELTA, tool_call=head, delta='{"pattern": '),
            StreamEvent(T.TOOL_CALL_DELTA, tool_call=head, delta='"x"}'),
        ]
    )
    (call,) = acc.message().tool_calls
    assert (call.id, call.name, call.arguments) == ("c7", "grep", {"pattern": "x"})


def test_malformed_streamed_arguments_survive_verbatim() -> None:
    head = ToolCall("c8", "grep")
    acc = _feed([StreamEvent(T.TOOL_CALL_DELTA, tool_call=head, delta='{"pattern": "x"')])
    (call,) = acc.message().tool_calls
    assert call.arguments_error is not None
    assert call.raw_arguments == '{"pattern": "x"'


def test_reasoning_text_from_deltas_when_end_carries_only_the_signature() -> None:
    acc = _feed(
        [
            StreamEvent(T.REASONING_DELTA, reasoning_delta="thought"),
            StreamEvent(T.REASONING_END, thinking=ThinkingData("", signature="s")),
        ]
    )
    (part,) = acc.message().content
    assert part.thinking is not None
    assert (part.thinking.text, part.thinking.signature) == ("thought", "s")


def test_finish_response_from_the_adapter_wins() -> None:
    final = Response("id", "m", "p", Message.assistant("canonical"), FinishReason("stop"))
    acc = _feed([StreamEvent(T.TEXT_DELTA, delta="partial"), StreamEvent(T.FINISH, response=final)])
    assert acc.response() is final


def test_warnings_from_stream_start() -> None:
    acc = _feed([StreamEvent(T.STREAM_START, warnings=[Warning("temperature ignored", "unsupported")])])
    assert acc.response().warnings == [Warning("temperature ignored", "unsupported")]


def test_empty_stream_gives_an_empty_stop_response() -> None:
    response = StreamAccumulator().response()
    assert response.text == "" and response.message.content == []
    assert response.finish_reason.reason == "stop" and response.usage == Usage()


@pytest.mark.parametrize(
    "step",
    [
        reply("A longer answer, streamed in several small chunks.", chunk_size=3),
        reply("Let me look.", reasoning="I should read the file.", reasoning_signature="sig"),
        calls(("read_file", {"path": "a.txt"}), ("grep", {"pattern": "x", "path": "."}), text="Checking."),
    ],
)
async def test_accumulating_a_stream_equals_complete(step: Step) -> None:
    request = Request(model="m", messages=[Message.user("q")])
    adapter = ScriptedAdapter([step, step])
    expected = await adapter.complete(request)
    acc = StreamAccumulator()
    async for event in adapter.stream(request):
        acc.process(event)
    # Ignore the final response the scripted FINISH carries: rebuild from the events alone.
    acc.final = None
    got = acc.response()
    assert got.message == expected.message
    assert got.finish_reason.reason == expected.finish_reason.reason
    assert got.usage == expected.usage
