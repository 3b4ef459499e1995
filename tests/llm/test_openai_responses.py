"""OpenAIAdapter (Responses API) against a real HTTP server on 127.0.0.1.

Recorded traffic comes from ``tests/fixtures/provider-cassettes/openai-responses``; everything
the recordings lack (5xx, 429 headers, context-length bodies, in-stream failures, broken streams)
is scripted here and marked *synthetic*.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from ra.llm.errors import (
    AuthenticationError,
    ContextLengthError,
    InvalidRequestError,
    NotFoundError,
    RateLimitError,
    RequestTimeoutError,
    ServerError,
    StreamError,
    UnsupportedToolChoiceError,
)
from ra.llm.http import AdapterTimeout
from ra.llm.providers.openai_responses import OpenAIAdapter
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
from tests.support.replay import Interaction, ReplayServer, cassette_path, load_cassette

API = "openai-responses"
T = StreamEventType
CHUNKINGS: list[str | int] = ["events", "whole", "random:1", "random:7", "random:42", 1]


def cassette(name: str) -> list[Interaction]:
    return load_cassette(cassette_path(API, name))


@pytest.fixture
async def make_adapter(replay_server: ReplayServer) -> AsyncIterator[Callable[..., OpenAIAdapter]]:
    made: list[OpenAIAdapter] = []

    def make(**kwargs: Any) -> OpenAIAdapter:
        kwargs.setdefault("api_key", "sk-test")
        adapter = OpenAIAdapter(base_url=replay_server.base_url, **kwargs)
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        await adapter.close()


async def collect(adapter: OpenAIAdapter, request: Request) -> list[StreamEvent]:
    return [event async for event in adapter.stream(request)]


def final(events: list[StreamEvent]) -> Response:
    assert events[-1].type == T.FINISH
    response = events[-1].response
    assert response is not None
    return response


def summary(response: Response, *, encrypted: bool = True) -> dict[str, Any]:
    """The unified view of a response that must not depend on how it arrived."""
    parts: list[Any] = []
    for part in response.message.content:
        if part.kind == ContentKind.TEXT:
            parts.append(("text", part.text))
        elif part.thinking is not None:
            data = dict(part.thinking.provider_data or {})
            if not encrypted:
                data.pop("encrypted_content", None)
            parts.append(("thinking", part.thinking.text, data))
        elif part.tool_call is not None:
            call = part.tool_call
            parts.append(("tool_call", call.id, call.name, call.arguments, call.provider_data))
    usage = response.usage
    return {
        "id": response.id,
        "model": response.model,
        "provider": response.provider,
        "parts": parts,
        "finish": (response.finish_reason.reason, response.finish_reason.raw),
        "usage": (
            usage.input_tokens,
            usage.output_tokens,
            usage.total_tokens,
            usage.reasoning_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        ),
    }


def event_signature(event: StreamEvent) -> tuple[Any, ...]:
    call = event.tool_call
    thinking = event.thinking
    return (
        str(event.type),
        event.delta,
        event.text_id,
        event.reasoning_delta,
        (call.id, call.name, call.arguments, call.raw_arguments, call.arguments_error, call.provider_data)
        if call
        else None,
        (thinking.text, thinking.provider_data) if thinking else None,
        event.finish_reason,
        summary(event.response) if event.response else None,
    )


def recorded_events(body: bytes) -> list[dict[str, Any]]:
    """A minimal, independent reading of a recorded SSE body (for cross-checks)."""
    out = []
    for block in body.decode("utf-8").split("\n\n"):
        data = "".join(line[5:].strip() for line in block.splitlines() if line.startswith("data:"))
        if data:
            out.append(json.loads(data))
    return out


def normalized_input(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recorded and sent input items in one shape: string content as a one-part list, ``null``
    and ``status`` fields dropped, function-call arguments parsed (semantic comparison)."""
    out = []
    for raw in items:
        item = {k: v for k, v in raw.items() if v is not None and k != "status"}
        if "role" in item:
            item.setdefault("type", "message")
            if isinstance(item["content"], str):
                kind = "output_text" if item["role"] == "assistant" else "input_text"
                item["content"] = [{"type": kind, "text": item["content"]}]
            item["content"] = [
                {k: v for k, v in c.items() if k not in ("annotations", "logprobs")} for c in item["content"]
            ]
        if item.get("type") == "function_call":
            item["arguments"] = json.loads(item["arguments"])
        out.append(item)
    return out


SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8"}


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events)


def simple_request(model: str = "gpt-4o", text: str = "hi", **kwargs: Any) -> Request:
    return Request(model=model, messages=[Message.user(text)], **kwargs)


def tools_from(body: dict[str, Any]) -> list[ToolDefinition]:
    return [ToolDefinition(t["name"], t.get("description") or "", t["parameters"]) for t in body["tools"]]


