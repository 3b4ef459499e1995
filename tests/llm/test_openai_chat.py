"""OpenAICompatibleAdapter against a real HTTP server on 127.0.0.1.

Recorded traffic (``openai-chat`` cassettes: OpenAI, DeepSeek, OpenRouter, Groq) is replayed as
recorded and re-chunked at arbitrary byte offsets; what the recordings lack (5xx, 429 headers,
context-length bodies, llama.cpp quirks, broken streams) is scripted and marked synthetic.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ra.llm.errors import (
    AuthenticationError,
    ConfigurationError,
    ContextLengthError,
    InvalidRequestError,
    NotFoundError,
    RateLimitError,
    RequestTimeoutError,
    ServerError,
    StreamError,
)
from ra.llm.http import AdapterTimeout
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.llm.types import (
    AudioData,
    ContentKind,
    ContentPart,
    DocumentData,
    ImageData,
    Message,
    Request,
    ResponseFormat,
    Role,
    StreamEvent,
    StreamEventType,
    ThinkingData,
    ToolCallData,
    ToolChoice,
    ToolDefinition,
)
from tests.llm.encoder_kit import (
    check_a_vouched_conversation_is_not_read_again,
    check_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again,
)
from tests.support.replay import Interaction, ReplayServer, cassette_path, load_cassette

API = "openai-chat"
CHUNKINGS: list[str | int] = ["events", "random:1", "random:7", "random:42", 1]
T = StreamEventType


# -- helpers ---------------------------------------------------------------------------------------
def make_adapter(server: ReplayServer, **kw: Any) -> OpenAICompatibleAdapter:
    kw.setdefault("api_key", "sk-test")
    kw.setdefault("timeout", AdapterTimeout(connect=2.0, request=5.0, stream_read=2.0))
    return OpenAICompatibleAdapter(base_url=server.base_url + "/v1", **kw)


def cassette(name: str) -> list[Interaction]:
    return load_cassette(cassette_path(API, name))


def to_message(wire: dict[str, Any]) -> Message:
    """A unified Message from a recorded Chat Completions message."""
    role = wire["role"]
    content = wire.get("content")
    if role == "system":
        return Message.system(content)
    if role == "tool":
        return Message.tool_result(wire["tool_call_id"], content)
    parts: list[ContentPart] = []
    if isinstance(content, str) and content:
        parts.append(ContentPart.of_text(content))
    elif isinstance(content, list):
        for p in content:
            if p["type"] == "text":
                parts.append(ContentPart.of_text(p["text"]))
            elif p["type"] == "image_url":
                parts.append(ContentPart.of_image(ImageData(url=p["image_url"]["url"])))
    for call in wire.get("tool_calls") or ():
        fn = call["function"]
        parts.append(ContentPart.of_tool_call(ToolCallData(call["id"], fn["name"], json.loads(fn["arguments"]))))
    return Message(Role.USER if role == "user" else Role.ASSISTANT, parts)


def to_request(body: dict[str, Any], messages: list[Message] | None = None) -> Request:
    """A unified Request equivalent to a recorded request body."""
    tools = None
    if body.get("tools"):
        tools = [
            ToolDefinition(t["function"]["name"], t["function"].get("description", ""), t["function"]["parameters"])
            for t in body["tools"]
        ]
    choice = None
    if isinstance(body.get("tool_choice"), str):
        choice = ToolChoice(body["tool_choice"])
    options: dict[str, Any] = {}
    for key in ("reasoning", "max_completion_tokens", "prompt_cache_key", "prompt_cache_options"):
        if key in body:
            options[key] = body[key]
    if body.get("tools") and all(t["function"].get("strict") for t in body["tools"]):
        options["strict_tools"] = True
    return Request(
        model=body["model"],
        messages=messages if messages is not None else [to_message(m) for m in body["messages"]],
        tools=tools,
        tool_choice=choice,
        provider_options={"openai-compatible": options} if options else None,
    )


async def collect(adapter: OpenAICompatibleAdapter, request: Request) -> list[StreamEvent]:
    return [event async for event in adapter.stream(request)]


def summary(events: list[StreamEvent]) -> dict[str, Any]:
    """Everything a consumer sees, for comparing chunkings."""
    final = events[-1].response
    assert events[-1].type == T.FINISH and final is not None
    return {
        "events": [(e.type, e.delta, e.reasoning_delta, e.text_id) for e in events],
        "tool_events": [(e.type, e.tool_call.id, e.tool_call.name) for e in events if e.tool_call is not None],
        "text": final.text,
        "reasoning": final.reasoning,
        "signatures": [p.thinking.signature for p in final.message.content if p.thinking is not None],
        "calls": [(c.id, c.name, c.arguments, c.arguments_error) for c in final.tool_calls],
        "finish": (final.finish_reason.reason, final.finish_reason.raw),
        "usage": usage_tuple(final.usage),
        "id": final.id,
        "model": final.model,
    }


def usage_tuple(u: Any) -> tuple[Any, ...]:
    return (u.input_tokens, u.output_tokens, u.total_tokens, u.reasoning_tokens, u.cache_read_tokens)


def kinds(events: list[StreamEvent]) -> list[str]:
    """Event types with runs of deltas collapsed, for readable sequence assertions."""
    out: list[str] = []
    for e in events:
        if e.type in (T.TEXT_DELTA, T.REASONING_DELTA, T.TOOL_CALL_DELTA) and out and out[-1] == e.type:
            continue
        out.append(e.type)
    return out


def normalise(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recorded and sent messages in a comparable form (null/absent content, empty assistant
    placeholders some clients send, SDK-specific extras)."""
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id")}
        if m["role"] == "assistant":
            if not m.get("content"):
                m.pop("content", None)
                if not m.get("tool_calls"):
                    continue
            if m.get("tool_calls"):
                m["tool_calls"] = [
                    {"id": c["id"], "type": c["type"], "function": dict(c["function"])} for c in m["tool_calls"]
                ]
        out.append(m)
    return out


def without_strict_false(body: dict[str, Any]) -> dict[str, Any]:
    """A recorded body without ``"strict": false`` on its tools (the adapter leaves defaults unsent)."""
    body = json.loads(json.dumps(body))
    for tool in body.get("tools") or ():
        if tool["function"].get("strict") is False:
            del tool["function"]["strict"]
    return body


def sent(server: ReplayServer, i: int = -1) -> dict[str, Any]:
    return server.requests[i].json()


# -- configuration ---------------------------------------------------------------------------------
def test_base_url_required_without_key() -> None:
    with pytest.raises(ConfigurationError):
        OpenAICompatibleAdapter()
    assert OpenAICompatibleAdapter(api_key="k").base_url == "https://api.openai.com/v1"
    local = OpenAICompatibleAdapter(base_url="http://127.0.0.1:8080/v1/", name="llamacpp")
    assert local.url == "http://127.0.0.1:8080/v1/chat/completions"
    assert local.name == "llamacpp"
    assert "authorization" not in local.headers()
    assert OpenAICompatibleAdapter(api_key="k").headers()["authorization"] == "Bearer k"


