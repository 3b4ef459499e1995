"""AnthropicAdapter against a real HTTP server on 127.0.0.1.

Recorded traffic (tests/fixtures/provider-cassettes/anthropic-messages) is replayed byte for byte,
as recorded and re-chunked at arbitrary offsets. Answers the recordings lack are scripted and
marked "synthetic" where they are written.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ra.llm.accumulator import StreamAccumulator
from ra.llm.errors import (
    AuthenticationError,
    ContextLengthError,
    InvalidRequestError,
    NotFoundError,
    ProviderError,
    RateLimitError,
    RequestTimeoutError,
    ServerError,
    StreamError,
)
from ra.llm.http import AdapterTimeout
from ra.llm.providers.anthropic import DEFAULT_MAX_TOKENS, AnthropicAdapter
from ra.llm.types import (
    AudioData,
    ContentKind,
    ContentPart,
    DocumentData,
    ImageData,
    Message,
    Request,
    Response,
    ResponseFormat,
    Role,
    StreamEvent,
    StreamEventType,
    ThinkingData,
    ToolCallData,
    ToolChoice,
    ToolDefinition,
)
from tests.support.replay import CASSETTES, Interaction, ReplayServer, cassette_path, load_cassette

T = StreamEventType
API = "anthropic-messages"
ALL_CASSETTES = sorted(p.name for p in (CASSETTES / API).glob("*.yaml"))
CHUNKINGS: list[str | int] = ["events", "random:1", "random:7", "random:42", 1]


# -- helpers ---------------------------------------------------------------------------------
@pytest.fixture
async def adapter(replay_server: ReplayServer) -> AsyncIterator[AnthropicAdapter]:
    a = AnthropicAdapter(
        api_key="test-key",
        base_url=replay_server.base_url,
        timeout=AdapterTimeout(connect=2, request=10, stream_read=5),
    )
    yield a
    await a.close()


def cassette(name: str) -> list[Interaction]:
    return load_cassette(cassette_path(API, name))


def user_parts(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def to_messages(recorded: list[dict[str, Any]]) -> list[Message]:
    """Recorded Anthropic messages -> unified messages (tool results become TOOL messages)."""
    out: list[Message] = []
    for m in recorded:
        blocks = user_parts(m["content"])
        if m["role"] == "user":
            out.extend(
                Message.tool_result(b["tool_use_id"], b["content"], b.get("is_error", False))
                for b in blocks
                if b["type"] == "tool_result"
            )
            texts = [ContentPart.of_text(b["text"]) for b in blocks if b["type"] == "text"]
            if texts:
                out.append(Message.user(texts))
            continue
        parts: list[ContentPart] = []
        for b in blocks:
            if b["type"] == "thinking":
                parts.append(ContentPart.of_thinking(ThinkingData(b["thinking"], b["signature"])))
            elif b["type"] == "redacted_thinking":
                parts.append(ContentPart.of_thinking(ThinkingData(b["data"], None, True)))
            elif b["type"] == "text" and b["text"].strip():
                parts.append(ContentPart.of_text(b["text"]))
            elif b["type"] == "tool_use":
                parts.append(ContentPart.of_tool_call(ToolCallData(b["id"], b["name"], b["input"])))
        out.append(Message.assistant(parts))
    return out


def to_request(body: dict[str, Any]) -> Request:
    """Rebuild the unified Request a recorded Messages API body came from."""
    messages: list[Message] = []
    system = body.get("system")
    if isinstance(system, str):
        messages.append(Message.system(system))
    elif isinstance(system, list):
        messages.extend(Message.system(b["text"]) for b in system)
    messages.extend(to_messages(body["messages"]))
    tools = [ToolDefinition(t["name"], t.get("description", ""), t["input_schema"]) for t in body.get("tools", [])]
    choice = None
    tc = body.get("tool_choice")
    if tc:
        choice = {
            "auto": ToolChoice.auto(),
            "any": ToolChoice.required(),
            "none": ToolChoice.none(),
        }.get(tc["type"]) or ToolChoice.named(tc["name"])
    options: dict[str, Any] = {}
    for key in ("thinking", "output_config", "cache_control"):
        if key in body:
            options[key] = body[key]
    fmt = None
    if "output_format" in body:
        fmt = ResponseFormat("json_schema", body["output_format"]["schema"])
        options["structured_output"] = "native"
    return Request(
        model=body["model"],
        messages=messages,
        tools=tools or None,
        tool_choice=choice,
        response_format=fmt,
        max_tokens=body.get("max_tokens"),
        temperature=body.get("temperature"),
        provider_options={"anthropic": options} if options else None,
    )


def strip_cache(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_cache(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache(v) for v in value]
    return value


def normalize(body: dict[str, Any]) -> dict[str, Any]:
    """The fields that matter, in one canonical shape: block-level cache_control, ``is_error:
    false``, whitespace-only assistant text (llm-anthropic adds one) and tool ``strict`` flags
    are dropped; string content and string system become block lists."""
    top_cache = body.get("cache_control")
    out = strip_cache(copy.deepcopy(body))
    if top_cache is not None:
        out["cache_control"] = top_cache
    out.pop("stream", None) if out.get("stream") is False else None
    if isinstance(out.get("system"), str):
        out["system"] = [{"type": "text", "text": out["system"]}]
    for m in out["messages"]:
        m["content"] = user_parts(m["content"])
        m["content"] = [
            b for b in m["content"] if not (m["role"] == "assistant" and b["type"] == "text" and not b["text"].strip())
        ]
        for b in m["content"]:
            if b.get("is_error") is False:
                del b["is_error"]
    for t in out.get("tools", []):
        t.pop("strict", None)
    return out


async def run(adapter: AnthropicAdapter, request: Request, *, stream: bool) -> tuple[Response, list[StreamEvent]]:
    if not stream:
        return await adapter.complete(request), []
    events = [e async for e in adapter.stream(request)]
    final = events[-1]
    assert final.type == T.FINISH and final.response is not None
    return final.response, events


def summary(r: Response) -> dict[str, Any]:
    parts = []
    for p in r.message.content:
        if p.thinking is not None:
            parts.append((str(p.kind), p.thinking.text, p.thinking.signature, p.thinking.redacted))
        elif p.tool_call is not None:
            parts.append(("tool_call", p.tool_call.id, p.tool_call.name, p.tool_call.arguments))
        else:
            parts.append((str(p.kind), p.text))
    u = r.usage
    return {
        "id": r.id,
        "model": r.model,
        "provider": r.provider,
        "finish": (r.finish_reason.reason, r.finish_reason.raw),
        "usage": (u.input_tokens, u.output_tokens, u.total_tokens, u.reasoning_tokens, u.cache_read_tokens,
                  u.cache_write_tokens),
        "parts": parts,
    }  # fmt: skip


def check_event_order(events: list[StreamEvent]) -> None:
    """STREAM_START first, FINISH last, every delta inside its own start/end pair, and an
    independent accumulator rebuilds the same message as the FINISH response."""
    assert events[0].type == T.STREAM_START
    assert [e.type for e in events].count(T.FINISH) == 1 and events[-1].type == T.FINISH
    open_text: set[str | None] = set()
    open_tools: set[str] = set()
    reasoning = False
    acc = StreamAccumulator()
    for e in events:
        acc.process(e)
        if e.type == T.TEXT_START:
            open_text.add(e.text_id)
        elif e.type == T.TEXT_DELTA:
            assert e.text_id in open_text
        elif e.type == T.TEXT_END:
            open_text.remove(e.text_id)
        elif e.type == T.REASONING_START:
            assert not reasoning
            reasoning = True
        elif e.type == T.REASONING_DELTA:
            assert reasoning
        elif e.type == T.REASONING_END:
            assert reasoning and e.thinking is not None
            reasoning = False
        elif e.type == T.TOOL_CALL_START:
            assert e.tool_call is not None and e.tool_call.id and e.tool_call.name
            open_tools.add(e.tool_call.id)
        elif e.type == T.TOOL_CALL_DELTA:
            assert e.tool_call is not None and e.tool_call.id in open_tools and e.delta
        elif e.type == T.TOOL_CALL_END:
            assert e.tool_call is not None and e.tool_call.arguments_error is None
            open_tools.remove(e.tool_call.id)
    assert not open_text and not open_tools and not reasoning
    final = events[-1].response
    assert final is not None
    assert acc.message() == final.message


def reference_text(sse_body: bytes) -> str:
    """Text deltas read straight out of the recorded bytes (independent of the adapter)."""
    out = []
    for line in sse_body.decode().splitlines():
        if line.startswith("data:"):
            payload = json.loads(line[5:])
            delta = payload.get("delta") or {}
            if payload.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
                out.append(delta["text"])
    return "".join(out)


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8"}


def text_stream(*deltas: str, stop: str = "end_turn", terminal: bool = True) -> bytes:
    """A synthetic text stream in the Messages API's event grammar."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_synthetic",
                "type": "message",
                "role": "assistant",
                "model": "claude-synthetic",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}} for d in deltas),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}},
    ]
    if terminal:
        events.append({"type": "message_stop"})
    return sse(*events)