# ==========================================================================================
# Non-streaming recordings
# ==========================================================================================
async def test_simple_response(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    interactions = cassette("test_openai_responses_model_simple_response.yaml")
    replay_server.enqueue_cassette(interactions)
    adapter = make_adapter(organization="org-1", project="proj-1")
    recorded = interactions[0].request.body
    response = await adapter.complete(simple_request(recorded["model"], recorded["input"][0]["content"]))

    assert response.text == "The capital of France is Paris."
    assert response.provider == "openai"
    assert response.id == "resp_68c2e8c147ac819491bcd667055eadbc02e845978fbbb592"
    assert response.model == "gpt-4o-2024-08-06"
    assert response.finish_reason.reason == "stop" and response.finish_reason.raw == "completed"
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (14, 8, 22)
    assert response.usage.reasoning_tokens == 0 and response.usage.cache_read_tokens == 0
    assert response.usage.raw is not None and response.usage.raw["total_tokens"] == 22
    assert response.raw is not None and response.raw["object"] == "response"
    assert response.tool_calls == [] and response.reasoning is None

    sent = replay_server.requests[0]
    assert sent.path == "/responses"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["openai-organization"] == "org-1"
    assert sent.headers["openai-project"] == "proj-1"
    body = sent.json()
    assert normalized_input(body["input"]) == normalized_input(recorded["input"])
    assert body["model"] == "gpt-4o" and body["store"] is False and "stream" not in body
    assert "include" not in body  # gpt-4o is no reasoning model: no encrypted reasoning asked for


async def test_tool_call_round_trip(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    interactions = cassette("test_openai_responses_model_simple_response_with_tool_call.yaml")
    replay_server.enqueue_cassette(interactions)
    adapter = make_adapter()
    first = interactions[0].request.body
    request = Request(
        model="gpt-4o",
        messages=[Message.user(first["input"][0]["content"])],
        tools=tools_from(first),
        tool_choice=ToolChoice.auto(),
        provider_options={"openai": {"strict_tools": True}},
    )
    turn1 = await adapter.complete(request)
    assert turn1.finish_reason.reason == "tool_calls"
    [call] = turn1.tool_calls
    assert (call.id, call.name, call.arguments) == (
        "call_YfwRsW8sUxDKipwyhWTzOXCA",
        "get_capital",
        {"country": "PotatoLand"},
    )
    assert call.provider_data == {"id": "fc_04907f5d3de791830068fbaa1b310c81958dc9c508e878c632"}

    body1 = replay_server.requests[0].json()

    # The recorder sent ``description: null``; ToolDefinition always has a (here empty) string.
    def without_description(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in t.items() if k != "description"} for t in tools]

    assert without_description(body1["tools"]) == without_description(first["tools"])
    assert body1["tool_choice"] == "auto"

    request.messages += [turn1.message, Message.tool_result(call.id, "Potato City")]
    turn2 = await adapter.complete(request)
    assert turn2.text == "The capital of PotatoLand is Potato City."
    assert turn2.finish_reason.reason == "stop"
    sent = replay_server.requests[1].json()
    assert normalized_input(sent["input"]) == normalized_input(interactions[1].request.body["input"])


async def test_prompt_cache_usage(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    interactions = cassette("test_openai_responses_prompt_cache_e2e.yaml")
    replay_server.enqueue_cassette(interactions)
    adapter = make_adapter()
    recorded = interactions[0].request.body
    text = [c["text"] for c in recorded["input"][0]["content"]]
    request = Request(
        model=recorded["model"],
        messages=[Message.user([ContentPart.of_text(t) for t in text])],
        provider_options={"openai": {"prompt_cache_key": recorded["prompt_cache_key"]}},
    )
    first = await adapter.complete(request)
    second = await adapter.complete(request)
    assert (first.usage.cache_read_tokens, first.usage.cache_write_tokens) == (0, 4012)
    assert (second.usage.cache_read_tokens, second.usage.cache_write_tokens) == (4012, 0)
    assert first.text == second.text == "OK"
    body = replay_server.requests[0].json()
    assert body["prompt_cache_key"] == "pydantic-ai-prompt-cache-e2e-responses"
    assert [c["text"] for c in body["input"][0]["content"]] == text
    assert body["include"] == ["reasoning.encrypted_content"]  # a gpt-5 family model


async def test_reasoning_summary(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    [interaction] = cassette("test_reasoning_summary_auto.yaml")
    replay_server.enqueue_response(interaction.response)
    adapter = make_adapter()
    recorded = interaction.request.body
    request = Request(
        model=recorded["model"],
        messages=[Message.system(recorded["instructions"]), Message.user(recorded["input"][0]["content"])],
        reasoning_effort="high",
        provider_options={"openai": {"reasoning_summary": "auto"}},
    )
    response = await adapter.complete(request)
    body = replay_server.requests[0].json()
    for key in ("instructions", "reasoning", "include", "model"):
        assert body[key] == recorded[key], key
    assert normalized_input(body["input"]) == normalized_input(recorded["input"])

    raw_item = interaction.response.json()["output"][0]
    thinking = response.message.content[0].thinking
    assert response.message.content[0].kind == ContentKind.THINKING and thinking is not None
    assert thinking.text == raw_item["summary"][0]["text"]
    assert thinking.text.startswith("**Generating factorial function**")
    assert thinking.provider_data == {
        "type": "reasoning",
        "id": raw_item["id"],
        "encrypted_content": raw_item["encrypted_content"],
        "summary": raw_item["summary"],
    }
    assert response.reasoning == thinking.text
    assert response.text.startswith("```python\ndef factorial")
    assert response.usage.reasoning_tokens == 59
    assert response.finish_reason.reason == "stop"


@pytest.mark.parametrize("store", [True, False])
async def test_reasoning_with_tool_calls_round_trip(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter], store: bool
) -> None:
    interactions = cassette("test_openai_responses_thinking_with_tool_calls.yaml")
    replay_server.enqueue_cassette(interactions)
    adapter = make_adapter()
    first = interactions[0].request.body
    options: dict[str, Any] = {"reasoning_summary": "detailed"}
    if store:
        # The recording ran with the API's default store=true; asking for the encrypted content
        # as it did keeps the request identical.
        options |= {"store": True, "encrypted_reasoning": True}
    request = Request(
        model="gpt-5",
        messages=[Message.system(first["instructions"]), Message.user(first["input"][0]["content"])],
        tools=tools_from(first),
        tool_choice=ToolChoice.auto(),
        reasoning_effort="low",
        provider_options={"openai": options},
    )
    turn1 = await adapter.complete(request)
    raw_reasoning = interactions[0].response.json()["output"][0]
    thinking_part, call_part = turn1.message.content
    assert thinking_part.thinking is not None
    assert thinking_part.thinking.text == "\n\n".join(s["text"] for s in raw_reasoning["summary"])
    assert len(raw_reasoning["summary"]) == 5
    assert call_part.tool_call is not None and call_part.tool_call.name == "update_plan"
    assert turn1.usage.reasoning_tokens == 1792
    body1 = replay_server.requests[0].json()
    for key in ("instructions", "reasoning", "include", "tool_choice"):
        assert body1[key] == first[key], key

    request.messages += [turn1.message, Message.tool_result(turn1.tool_calls[0].id, "plan updated")]
    turn2 = await adapter.complete(request)
    sent = replay_server.requests[1].json()["input"]
    expected = normalized_input(interactions[1].request.body["input"])
    if not store:  # without store the server cannot resolve function-call item ids: none sent
        expected[2].pop("id")
    assert normalized_input(sent) == expected
    # The reasoning item goes back byte for byte, ahead of its function call.
    assert sent[1] == {k: raw_reasoning[k] for k in ("type", "id", "summary", "encrypted_content")}
    assert turn2.usage.cache_read_tokens == 2048
    assert turn2.text.startswith("Softly old fountains")


async def test_encrypted_reasoning_round_trip_three_turns(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]
) -> None:
    interactions = cassette("test_responses_round_trips_encrypted_reasoning.yaml")
    replay_server.enqueue_cassette(interactions)
    adapter = make_adapter()
    first = interactions[0].request.body
    request = Request(
        model="gpt-5.5",
        messages=[Message.user(first["input"][0]["content"])],
        tools=tools_from(first),
        reasoning_effort="high",
    )
    turn1 = await adapter.complete(request)
    assert turn1.usage.reasoning_tokens == 63
    body1 = replay_server.requests[0].json()
    assert body1["store"] is False and body1["include"] == ["reasoning.encrypted_content"]
    assert body1["reasoning"] == {"effort": "high"}
    assert [t["name"] for t in body1["tools"]] == ["lookup_population", "can_have_dragons"]

    request.messages += [turn1.message, Message.tool_result(turn1.tool_calls[0].id, "123124")]
    turn2 = await adapter.complete(request)
    request.messages += [turn2.message, Message.tool_result(turn2.tool_calls[0].id, "true")]
    turn3 = await adapter.complete(request)
    assert turn3.text == "Pundora has a population of 123,124 \u2014 and yes, it can have dragons."

    for index in (1, 2):
        sent = replay_server.requests[index].json()["input"]
        recorded = interactions[index].request.body["input"]
        assert normalized_input(sent) == normalized_input(recorded)
        # Exact bytes where it matters: encrypted content, call ids, argument text, outputs.
        assert sent[1:] == recorded[1:]


async def test_modified_history_rejected(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]
) -> None:
    interactions = cassette("test_openai_responses_thinking_with_modified_history.yaml")
    replay_server.enqueue_cassette(interactions)
    adapter = make_adapter()
    question = interactions[0].request.body["input"][0]["content"]
    request = Request(
        model="gpt-5",
        messages=[Message.user(question)],
        reasoning_effort="low",
        provider_options={"openai": {"reasoning_summary": "detailed"}},
    )
    turn1 = await adapter.complete(request)
    assert turn1.usage.reasoning_tokens == 64

    # The recorded test replaced the answer text; the reasoning item stays and the API refuses.
    thinking = turn1.message.content[0]
    edited = Message.assistant([thinking, ContentPart.of_text("The meaning of life is 42")])
    request.messages += [edited, Message.user("Anything to add?")]
    with pytest.raises(InvalidRequestError) as info:
        await adapter.complete(request)
    assert "required following item" in info.value.message
    assert info.value.status_code == 400 and info.value.retryable is False
    sent = replay_server.requests[1].json()["input"]
    assert normalized_input(sent) == normalized_input(interactions[1].request.body["input"])

    # The recording's third call sent the reasoning as plain assistant text instead.
    recorded3 = interactions[2].request.body["input"]
    request.messages = [
        Message.user(recorded3[0]["content"]),
        Message.assistant(recorded3[1]["content"]),
        Message.assistant(recorded3[2]["content"]),
        Message.user(recorded3[3]["content"]),
    ]
    turn3 = await adapter.complete(request)
    sent3 = replay_server.requests[2].json()["input"]
    assert [(i["role"], i["content"][0]["text"]) for i in sent3] == [(i["role"], i["content"]) for i in recorded3]
    assert turn3.text.startswith("Plenty.")
    assert turn3.usage.reasoning_tokens == 128
    assert turn3.reasoning is not None and turn3.reasoning.startswith("**Expanding on life")