async def test_no_authorization_header_without_key(replay_server: ReplayServer) -> None:
    replay_server.enqueue_cassette(cassette("test_openai_instructions.yaml"))
    adapter = make_adapter(replay_server, api_key=None)
    await adapter.complete(Request("m", [Message.user("hi")]))
    received = replay_server.requests[0]
    assert received.path == "/v1/chat/completions"
    assert "authorization" not in received.headers


# -- non-streaming cassettes -----------------------------------------------------------------------
async def test_text_answer(replay_server: ReplayServer) -> None:
    inter = cassette("test_openai_instructions.yaml")
    replay_server.enqueue_cassette(inter)
    adapter = make_adapter(replay_server)
    response = await adapter.complete(to_request(inter[0].request.body))
    assert response.text == "The capital of France is Paris."
    assert response.finish_reason.reason == "stop" and response.finish_reason.raw == "stop"
    assert usage_tuple(response.usage) == (24, 8, 32, 0, 0)
    assert response.usage.raw is not None and response.usage.raw["prompt_tokens"] == 24
    assert response.id == "chatcmpl-BJjf61mLb9z5H45ClJzbx0UWKwjo1"
    assert response.model == "gpt-4o-2024-08-06"
    assert response.provider == "openai-compatible"
    assert response.raw is not None and response.raw["object"] == "chat.completion"
    body = sent(replay_server)
    assert body["messages"] == inter[0].request.body["messages"]
    assert replay_server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert "stream" not in body and "temperature" not in body and "max_tokens" not in body


async def test_tool_round_trip_non_streaming(replay_server: ReplayServer) -> None:
    inter = cassette("test_openai_instructions_with_tool_calls_keep_instructions.yaml")
    replay_server.enqueue_cassette(inter)
    adapter = make_adapter(replay_server)
    first = to_request(inter[0].request.body)
    r1 = await adapter.complete(first)
    assert r1.finish_reason.reason == "tool_calls"
    [call] = r1.tool_calls
    assert (call.id, call.name, call.arguments) == (
        "call_bhZkmIKKItNGJ41whHUHB7p9",
        "get_temperature",
        {"city": "Tokyo"},
    )
    assert sent(replay_server, 0) == {k: v for k, v in inter[0].request.body.items() if k not in ("n", "stream")}
    history = [*first.messages, r1.message, Message.tool_result(call.id, "20.0")]
    r2 = await adapter.complete(to_request(inter[1].request.body, history))
    assert r2.text == "The temperature in Tokyo is currently 20.0 degrees Celsius."
    assert normalise(sent(replay_server, 1)["messages"]) == normalise(inter[1].request.body["messages"])
    assert sent(replay_server, 1)["tool_choice"] == "auto"


async def test_strict_tools_option(replay_server: ReplayServer) -> None:
    inter = cassette("test_openai_instructions_with_tool_calls_keep_instructions.yaml")
    replay_server.enqueue_cassette(inter[:1])
    adapter = make_adapter(replay_server)
    request = to_request(inter[0].request.body)
    request.provider_options = {"openai-compatible": {"strict_tools": True}}
    await adapter.complete(request)
    assert sent(replay_server)["tools"] == inter[0].request.body["tools"]


async def test_reasoning_tokens_and_max_completion_tokens(replay_server: ReplayServer) -> None:
    inter = cassette("test_max_completion_tokens[o3-mini].yaml")
    replay_server.enqueue_cassette(inter)
    adapter = make_adapter(replay_server)
    request = Request(
        "o3-mini",
        [Message.user("hello")],
        max_tokens=100,
        provider_options={"openai-compatible": {"max_tokens_field": "max_completion_tokens"}},
    )
    response = await adapter.complete(request)
    body = sent(replay_server)
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body
    assert {k: v for k, v in body.items() if k != "stream"} == {
        k: v for k, v in inter[0].request.body.items() if k != "stream"
    }
    assert response.usage.reasoning_tokens == 64
    assert response.text == "Hello there! How can I help you today?"


async def test_deepseek_reasoning_content(replay_server: ReplayServer) -> None:
    replay_server.enqueue_cassette(cassette("test_deepseek_model_thinking_part.yaml"))
    adapter = make_adapter(replay_server)
    response = await adapter.complete(Request("deepseek-reasoner", [Message.user("How do I cross the street?")]))
    first, second = response.message.content
    assert first.kind == ContentKind.THINKING and first.thinking is not None
    assert first.thinking.text.startswith("Okay, the user is asking how to cross the street.")
    assert second.kind == ContentKind.TEXT and response.text.startswith("Crossing the street safely")
    assert response.usage.reasoning_tokens == 415
    assert response.usage.cache_read_tokens == 0
    assert usage_tuple(response.usage)[:3] == (12, 789, 801)


async def test_prompt_cache_usage(replay_server: ReplayServer) -> None:
    inter = cassette("test_openai_chat_prompt_cache_e2e.yaml")
    replay_server.enqueue_cassette(inter)
    adapter = make_adapter(replay_server)
    recorded = inter[0].request.body
    parts = recorded["messages"][0]["content"]
    message = Message.user([ContentPart.of_text(p["text"]) for p in parts])
    options = {k: recorded[k] for k in ("prompt_cache_key", "prompt_cache_options")}
    request = Request(recorded["model"], [message], provider_options={"openai-compatible": options})
    r1 = await adapter.complete(request)
    r2 = await adapter.complete(request)
    assert r1.text == "OK" and r2.text == "OK"
    assert r1.usage.cache_read_tokens == 0
    assert r2.usage.cache_read_tokens == 4012 and r2.usage.cache_write_tokens == 0
    body = sent(replay_server, 0)
    assert body["prompt_cache_key"] == recorded["prompt_cache_key"]
    assert [p["text"] for p in body["messages"][0]["content"]] == [p["text"] for p in parts]
    # The second request reuses the cached translation and sends identical bytes.
    assert replay_server.requests[0].body == replay_server.requests[1].body


@pytest.mark.parametrize(
    ("name", "stream", "cls", "status", "code"),
    [
        ("test_openai_o1_mini_system_role[system].yaml", False, InvalidRequestError, 400, "unsupported_value"),
        ("mirascope__test_authentication_error__openai_gpt_4o_completions.yaml", False, AuthenticationError, 401,
         "invalid_api_key"),
        ("mirascope__test_model_not_found_stream__openai_gpt_4o_completions.yaml", True, NotFoundError, 404,
         "model_not_found"),
        ("test_openrouter_errors_raised.yaml", False, RateLimitError, 429, "429"),
    ],
)  # fmt: skip
async def test_recorded_errors(
    replay_server: ReplayServer, name: str, stream: bool, cls: type[Exception], status: int, code: str
) -> None:
    inter = cassette(name)
    replay_server.enqueue_cassette(inter)
    adapter = make_adapter(replay_server)
    for it in inter:  # every recorded attempt fails the same way
        request = to_request(it.request.body)
        with pytest.raises(cls) as info:
            if stream:
                await collect(adapter, request)
            else:
                await adapter.complete(request)
        err = info.value
        assert err.status_code == status  # type: ignore[attr-defined]
        assert err.error_code == code  # type: ignore[attr-defined]
        assert err.retryable is (cls is RateLimitError)
        assert err.raw == it.response.json()  # type: ignore[attr-defined]
        assert sent(replay_server).get("stream", False) is stream


