"""Reading a message stream back (``ra.sdk.reading``): what ra writes comes back the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ra.llm.testing import Step, call, calls, reply
from ra.llm.types import Usage
from ra.sdk import AgentClient, AssistantMessage, QueryOptions, ResultMessage, StreamEvent, UserMessage
from ra.sdk.reading import MessageFormatError, parse_message, read_messages

from ..agent.support import make_session


async def _messages(script: list[Step], *, partial: bool = False) -> list[object]:
    session, _ = make_session(script, streaming=partial)
    client = AgentClient(QueryOptions(include_partial_messages=partial), session=session)
    await client.connect()
    await client.query("go")
    out = [m async for m in client.receive_response()]
    await client.disconnect()
    return out


@pytest.mark.parametrize("partial", [False, True])
async def test_every_message_a_session_writes_reads_back_the_same(partial: bool) -> None:
    script = [
        Step(text="Looking first.", reasoning="think", tool_calls=call("echo", text="a").tool_calls),
        calls(("echo", {"text": "b"}), ("boom", {})),  # a result that is an error
        reply("done", usage=Usage(120, 7, 127, cache_read_tokens=100, cache_write_tokens=3)),
    ]
    messages = await _messages(script, partial=partial)
    kinds = {type(m) for m in messages}
    assert {AssistantMessage, UserMessage, ResultMessage} <= kinds
    assert (StreamEvent in kinds) is partial
    for message in messages:
        written = message.to_json()  # type: ignore[attr-defined]
        back = parse_message(json.loads(json.dumps(written)))
        assert type(back) is type(message)
        assert back.to_json() == written
    errors = [b for m in messages if isinstance(m, UserMessage) for b in m.content if b.is_error]  # type: ignore[union-attr]
    assert errors  # the failing call came back as an error result


def test_the_cli_stream_reads_back_as_typed_messages(tmp_path: Path) -> None:
    """Lines as `ra --output-format stream-json` writes them (one of its runs, kept as a fixture
    in the shape the CLI test checks), blank lines skipped."""
    lines = [
        json.dumps({"type": "system", "subtype": "init", "cwd": "/w", "model": "m", "tools": ["read_file"],
                    "mcp_servers": [], "permissionMode": "bypassPermissions", "profile": "ra", "session_id": "s",
                    "uuid": "u1"}),
        "",
        json.dumps({"type": "assistant", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                    "model": "m", "content": [{"type": "tool_use", "id": "c1", "name": "read_file",
                    "input": {"path": "a"}}], "stop_reason": "tool_use", "stop_sequence": None,
                    "usage": {"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 0,
                              "cache_creation_input_tokens": 0}},
                    "parent_tool_use_id": None, "session_id": "s", "uuid": "u2"}),
        json.dumps({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result",
                    "tool_use_id": "c1", "content": "x", "is_error": False}]}, "parent_tool_use_id": None,
                    "session_id": "s", "uuid": "u3"}),
        json.dumps({"type": "result", "subtype": "success", "is_error": False, "duration_ms": 10,
                    "duration_api_ms": 4, "num_turns": 2, "result": "ok", "stop_reason": "end_turn",
                    "ra_stop_reason": "completed", "session_id": "s", "total_cost_usd": 0,
                    "usage": {"input_tokens": 9, "output_tokens": 3, "cache_read_input_tokens": 0,
                              "cache_creation_input_tokens": 0}, "permission_denials": [], "uuid": "u4",
                    "a_field_from_a_newer_writer": 1}),
    ]  # fmt: skip
    messages = list(read_messages(lines))
    assert [type(m).__name__ for m in messages] == ["SystemMessage", "AssistantMessage", "UserMessage", "ResultMessage"]
    assert messages[0].data["tools"] == ["read_file"]  # type: ignore[union-attr]
    assert messages[1].content[0].input == {"path": "a"}  # type: ignore[union-attr]
    assert messages[3].usage.input_tokens == 9 and messages[3].total_cost_usd == 0.0  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("not json", "line 1: not JSON"),
        ("[1, 2]", "line 1: message: expected an object"),
        ('{"type": "telepathy", "session_id": "s", "uuid": "u"}', "unknown message type 'telepathy'"),
        ('{"type": "user", "session_id": "s"}', "user.uuid: missing"),
        (
            '{"type": "assistant", "session_id": "s", "uuid": "u", "message": {"model": "m", "usage":'
            ' {"input_tokens": 1, "output_tokens": 1}, "content": [{"type": "text", "text": 3}]}}',
            "assistant.message.content[0].text: expected str, got int",
        ),
        (
            '{"type": "result", "session_id": "s", "uuid": "u", "subtype": "success", "is_error": "no"}',
            "result.is_error: expected bool, got str",
        ),
        (
            '{"type": "user", "session_id": "s", "uuid": "u", "message": {"content": [{"type": "tool_result",'
            ' "tool_use_id": "c", "content": "x", "is_error": 1}]}}',
            "user.message.content[0].is_error: expected bool, got int",
        ),
    ],
)
def test_what_ra_does_not_write_is_an_error_naming_the_field(line: str, named: str) -> None:
    with pytest.raises(MessageFormatError) as info:
        list(read_messages([line]))
    assert named in str(info.value)