# ==========================================================================================
# Recorded errors
# ==========================================================================================
async def test_authentication_error(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    replay_server.enqueue_cassette(cassette("mirascope__test_authentication_error__openai_gpt_4o_responses.yaml"))
    with pytest.raises(AuthenticationError) as info:
        await make_adapter(api_key="invalid-12345").complete(simple_request())
    error = info.value
    assert (error.status_code, error.error_code, error.retryable) == (401, "invalid_api_key", False)
    assert "Incorrect API key" in error.message and error.raw["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize("stream", [True, False])
async def test_model_not_found(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter], stream: bool
) -> None:
    interactions = cassette("mirascope__test_model_not_found_stream__openai_gpt_4o_responses.yaml")
    replay_server.enqueue_cassette(interactions)
    adapter = make_adapter()
    request = simple_request("this-model-does-not-exist-12345", "This should fail with NotFoundError")
    for _ in interactions:  # recorded twice; each answer is used once, in order
        with pytest.raises(NotFoundError) as info:
            if stream:
                await collect(adapter, request)
            else:
                await adapter.complete(request)
        assert (info.value.status_code, info.value.error_code, info.value.retryable) == (400, "model_not_found", False)
    assert len(replay_server.requests) == 2


async def test_http_error_on_stream(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    [interaction] = cassette("test_openai_responses_model_http_error.yaml")
    replay_server.enqueue_response(interaction.response)
    seen: list[StreamEvent] = []
    with pytest.raises(InvalidRequestError) as info:
        async for event in make_adapter().stream(
            simple_request("gpt-4o", "What is the capital of France?", temperature=-1)
        ):
            seen.append(event)  # noqa: PERF401 - keep what arrived before the raise
    assert seen == []
    assert info.value.error_code == "decimal_below_min_value" and info.value.status_code == 400
    body = replay_server.requests[0].json()
    assert body["temperature"] == -1 and body["stream"] is True
    assert replay_server.requests[0].headers["accept"] == "text/event-stream"


# ==========================================================================================
# Streaming recordings, under every chunking
# ==========================================================================================
STREAM_CASSETTES = [
    "test_responses_basic_streaming.yaml",
    "test_openai_responses_stream.yaml",
    "test_responses_tool_use_streaming.yaml",
    "mirascope__test_call_with_tools__openai_gpt_4o_responses__stream.yaml",
    "test_openai_responses_streaming_usage.yaml",
    "test_openai_responses_thinking_part_iter.yaml",
]


@pytest.mark.parametrize("name", STREAM_CASSETTES)
async def test_stream_is_chunking_independent(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter], name: str
) -> None:
    interactions = cassette(name)
    adapter = make_adapter()
    baseline: list[list[tuple[Any, ...]]] | None = None
    for chunking in CHUNKINGS:
        if chunking == 1 and len(interactions[0].response.body) > 50_000:
            chunking = 3  # one-byte writes of a 200 KB body only make the suite slow
        replay_server.enqueue_cassette(interactions, chunking=chunking)
        runs = []
        for interaction in interactions:
            events = await collect(adapter, simple_request(interaction.request.body["model"]))
            runs.append([event_signature(e) for e in events])
        if baseline is None:
            baseline = runs
        else:
            assert runs == baseline, f"chunking {chunking!r} changed the unified stream"


@pytest.mark.parametrize("name", STREAM_CASSETTES)
async def test_stream_matches_completed_response(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter], name: str
) -> None:
    """The Response a stream accumulates equals what ``complete()`` makes of the final
    ``response.completed`` object (encrypted reasoning is re-encrypted per event, so its bytes
    are compared separately)."""
    adapter = make_adapter()
    for interaction in cassette(name):
        replay_server.enqueue_response(interaction.response)
        events = await collect(adapter, simple_request(interaction.request.body["model"]))
        streamed = final(events)
        recorded = recorded_events(interaction.response.body)
        completed = next(e for e in recorded if e["type"] == "response.completed")["response"]
        replay_server.enqueue(200, completed)
        completed_response = await adapter.complete(simple_request(interaction.request.body["model"]))
        assert summary(streamed, encrypted=False) == summary(completed_response, encrypted=False)
        assert streamed.raw == completed
        assert events[0].type == T.STREAM_START
        assert [e.type for e in events].count(T.FINISH) == 1
        # Reasoning carries the encrypted content of its output_item.done event.
        done = {e["item"]["id"]: e["item"] for e in recorded if e["type"] == "response.output_item.done"}
        for part in streamed.message.content:
            if part.thinking is not None:
                data = part.thinking.provider_data or {}
                assert data["encrypted_content"] == done[data["id"]]["encrypted_content"]