async def test_groq_tool_use_failed_then_round_trip(replay_server: ReplayServer) -> None:
    inter = cassette("test_tool_use_failed_error.yaml")
    replay_server.enqueue_cassette(inter)
    adapter = make_adapter(replay_server)
    with pytest.raises(InvalidRequestError) as info:
        await adapter.complete(to_request(inter[0].request.body))
    err = info.value
    assert err.status_code == 400 and err.error_code == "tool_use_failed" and not err.retryable
    assert "failed_generation" in err.raw["error"]

    second = to_request(inter[1].request.body)
    r2 = await adapter.complete(second)
    assert normalise(sent(replay_server)["messages"]) == normalise(inter[1].request.body["messages"])
    assert r2.reasoning == 'We need to call with correct param: name field. Use some name, e.g., "test".'
    [call] = r2.tool_calls
    assert (call.id, call.arguments) == ("fc_311ba17b-89f9-48d3-8fd9-7e74a1264855", {"name": "test"})
    assert r2.usage.reasoning_tokens == 22

    history = [*second.messages, r2.message, Message.tool_result(call.id, "Something with name: test")]
    r3 = await adapter.complete(to_request(inter[2].request.body, history))
    assert r3.text.startswith("The first call failed") and r3.usage.cache_read_tokens == 256
    got = sent(replay_server)["messages"]
    want = inter[2].request.body["messages"]
    # The recording echoed reasoning as <think> text; this adapter drops reasoning by default.
    assert got[4]["content"] == "" and "reasoning" not in got[4]
    assert got[4]["tool_calls"] == want[4]["tool_calls"]
    assert normalise(got[:4]) == normalise(want[:4]) and got[5] == want[5]


# -- streaming cassettes ---------------------------------------------------------------------------
async def stream_summaries(server: ReplayServer, name: str, index: int, request: Request) -> list[dict[str, Any]]:
    inter = cassette(name)
    out = []
    for chunking in CHUNKINGS:
        server.enqueue_response(inter[index].response, chunking=chunking)
        out.append(summary(await collect(make_adapter(server), request)))
    return out


