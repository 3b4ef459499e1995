"""The Go-port spec's message stream (sections 3.2 and 10) as ra.sdk projects it: exit reasons,
the permission mode's spelling, the tools ``init`` lists, ``tool_progress`` and ``stream_event``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ra.agent import SessionConfig
from ra.llm.errors import StreamError
from ra.llm.pricing import ModelPrice
from ra.llm.testing import Step, call, calls, reply
from ra.llm.types import Usage
from ra.sdk import (
    AgentClient,
    QueryOptions,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    ToolProgressMessage,
    UserMessage,
)
from ra.sdk.reading import parse_message

from ..agent.support import make_session


async def _run(session: Any, prompt: str = "go", *, partial: bool = False) -> list[Any]:
    client = AgentClient(QueryOptions(include_partial_messages=partial), session=session)
    await client.connect()
    try:
        await client.query(prompt)
        return [m async for m in client.receive_response()]
    finally:
        await client.disconnect()


# -- 3.2 exit reasons -------------------------------------------------------------------------------------


async def test_a_budget_stop_reports_error_max_budget_usd() -> None:
    usage = Usage(input_tokens=1_000_000)  # $1 a call at $1/M
    config = SessionConfig(prices={"test-model": ModelPrice(1.0, 0.0)}, max_budget_usd=1.0)
    session, _ = make_session(default=Step(tool_calls=call("echo", text="x").tool_calls, usage=usage), config=config)
    result = (await _run(session))[-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.stop_reason, result.is_error) == (
        "error_max_budget_usd",
        "error_max_budget_usd",
        True,
    )
    assert result.ra_stop_reason == "budget_limit"


async def test_a_reply_cut_at_max_tokens_is_not_a_success() -> None:
    """A cut reply is continued a few times in a row; an input that still ends cut is no success."""
    from ra.agent.output_limit import MAX_CUT_RESPONSES

    session, _ = make_session([Step(text="The answer is", finish_reason="length")] * (MAX_CUT_RESPONSES + 1))
    result = (await _run(session))[-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error) == ("error_during_execution", True)
    text = "The answer is" * (MAX_CUT_RESPONSES + 1)
    assert (result.stop_reason, result.ra_stop_reason, result.result) == ("max_tokens", "max_tokens", text)


# -- the permission mode, as Claude Code spells it -------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "reported"),
    [
        ("default", "default"),
        ("accept_edits", "acceptEdits"),
        ("acceptEdits", "acceptEdits"),
        ("plan", "plan"),
        ("bypass", "bypassPermissions"),
        ("bypassPermissions", "bypassPermissions"),
        ("dont_ask", "dontAsk"),
        ("dontAsk", "dontAsk"),
    ],
)
async def test_init_reports_the_mode_in_claude_spelling(given: str, reported: str) -> None:
    session, _ = make_session([reply("ok")], config=SessionConfig(permission_mode=given))
    init = (await _run(session))[0]
    assert isinstance(init, SystemMessage) and init.data["permissionMode"] == reported
    assert json.loads(json.dumps(init.to_json()))["permissionMode"] == reported


async def test_a_mode_switched_between_queries_is_reported_in_claude_spelling() -> None:
    session, _ = make_session([reply("one"), reply("two")])
    client = AgentClient(session=session)
    await client.connect()
    try:
        await client.query("first")
        first = [m async for m in client.receive_response()]
        client.set_permission_mode("accept_edits")  # ra's spelling in, Claude's out
        await client.query("second")
        second = [m async for m in client.receive_response()]
    finally:
        await client.disconnect()
    assert first[0].data["permissionMode"] == "bypassPermissions"  # no mode, rules or callback: bypass
    assert second[0].data["permissionMode"] == "acceptEdits"
    assert session.permission_mode == "accept_edits"  # ra's own spelling stays inside


def test_claude_mode_refuses_an_unknown_mode() -> None:
    from ra.agent.permissions.rules import claude_mode

    with pytest.raises(ValueError, match="unknown permission mode"):
        claude_mode("yolo")


# -- init.tools --------------------------------------------------------------------------------------------


async def test_init_tools_leave_out_what_a_bare_deny_rule_hides() -> None:
    config = SessionConfig(disallowed_tools=("boom", "echo(secret*)"))
    session, model = make_session([reply("ok")], config=config)
    init = (await _run(session))[0]
    tools = init.data["tools"]
    offered = [t.name for t in model.requests[0].tools or []]
    assert "boom" not in tools and "boom" not in offered  # hidden from the model: not listed
    assert "echo" in tools  # a scoped rule checks calls; the tool stays offered
    assert tools == offered


# -- 10: tool_progress -------------------------------------------------------------------------------------


async def test_tool_progress_frames_every_tool_call_in_order() -> None:
    config = SessionConfig(disallowed_tools=("echo(denied)",))
    session, _ = make_session(
        [calls(("echo", {"text": "a"}), ("echo", {"text": "denied"}), ("nap", {"seconds": 0.05})), reply("ok")],
        config=config,
    )
    messages = await _run(session)
    assistant = messages[1]
    ids = [b.id for b in assistant.content]
    progress = [m for m in messages if isinstance(m, ToolProgressMessage)]
    assert [(p.tool_use_id, p.status) for p in progress] == [
        (ids[0], "started"),
        (ids[0], "finished"),
        (ids[1], "started"),  # denied: framed too, its result says why
        (ids[1], "finished"),
        (ids[2], "started"),
        (ids[2], "finished"),
    ]
    assert progress[-1].elapsed_time_seconds >= 0.05 and progress[-2].elapsed_time_seconds == 0
    user = next(m for m in messages if isinstance(m, UserMessage))
    assert messages.index(progress[-1]) < messages.index(user)  # progress comes before the results
    for p in progress:
        assert parse_message(json.loads(json.dumps(p.to_json()))).to_json() == p.to_json()


# -- 10: stream_event --------------------------------------------------------------------------------------


def _events(messages: list[Any]) -> list[dict[str, Any]]:
    return [m.event for m in messages if isinstance(m, StreamEvent)]


async def test_stream_events_cover_every_block_and_tool_input() -> None:
    session, _ = make_session(
        [
            Step(text="Looking.", reasoning="think", tool_calls=call("echo", text="a").tool_calls, chunk_size=4),
            reply("done"),
        ],
        streaming=True,
    )
    messages = await _run(session, partial=True)
    events = _events(messages)
    first = events[: next(i for i, e in enumerate(events) if e["type"] == "message_stop") + 1]
    assert [e["type"] for e in first] == [
        "message_start",
        "content_block_start",  # thinking
        "content_block_delta",
        "content_block_stop",
        "content_block_start",  # text
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",  # tool_use
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    starts = [e for e in first if e["type"] == "content_block_start"]
    assert [(e["index"], e["content_block"]["type"]) for e in starts] == [(0, "thinking"), (1, "text"), (2, "tool_use")]
    tool_block = starts[2]["content_block"]
    assistant = next(m for m in messages if type(m).__name__ == "AssistantMessage")
    assert (tool_block["id"], tool_block["name"]) == (assistant.content[2].id, "echo")
    deltas = [e for e in first if e["type"] == "content_block_delta"]
    assert "".join(e["delta"].get("text", "") for e in deltas if e["index"] == 1) == "Looking."
    (json_delta,) = [e["delta"] for e in deltas if e["index"] == 2]
    assert json_delta["type"] == "input_json_delta" and json.loads(json_delta["partial_json"]) == {"text": "a"}
    assert first[-2]["delta"]["stop_reason"] == "tool_use"
    # Every stream event comes before the assistant message it builds up.
    assert messages.index(next(m for m in messages if isinstance(m, StreamEvent))) < messages.index(assistant)
    for message in messages:
        assert parse_message(json.loads(json.dumps(message.to_json()))).to_json() == message.to_json()


async def test_no_stream_events_unless_asked() -> None:
    session, _ = make_session([reply("done")], streaming=True)
    assert _events(await _run(session, partial=False)) == []


async def test_a_retried_stream_is_announced_and_starts_a_new_message() -> None:
    """A call that breaks after streaming text is retried: the consumer is told the partial text
    is void (api_retry) before the new attempt's message_start, so nothing is silently doubled."""
    session, _ = make_session(
        [Step(text="partial answer", stream_error=StreamError("connection reset")), reply("complete answer")],
        streaming=True,
    )
    messages = await _run(session, partial=True)
    kinds = [
        m.event["type"] if isinstance(m, StreamEvent) else f"{type(m).__name__}:{getattr(m, 'subtype', '')}"
        for m in messages
    ]
    retry = kinds.index("SystemMessage:api_retry")
    assert kinds[:retry].count("message_start") == 1 and "message_stop" not in kinds[:retry]
    assert kinds[retry + 1] == "message_start"
    notice = messages[retry]
    assert notice.data["discard_partial"] is True and notice.data["error_type"] == "StreamError"
    after = "".join(e["delta"].get("text", "") for e in _events(messages[retry:]) if e["type"] == "content_block_delta")
    assert after == "complete answer"
    assert messages[-1].result == "complete answer"