async def test_stream_text(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    [interaction] = cassette("test_responses_basic_streaming.yaml")
    replay_server.enqueue_response(interaction.response, chunking="random:5")
    recorded = interaction.request.body
    request = Request(
        model=recorded["model"], messages=[Message.user(recorded["input"][0]["content"])], reasoning_effort="low"
    )
    events = await collect(make_adapter(), request)
    item_id = "msg_00592e63e61b66660169fab1bada8481a28ef92eb62c168ead"
    assert [(e.type, e.delta, e.text_id) for e in events[:-1]] == [
        (T.STREAM_START, None, None),
        (T.TEXT_START, None, item_id),
        (T.TEXT_DELTA, "pong", item_id),
        (T.TEXT_END, None, item_id),
    ]
    response = final(events)
    assert response.text == "pong"
    assert events[-1].finish_reason is not None and events[-1].finish_reason.reason == "stop"
    assert events[-1].usage is response.usage
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 5)
    assert response.id == "resp_00592e63e61b66660169fab1b9f8e481a2b321356198d7ac1b"
    assert response.model == "gpt-5.5-2026-04-23"
    body = replay_server.requests[0].json()
    for key in ("include", "reasoning", "store", "stream", "model"):
        assert body[key] == recorded[key], key


async def test_stream_parallel_tool_calls_round_trips(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]
) -> None:
    """Two function calls in one response (output_index 0 and 1); three recorded round trips,
    the last two with strict tools."""
    interactions = cassette("mirascope__test_call_with_tools__openai_gpt_4o_responses__stream.yaml")
    replay_server.enqueue_cassette(interactions, chunking="random:3")
    adapter = make_adapter()
    for round_trip in range(3):
        first = interactions[2 * round_trip].request.body
        strict = first["tools"][0]["strict"]
        request = Request(
            model="gpt-4o",
            messages=[Message.developer(first["input"][0]["content"]), Message.user(first["input"][1]["content"])],
            tools=tools_from(first),
            provider_options={"openai": {"store": True, "strict_tools": strict}},
        )
        events = await collect(adapter, request)
        starts = [e.tool_call for e in events if e.type == T.TOOL_CALL_START]
        ends = [e.tool_call for e in events if e.type == T.TOOL_CALL_END]
        assert len(starts) == len(ends) == 2
        assert [c.id for c in starts] == [c.id for c in ends] and starts[0].id != starts[1].id
        for end in ends:
            assert end is not None
            fragments = "".join(
                e.delta or "" for e in events if e.type == T.TOOL_CALL_DELTA and e.tool_call.id == end.id
            )
            assert json.loads(fragments) == end.arguments
        assert [c.arguments for c in ends] == [{"password": "mellon"}, {"password": "radiance"}]
        turn1 = final(events)
        assert turn1.finish_reason.reason == "tool_calls"
        assert [c.id for c in turn1.tool_calls] == [c.id for c in ends]
        sent1 = replay_server.requests[2 * round_trip].json()
        assert normalized_input(sent1["input"]) == normalized_input(first["input"])
        assert sent1["tools"] == first["tools"]

        secrets = {"mellon": "Welcome to Moria!", "radiance": "Life before Death"}
        request.messages.append(turn1.message)
        request.messages += [Message.tool_result(c.id, secrets[c.arguments["password"]]) for c in turn1.tool_calls]
        turn2 = final(await collect(adapter, request))
        assert "Welcome to Moria!" in turn2.text and "Life before Death" in turn2.text
        sent2 = replay_server.requests[2 * round_trip + 1].json()["input"]
        assert normalized_input(sent2) == normalized_input(interactions[2 * round_trip + 1].request.body["input"])


async def test_stream_tool_call_round_trip(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]
) -> None:
    interactions = cassette("test_responses_tool_use_streaming.yaml")
    replay_server.enqueue_cassette(interactions, chunking="random:11")
    adapter = make_adapter()
    first = interactions[0].request.body
    request = Request(
        model="gpt-5.5",
        messages=[Message.user(first["input"][0]["content"])],
        tools=tools_from(first),
        reasoning_effort="low",
    )
    events = await collect(adapter, request)
    assert sum(e.type == T.TOOL_CALL_DELTA for e in events) == 11
    turn1 = final(events)
    [call] = turn1.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_sVidsfFJ6zlzRpelrPkTPlpd", "multiply", {"a": 1231, "b": 2331})
    request.messages += [turn1.message, Message.tool_result(call.id, "2869461")]
    turn2 = final(await collect(adapter, request))
    assert turn2.text == "1231 \u00d7 2331 = **2,869,461**"
    sent = replay_server.requests[1].json()["input"]
    assert sent[1:] == interactions[1].request.body["input"][1:]  # byte-exact, as recorded


async def test_stream_tool_call_old_wire(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]
) -> None:
    """A 2025-03 recording (no sequence numbers). The recorder of that day sent the item id as
    call_id; we send the real call_id, so only the rest of turn 2 is compared."""
    interactions = cassette("test_openai_responses_stream.yaml")
    replay_server.enqueue_cassette(interactions)
    adapter = make_adapter()
    first = interactions[0].request.body
    request = Request(model="gpt-4o", messages=[Message.user(first["input"][0]["content"])], tools=tools_from(first))
    turn1 = final(await collect(adapter, request))
    [call] = turn1.tool_calls
    assert call.id == "call_kL0PCQV7M2WMoVX8V8OtYSAL" and call.arguments == {"country": "France"}
    assert call.provider_data == {"id": "fc_67e554a1de488191af0831d35cbe082e0794405d35281ae2"}
    request.messages += [turn1.message, Message.tool_result(call.id, "Paris")]
    turn2 = final(await collect(adapter, request))
    assert turn2.text == "The capital of France is Paris."
    sent = replay_server.requests[1].json()["input"]
    recorded = interactions[1].request.body["input"]
    assert [(i["type"], i.get("name"), i.get("output")) for i in sent[1:]] == [
        (i["type"], i.get("name"), i.get("output")) for i in recorded[1:]
    ]
    assert json.loads(sent[1]["arguments"]) == json.loads(recorded[1]["arguments"])
    assert sent[1]["call_id"] == sent[2]["call_id"] == call.id


async def test_stream_reasoning_without_summary(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]
) -> None:
    [interaction] = cassette("test_openai_responses_streaming_usage.yaml")
    replay_server.enqueue_response(interaction.response)
    recorded = interaction.request.body
    request = Request(
        model="gpt-5",
        messages=[Message.user(recorded["input"][0]["content"])],
        tools=tools_from(recorded),
        tool_choice=ToolChoice.required(),
        reasoning_effort="low",
        provider_options={"openai": {"service_tier": "flex", "strict_tools": True}},
    )
    events = await collect(make_adapter(), request)
    body = replay_server.requests[0].json()
    for key in ("tool_choice", "service_tier", "include", "tools"):
        assert body[key] == recorded[key], key
    assert body["reasoning"] == {"effort": "low"}
    kinds = [e.type for e in events]
    assert kinds[:3] == [T.STREAM_START, T.REASONING_START, T.REASONING_END]
    end = events[2].thinking
    assert end is not None and end.text == "" and end.provider_data is not None
    assert end.provider_data["id"] == "rs_0050471a34b36ae60068c97bac4dcc819595fd0f80d6b3c405"
    assert len(end.provider_data["encrypted_content"]) > 1000
    response = final(events)
    assert response.message.content[0].kind == ContentKind.THINKING
    assert response.tool_calls[0].arguments == {"result": 6666}
    assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (469, 448)
    assert response.finish_reason.reason == "tool_calls"

    # The thinking goes back with its encrypted content before the call (store=false default).
    request.messages += [response.message, Message.tool_result(response.tool_calls[0].id, "ok")]
    items = make_adapter().build_body(request, stream=True)["input"]
    assert [i["type"] for i in items] == ["message", "reasoning", "function_call", "function_call_output"]
    assert items[1]["encrypted_content"] == end.provider_data["encrypted_content"]
    assert "id" not in items[2]