def assert_same(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    for other in summaries[1:]:
        assert other == summaries[0]
    return summaries[0]


async def test_stream_text(replay_server: ReplayServer) -> None:
    name = "mirascope__test_call__openai_gpt_4o_completions__stream.yaml"
    request = to_request(cassette(name)[0].request.body)
    s = assert_same(await stream_summaries(replay_server, name, 0, request))
    assert s["text"] == "4200 + 42 equals 4242."
    assert s["finish"] == ("stop", "stop")
    assert s["usage"] == (16, 10, 26, 0, 0)
    assert s["id"] == "chatcmpl-CoDWl5rS0pF10P0W0TDVgY3NA26dk" and s["model"] == "gpt-4o-2024-08-06"
    assert [k for k, *_ in s["events"] if k != T.TEXT_DELTA] == [T.STREAM_START, T.TEXT_START, T.TEXT_END, T.FINISH]
    body = sent(replay_server)
    assert body == cassette(name)[0].request.body


async def test_stream_deepseek_reasoning(replay_server: ReplayServer) -> None:
    name = "test_deepseek_model_thinking_stream.yaml"
    request = to_request(cassette(name)[0].request.body)
    s = assert_same(await stream_summaries(replay_server, name, 0, request))
    assert s["reasoning"].startswith('Hmm, the user just said "Hello".')
    assert s["text"] == "Hello there! 😊 How can I help you today?"
    assert s["usage"] == (6, 212, 218, 198, 0)
    kinds_seen = [k for k, *_ in s["events"] if k not in (T.TEXT_DELTA, T.REASONING_DELTA)]
    assert kinds_seen == [T.STREAM_START, T.REASONING_START, T.REASONING_END, T.TEXT_START, T.TEXT_END, T.FINISH]


SIGNATURE = "Et0BCkgIChACGAIqQA2s7h7tA7IG35fbwVkou9PM2hANVJNUwcEM4q12fTRDK6y3v6YoEvJ"


async def test_stream_openrouter_reasoning_signature_and_echo(replay_server: ReplayServer) -> None:
    name = "test_openrouter_streaming_reasoning.yaml"
    recorded = cassette(name)[0].request.body
    request = to_request(recorded)
    s = assert_same(await stream_summaries(replay_server, name, 0, request))
    assert s["reasoning"] == "This is a simple arithmetic question. 2+2 equals 4."
    assert s["text"] == "2 + 2 = 4"
    assert s["signatures"][0].startswith(SIGNATURE)
    assert s["usage"] == (43, 36, 79, 13, 0)
    assert sent(replay_server) == recorded  # reasoning={"enabled": true} went through provider options

    # REASONING_END carries the signed thinking, and echoing it sends the details back verbatim.
    replay_server.enqueue_response(cassette(name)[0].response)
    events = await collect(make_adapter(replay_server), request)
    [end] = [e for e in events if e.type == T.REASONING_END]
    assert end.thinking is not None and end.thinking.signature is not None
    answer = events[-1].response
    assert answer is not None
    history = [*request.messages, answer.message, Message.user("And 3+3?")]
    echo = make_adapter(replay_server, echo_reasoning=True)
    body = echo.build_body(Request("m", history), stream=True)
    assistant = body["messages"][1]
    assert assistant["content"] == "2 + 2 = 4"
    assert assistant["reasoning"] == s["reasoning"]
    [detail] = assistant["reasoning_details"]
    assert detail["signature"].startswith(SIGNATURE) and detail["type"] == "reasoning.text"
    assert detail["text"] == s["reasoning"] and detail["format"] == "anthropic-claude-v1"
    plain = make_adapter(replay_server).build_body(Request("m", history), stream=True)
    assert plain["messages"][1] == {"role": "assistant", "content": "2 + 2 = 4"}


async def test_stream_openrouter_error_chunk_raises(replay_server: ReplayServer) -> None:
    name = "test_openrouter_stream_error.yaml"
    recorded = cassette(name)[0].request.body
    request = to_request(recorded)
    for chunking in CHUNKINGS:
        replay_server.enqueue_response(cassette(name)[0].response, chunking=chunking)
        seen: list[StreamEvent] = []
        with pytest.raises(InvalidRequestError) as info:
            async for event in make_adapter(replay_server).stream(request):
                seen.append(event)  # noqa: PERF401 - the events before the raise are the point
        assert info.value.message == "Token limit reached" and info.value.status_code == 400
        assert info.value.raw["error"] == {"code": 400, "message": "Token limit reached"}
        assert kinds(seen) == [T.STREAM_START, T.REASONING_START, T.REASONING_DELTA]
        assert "".join(e.reasoning_delta or "" for e in seen) == "We need to respond to a greeting. The user"
    assert sent(replay_server)["max_completion_tokens"] == 10


@pytest.mark.parametrize(
    "name",
    [
        "test_run_stream_sync_streams_real_model.yaml",
        "mirascope__test_call_with_tools__openai_gpt_4o_completions__stream.yaml",
    ],
)
async def test_stream_tool_round_trips(replay_server: ReplayServer, name: str) -> None:
    inter = cassette(name)
    for turn in range(0, len(inter), 2):
        first = to_request(inter[turn].request.body)
        s = assert_same(await stream_summaries(replay_server, name, turn, first))
        assert s["finish"] == ("tool_calls", "tool_calls")
        turn2 = inter[turn + 1].request.body
        recorded_calls = [c for m in turn2["messages"] if m["role"] == "assistant" for c in m["tool_calls"]]
        assert [(c[0], c[1]) for c in s["calls"]] == [(c["id"], c["function"]["name"]) for c in recorded_calls]
        assert sent(replay_server) == without_strict_false(inter[turn].request.body)

        # Turn 2 from turn 1's streamed answer: arguments echoed byte for byte, results as tool messages.
        replay_server.enqueue_response(inter[turn].response)
        answer = (await collect(make_adapter(replay_server), first))[-1].response
        assert answer is not None
        results = [
            Message.tool_result(m["tool_call_id"], m["content"]) for m in turn2["messages"] if m["role"] == "tool"
        ]
        history = [*first.messages, answer.message, *results]
        replay_server.enqueue_response(inter[turn + 1].response)
        events = await collect(make_adapter(replay_server), to_request(turn2, history))
        assert normalise(sent(replay_server)["messages"]) == normalise(turn2["messages"])
        final = events[-1].response
        assert final is not None and final.finish_reason.reason == "stop" and final.text


async def test_stream_tool_call_repeated_header_kimi(replay_server: ReplayServer) -> None:
    """Novita/Kimi repeats id and name in the second delta of the same index and sends no
    finish_reason: still one call, finish inferred from the call."""
    name = "test_tools_streaming_variant_a.yaml"
    inter = cassette(name)
    first = to_request(inter[0].request.body)
    s = assert_same(await stream_summaries(replay_server, name, 0, first))
    assert s["calls"] == [("0", "llm_version", {}, None)]
    assert s["finish"] == ("tool_calls", None)
    assert s["usage"] == (57, 17, 74, 0, 0)

    replay_server.enqueue_response(inter[0].response)
    answer = (await collect(make_adapter(replay_server), first))[-1].response
    assert answer is not None
    turn2 = inter[1].request.body
    history = [*first.messages, answer.message, Message.tool_result("0", "0.fixed-version")]
    replay_server.enqueue_response(inter[1].response)
    final = (await collect(make_adapter(replay_server), to_request(turn2, history)))[-1].response
    assert final is not None and final.text == "The current version of *llm* is **0.fixed-version**."
    assert normalise(sent(replay_server)["messages"]) == normalise(turn2["messages"])


# -- request side ------------------------------------------------------------------------------------
def body_of(request: Request, *, stream: bool = False, **kw: Any) -> dict[str, Any]:
    kw.setdefault("base_url", "http://127.0.0.1:1/v1")
    return OpenAICompatibleAdapter(**kw).build_body(request, stream=stream)


def test_roles_names_and_developer() -> None:
    named = Message.user("hi")
    named.name = "alice"
    msgs = [Message.system("a"), Message.developer("b"), Message.system("c"), named]
    assert body_of(Request("m", msgs))["messages"] == [
        {"role": "system", "content": "a"},
        {"role": "system", "content": "b"},
        {"role": "system", "content": "c"},
        {"role": "user", "content": "hi", "name": "alice"},
    ]
    opt = Request("m", msgs, provider_options={"openai-compatible": {"developer_role": True}})
    assert body_of(opt)["messages"][1] == {"role": "developer", "content": "b"}
    assert body_of(Request("m", msgs), developer_role=True)["messages"][1]["role"] == "developer"


def test_tools_and_every_tool_choice() -> None:
    tool = ToolDefinition("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
    wire_tool = {
        "type": "function",
        "function": {"name": "read_file", "description": "Read a file", "parameters": tool.parameters},
    }
    expected = {
        None: None,
        "auto": "auto",
        "none": "none",
        "required": "required",
        "named": {"type": "function", "function": {"name": "read_file"}},
    }
    for mode, want in expected.items():
        choice = None if mode is None else ToolChoice(mode, "read_file" if mode == "named" else None)
        body = body_of(Request("m", [Message.user("x")], tools=[tool], tool_choice=choice))
        assert body["tools"] == [wire_tool]
        assert body.get("tool_choice") == want
    adapter = OpenAICompatibleAdapter(base_url="http://x/v1")
    assert all(adapter.supports_tool_choice(m) for m in ("auto", "none", "required", "named"))
    assert not adapter.supports_tool_choice("any")
    # tool_choice without tools is not sent (servers reject it).
    assert "tool_choice" not in body_of(Request("m", [Message.user("x")], tool_choice=ToolChoice.required()))


def test_assistant_tool_calls_and_tool_results() -> None:
    good = ToolCallData("c1", "read_file", {"path": "a.txt"})
    broken = ToolCallData("c2", "write_file", '{"path": "b.txt", "content": ')
    assistant = Message.assistant([ContentPart.of_text("Reading."), ContentPart.of_tool_call(good)])
    only_calls = Message.assistant([ContentPart.of_tool_call(broken)])
    msgs = [
        Message.user("go"),
        assistant,
        Message.tool_result("c1", "hello"),
        only_calls,
        Message.tool_result("c2", {"error": "bad json", "lines": [1, 2]}, is_error=True),
        Message.tool_result("c3", ["a", "é"]),
    ]
    wire = body_of(Request("m", msgs))["messages"]
    assert wire[1] == {
        "role": "assistant",
        "content": "Reading.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"a.txt"}'}}
        ],
    }
    assert wire[2] == {"role": "tool", "tool_call_id": "c1", "content": "hello"}
    assert wire[3]["content"] == ""
    assert wire[3]["tool_calls"][0]["function"]["arguments"] == '{"path": "b.txt", "content": '
    assert json.loads(wire[4]["content"]) == {"error": "bad json", "lines": [1, 2]}
    assert wire[5]["content"] == '["a","é"]'


def test_tool_result_images_follow_the_tool_messages() -> None:
    png = b"\x89PNG fake"
    calls = [ToolCallData("a", "shot", {}), ToolCallData("b", "shot", {})]
    msgs = [
        Message.user("screens"),
        Message.assistant([ContentPart.of_tool_call(c) for c in calls]),
        Message.tool_result("a", "see image", image_data=png, image_media_type="image/png"),
        Message.tool_result("b", "no image"),
        Message.user("thanks"),
    ]
    wire = body_of(Request("m", msgs))["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", "user", "user"]
    image_msg = wire[4]
    assert image_msg["content"][1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(png).decode()
    assert "a" in image_msg["content"][0]["text"]


def test_images_url_bytes_local_file_and_detail(tmp_path: Path) -> None:
    jpg = tmp_path / "shot.jpg"
    jpg.write_bytes(b"\xff\xd8\xffJPEGDATA")
    parts = [
        ContentPart.of_text("compare"),
        ContentPart.of_image(ImageData(url="https://example.com/a.png", detail="high")),
        ContentPart.of_image(ImageData(data=b"rawpng", media_type="image/png")),
        ContentPart.of_image(ImageData(url=str(jpg))),
        ContentPart.of_image(ImageData(url="data:image/gif;base64,R0lG")),
    ]
    content = body_of(Request("m", [Message.user(parts)]))["messages"][0]["content"]
    assert content == [
        {"type": "text", "text": "compare"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "high"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"rawpng").decode()}},
        {
            "type": "image_url",
            "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(jpg.read_bytes()).decode()},
        },
        {"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lG"}},
    ]