def simple(text: str = "hi", **kwargs: Any) -> Request:
    return Request(model="claude-sonnet-4-5", messages=[Message.user(text)], **kwargs)


# -- 1. every cassette -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL_CASSETTES)
def test_request_rebuilt_from_every_recording_matches(name: str) -> None:
    """Each recorded request body, rebuilt as a unified Request, is sent back identically."""
    a = AnthropicAdapter(api_key="k", auto_cache=False)
    for inter in cassette(name):
        recorded = inter.request.body
        request = to_request(recorded)
        ours = a.build_body(request, stream=bool(recorded.get("stream")))
        assert normalize(ours) == normalize(recorded)
        recorded_betas = inter.request.headers.get("anthropic-beta")
        if recorded_betas:
            assert set(recorded_betas.split(",")) <= set(a.build_headers(request)["anthropic-beta"].split(","))


@pytest.mark.parametrize("name", ALL_CASSETTES)
async def test_replay_every_cassette(name: str, adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    interactions = cassette(name)
    replay_server.enqueue_cassette(interactions)
    for inter in interactions:
        recorded = inter.request.body
        request = to_request(recorded)
        is_stream = bool(recorded.get("stream"))
        if inter.response.status >= 400:
            with pytest.raises(ProviderError) as info:
                await run(adapter, request, stream=is_stream)
            body = inter.response.json()
            assert info.value.status_code == inter.response.status
            assert info.value.error_code == body["error"]["type"] and info.value.raw == body
            assert not info.value.retryable
            continue
        response, events = await run(adapter, request, stream=is_stream)
        assert response.provider == "anthropic"
        if is_stream:
            check_event_order(events)
            assert response.text == reference_text(inter.response.body)
            assert response.raw is not None and response.raw["id"] == response.id
        else:
            raw = inter.response.json()
            assert response.raw == raw
            assert response.id == raw["id"] and response.model == raw["model"]
            assert response.text == "".join(b["text"] for b in raw["content"] if b["type"] == "text")
            assert [c.id for c in response.tool_calls] == [b["id"] for b in raw["content"] if b["type"] == "tool_use"]
        sent = replay_server.requests[-1]
        assert sent.path == "/v1/messages"
        assert sent.headers["x-api-key"] == "test-key"
        assert sent.headers["anthropic-version"] == "2023-06-01"


STREAMED = [
    (name, i)
    for name in ALL_CASSETTES
    for i, inter in enumerate(cassette(name))
    if inter.response.status == 200 and inter.response.is_sse
]


@pytest.mark.parametrize(("name", "index"), STREAMED)
async def test_streams_survive_any_chunking(
    name: str, index: int, adapter: AnthropicAdapter, replay_server: ReplayServer
) -> None:
    inter = cassette(name)[index]
    request = to_request(inter.request.body)
    results = []
    for chunking in CHUNKINGS:
        replay_server.enqueue_response(inter.response, chunking=chunking)
        response, events = await run(adapter, request, stream=True)
        check_event_order(events)
        results.append(summary(response))
    assert all(r == results[0] for r in results[1:])
    assert results[0]["parts"], "every recorded stream has content"


# -- 1b. what the recordings say, in unified terms -------------------------------------------
async def test_plain_text_completion(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    inter = cassette("mirascope__test_call__anthropic_claude_sonnet_4_0__sync.yaml")[0]
    replay_server.enqueue_response(inter.response)
    r = await adapter.complete(to_request(inter.request.body))
    assert r.text == "4200 + 42 = 4242"
    assert r.id == "msg_01EXuhhFC9buDpjCcznFPSDs" and r.model == "claude-sonnet-4-20250514"
    assert (r.finish_reason.reason, r.finish_reason.raw) == ("stop", "end_turn")
    assert summary(r)["usage"] == (17, 15, 32, None, 0, 0)
    assert r.usage.raw is not None and r.usage.raw["service_tier"] == "standard"
    assert r.rate_limit is not None
    assert (r.rate_limit.requests_remaining, r.rate_limit.requests_limit) == (3999, 4000)
    assert r.rate_limit.tokens_remaining == 2400000


async def test_system_prompt_completion(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    inter = cassette("test_anthropic_model_instructions.yaml")[0]
    replay_server.enqueue_response(inter.response)
    r = await adapter.complete(to_request(inter.request.body))
    assert r.text == "The capital of France is Paris."
    sent = replay_server.requests[0].json()
    assert sent["system"][0]["text"] == "You are a helpful assistant.\n\n"


async def test_streamed_text(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    inter = cassette("test_prompt.yaml")[0]
    replay_server.enqueue_response(inter.response, chunking="random:3")
    r, events = await run(adapter, to_request(inter.request.body), stream=True)
    assert r.text == "- Captain\n- Scoop"
    assert [e.delta for e in events if e.type == T.TEXT_DELTA] == ["-", " Captain", "\n- Sc", "oop"]
    assert summary(r)["usage"] == (17, 10, 27, None, 0, 0)
    assert r.id == "msg_017A4s3HAsrqf5d2WvBmrpLr" and r.model == "claude-sonnet-4-5-20250929"
    assert r.rate_limit is not None


async def test_streamed_parallel_tool_calls(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    inter = cassette("mirascope__test_call_with_tools__anthropic_claude_sonnet_4_0__stream.yaml")[0]
    replay_server.enqueue_response(inter.response)
    r, events = await run(adapter, to_request(inter.request.body), stream=True)
    assert r.text == "I'll retrieve the secrets for both passwords you provided."
    calls = [(c.id, c.name, c.arguments) for c in r.tool_calls]
    assert calls == [
        ("toolu_015cUijgET79LXjgeYQerN2h", "secret_retrieval_tool", {"password": "mellon"}),
        ("toolu_01XZTimPexA7h3EVKesnKt5T", "secret_retrieval_tool", {"password": "radiance"}),
    ]
    assert (r.finish_reason.reason, r.finish_reason.raw) == ("tool_calls", "tool_use")
    deltas = [e.delta for e in events if e.type == T.TOOL_CALL_DELTA and e.tool_call.id == calls[0][0]]
    assert "".join(deltas) == '{"password": "mellon"}'
    assert summary(r)["usage"] == (416, 109, 525, None, 0, 0)


async def test_tool_calls_without_arguments(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    inter = cassette("test_tools.yaml")[0]  # gzip-compressed SSE in the recording
    replay_server.enqueue_response(inter.response)
    r, _ = await run(adapter, to_request(inter.request.body), stream=True)
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("pelican_name_generator", {})] * 2


async def test_non_streamed_parallel_tool_calls(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    inter = cassette("test_multiple_parallel_tool_calls.yaml")[0]
    replay_server.enqueue_response(inter.response)
    r = await adapter.complete(to_request(inter.request.body))
    assert [c.arguments["name"] for c in r.tool_calls] == ["Alice", "Bob", "Charlie", "Daisy"]
    assert r.finish_reason.reason == "tool_calls"
    assert r.message.content[0].kind == ContentKind.TEXT


async def test_thinking_with_signature(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    inter = cassette("test_anthropic_model_thinking_part.yaml")[0]
    replay_server.enqueue_response(inter.response)
    r = await adapter.complete(to_request(inter.request.body))
    raw = inter.response.json()["content"][0]
    part = r.message.content[0]
    assert part.kind == ContentKind.THINKING and part.thinking is not None
    assert part.thinking.text == raw["thinking"] and part.thinking.signature == raw["signature"]
    assert r.reasoning == raw["thinking"]
    # No exact count from the API: about four characters a token, capped at output_tokens.
    assert r.usage.reasoning_tokens == (len(raw["thinking"]) + 3) // 4
    assert r.usage.output_tokens == 321


async def test_streamed_thinking(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    inter = cassette("test_anthropic_model_thinking_part_stream.yaml")[0]
    replay_server.enqueue_response(inter.response, chunking="random:5")
    r, events = await run(adapter, to_request(inter.request.body), stream=True)
    thinking = r.message.content[0].thinking
    assert thinking is not None and thinking.signature and thinking.text.startswith("This is a straightforward")
    ends = [e for e in events if e.type == T.REASONING_END]
    assert len(ends) == 1 and ends[0].thinking == thinking
    assert "".join(e.reasoning_delta or "" for e in events if e.type == T.REASONING_DELTA) == thinking.text
    assert r.usage.reasoning_tokens == (len(thinking.text) + 3) // 4
    assert [p.kind for p in r.message.content] == [ContentKind.THINKING, ContentKind.TEXT]


async def test_exact_thinking_tokens_win_over_estimate(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    inter = cassette("test_fixed_version_tool_chain_with_thinking_display_regression.yaml")[0]
    replay_server.enqueue_response(inter.response)
    r, _ = await run(adapter, to_request(inter.request.body), stream=True)
    assert r.usage.reasoning_tokens == 53  # output_tokens_details.thinking_tokens
    assert [p.kind for p in r.message.content] == [ContentKind.THINKING, ContentKind.TOOL_CALL]


async def test_redacted_thinking(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    inter = cassette("test_anthropic_model_thinking_part_redacted.yaml")[0]
    replay_server.enqueue_response(inter.response)
    r = await adapter.complete(to_request(inter.request.body))
    part = r.message.content[0]
    assert part.kind == ContentKind.REDACTED_THINKING and part.thinking is not None and part.thinking.redacted
    assert part.thinking.text == inter.response.json()["content"][0]["data"]
    assert r.reasoning is None and r.usage.reasoning_tokens is None  # opaque: not estimated


async def test_streamed_redacted_thinking(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    inter = cassette("test_anthropic_model_thinking_part_redacted_stream.yaml")[0]
    replay_server.enqueue_response(inter.response, chunking=1)
    r, events = await run(adapter, to_request(inter.request.body), stream=True)
    kinds = [p.kind for p in r.message.content]
    assert kinds == [ContentKind.REDACTED_THINKING, ContentKind.REDACTED_THINKING, ContentKind.TEXT]
    recorded = [
        json.loads(line[5:])["content_block"]["data"]
        for line in inter.response.body.decode().splitlines()
        if line.startswith("data:") and '"redacted_thinking"' in line
    ]
    ends = [e.thinking for e in events if e.type == T.REASONING_END]
    assert [(t.text, t.redacted, t.signature) for t in ends if t is not None] == [(d, True, None) for d in recorded]
    assert len(recorded) == 2 and r.usage.reasoning_tokens is None


async def test_cache_usage(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    interactions = cassette("test_anthropic_cache_real_api.yaml")
    replay_server.enqueue_cassette(interactions)
    first = await adapter.complete(to_request(interactions[0].request.body))
    second = await adapter.complete(to_request(interactions[1].request.body))
    # input_tokens is the whole prompt: fresh + cache read + cache write (raw numbers kept).
    assert summary(first)["usage"] == (3 + 1111, 406, 3 + 1111 + 406, None, 1111, 0)
    assert summary(second)["usage"] == (3 + 1111 + 418, 33, 3 + 1111 + 418 + 33, None, 1111, 418)
    assert second.usage.raw is not None and second.usage.raw["input_tokens"] == 3
    sent = replay_server.requests[0].json()
    assert sent["cache_control"] == {"ttl": "5m", "type": "ephemeral"}  # caller's top-level mode kept
    assert all("cache_control" not in b for m in sent["messages"] for b in m["content"])  # not duplicated


async def test_recorded_errors(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    replay_server.enqueue_cassette(cassette("mirascope__test_authentication_error__anthropic_claude_sonnet_4_0.yaml"))
    with pytest.raises(AuthenticationError) as auth:
        await adapter.complete(simple())
    assert auth.value.status_code == 401 and auth.value.retryable is False
    assert auth.value.error_code == "authentication_error" and "invalid x-api-key" in auth.value.message

    replay_server.enqueue_cassette(
        cassette("mirascope__test_authentication_error_stream__anthropic_claude_sonnet_4_0.yaml")
    )
    with pytest.raises(AuthenticationError):
        await run(adapter, simple(), stream=True)

    replay_server.enqueue_cassette(cassette("mirascope__test_model_not_found_stream__anthropic_claude_sonnet_4_0.yaml"))
    for _ in range(2):
        with pytest.raises(NotFoundError) as missing:
            await run(adapter, simple(), stream=True)
        assert missing.value.status_code == 404 and not missing.value.retryable

    replay_server.enqueue_cassette(cassette("test_anthropic_explicit_effort_xhigh_unsupported_model_errors.yaml"))
    with pytest.raises(InvalidRequestError) as bad:
        await adapter.complete(simple(provider_options={"anthropic": {"output_config": {"effort": "xhigh"}}}))
    assert bad.value.status_code == 400 and "effort level" in bad.value.message
    assert replay_server.requests[-1].json()["output_config"] == {"effort": "xhigh"}


# -- 2. round trips ----------------------------------------------------------------------------
ROUND_TRIPS = [name for name in ALL_CASSETTES if sum(1 for i in cassette(name) if i.response.status == 200) >= 2]


@pytest.mark.parametrize("name", ROUND_TRIPS)
async def test_round_trip_sends_turn_one_back(
    name: str, adapter: AnthropicAdapter, replay_server: ReplayServer
) -> None:
    """Turn 1's Response message goes back as history; the turn-2 body matches the recording
    (signatures, redacted data, tool ids and results verbatim, thinking before tool_use)."""
    first, second = cassette(name)[:2]
    replay_server.enqueue_cassette([first, second])
    request1 = to_request(first.request.body)
    response1, _ = await run(adapter, request1, stream=bool(first.request.body.get("stream")))

    recorded2 = second.request.body
    tail = to_messages(recorded2["messages"][len(first.request.body["messages"]) + 1 :])
    request2 = to_request(recorded2)
    request2.messages = [*request1.messages, response1.message, *tail]
    body2 = adapter.build_body(request2, stream=bool(recorded2.get("stream")))
    assert normalize(body2)["messages"] == normalize(recorded2)["messages"]

    response2, _ = await run(adapter, request2, stream=bool(recorded2.get("stream")))
    assert response2.text
    assert replay_server.requests[-1].json()["messages"] == body2["messages"]


# -- 3. request side ---------------------------------------------------------------------------
def body_of(request: Request, **kwargs: Any) -> dict[str, Any]:
    return AnthropicAdapter(api_key="k", **kwargs).build_body(request, stream=False)


def test_roles_merge_and_alternate() -> None:
    request = Request(
        model="m",
        messages=[
            Message.system("be brief"),
            Message.user("one"),
            Message(Role.USER, [ContentPart.of_text("two")], name="alice"),
            Message.developer("use tools"),
            Message.assistant([ContentPart.of_tool_call(ToolCallData("t1", "look", {"q": 1}))]),
            Message.assistant("still me"),
            Message.user("after text comes"),
            Message.tool_result("t1", "found", name="look"),
        ],
    )
    body = body_of(request, auto_cache=False)
    assert body["system"] == [{"type": "text", "text": "be brief"}, {"type": "text", "text": "use tools"}]
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "look", "input": {"q": 1}},
                {"type": "text", "text": "still me"},
            ],
        },
        {
            "role": "user",
            "content": [  # tool results lead the user turn
                {"type": "tool_result", "tool_use_id": "t1", "content": "found"},
                {"type": "text", "text": "after text comes"},
            ],
        },
    ]


def test_tool_results_of_every_shape(tmp_path: Path) -> None:
    request = Request(
        model="m",
        messages=[
            Message.user("go"),
            Message.assistant([ContentPart.of_tool_call(ToolCallData("a", "f", '{"x": 1}'))]),
            Message.tool_result("a", {"rows": [1, 2]}),
            Message.tool_result("b", "boom", is_error=True),
            Message.tool_result("c", "see image", image_data=b"\x89PNG", image_media_type="image/png"),
            Message.tool_result("d", [ContentPart.of_text("part")]),
        ],
    )
    body = body_of(request, auto_cache=False)
    assert body["messages"][1]["content"][0]["input"] == {"x": 1}  # string arguments parsed
    results = body["messages"][2]["content"]
    assert results[0] == {"type": "tool_result", "tool_use_id": "a", "content": '{"rows": [1, 2]}'}
    assert results[1] == {"type": "tool_result", "tool_use_id": "b", "content": "boom", "is_error": True}
    assert results[2]["content"] == [
        {"type": "text", "text": "see image"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
    ]
    assert results[3]["content"] == [{"type": "text", "text": "part"}]


def test_images_and_documents(tmp_path: Path) -> None:
    png = tmp_path / "shot.png"
    png.write_bytes(b"\x89PNG\r\n")
    request = simple()
    request.messages = [
        Message.user(
            [
                ContentPart.of_text("look"),
                ContentPart.of_image(ImageData(url="https://example.com/cat.jpg")),
                ContentPart.of_image(ImageData(data=b"abc", media_type="image/jpeg")),
                ContentPart.of_image(ImageData(url=str(png))),
                ContentPart(ContentKind.DOCUMENT, document=DocumentData(data=b"%PDF-1", media_type="application/pdf")),
                ContentPart(
                    ContentKind.DOCUMENT,
                    document=DocumentData(data=b"notes", media_type="text/plain", file_name="n.txt"),
                ),
                ContentPart(ContentKind.DOCUMENT, document=DocumentData(url="https://example.com/a.pdf")),
            ]
        )
    ]
    blocks = body_of(request, auto_cache=False)["messages"][0]["content"]
    assert blocks[1] == {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}
    assert blocks[2]["source"] == {"type": "base64", "media_type": "image/jpeg", "data": "YWJj"}
    assert blocks[3]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(b"\x89PNG\r\n").decode(),
    }
    assert blocks[4]["source"] == {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}
    assert blocks[5] == {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "notes"},
        "title": "n.txt",
    }
    assert blocks[6]["source"] == {"type": "url", "url": "https://example.com/a.pdf"}


def test_unsupported_content_is_a_clear_error() -> None:
    audio = simple()
    audio.messages = [
        Message.user([ContentPart(ContentKind.AUDIO, audio=AudioData(data=b"x", media_type="audio/wav"))])
    ]
    with pytest.raises(InvalidRequestError, match="audio"):
        body_of(audio)
    odd = simple()
    odd.messages = [Message.user([ContentPart("hologram", text="?")])]
    with pytest.raises(InvalidRequestError, match="hologram"):
        body_of(odd)
    image_system = simple()
    image_system.messages = [Message(Role.SYSTEM, [ContentPart.of_image(ImageData(url="https://x/y.png"))])]
    with pytest.raises(InvalidRequestError, match="only text"):
        body_of(image_system)


TOOLS = [ToolDefinition("look", "Look something up.", {"type": "object", "properties": {"q": {"type": "string"}}})]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (None, None),
        (ToolChoice.auto(), {"type": "auto"}),
        (ToolChoice.required(), {"type": "any"}),
        (ToolChoice.named("look"), {"type": "tool", "name": "look"}),
    ],
)
def test_tool_definitions_and_choice(choice: ToolChoice | None, expected: dict[str, Any] | None) -> None:
    body = body_of(simple(tools=TOOLS, tool_choice=choice), auto_cache=False)
    assert body["tools"] == [{"name": "look", "description": "Look something up.", "input_schema": TOOLS[0].parameters}]
    assert body.get("tool_choice") == expected


def test_tool_choice_none_omits_tools() -> None:
    body = body_of(simple(tools=TOOLS, tool_choice=ToolChoice.none()))
    assert "tools" not in body and "tool_choice" not in body
    # With tool blocks in the history the API wants the definitions, so "none" is said explicitly.
    request = simple(tools=TOOLS, tool_choice=ToolChoice.none())
    request.messages += [
        Message.assistant([ContentPart.of_tool_call(ToolCallData("t", "look", {}))]),
        Message.tool_result("t", "ok"),
    ]
    body = body_of(request, auto_cache=False)
    assert body["tool_choice"] == {"type": "none"} and body["tools"][0]["name"] == "look"


def test_supports_every_tool_choice_and_parallel_switch() -> None:
    a = AnthropicAdapter(api_key="k")
    assert all(a.supports_tool_choice(m) for m in ("auto", "none", "required", "named"))
    assert not a.supports_tool_choice("sometimes")
    body = body_of(simple(tools=TOOLS, provider_options={"anthropic": {"disable_parallel_tool_use": True}}))
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


@pytest.mark.parametrize(
    ("effort", "max_tokens", "budget", "sent_max"),
    [
        ("low", None, 2048, DEFAULT_MAX_TOKENS),
        ("medium", None, 8192, 8192 + DEFAULT_MAX_TOKENS),
        ("high", None, 24576, 24576 + DEFAULT_MAX_TOKENS),
        ("minimal", 2000, 1024, 2000),
        ("medium", 3000, 2999, 3000),
    ],
)
def test_reasoning_effort_becomes_thinking_budget(
    effort: str, max_tokens: int | None, budget: int, sent_max: int
) -> None:
    body = body_of(simple(reasoning_effort=effort, max_tokens=max_tokens))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == sent_max > budget


def test_reasoning_effort_edges() -> None:
    assert "thinking" not in body_of(simple(reasoning_effort="none"))
    with pytest.raises(InvalidRequestError, match="reasoning_effort"):
        body_of(simple(reasoning_effort="extreme"))
    with pytest.raises(InvalidRequestError, match="max_tokens=500"):
        body_of(simple(reasoning_effort="low", max_tokens=500))
    explicit = {"type": "enabled", "budget_tokens": 5000, "display": "summarized"}
    body = body_of(simple(reasoning_effort="high", provider_options={"anthropic": {"thinking": explicit}}))
    assert body["thinking"] == explicit and body["max_tokens"] == 5000 + DEFAULT_MAX_TOKENS


async def test_headers_options_and_parameters(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    adapter.default_headers["anthropic-beta"] = "from-default"
    replay_server.enqueue(200, text_stream("ok"), SSE_HEADERS)
    request = simple(
        temperature=0.2,
        top_p=0.9,
        stop_sequences=["END"],
        metadata={"user_id": "u-1", "trace": "x"},
        provider_options={
            "anthropic": {"beta_headers": ["interleaved-thinking-2025-05-14", "b2"], "top_k": 5, "auto_cache": False},
            "openai": {"ignored": True},
        },
    )
    await run(adapter, request, stream=True)
    sent = replay_server.requests[0]
    assert sent.headers["anthropic-beta"] == "from-default,interleaved-thinking-2025-05-14,b2"
    assert sent.headers["x-api-key"] == "test-key" and sent.headers["anthropic-version"] == "2023-06-01"
    body = sent.json()
    assert body["stream"] is True and body["top_k"] == 5 and "ignored" not in body and "auto_cache" not in body
    assert (body["temperature"], body["top_p"], body["stop_sequences"]) == (0.2, 0.9, ["END"])
    assert body["metadata"] == {"user_id": "u-1"}


def test_base_url_with_v1_is_not_doubled() -> None:
    assert AnthropicAdapter(api_key="k", base_url="https://proxy/v1/").messages_url == "https://proxy/v1/messages"
    assert AnthropicAdapter(api_key="k").messages_url == "https://api.anthropic.com/v1/messages"


# -- prompt caching ----------------------------------------------------------------------------
def conversation() -> Request:
    return Request(
        model="m",
        tools=TOOLS,
        messages=[
            Message.system("sys"),
            Message.user("first"),
            Message.assistant(
                [
                    ContentPart.of_thinking(ThinkingData("hmm", "sig")),
                    ContentPart.of_tool_call(ToolCallData("t1", "look", {})),
                ]
            ),
            Message.tool_result("t1", "r1"),
            Message.assistant([ContentPart.of_tool_call(ToolCallData("t2", "look", {}))]),
            Message.tool_result("t2", "r2"),
        ],
    )


def marked(body: dict[str, Any]) -> list[str]:
    out = [f"system[{i}]" for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    out += [f"tools[{i}]" for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    for i, m in enumerate(body["messages"]):
        out += [f"messages[{i}][{j}]" for j, b in enumerate(m["content"]) if "cache_control" in b]
    return out


def test_auto_cache_breakpoints() -> None:
    a = AnthropicAdapter(api_key="k")
    prepared = a._prepare(conversation(), stream=False)
    assert marked(prepared.body) == ["system[0]", "tools[0]", "messages[2][0]", "messages[4][0]"]
    assert prepared.body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "prompt-caching-2024-07-31" in prepared.headers["anthropic-beta"]
    off = a._prepare(
        Request(model="m", messages=conversation().messages, provider_options={"anthropic": {"auto_cache": False}}),
        stream=False,
    )
    assert marked(off.body) == [] and "anthropic-beta" not in off.headers


def test_auto_cache_skips_thinking_and_respects_caller_marks() -> None:
    request = Request(
        model="m",
        messages=[
            Message.user("q"),
            Message.assistant([ContentPart.of_thinking(ThinkingData("hmm", "sig")), ContentPart.of_text("a")]),
            Message.user("q2"),
        ],
    )
    assert marked(body_of(request)) == ["messages[0][0]", "messages[2][0]"]

    caller_system = [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    original = copy.deepcopy(caller_system)
    request.provider_options = {"anthropic": {"system": caller_system}}
    body = body_of(request)
    assert body["system"] == original  # not duplicated, and the caller's list is untouched
    assert caller_system == original
    assert marked(body) == ["system[0]", "messages[0][0]", "messages[2][0]"]

    request.provider_options = {"anthropic": {"cache_control": {"type": "ephemeral"}}}
    assert marked(body_of(request)) == []  # Anthropic's own automatic mode manages the conversation


def test_auto_cache_never_exceeds_four_breakpoints() -> None:
    request = conversation()
    many = [{"type": "text", "text": f"s{i}", "cache_control": {"type": "ephemeral"}} for i in range(3)]
    request.provider_options = {"anthropic": {"system": many}}
    body = body_of(request)
    assert len(marked(body)) == 4
    assert marked(body)[3:] == ["messages[4][0]"]  # the one free slot goes to the newest turn


# -- structured output -------------------------------------------------------------------------
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


def tool_use_message(name: str, payload: Any, *, extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "id": "msg_json",
        "type": "message",
        "role": "assistant",
        "model": "claude-synthetic",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": name, "input": payload}, *(extra or [])],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 7},
    }


async def test_json_schema_through_forced_tool(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    request = simple(response_format=ResponseFormat("json_schema", SCHEMA, strict=True))
    body = adapter.build_body(request, stream=False)
    assert strip_cache(body["tools"]) == [
        {"name": "json_output", "description": body["tools"][0]["description"], "input_schema": SCHEMA, "strict": True}
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "json_output"}
    # synthetic: the answer a forced tool produces
    replay_server.enqueue(200, tool_use_message("json_output", {"name": "Ann", "age": 30}))
    r = await adapter.complete(request)
    assert json.loads(r.text) == {"name": "Ann", "age": 30} and r.tool_calls == []
    assert (r.finish_reason.reason, r.finish_reason.raw) == ("stop", "tool_use")
    assert "structured-outputs-2025-11-13" in replay_server.requests[0].headers["anthropic-beta"]


async def test_json_schema_streamed(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    fragments = ['{"name": "A', 'nn", "age"', ": 30}"]
    # synthetic: a streamed forced-tool answer
    body = sse(
        {"type": "message_start", "message": {"id": "m1", "model": "c", "usage": {"input_tokens": 3}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "json_output", "input": {}},
        },
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": f}}
            for f in fragments
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    )
    replay_server.enqueue(200, body, SSE_HEADERS, chunking="random:2")
    r, events = await run(adapter, simple(response_format=ResponseFormat("json_schema", SCHEMA)), stream=True)
    check_event_order(events)
    assert [e.delta for e in events if e.type == T.TEXT_DELTA] == fragments
    assert not any(e.type.startswith("tool_call") for e in events)
    assert json.loads(r.text) == {"name": "Ann", "age": 30} and r.finish_reason.reason == "stop"


async def test_json_non_object_schema_is_wrapped(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    request = simple(response_format=ResponseFormat("json_schema", schema))
    body = adapter.build_body(request, stream=False)
    assert body["tools"][0]["input_schema"] == {
        "type": "object",
        "properties": {"value": schema},
        "required": ["value"],
    }
    replay_server.enqueue(200, tool_use_message("json_output", {"value": [1, 2]}))  # synthetic
    assert json.loads((await adapter.complete(request)).text) == [1, 2]
    # synthetic: the same answer streamed
    replay_server.enqueue(
        200,
        sse(
            {"type": "message_start", "message": {"id": "m", "model": "c", "usage": {"input_tokens": 1}}},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "t", "name": "json_output", "input": {}},
            },
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"va'}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": 'lue": [3]}'},
            },
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 2}},
            {"type": "message_stop"},
        ),
        SSE_HEADERS,
    )
    r, _ = await run(adapter, request, stream=True)
    assert json.loads(r.text) == [3]


def test_json_modes_with_tools_thinking_and_native() -> None:
    taken = [ToolDefinition("json_output", "mine")]
    body = body_of(simple(tools=taken, response_format=ResponseFormat("json")))
    assert [t["name"] for t in body["tools"]] == ["json_output", "json_output_1"]
    assert body["tool_choice"] == {"type": "any"}  # a real tool, or the answer
    assert body["tools"][1]["input_schema"] == {"type": "object"}

    thinking = body_of(simple(reasoning_effort="low", response_format=ResponseFormat("json_schema", SCHEMA)))
    assert thinking["tool_choice"] == {"type": "auto"}  # forced tool use is refused with thinking
    assert "json_output" in thinking["system"][-1]["text"]

    a = AnthropicAdapter(api_key="k")
    native = a._prepare(
        simple(
            response_format=ResponseFormat("json_schema", SCHEMA),
            provider_options={"anthropic": {"structured_output": "native"}},
        ),
        stream=False,
    )
    assert native.body["output_format"] == {"type": "json_schema", "schema": SCHEMA} and "tools" not in native.body
    assert "structured-outputs-2025-11-13" in native.headers["anthropic-beta"]
    with pytest.raises(InvalidRequestError, match="structured_output"):
        body_of(
            simple(
                response_format=ResponseFormat("json"), provider_options={"anthropic": {"structured_output": "magic"}}
            )
        )


async def test_json_tool_beside_real_tool_calls(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    extra = [{"type": "tool_use", "id": "toolu_2", "name": "look", "input": {"q": "x"}}]
    replay_server.enqueue(200, tool_use_message("json_output", {"name": "B"}, extra=extra))  # synthetic
    r = await adapter.complete(simple(tools=TOOLS, response_format=ResponseFormat("json_schema", SCHEMA)))
    assert json.loads(r.text) == {"name": "B"}
    assert [c.name for c in r.tool_calls] == ["look"] and r.finish_reason.reason == "tool_calls"


# -- 4. scripted failures ----------------------------------------------------------------------
@pytest.mark.parametrize("status", [500, 502, 503, 529])
@pytest.mark.parametrize("stream", [False, True])
async def test_server_errors_are_retryable(
    status: int, stream: bool, adapter: AnthropicAdapter, replay_server: ReplayServer
) -> None:
    # synthetic: the recordings hold no 5xx
    kind = "overloaded_error" if status == 529 else "api_error"
    replay_server.enqueue(status, {"type": "error", "error": {"type": kind, "message": "Overloaded"}})
    with pytest.raises(ServerError) as info:
        await run(adapter, simple(), stream=stream)
    assert info.value.status_code == status and info.value.retryable and info.value.error_code == kind


@pytest.mark.parametrize(("headers", "seconds"), [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "1500"}, 1.5)])
async def test_rate_limit_retry_after(
    headers: dict[str, str], seconds: float, adapter: AnthropicAdapter, replay_server: ReplayServer
) -> None:
    # synthetic: no recorded Anthropic 429
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens exceeded"}}
    replay_server.enqueue(429, body, headers)
    with pytest.raises(RateLimitError) as info:
        await adapter.complete(simple())
    assert info.value.retry_after == seconds and info.value.retryable and info.value.status_code == 429


@pytest.mark.parametrize("stream", [False, True])
async def test_context_length_error(stream: bool, adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    # synthetic: the wording Anthropic uses for an over-long prompt
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 215000 tokens > 200000 maximum"},
    }
    replay_server.enqueue(400, body)
    with pytest.raises(ContextLengthError) as info:
        await run(adapter, simple(), stream=stream)
    assert not info.value.retryable and info.value.status_code == 400 and info.value.raw == body


async def test_dropped_connection_mid_stream(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, text_stream("a", "b", "c"), SSE_HEADERS, chunking="events", drop_after=3)
    seen: list[StreamEvent] = []
    with pytest.raises(StreamError):
        async for event in adapter.stream(simple()):
            seen.append(event)  # noqa: PERF401 - keep what arrived before the error
    assert seen[0].type == T.STREAM_START and all(e.type != T.FINISH for e in seen)


async def test_stalled_stream_times_out(replay_server: ReplayServer) -> None:
    a = AnthropicAdapter(api_key="k", base_url=replay_server.base_url, timeout=AdapterTimeout(stream_read=0.3))
    replay_server.enqueue(200, text_stream("a", "b"), SSE_HEADERS, chunking="events", stall_after=2, stall_seconds=3)
    try:
        with pytest.raises(RequestTimeoutError):
            await run(a, simple(), stream=True)
    finally:
        await a.close()


async def test_finished_stream_leaves_connection_reusable(
    adapter: AnthropicAdapter, replay_server: ReplayServer
) -> None:
    for _ in range(3):
        replay_server.enqueue(200, text_stream("a"), SSE_HEADERS, chunking="events")
        r, _ = await run(adapter, simple(), stream=True)
        assert r.text == "a"
    pool = adapter._client()._transport._pool  # type: ignore[attr-defined]
    assert len(pool.connections) == 1 and pool.connections[0].is_idle()


async def test_stream_without_message_stop(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, text_stream("a", terminal=False), SSE_HEADERS, chunking="events")
    with pytest.raises(StreamError, match="message_stop"):
        await run(adapter, simple(), stream=True)


@pytest.mark.parametrize(
    ("kind", "message", "error", "status"),
    [
        ("overloaded_error", "Overloaded", ServerError, 529),
        ("api_error", "Internal server error", ServerError, 500),
        ("invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum", ContextLengthError, 400),
    ],
)
async def test_error_event_inside_stream(
    kind: str, message: str, error: type[Exception], status: int, adapter: AnthropicAdapter, replay_server: ReplayServer
) -> None:
    # synthetic: the recordings hold no mid-stream `event: error`
    body = text_stream("partial", terminal=False).rsplit(b"event: message_delta", 1)[0]
    body += sse({"type": "error", "error": {"type": kind, "message": message}})
    replay_server.enqueue(200, body, SSE_HEADERS, chunking="random:4")
    seen: list[StreamEvent] = []
    with pytest.raises(error) as info:
        async for event in adapter.stream(simple()):
            seen.append(event)  # noqa: PERF401 - keep what arrived before the error
    assert info.value.status_code == status and info.value.error_code == kind  # type: ignore[attr-defined]
    assert info.value.retryable == (status >= 500)  # type: ignore[attr-defined]
    assert [e.delta for e in seen if e.type == T.TEXT_DELTA] == ["partial"]


async def test_stream_answered_with_json_body(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    with pytest.raises(ServerError):
        await run(adapter, simple(), stream=True)
    replay_server.enqueue(200, {"id": "msg", "content": []})
    with pytest.raises(StreamError, match="event stream"):
        await run(adapter, simple(), stream=True)


async def test_garbage_event_and_unknown_events(adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, b"event: content_block_delta\ndata: {not json\n\n", SSE_HEADERS)
    with pytest.raises(StreamError, match="undecodable"):
        await run(adapter, simple(), stream=True)
    extra = sse({"type": "future_event", "value": 1})
    body = text_stream("ok").replace(b"event: message_delta", extra + b"event: message_delta", 1)
    replay_server.enqueue(200, body, SSE_HEADERS)
    r, events = await run(adapter, simple(), stream=True)
    assert r.text == "ok" and r.finish_reason.reason == "stop"
    assert [e.raw for e in events if e.type == T.PROVIDER_EVENT] == [{"type": "future_event", "value": 1}]


@pytest.mark.parametrize(
    ("stop", "reason"),
    [("max_tokens", "length"), ("stop_sequence", "stop"), ("refusal", "content_filter"), ("pause_turn", "other")],
)
async def test_finish_reasons(stop: str, reason: str, adapter: AnthropicAdapter, replay_server: ReplayServer) -> None:
    replay_server.enqueue(200, text_stream("x", stop=stop), SSE_HEADERS)
    r, _ = await run(adapter, simple(), stream=True)
    assert (r.finish_reason.reason, r.finish_reason.raw) == (reason, stop)


# -- 5. cancellation ---------------------------------------------------------------------------
class HangingServer:
    """A raw socket server that answers (optionally) with one SSE chunk and then waits, noting
    when the client hangs up - so a test can see the adapter really closed the connection."""

    def __init__(self, first_chunk: bytes | None) -> None:
        self.first_chunk = first_chunk
        self.got_request = asyncio.Event()
        self.answered = asyncio.Event()
        self.client_closed = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        match = re.search(rb"content-length: *(\d+)", head, re.I)
        await reader.readexactly(int(match.group(1)) if match else 0)
        self.got_request.set()
        if self.first_chunk is not None:
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                + b"%x\r\n%s\r\n" % (len(self.first_chunk), self.first_chunk)
            )
            await writer.drain()
            self.answered.set()
        await reader.read()  # returns b"" once the client closes its end
        self.client_closed.set()
        writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


async def test_cancelling_complete_closes_the_connection() -> None:
    hanging = HangingServer(None)
    async with hanging as url:
        a = AnthropicAdapter(api_key="k", base_url=url)
        task = asyncio.create_task(a.complete(simple()))
        await asyncio.wait_for(hanging.got_request.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(hanging.client_closed.wait(), 5)
        await a.close()


async def test_cancelling_a_stream_closes_the_connection() -> None:
    first = text_stream("hello").split(b"event: content_block_stop")[0]
    hanging = HangingServer(first)
    async with hanging as url:
        a = AnthropicAdapter(api_key="k", base_url=url)
        seen: list[StreamEvent] = []
        got_text = asyncio.Event()

        async def consume() -> None:
            async for event in a.stream(simple()):
                seen.append(event)
                if event.type == T.TEXT_DELTA:
                    got_text.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(got_text.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(hanging.client_closed.wait(), 5)
        assert [e.delta for e in seen if e.type == T.TEXT_DELTA] == ["hello"]
        await a.close()