async def test_stream_reasoning_summary_deltas(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]
) -> None:
    [interaction] = cassette("test_openai_responses_thinking_part_iter.yaml")
    replay_server.enqueue_response(interaction.response)
    request = Request(
        model="o3-mini",
        messages=[Message.user("How do I cross the street?")],
        reasoning_effort="high",
        provider_options={"openai": {"reasoning_summary": "detailed"}},
    )
    events = await collect(make_adapter(), request)
    recorded = recorded_events(interaction.response.body)
    item = next(
        e["item"] for e in recorded if e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning"
    )
    expected = "\n\n".join(s["text"] for s in item["summary"])
    assert len(item["summary"]) == 4
    streamed_reasoning = "".join(e.reasoning_delta or "" for e in events if e.type == T.REASONING_DELTA)
    assert streamed_reasoning == expected
    response = final(events)
    assert response.reasoning == expected
    text = next(e["text"] for e in recorded if e["type"] == "response.output_text.done")
    assert response.text == text
    assert "".join(e.delta or "" for e in events if e.type == T.TEXT_DELTA) == text
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.reasoning_tokens) == (
        13,
        1680,
        1408,
    )
    body = replay_server.requests[0].json()
    assert body["reasoning"] == {"effort": "high", "summary": "detailed"}
    assert body["include"] == ["reasoning.encrypted_content"]


# ==========================================================================================
# Request side
# ==========================================================================================
def body_for(request: Request, **adapter_kwargs: Any) -> dict[str, Any]:
    return OpenAIAdapter(api_key="k", **adapter_kwargs).build_body(request, stream=False)


def test_roles_and_instructions() -> None:
    request = Request(
        model="gpt-4.1",
        messages=[
            Message.system("Be terse."),
            Message.user("first"),
            Message.assistant("answer"),
            Message.system("Cite files."),
            Message.developer("Prefer ripgrep."),
            Message.user("second"),
        ],
    )
    body = body_for(request)
    assert body["instructions"] == "Be terse.\n\nCite files."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "first"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "answer"}]},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Prefer ripgrep."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "second"}]},
    ]
    assert "instructions" not in body_for(simple_request())


def test_system_message_with_image_is_rejected() -> None:
    bad = Message(Role.SYSTEM, [ContentPart.of_image(ImageData(url="https://x/y.png"))])
    with pytest.raises(InvalidRequestError):
        body_for(Request(model="gpt-4o", messages=[bad]))