def test_audio_and_documents(tmp_path: Path) -> None:
    pdf = tmp_path / "spec.pdf"
    pdf.write_bytes(b"%PDF-1.4")
    parts = [
        ContentPart(ContentKind.AUDIO, audio=AudioData(data=b"RIFF", media_type="audio/wav")),
        ContentPart(ContentKind.DOCUMENT, document=DocumentData(url=str(pdf))),
    ]
    content = body_of(Request("m", [Message.user(parts)]))["messages"][0]["content"]
    assert content[0] == {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    assert content[1] == {
        "type": "file",
        "file": {
            "file_data": "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4").decode(),
            "filename": "spec.pdf",
        },
    }
    remote = ContentPart(ContentKind.DOCUMENT, document=DocumentData(url="https://example.com/x.pdf"))
    with pytest.raises(InvalidRequestError, match="documents must be inline"):
        body_of(Request("m", [Message.user([remote])]))
    ogg = ContentPart(ContentKind.AUDIO, audio=AudioData(data=b"x", media_type="audio/ogg"))
    with pytest.raises(InvalidRequestError, match="wav or mp3"):
        body_of(Request("m", [Message.user([ogg])]))


def test_generation_parameters_only_when_set() -> None:
    bare = body_of(Request("m", [Message.user("x")]), stream=True)
    assert bare == {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    full = body_of(
        Request(
            "m",
            [Message.user("x")],
            temperature=0.0,
            top_p=0.5,
            max_tokens=64,
            stop_sequences=["END"],
            reasoning_effort="low",
            provider_options={
                "openai-compatible": {"parallel_tool_calls": False, "seed": 7},
                "openai_compatible": {"top_k": 20},
                "vllm": {"min_p": 0.1},
                "anthropic": {"ignored": True},
            },
        ),
        name="vllm",
    )
    assert full["temperature"] == 0.0 and full["top_p"] == 0.5 and full["max_tokens"] == 64
    assert full["stop"] == ["END"] and full["reasoning_effort"] == "low"
    assert full["parallel_tool_calls"] is False and full["seed"] == 7 and full["top_k"] == 20 and full["min_p"] == 0.1
    assert "ignored" not in full and "stream" not in full
    no_usage = Request("m", [Message.user("x")], provider_options={"openai-compatible": {"include_usage": False}})
    assert "stream_options" not in body_of(no_usage, stream=True)
    assert "stream_options" not in body_of(Request("m", [Message.user("x")]), stream=True, include_usage=False)
    explicit = Request(
        "m", [Message.user("x")], max_tokens=5, provider_options={"openai-compatible": {"max_completion_tokens": 9}}
    )
    body = body_of(explicit)
    assert body["max_completion_tokens"] == 9 and "max_tokens" not in body


def test_response_format() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    strict = ResponseFormat("json_schema", schema, strict=True, name="answer")
    assert body_of(Request("m", [Message.user("x")], response_format=strict))["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }
    plain = body_of(Request("m", [Message.user("x")], response_format=ResponseFormat("json")))
    assert plain["response_format"] == {"type": "json_object"}
    assert "response_format" not in body_of(Request("m", [Message.user("x")], response_format=ResponseFormat()))


def test_reasoning_dropped_unless_echoed() -> None:
    thinking = ThinkingData("let me think", provider_data={"field": "reasoning_content"})
    assistant = Message.assistant(
        [ContentPart.of_thinking(thinking), ContentPart.of_tool_call(ToolCallData("c", "f", {}))]
    )
    msgs = [Message.user("q"), assistant, Message.tool_result("c", "ok")]
    assert "reasoning_content" not in body_of(Request("m", msgs))["messages"][1]
    echoed = Request("m", msgs, provider_options={"openai-compatible": {"echo_reasoning": True}})
    assert body_of(echoed)["messages"][1]["reasoning_content"] == "let me think"
    named = Request("m", msgs, provider_options={"openai-compatible": {"echo_reasoning": "reasoning"}})
    assert body_of(named)["messages"][1]["reasoning"] == "let me think"


def test_translation_cache_reuses_and_invalidates() -> None:
    adapter = OpenAICompatibleAdapter(base_url="http://127.0.0.1:1/v1")
    history = [Message.system("s"), Message.user("one")]
    first = adapter.build_body(Request("m", history), stream=False)["messages"]
    history.append(Message.assistant("two"))
    second = adapter.build_body(Request("m", history), stream=False)["messages"]
    assert second[0] is first[0] and second[1] is first[1]  # translated once
    assert second[2] == {"role": "assistant", "content": "two"}
    # Replacing content, adding a part or changing the role is seen.
    history[1].content = [ContentPart.of_text("uno")]
    history[2].content.append(ContentPart.of_text(" more"))
    history[0].role = Role.DEVELOPER
    third = adapter.build_body(
        Request("m", history, provider_options={"openai-compatible": {"developer_role": True}}), stream=False
    )["messages"]
    assert third == [
        {"role": "developer", "content": "s"},
        {"role": "user", "content": "uno"},
        {"role": "assistant", "content": "two more"},
    ]
    # A new Message that happens to reuse a freed object's id is not confused with it.
    for _ in range(50):
        adapter.build_body(Request("m", [Message.user(f"n{_}")]), stream=False)
        assert adapter.build_body(Request("m", [Message.user("fresh")]), stream=False)["messages"][0]["content"] == (
            "fresh"
        )


class CountingCache(dict[int, Any]):
    """The adapter's translation cache, counting how many messages a request looks up."""

    lookups = 0

    def get(self, key: int, default: Any = None) -> Any:
        self.lookups += 1
        return super().get(key, default)


def fresh_bytes(request: Request) -> bytes:
    """The body a new adapter (nothing cached) sends for ``request``."""
    return OpenAICompatibleAdapter(base_url="http://127.0.0.1:1/v1").encode_body(request, stream=True)


def agent_step(i: int) -> list[Message]:
    """One step's new messages: a tool call, its result (every third with an image), and now and
    then a user message, so image follow-ups have to wait across steps for the run of tool
    messages to end."""
    call = ToolCallData(f"c{i}", "look", {"n": i})
    image = b"\x89PNG" + bytes([i % 256]) if i % 3 == 0 else None
    step = [
        Message.assistant([ContentPart.of_text(f"step {i}"), ContentPart.of_tool_call(call)]),
        Message.tool_result(f"c{i}", f"result {i}", image_data=image, image_media_type="image/png"),
    ]
    if i % 4 == 3:
        step.append(Message.user(f"go on {i}"))
    return step


def test_each_step_walks_only_the_new_messages() -> None:
    """Per-step work grows with what is new, not with the history, and the bytes stay those of
    a fresh translation: n steps look up about n * 2.5 messages in all (the old walk looked up
    every message every step: about n * n * 1.25)."""
    adapter = OpenAICompatibleAdapter(base_url="http://127.0.0.1:1/v1")
    cache = CountingCache()
    adapter._msg_cache = cache
    history = [Message.system("sys"), Message.user("task")]
    added = len(history)
    for i in range(120):
        request = Request("m", history)
        assert adapter.encode_body(request, stream=True) == fresh_bytes(request)
        assert adapter.build_body(request, stream=True)["messages"] == json.loads(fresh_bytes(request))["messages"]
        step = agent_step(i)
        history.extend(step)
        added += len(step)
    # Each message is looked up once by encode_body and once by build_body (each keeps its own
    # place), whatever the length of the history.
    assert cache.lookups <= 2 * added


def test_a_changed_prefix_is_noticed() -> None:
    """Whatever changes in the history already sent is sent as it is now: the remembered place is
    only used when the earlier messages are the same objects with the same role, name, call id and
    parts."""
    adapter = OpenAICompatibleAdapter(base_url="http://127.0.0.1:1/v1")
    history = [Message.system("sys"), Message.user("task")]
    for i in range(6):
        history.extend(agent_step(i))

    def check(messages: list[Message], **options: Any) -> None:
        po = {"openai-compatible": options} if options else None
        request = Request("m", messages, provider_options=po)
        adapter.encode_body(request, stream=True)  # remember this place
        for change in changes:
            change(messages)
            request = Request("m", messages, provider_options=po)
            assert adapter.encode_body(request, stream=True) == fresh_bytes(request), change
            assert adapter.build_body(request, stream=True)["messages"] == json.loads(fresh_bytes(request))["messages"]

    def replace_content(ms: list[Message]) -> None:
        ms[1].content = [ContentPart.of_text("other task")]

    def append_part(ms: list[Message]) -> None:
        ms[2].content.append(ContentPart.of_text(" and more"))

    def replace_part(ms: list[Message]) -> None:
        ms[1].content[0] = ContentPart.of_text("third task")

    def drop_part(ms: list[Message]) -> None:
        del ms[2].content[0]

    def change_role(ms: list[Message]) -> None:
        ms[0].role = Role.DEVELOPER

    def change_name(ms: list[Message]) -> None:
        ms[1].name = "alice"

    def change_call_id(ms: list[Message]) -> None:
        ms[3].role, ms[3].tool_call_id, ms[3].content = Role.TOOL, "c0", [ContentPart.of_text("text result")]

    def swap_message(ms: list[Message]) -> None:
        ms[4] = Message.user("swapped in")

    def truncate(ms: list[Message]) -> None:
        del ms[-3:]

    def insert_front(ms: list[Message]) -> None:
        ms.insert(1, Message.user("inserted"))

    def grow_again(ms: list[Message]) -> None:
        ms.extend(agent_step(7))

    changes = [
        replace_content,
        grow_again,
        append_part,
        replace_part,
        drop_part,
        change_role,
        change_name,
        change_call_id,
        swap_message,
        truncate,
        grow_again,
        insert_front,
    ]
    check(history)
    check(list(history), developer_role=True, echo_reasoning=True)  # another mode, another place


def test_remembered_conversations_are_bounded() -> None:
    """Many conversations on one adapter (a batch) keep at most _CACHE_LIMIT messages alive
    beyond the newest conversation; a dropped conversation is still sent right, from scratch."""
    from ra.llm.providers.conversations import CACHE_LIMIT

    adapter = OpenAICompatibleAdapter(base_url="http://127.0.0.1:1/v1")
    first = [Message.system("first"), Message.user("x")]
    adapter.encode_body(Request("m", first), stream=False)
    size = 400
    for c in range(3 * CACHE_LIMIT // size):
        history = [Message.user(f"conversation {c}")] + [Message.assistant(f"{c}.{j}") for j in range(size - 1)]
        adapter.encode_body(Request("m", history), stream=False)
        conversations = adapter._conversations[False]
        held = sum(len(p.messages) for p in conversations.prefixes.values())
        assert held == conversations.total <= CACHE_LIMIT + size
        assert len(adapter._msg_cache) <= CACHE_LIMIT
    assert all(p.messages[0] is not first[0] for p in conversations.prefixes.values())
    first.append(Message.user("y"))
    request = Request("m", first)
    assert adapter.encode_body(request, stream=True) == fresh_bytes(request)


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(InvalidRequestError, match="not supported in a system"):
        body_of(Request("m", [Message(Role.SYSTEM, [ContentPart.of_image(ImageData(url="https://x/a.png"))])]))
    with pytest.raises(InvalidRequestError, match="needs tool_call_id"):
        body_of(Request("m", [Message(Role.TOOL, [ContentPart.of_text("orphan")])]))


# -- scripted answers (synthetic: not in the recordings) ----------------------------------------------
def sse(*chunks: dict[str, Any] | str) -> bytes:
    return "".join("data: " + (c if isinstance(c, str) else json.dumps(c)) + "\n\n" for c in chunks).encode()


def delta(**d: Any) -> dict[str, Any]:
    return {"id": "s1", "model": "local", "choices": [{"index": 0, "delta": d, "finish_reason": None}]}


def finish(reason: str) -> dict[str, Any]:
    return {"id": "s1", "model": "local", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


TEXT_STREAM = sse(delta(role="assistant", content="Hel"), delta(content="lo"), finish("stop"), "[DONE]")
SSE = {"content-type": "text/event-stream"}


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_are_retryable(replay_server: ReplayServer, status: int) -> None:
    # synthetic
    replay_server.enqueue(status, {"error": {"message": "upstream failure", "type": "server_error"}})
    replay_server.enqueue(status, "<html>Bad Gateway</html>", {"content-type": "text/html"})
    adapter = make_adapter(replay_server)
    with pytest.raises(ServerError) as info:
        await adapter.complete(Request("m", [Message.user("x")]))
    assert info.value.retryable and info.value.status_code == status
    with pytest.raises(ServerError):
        await collect(adapter, Request("m", [Message.user("x")]))


async def test_rate_limit_retry_after(replay_server: ReplayServer) -> None:
    # synthetic
    body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
    replay_server.enqueue(429, body, {"retry-after": "7"})
    replay_server.enqueue(429, body, {"retry-after-ms": "1500", "retry-after": "9"})
    adapter = make_adapter(replay_server)
    for expected in (7.0, 1.5):
        with pytest.raises(RateLimitError) as info:
            await adapter.complete(Request("m", [Message.user("x")]))
        assert info.value.retry_after == expected and info.value.retryable


@pytest.mark.parametrize(
    "body",
    [
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your messages resulted "
                "in 130512 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
            }
        },
    ],
)
async def test_context_length_errors(replay_server: ReplayServer, body: dict[str, Any]) -> None:
    # synthetic: OpenAI and llama.cpp server bodies
    replay_server.enqueue(400, body)
    replay_server.enqueue(400, body)
    adapter = make_adapter(replay_server)
    with pytest.raises(ContextLengthError) as info:
        await adapter.complete(Request("m", [Message.user("x")]))
    assert not info.value.retryable and info.value.raw == body
    with pytest.raises(ContextLengthError):
        await collect(adapter, Request("m", [Message.user("x")]))


async def test_dropped_stream_is_stream_error(replay_server: ReplayServer) -> None:
    # synthetic
    replay_server.enqueue(200, TEXT_STREAM, SSE, chunking="events", drop_after=2)
    with pytest.raises(StreamError):
        await collect(make_adapter(replay_server), Request("m", [Message.user("x")]))


async def test_stalled_stream_times_out(replay_server: ReplayServer) -> None:
    # synthetic
    replay_server.enqueue(200, TEXT_STREAM, SSE, chunking="events", stall_after=1, stall_seconds=3)
    adapter = make_adapter(replay_server, timeout=AdapterTimeout(connect=2, request=5, stream_read=0.3))
    with pytest.raises(RequestTimeoutError):
        await collect(adapter, Request("m", [Message.user("x")]))


async def test_stream_without_done_is_stream_error(replay_server: ReplayServer) -> None:
    # synthetic: the connection closes cleanly, but [DONE] never came
    replay_server.enqueue(200, sse(delta(content="Hel"), delta(content="lo")), SSE, chunking="events")
    seen: list[StreamEvent] = []
    with pytest.raises(StreamError, match="DONE"):
        async for event in make_adapter(replay_server).stream(Request("m", [Message.user("x")])):
            seen.append(event)  # noqa: PERF401
    assert kinds(seen) == [T.STREAM_START, T.TEXT_START, T.TEXT_DELTA]


@pytest.mark.parametrize(
    ("error", "cls", "status"),
    [
        ({"message": "The server is overloaded", "type": "server_error"}, ServerError, 500),
        ({"message": "Rate limit exceeded", "code": 429}, RateLimitError, 429),
        ({"message": "prompt too long", "code": "context_length_exceeded"}, ContextLengthError, 400),
        ({"message": "upstream went away"}, ServerError, 500),
    ],
)
async def test_mid_stream_error_chunk(
    replay_server: ReplayServer, error: dict[str, Any], cls: type[Exception], status: int
) -> None:
    # synthetic: an OpenAI-style error payload after some text in a 200 stream
    body = sse(delta(content="partial"), {"error": error}, "[DONE]")
    replay_server.enqueue(200, body, SSE, chunking="random:3")
    with pytest.raises(cls) as info:
        await collect(make_adapter(replay_server), Request("m", [Message.user("x")]))
    assert info.value.status_code == status  # type: ignore[attr-defined]


async def test_sse_line_endings_and_comments(replay_server: ReplayServer) -> None:
    # synthetic: CRLF and CR line ends, comments, "data:" without a space, multi-line data
    crlf = TEXT_STREAM.replace(b"\n", b"\r\n")
    cr = b":keep-alive\r\r" + TEXT_STREAM.replace(b"\n", b"\r").replace(b"data: ", b"data:")
    multiline = b'data: {"id":"s1","model":"local",\ndata: "choices":[{"index":0,"delta":{"content":"Hello"}}]}\n\n'
    multiline += sse(finish("stop"), "[DONE]")
    for body in (crlf, cr, multiline):
        for chunking in ("random:5", 1):
            replay_server.enqueue(200, body, SSE, chunking=chunking)
            events = await collect(make_adapter(replay_server), Request("m", [Message.user("x")]))
            final = events[-1].response
            assert final is not None and final.text == "Hello" and final.finish_reason.reason == "stop"


async def test_parallel_tool_calls_by_index_and_late_name(replay_server: ReplayServer) -> None:
    # synthetic: llama.cpp-style deltas, arguments before a call is announced in one chunk, two indexes,
    # malformed arguments on the second call, and finish_reason "stop" despite tool calls
    body = sse(
        delta(content="Let me look."),
        delta(tool_calls=[{"index": 0, "id": "a", "type": "function", "function": {"name": "read", "arguments": ""}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": '{"path": '}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": '"x"}'}}]),
        delta(tool_calls=[{"index": 1, "id": "b", "function": {"arguments": '{"oops'}}]),
        delta(tool_calls=[{"index": 1, "function": {"name": "write"}}]),
        finish("stop"),
        {"id": "s1", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}},
        "[DONE]",
    )
    replay_server.enqueue(200, body, SSE, chunking="random:11")
    events = await collect(make_adapter(replay_server), Request("m", [Message.user("x")]))
    assert kinds(events) == [
        T.STREAM_START, T.TEXT_START, T.TEXT_DELTA, T.TEXT_END,
        T.TOOL_CALL_START, T.TOOL_CALL_DELTA, T.TOOL_CALL_END,
        T.TOOL_CALL_START, T.TOOL_CALL_DELTA, T.TOOL_CALL_END, T.FINISH,
    ]  # fmt: skip
    ends = [e.tool_call for e in events if e.type == T.TOOL_CALL_END]
    assert ends[0] is not None and ends[0].arguments == {"path": "x"}
    assert ends[1] is not None and ends[1].name == "write" and ends[1].arguments_error is not None
    assert ends[1].raw_arguments == '{"oops'
    final = events[-1].response
    assert final is not None
    assert final.finish_reason.reason == "tool_calls" and final.finish_reason.raw == "stop"
    assert [c.name for c in final.tool_calls] == ["read", "write"]
    assert final.message.content[0].text == "Let me look."
    assert usage_tuple(final.usage) == (5, 3, 8, None, None)
    # Malformed arguments go back verbatim.
    wire = body_of(Request("m", [Message.user("x"), final.message]))["messages"][1]
    assert wire["tool_calls"][1]["function"]["arguments"] == '{"oops'
    assert wire["tool_calls"][0]["function"]["arguments"] == '{"path": "x"}'


