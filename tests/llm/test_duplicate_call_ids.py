"""Two tool calls of one reply that share an id are both kept: the later one is renumbered, so
each runs and is answered by its own result (before, the second was merged into the first or
dropped, silently)."""

from __future__ import annotations

import json
from pathlib import Path

from ra.llm import Client
from ra.llm.accumulator import StreamAccumulator
from ra.llm.call_ids import renumber_duplicate_call_ids
from ra.llm.providers.anthropic import AnthropicAdapter
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.llm.types import ContentPart, Message, Request, Role, ToolCallData
from tests.cli.support import SSE, chat_requests, clean_env, enqueue_text, run_ra, sse_tools, tool_messages
from tests.support.replay import ReplayServer

REQUEST = Request("m", [Message.user("hi")])
CALLS = (("dup", "read_file", {"file_path": "a.txt"}), ("dup", "read_file", {"file_path": "b.txt"}))


def _ids_and_args(message: Message) -> list[tuple[str, object]]:
    return [(p.tool_call.id, p.tool_call.arguments) for p in message.content if p.tool_call is not None]


EXPECTED = [("dup", {"file_path": "a.txt"}), ("dup~2", {"file_path": "b.txt"})]


async def test_chat_completions_stream(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, sse_tools(*CALLS), SSE, chunking="events")
    adapter = OpenAICompatibleAdapter("k" * 8, f"{replay_server.base_url}/v1")
    acc = StreamAccumulator()
    try:
        async for event in adapter.stream(REQUEST):
            acc.process(event)
    finally:
        await adapter.close()
    assert _ids_and_args(acc.response().message) == EXPECTED


async def test_chat_completions_reply(replay_server: ReplayServer) -> None:
    calls = [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for cid, name, args in CALLS
    ]
    replay_server.enqueue(
        200, {"id": "r", "choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": calls}}]}
    )
    client = Client({"openai-compatible": OpenAICompatibleAdapter("k" * 8, f"{replay_server.base_url}/v1")})
    try:
        response = await client.complete(Request("m", [Message.user("hi")], provider="openai-compatible"))
    finally:
        await client.close()
    assert _ids_and_args(response.message) == EXPECTED


def _anthropic_sse() -> str:
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg",
                    "type": "message",
                    "role": "assistant",
                    "model": "m",
                    "content": [],
                    "usage": {"input_tokens": 5, "output_tokens": 0},
                },
            },
        )
    ]
    for index, (cid, name, args) in enumerate(CALLS):
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": cid, "name": name, "input": {}},
                },
            )
        )
        events.append(
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)},
                },
            )
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


async def test_anthropic_stream(replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, _anthropic_sse(), SSE, chunking="events")
    adapter = AnthropicAdapter(api_key="sk-ant-test", base_url=replay_server.base_url)
    acc = StreamAccumulator()
    try:
        async for event in adapter.stream(Request("m", [Message.user("hi")], max_tokens=64)):
            acc.process(event)
    finally:
        await adapter.close()
    assert _ids_and_args(acc.response().message) == EXPECTED


def test_renumbering_skips_ids_already_taken() -> None:
    parts = [ContentPart.of_tool_call(ToolCallData(i, "t", {})) for i in ("a", "a~2", "a", "a")]
    message = Message(Role.ASSISTANT, parts)
    assert renumber_duplicate_call_ids(message) == 2
    assert [p.tool_call.id for p in message.content] == ["a", "a~2", "a~3", "a~4"]


def test_the_command_answers_each_call_with_its_own_result(replay_server: ReplayServer, tmp_path: Path) -> None:
    """The real ``ra`` (a profile that runs parallel calls): both files are read, and the next
    request carries two calls with distinct ids, each answered by its own result."""
    (tmp_path / "a.txt").write_text("AAA\n")
    (tmp_path / "b.txt").write_text("BBB\n")
    replay_server.enqueue(200, sse_tools(*CALLS), SSE, chunking="events")
    enqueue_text(replay_server, "done")
    args = ["--profile", "anthropic", "--provider", "openai-compatible", "--model", "m"]
    done = run_ra(
        [*args, "--base-url", f"{replay_server.base_url}/v1", "read both"], clean_env(tmp_path / "h"), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    second = chat_requests(replay_server)[1]
    assistant = [m for m in second["messages"] if m.get("tool_calls")][-1]
    assert [c["id"] for c in assistant["tool_calls"]] == ["dup", "dup~2"]
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(second)}
    assert "AAA" in results["dup"] and "BBB" in results["dup~2"]


async def test_responses_stream(replay_server: ReplayServer) -> None:
    """A recorded Responses stream with two function calls, the second given the first's call_id."""
    from tests.support.replay import CASSETTES, load_cassette

    recorded = load_cassette(
        CASSETTES / "openai-responses" / "mirascope__test_call_with_tools__openai_gpt_4o_responses__stream.yaml"
    )[0]
    first, second = "call_sKC7OABqf2A2PTLCm0CLeRWV", "call_OdR3s3xop0vtgkDyWRMLafuH"
    body = recorded.response.body.replace(second.encode(), first.encode())
    replay_server.enqueue(200, body, recorded.response.headers, chunking="events")
    from ra.llm.providers.openai_responses import OpenAIAdapter

    adapter = OpenAIAdapter(api_key="sk-test-key", base_url=f"{replay_server.base_url}/v1")
    acc = StreamAccumulator()
    try:
        async for event in adapter.stream(Request("gpt-4o", [Message.user("hi")])):
            acc.process(event)
    finally:
        await adapter.close()
    ids = [call.id for call in acc.response().message.tool_calls]
    assert ids == [first, f"{first}~2"]