def test_tools_and_tool_choice() -> None:
    tool = ToolDefinition("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
    request = Request(model="gpt-4o", messages=[Message.user("x")], tools=[tool])
    body = body_for(request)
    assert body["tools"] == [
        {
            "type": "function",
            "name": "read_file",
            "description": "Read a file",
            "parameters": tool.parameters,
            "strict": False,
        }
    ]
    assert "tool_choice" not in body
    request.provider_options = {"openai": {"strict_tools": True, "tools": [{"type": "web_search"}]}}
    body = body_for(request)
    assert body["tools"][0]["strict"] is True and body["tools"][1] == {"type": "web_search"}
    assert "strict_tools" not in body

    adapter = OpenAIAdapter(api_key="k")
    for mode, wire in [("auto", "auto"), ("none", "none"), ("required", "required")]:
        assert adapter.supports_tool_choice(mode)
        request.tool_choice = ToolChoice(mode)
        assert adapter.build_body(request, stream=False)["tool_choice"] == wire
    request.tool_choice = ToolChoice.named("read_file")
    assert adapter.build_body(request, stream=False)["tool_choice"] == {"type": "function", "name": "read_file"}
    assert adapter.supports_tool_choice("named") and not adapter.supports_tool_choice("any")
    choice = ToolChoice.auto()
    choice.mode = "any"  # bypasses ToolChoice's own validation
    request.tool_choice = choice
    with pytest.raises(UnsupportedToolChoiceError):
        adapter.build_body(request, stream=False)


def test_tool_results() -> None:
    png = b"\x89PNG\r\n\x1a\nfake"
    messages = [
        Message.user("go"),
        Message.assistant(
            [
                ContentPart.of_tool_call(ToolCallData("call_1", "a", {"x": 1}, provider_data={"id": "fc_1"})),
                ContentPart.of_tool_call(ToolCallData("call_2", "b", '{"x": ')),  # malformed, kept verbatim
            ]
        ),
        Message.tool_result("call_1", {"rows": [1, 2], "ok": True}),
        Message.tool_result("call_2", ["a", "b"], is_error=True),
        Message.tool_result("call_3", "see image", image_data=png, image_media_type="image/png"),
        Message(Role.TOOL, [ContentPart.of_text("plain")], tool_call_id="call_4"),
    ]
    items = body_for(Request(model="gpt-4o", messages=messages))["input"]
    assert items[1] == {"type": "function_call", "call_id": "call_1", "name": "a", "arguments": '{"x": 1}'}
    assert items[2] == {"type": "function_call", "call_id": "call_2", "name": "b", "arguments": '{"x": '}
    assert items[3] == {"type": "function_call_output", "call_id": "call_1", "output": '{"rows": [1, 2], "ok": true}'}
    assert items[4] == {"type": "function_call_output", "call_id": "call_2", "output": '["a", "b"]'}
    uri = "data:image/png;base64," + base64.b64encode(png).decode()
    assert items[5] == {
        "type": "function_call_output",
        "call_id": "call_3",
        "output": [
            {"type": "input_text", "text": "see image"},
            {"type": "input_image", "image_url": uri, "detail": "auto"},
        ],
    }
    assert items[6] == {"type": "function_call_output", "call_id": "call_4", "output": "plain"}
    # With store=true the function-call item id travels too.
    stored = body_for(Request(model="gpt-4o", messages=messages, provider_options={"openai": {"store": True}}))
    assert stored["input"][1]["id"] == "fc_1" and "id" not in stored["input"][2]
    assert stored["store"] is True


def test_images_and_documents(tmp_path: Any) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    path = tmp_path / "shot.png"
    path.write_bytes(png)
    pdf = b"%PDF-1.4 tiny"
    parts = [
        ContentPart.of_text("look"),
        ContentPart.of_image(ImageData(url="https://example.com/a.jpg", detail="low")),
        ContentPart.of_image(ImageData(data=png, media_type="image/png", detail="high")),
        ContentPart.of_image(ImageData(url=str(path))),
        ContentPart(
            ContentKind.DOCUMENT, document=DocumentData(data=pdf, media_type="application/pdf", file_name="r.pdf")
        ),
        ContentPart(ContentKind.DOCUMENT, document=DocumentData(url="https://example.com/spec.pdf")),
    ]
    [item] = body_for(Request(model="gpt-4o", messages=[Message.user(parts)]))["input"]
    uri = "data:image/png;base64," + base64.b64encode(png).decode()
    assert item["content"] == [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": "https://example.com/a.jpg", "detail": "low"},
        {"type": "input_image", "image_url": uri, "detail": "high"},
        {"type": "input_image", "image_url": uri, "detail": "auto"},
        {
            "type": "input_file",
            "filename": "r.pdf",
            "file_data": "data:application/pdf;base64," + base64.b64encode(pdf).decode(),
        },
        {"type": "input_file", "file_url": "https://example.com/spec.pdf"},
    ]
    audio = ContentPart(ContentKind.AUDIO, audio=AudioData(data=b"RIFF", media_type="audio/wav"))
    with pytest.raises(InvalidRequestError, match="audio"):
        body_for(Request(model="gpt-4o", messages=[Message.user([audio])]))
    with pytest.raises(FileNotFoundError):
        body_for(
            Request(
                model="gpt-4o",
                messages=[Message.user([ContentPart.of_image(ImageData(url=str(tmp_path / "nope.png")))])],
            )
        )


def test_reasoning_effort_store_and_include() -> None:
    body = body_for(simple_request("gpt-5", reasoning_effort="medium"))
    assert body["reasoning"] == {"effort": "medium"}
    assert body["include"] == ["reasoning.encrypted_content"] and body["store"] is False
    # A reasoning model asks for the encrypted content even without an effort.
    assert body_for(simple_request("o4-mini"))["include"] == ["reasoning.encrypted_content"]
    assert "reasoning" not in body_for(simple_request("o4-mini"))
    assert "include" not in body_for(simple_request("gpt-4.1"))
    # Overrides, and store=true (the server keeps the reasoning, no need to carry it).
    forced = body_for(simple_request("my-proxy-model", provider_options={"openai": {"encrypted_reasoning": True}}))
    assert forced["include"] == ["reasoning.encrypted_content"] and "encrypted_reasoning" not in forced
    assert "include" not in body_for(
        simple_request("gpt-5", provider_options={"openai": {"encrypted_reasoning": False}})
    )
    stored = body_for(simple_request("gpt-5", reasoning_effort="low", provider_options={"openai": {"store": True}}))
    assert stored["store"] is True and "include" not in stored


def test_provider_options_merge() -> None:
    request = simple_request(
        "gpt-5",
        reasoning_effort="high",
        response_format=ResponseFormat("json"),
        provider_options={
            "openai": {
                "reasoning_summary": "auto",
                "reasoning": {"context": "all_turns"},
                "text": {"verbosity": "low"},
                "include": ["web_search_call.action.sources", "reasoning.encrypted_content"],
                "previous_response_id": "resp_1",
                "service_tier": "priority",
                "parallel_tool_calls": False,
            },
            "anthropic": {"thinking": {"type": "enabled"}},
        },
    )
    body = body_for(request)
    assert body["reasoning"] == {"effort": "high", "summary": "auto", "context": "all_turns"}
    assert body["text"] == {"format": {"type": "json_object"}, "verbosity": "low"}
    assert body["include"] == ["reasoning.encrypted_content", "web_search_call.action.sources"]
    assert (body["previous_response_id"], body["service_tier"], body["parallel_tool_calls"]) == (
        "resp_1",
        "priority",
        False,
    )
    assert "thinking" not in body and "reasoning_summary" not in body


def test_generation_parameters_and_response_format() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    request = simple_request(
        "gpt-4o",
        max_tokens=256,
        temperature=0.2,
        top_p=0.9,
        metadata={"run": "42"},
        response_format=ResponseFormat("json_schema", schema, strict=True, name="count"),
    )
    body = body_for(request)
    assert (body["max_output_tokens"], body["temperature"], body["top_p"]) == (256, 0.2, 0.9)
    assert body["metadata"] == {"run": "42"}
    assert body["text"] == {"format": {"type": "json_schema", "name": "count", "schema": schema, "strict": True}}
    assert "text" not in body_for(simple_request(response_format=ResponseFormat("text")))
    assert OpenAIAdapter().build_body(simple_request(), stream=True)["stream"] is True


def test_reasoning_round_trip_rules() -> None:
    encrypted = ThinkingData(
        "summary",
        provider_data={
            "type": "reasoning",
            "id": "rs_1",
            "encrypted_content": "enc",
            "summary": [{"type": "summary_text", "text": "summary"}],
        },
    )
    plain = ThinkingData(
        "", provider_data={"type": "reasoning", "id": "rs_2", "encrypted_content": None, "summary": []}
    )
    foreign = ThinkingData("claude thoughts", signature="sig")
    call = ContentPart.of_tool_call(ToolCallData("call_1", "f", {}, provider_data={"id": "fc_1"}))

    def items(message: Message, store: bool) -> list[dict[str, Any]]:
        request = Request(
            model="gpt-5", messages=[Message.user("q"), message], provider_options={"openai": {"store": store}}
        )
        return body_for(request)["input"][1:]

    with_call = Message.assistant([ContentPart.of_thinking(encrypted), call])
    assert items(with_call, False) == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "summary"}],
            "encrypted_content": "enc",
        },
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
    ]
    assert [i["type"] for i in items(with_call, True)] == ["reasoning", "function_call"]
    # Without encrypted content and without store the server could not resolve it: dropped.
    assert [i["type"] for i in items(Message.assistant([ContentPart.of_thinking(plain), call]), False)] == [
        "function_call"
    ]
    stored = items(Message.assistant([ContentPart.of_thinking(plain), call]), True)
    assert stored[0] == {"type": "reasoning", "id": "rs_2", "summary": []}
    # Stored reasoning followed by text would need the message's item id: dropped.
    before_text = Message.assistant([ContentPart.of_thinking(encrypted), ContentPart.of_text("done")])
    assert [i["type"] for i in items(before_text, True)] == ["message"]
    assert [i["type"] for i in items(before_text, False)] == ["reasoning", "message"]
    # Thinking from another provider cannot be replayed to OpenAI.
    assert [i["type"] for i in items(Message.assistant([ContentPart.of_thinking(foreign), call]), False)] == [
        "function_call"
    ]