@pytest.mark.parametrize(
    ("raw", "unified"),
    [("length", "length"), ("content_filter", "content_filter"), ("function_call", "tool_calls"), ("eos", "other")],
)
async def test_finish_reasons(replay_server: ReplayServer, raw: str, unified: str) -> None:
    # synthetic
    replay_server.enqueue(200, sse(delta(content="x"), finish(raw), "[DONE]"), SSE)
    final = (await collect(make_adapter(replay_server), Request("m", [Message.user("x")])))[-1].response
    assert final is not None and (final.finish_reason.reason, final.finish_reason.raw) == (unified, raw)


LLAMA_CPP_REFUSAL = {
    "error": {
        "message": "Automatic streaming tool choice is not supported",
        "type": "internal_server_error",
    }
}


def non_stream_tool_answer(call_id: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-local",
        "model": "qwen",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Checking.",
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": "ls", "arguments": '{"dir": "."}'}}
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29},
    }


async def test_stream_fallback_when_tools_cannot_stream(replay_server: ReplayServer) -> None:
    # synthetic: llama-cpp-python's refusal, then the same request without streaming
    replay_server.enqueue(500, LLAMA_CPP_REFUSAL)
    replay_server.enqueue(200, non_stream_tool_answer("call_1"))
    replay_server.enqueue(200, non_stream_tool_answer("call_2"))
    replay_server.enqueue(200, TEXT_STREAM, SSE, chunking="events")
    adapter = make_adapter(replay_server, api_key=None)
    tools = [ToolDefinition("ls", "List a directory")]
    request = Request("qwen", [Message.user("what is here?")], tools=tools)

    events = await collect(adapter, request)
    assert kinds(events) == [
        T.STREAM_START, T.TEXT_START, T.TEXT_DELTA, T.TEXT_END,
        T.TOOL_CALL_START, T.TOOL_CALL_DELTA, T.TOOL_CALL_END, T.FINISH,
    ]  # fmt: skip
    start = events[0]
    assert start.warnings and start.warnings[0].code == "stream_fallback"
    assert "Automatic streaming tool choice" in start.warnings[0].message
    final = events[-1].response
    assert final is not None and final.warnings == start.warnings
    assert final.tool_calls[0].arguments == {"dir": "."} and final.text == "Checking."
    assert usage_tuple(final.usage) == (20, 9, 29, None, None)
    assert [r.json().get("stream", False) for r in replay_server.requests] == [True, False]

    # Remembered: the next request with tools goes straight to a non-streaming call, quietly.
    events = await collect(adapter, request)
    assert not events[0].warnings
    assert events[-1].response is not None and events[-1].response.tool_calls[0].id == "call_2"
    assert replay_server.requests[-1].json().get("stream", False) is False
    # Requests without tools still stream.
    events = await collect(adapter, Request("qwen", [Message.user("hi")]))
    assert replay_server.requests[-1].json()["stream"] is True and events[-1].response.text == "Hello"  # type: ignore[union-attr]


async def test_unrelated_500_is_not_a_fallback(replay_server: ReplayServer) -> None:
    # synthetic
    replay_server.enqueue(500, {"error": {"message": "CUDA out of memory"}})
    adapter = make_adapter(replay_server)
    with pytest.raises(ServerError):
        await collect(adapter, Request("m", [Message.user("x")], tools=[ToolDefinition("ls", "d")]))
    assert not adapter.no_stream_with_tools and len(replay_server.requests) == 1


async def test_server_ignoring_stream_flag(replay_server: ReplayServer) -> None:
    # synthetic: a server that answers a streamed request with one JSON completion
    replay_server.enqueue(200, non_stream_tool_answer("call_9"))
    events = await collect(make_adapter(replay_server), Request("m", [Message.user("x")]))
    assert events[0].type == T.STREAM_START and not events[0].warnings
    final = events[-1].response
    assert final is not None and final.tool_calls[0].id == "call_9" and final.text == "Checking."


# -- cancellation ----------------------------------------------------------------------------------
class HangingServer:
    """Accepts one request, answers headers (+ one SSE event when streaming) and then waits;
    records when the client closes the connection."""

    def __init__(self, stream: bool) -> None:
        self.stream = stream
        self.got_request = asyncio.Event()
        self.disconnected = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> HangingServer:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    @property
    def base_url(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}/v1"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        self.got_request.set()
        if self.stream:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            event = sse(delta(content="Hi"))
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
        while await reader.read(1024):
            pass
        self.disconnected.set()
        writer.close()