async def test_warnings_and_headers(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    [interaction] = cassette("test_openai_responses_model_simple_response.yaml")
    replay_server.enqueue_response(interaction.response)
    adapter = make_adapter(default_headers={"Authorization": "Bearer proxy-token", "X-Trace": "1"})
    request = Request(
        model="gpt-4o",
        messages=[Message(Role.USER, [ContentPart.of_text("hi")], name="alice")],
        stop_sequences=["END"],
    )
    response = await adapter.complete(request)
    codes = sorted(w.code or "" for w in response.warnings)
    assert codes == ["unsupported_name", "unsupported_stop"]
    sent = replay_server.requests[0]
    assert sent.headers["authorization"] == "Bearer proxy-token" and sent.headers["x-trace"] == "1"
    assert "stop" not in sent.json() and "openai-organization" not in sent.headers

    replay_server.enqueue(200, headers=SSE_HEADERS, body=sse(_created(), _completed([])))
    events = await collect(adapter, request)
    assert events[0].type == T.STREAM_START and events[0].warnings is not None
    assert sorted(w.code or "" for w in final(events).warnings) == codes


async def test_rate_limit_headers(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    # synthetic: OpenAI's x-ratelimit-* headers on a 200
    [interaction] = cassette("test_openai_responses_model_simple_response.yaml")
    headers = {
        "x-ratelimit-remaining-requests": "99",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-reset-requests": "1s",
    }
    replay_server.enqueue(200, interaction.response.json(), headers)
    response = await make_adapter().complete(simple_request())
    assert response.rate_limit is not None
    assert (response.rate_limit.requests_remaining, response.rate_limit.tokens_limit) == (99, 30000)
    assert response.rate_limit.reset_at is not None


# ==========================================================================================
# Synthetic answers: finish reasons, odd streams, errors
# ==========================================================================================
def _created(response_id: str = "resp_s") -> dict[str, Any]:
    return {
        "type": "response.created",
        "response": {"id": response_id, "model": "gpt-test", "status": "in_progress", "output": []},
    }


def _completed(output: list[dict[str, Any]], status: str = "completed", **extra: Any) -> dict[str, Any]:
    response = {
        "id": "resp_s",
        "model": "gpt-test",
        "status": status,
        "output": output,
        "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
        **extra,
    }
    kind = "response.completed" if status == "completed" else f"response.{status}"
    return {"type": kind, "response": response}


def _message(text: str, item_id: str = "msg_1", kind: str = "output_text") -> dict[str, Any]:
    block = {"type": kind, kind if kind == "refusal" else "text": text}
    return {"type": "message", "id": item_id, "role": "assistant", "status": "completed", "content": [block]}


@pytest.mark.parametrize(
    ("status", "details", "output", "expected"),
    [
        ("incomplete", {"reason": "max_output_tokens"}, [_message("partial")], ("length", "max_output_tokens")),
        ("incomplete", {"reason": "content_filter"}, [], ("content_filter", "content_filter")),
        ("incomplete", None, [], ("other", "incomplete")),
        ("completed", None, [_message("I can't help with that.", kind="refusal")], ("content_filter", "refusal")),
        ("failed", None, [], ("error", "failed")),
        ("cancelled", None, [], ("other", "cancelled")),
    ],
)
async def test_finish_reasons(
    replay_server: ReplayServer,
    make_adapter: Callable[..., OpenAIAdapter],
    status: str,
    details: dict[str, Any] | None,
    output: list[dict[str, Any]],
    expected: tuple[str, str],
) -> None:
    # synthetic: status / incomplete_details combinations the recordings lack
    body = _completed(output, status, incomplete_details=details)["response"]
    replay_server.enqueue(200, body)
    response = await make_adapter().complete(simple_request())
    assert (response.finish_reason.reason, response.finish_reason.raw) == expected
    if output and output[0]["content"][0]["type"] == "refusal":
        assert response.text == "I can't help with that."


async def test_failed_response_raises(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    # synthetic: a non-streaming answer that reports a failure in its body
    failed = _completed([], "failed", error={"code": "server_error", "message": "The model crashed."})["response"]
    replay_server.enqueue(200, failed)
    with pytest.raises(ServerError) as info:
        await make_adapter().complete(simple_request())
    assert info.value.retryable and "crashed" in info.value.message


async def test_stream_incomplete_finishes_with_length(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]
) -> None:
    # synthetic: response.incomplete is a terminal event, not an error
    replay_server.enqueue(
        200,
        headers=SSE_HEADERS,
        body=sse(
            _created(),
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "message", "id": "msg_1", "content": []},
            },
            {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": "Once upon"},
            _completed([_message("Once upon")], "incomplete", incomplete_details={"reason": "max_output_tokens"}),
        ),
        chunking="random:2",
    )
    events = await collect(make_adapter(), simple_request())
    assert [e.type for e in events] == [T.STREAM_START, T.TEXT_START, T.TEXT_DELTA, T.TEXT_END, T.FINISH]
    response = final(events)
    assert response.text == "Once upon" and response.finish_reason.reason == "length"
    assert response.usage.total_tokens == 7


async def test_stream_odd_events(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    # synthetic: built-in tool items, annotations, a message without deltas, malformed arguments
    web = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    bad_call = {"type": "function_call", "id": "fc_9", "call_id": "call_9", "name": "edit", "arguments": ""}
    replay_server.enqueue(
        200,
        headers=SSE_HEADERS,
        body=sse(
            {"type": "response.in_progress", "response": {"id": "resp_s"}},  # no response.created first
            {"type": "response.output_item.added", "output_index": 0, "item": web},
            {"type": "response.web_search_call.completed", "output_index": 0, "item_id": "ws_1"},
            {"type": "response.output_item.done", "output_index": 0, "item": web},
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "item": {"type": "message", "id": "msg_2", "content": []},
            },
            {
                "type": "response.output_text.annotation.added",
                "item_id": "msg_2",
                "annotation": {"type": "url_citation"},
            },
            {"type": "response.output_item.done", "output_index": 1, "item": _message("whole text", "msg_2")},
            {"type": "response.output_item.added", "output_index": 2, "item": bad_call},
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 2,
                "item_id": "fc_9",
                "delta": '{"path": ',
            },
            {
                "type": "response.function_call_arguments.done",
                "output_index": 2,
                "item_id": "fc_9",
                "arguments": '{"path": ',
            },
            {"type": "response.output_item.done", "output_index": 2, "item": {**bad_call, "arguments": '{"path": '}},
            _completed([web, _message("whole text", "msg_2"), {**bad_call, "arguments": '{"path": '}]),
        ),
    )
    events = await collect(make_adapter(), simple_request())
    kinds = [e.type for e in events]
    assert kinds.count(T.PROVIDER_EVENT) == 4
    assert kinds[0] == T.STREAM_START
    assert [(e.delta, e.text_id) for e in events if e.type == T.TEXT_DELTA] == [("whole text", "msg_2")]
    end = next(e.tool_call for e in events if e.type == T.TOOL_CALL_END)
    assert end is not None and end.arguments == {} and end.arguments_error is not None
    assert end.raw_arguments == '{"path": '
    response = final(events)
    assert response.text == "whole text"
    [part] = [p for p in response.message.content if p.tool_call is not None]
    assert part.tool_call is not None and part.tool_call.arguments == '{"path": '  # kept for the round trip
    assert response.finish_reason.reason == "tool_calls"


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter], status: int
) -> None:
    # synthetic: no 5xx was ever recorded
    replay_server.enqueue(
        status, {"error": {"message": "The server had an error", "type": "server_error", "code": None}}
    )
    replay_server.enqueue(status, "<html>bad gateway</html>", {"content-type": "text/html"})
    adapter = make_adapter()
    with pytest.raises(ServerError) as info:
        await adapter.complete(simple_request())
    assert info.value.status_code == status and info.value.retryable
    with pytest.raises(ServerError) as info:
        await collect(adapter, simple_request())
    assert info.value.status_code == status and "bad gateway" in info.value.message