@pytest.mark.parametrize("streaming", [False, True])
async def test_cancellation_closes_the_connection(streaming: bool) -> None:
    async with HangingServer(streaming) as server:
        adapter = OpenAICompatibleAdapter(base_url=server.base_url, timeout=AdapterTimeout(stream_read=10))
        request = Request("m", [Message.user("x")])
        delivered = asyncio.Event()

        async def run() -> None:
            if streaming:
                async for event in adapter.stream(request):
                    if event.type == T.TEXT_DELTA:
                        delivered.set()
            else:
                await adapter.complete(request)

        task = asyncio.create_task(run())
        await asyncio.wait_for(server.got_request.wait(), 2)
        if streaming:
            await asyncio.wait_for(delivered.wait(), 2)  # mid-stream, waiting for the next chunk
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(server.disconnected.wait(), 2)
        await adapter.close()


async def test_calls_sharing_index_zero_and_extra_choices(replay_server: ReplayServer) -> None:
    # synthetic: servers that put every call at index 0 (told apart by id), and an n=2 stream whose
    # second choice must not leak into the first
    other = {"id": "s1", "choices": [{"index": 1, "delta": {"content": "IGNORED"}, "finish_reason": None}]}
    body = sse(
        delta(tool_calls=[{"index": 0, "id": "a", "function": {"name": "ls", "arguments": "{}"}}]),
        other,
        delta(tool_calls=[{"index": 0, "id": "b", "function": {"name": "pwd", "arguments": "{}"}}]),
        finish("tool_calls"),
        "[DONE]",
    )
    replay_server.enqueue(200, body, SSE, chunking="random:2")
    final = (await collect(make_adapter(replay_server), Request("m", [Message.user("x")])))[-1].response
    assert final is not None and final.text == ""
    assert [(c.id, c.name) for c in final.tool_calls] == [("a", "ls"), ("b", "pwd")]


async def test_encrypted_reasoning_details_only(replay_server: ReplayServer) -> None:
    # synthetic: OpenRouter reasoning that arrives only as an encrypted detail, never as text
    encrypted = {"type": "reasoning.encrypted", "data": "opaque==", "format": "openai-responses-v1", "index": 0}
    body = sse(delta(reasoning_details=[encrypted]), delta(content="Done."), finish("stop"), "[DONE]")
    replay_server.enqueue(200, body, SSE)
    events = await collect(make_adapter(replay_server), Request("m", [Message.user("x")]))
    final = events[-1].response
    assert final is not None and final.text == "Done."
    [thinking] = [p.thinking for p in final.message.content if p.thinking is not None]
    assert thinking.provider_data is not None and thinking.provider_data["reasoning_details"] == [encrypted]
    echoed = body_of(
        Request("m", [Message.user("x"), final.message]),
        echo_reasoning="reasoning_details",
    )["messages"][1]
    assert echoed == {"role": "assistant", "content": "Done.", "reasoning_details": [encrypted]}


def _chat_start() -> list[Message]:
    return [Message.system("sys"), Message.user("task")]


def _build_body_agrees(adapter: OpenAICompatibleAdapter, request: Request) -> None:
    assert adapter.build_body(request, stream=True)["messages"] == json.loads(fresh_bytes(request))["messages"]


def test_a_vouched_conversation_is_not_read_again() -> None:
    check_a_vouched_conversation_is_not_read_again(
        lambda: OpenAICompatibleAdapter(base_url="http://127.0.0.1:1/v1"), "m", _chat_start, agent_step, fresh_bytes
    )


def test_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again() -> None:
    check_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again(
        lambda: OpenAICompatibleAdapter(base_url="http://127.0.0.1:1/v1"),
        "m",
        _chat_start,
        agent_step,
        fresh_bytes,
        steps=5,
        also=_build_body_agrees,
    )