@pytest.mark.parametrize(("header", "value", "seconds"), [("retry-after", "7", 7.0), ("retry-after-ms", "1500", 1.5)])
async def test_rate_limited(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter], header: str, value: str, seconds: float
) -> None:
    # synthetic: OpenAI's 429 body with its retry headers
    body = {
        "error": {
            "message": "Rate limit reached for gpt-4o on tokens per min (TPM).",
            "type": "tokens",
            "code": "rate_limit_exceeded",
        }
    }
    replay_server.enqueue(429, body, {header: value})
    with pytest.raises(RateLimitError) as info:
        await make_adapter().complete(simple_request())
    assert info.value.retry_after == seconds and info.value.retryable
    assert info.value.error_code == "rate_limit_exceeded"


async def test_context_length_error(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    # synthetic: the shape of OpenAI's context_length_exceeded answer
    body = {
        "error": {
            "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }
    replay_server.enqueue(400, body)
    with pytest.raises(ContextLengthError) as info:
        await make_adapter().complete(simple_request())
    assert info.value.status_code == 400 and not info.value.retryable
    assert info.value.error_code == "context_length_exceeded"


@pytest.mark.parametrize(
    ("event", "error_type"),
    [
        (
            _completed(
                [],
                "failed",
                error={
                    "code": "context_length_exceeded",
                    "message": "Your input exceeds the context window of this model.",
                },
            ),
            ContextLengthError,
        ),
        (
            _completed([], "failed", error={"code": "server_error", "message": "An error occurred while processing."}),
            ServerError,
        ),
        (_completed([], "failed", error=None), ServerError),
        (
            {
                "type": "error",
                "code": "rate_limit_exceeded",
                "message": "Slow down.",
                "param": None,
                "sequence_number": 3,
            },
            RateLimitError,
        ),
        (
            {
                "type": "error",
                "error": {"type": "invalid_request_error", "code": "invalid_prompt", "message": "Bad prompt."},
            },
            InvalidRequestError,
        ),
    ],
)
async def test_mid_stream_errors(
    replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter], event: dict[str, Any], error_type: type
) -> None:
    # synthetic: no response.failed / error event was ever recorded
    replay_server.enqueue(
        200,
        headers=SSE_HEADERS,
        body=sse(
            _created(),
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "message", "id": "msg_1", "content": []},
            },
            {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": "Hel"},
            event,
        ),
        chunking="random:9",
    )
    seen: list[StreamEvent] = []
    with pytest.raises(error_type) as info:
        async for item in make_adapter().stream(simple_request()):
            seen.append(item)  # noqa: PERF401 - keep what arrived before the raise
    assert [e.type for e in seen] == [T.STREAM_START, T.TEXT_START, T.TEXT_DELTA]  # delivered before the raise
    assert info.value.provider == "openai"


async def test_broken_streams(replay_server: ReplayServer, make_adapter: Callable[..., OpenAIAdapter]) -> None:
    [interaction] = cassette("test_openai_responses_thinking_part_iter.yaml")
    body = interaction.response.body
    adapter = make_adapter(timeout=AdapterTimeout(connect=2, request=5, stream_read=0.3))

    # synthetic: the connection drops after 40 events
    replay_server.enqueue(200, body, interaction.response.headers, chunking="events", drop_after=40)
    seen = 0
    with pytest.raises(StreamError):
        async for _ in adapter.stream(simple_request("o3-mini")):
            seen += 1
    assert seen > 10

    # synthetic: the server stops sending and holds the connection
    replay_server.enqueue(200, body, interaction.response.headers, chunking="events", stall_after=40, stall_seconds=3)
    with pytest.raises(RequestTimeoutError):
        await collect(adapter, simple_request("o3-mini"))

    # synthetic: a cleanly closed stream that never sent response.completed
    events = recorded_events(body)
    truncated = sse(*[e for e in events if e["type"] != "response.completed"])
    replay_server.enqueue(200, truncated, {"content-type": "text/event-stream"}, chunking="random:4")
    with pytest.raises(StreamError, match=r"response\.completed"):
        await collect(adapter, simple_request("o3-mini"))

    # synthetic: garbage where JSON belongs
    replay_server.enqueue(200, b"event: response.created\ndata: {not json\n\n", {"content-type": "text/event-stream"})
    with pytest.raises(StreamError, match="malformed"):
        await collect(adapter, simple_request("o3-mini"))


# ==========================================================================================
# Cancellation closes the connection
# ==========================================================================================
class _HoldingServer:
    """Answers one request with ``prefix`` (maybe nothing), then waits for the client to hang up."""

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.request_seen = asyncio.Event()
        self.client_closed = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
        )
        await reader.readexactly(length)
        self.request_seen.set()
        if self.prefix:
            writer.write(self.prefix)
            await writer.drain()
        while await reader.read(1024):
            pass
        self.client_closed.set()
        writer.close()


@pytest.mark.parametrize("streaming", [True, False])
async def test_cancellation_closes_connection(streaming: bool) -> None:
    first_event = sse(_created())
    prefix = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        + b"%x\r\n%s\r\n" % (len(first_event), first_event)
        if streaming
        else b""
    )
    holder = _HoldingServer(prefix)
    async with holder as base_url:
        adapter = OpenAIAdapter(api_key="k", base_url=base_url)
        got_start = asyncio.Event()

        async def consume() -> None:
            if streaming:
                async for event in adapter.stream(simple_request()):
                    if event.type == T.STREAM_START:
                        got_start.set()
            else:
                await adapter.complete(simple_request())

        task = asyncio.create_task(consume())
        await asyncio.wait_for(got_start.wait() if streaming else holder.request_seen.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(holder.client_closed.wait(), 5)
        await adapter.close()


class _KeepAliveServer:
    """Serves SSE answers over keep-alive connections and counts the connections it accepted."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.connections = 0
        self.requests = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (int(ln.split(b":")[1]) for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")),
                    0,
                )
                await reader.readexactly(length)
                self.requests += 1
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                for event in self.body.split(b"\n\n")[:-1]:
                    chunk = event + b"\n\n"
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


async def test_stream_connection_is_reused() -> None:
    [interaction] = cassette("test_responses_basic_streaming.yaml")
    server = _KeepAliveServer(interaction.response.body)
    async with server as base_url:
        adapter = OpenAIAdapter(api_key="k", base_url=base_url)
        try:
            assert final(await collect(adapter, simple_request("gpt-5.5"))).text == "pong"
            async for event in adapter.stream(simple_request("gpt-5.5")):
                if event.type == T.FINISH:
                    break  # a consumer that stops at FINISH still leaves the connection usable
            assert final(await collect(adapter, simple_request("gpt-5.5"))).text == "pong"
        finally:
            await adapter.close()
    assert (server.requests, server.connections) == (3, 1)
