"""GeminiAdapter against recorded Gemini traffic (every cassette in provider-cassettes/gemini) and
scripted answers for what the recordings lack, served by a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ra.llm.errors import (
    AuthenticationError,
    ContentFilterError,
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
from ra.llm.providers.gemini import GeminiAdapter, JSONArrayStream, to_gemini_schema
from ra.llm.types import (
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
from tests.support.replay import Interaction, ReplayServer, cassette_path, load_cassette

T = StreamEventType
CHUNKINGS: list[str | int] = ["events", "random:1", "random:7", "random:1234", 1]
CALL_ID = re.compile(r"^call_[0-9a-f]{32}$")


# -- helpers -------------------------------------------------------------------------------------
def cassette(name: str) -> list[Interaction]:
    return load_cassette(cassette_path("gemini", name))


def make_adapter(server: ReplayServer, **kw: Any) -> GeminiAdapter:
    kw.setdefault("timeout", AdapterTimeout(connect=2.0, request=10.0, stream_read=5.0))
    return GeminiAdapter(api_key="test-key", base_url=server.base_url, **kw)


async def collect(adapter: GeminiAdapter, request: Request) -> list[StreamEvent]:
    return [event async for event in adapter.stream(request)]


async def collect_into(adapter: GeminiAdapter, request: Request, seen: list[StreamEvent]) -> None:
    """Like collect, but the events before a failure stay visible to the test."""
    async for event in adapter.stream(request):
        seen.append(event)  # noqa: PERF401 - appended one by one on purpose: the stream may raise midway


def sig_bytes(sig: str) -> bytes:
    """Signatures are base64; Google's Python SDK echoes them base64url-encoded."""
    sig = sig.replace("+", "-").replace("/", "_")
    return base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))


def chunks_of(body: bytes) -> list[dict[str, Any]]:
    """The recorded GenerateContentResponse chunks, parsed independently of the adapter."""
    text = body.decode()
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


SSE_HEADERS = {"content-type": "text/event-stream"}


def text_chunk(text: str, finish: str | None = None, usage: dict[str, int] | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    chunk: dict[str, Any] = {"candidates": [cand], "modelVersion": "gemini-2.5-flash", "responseId": "r1"}
    if usage:
        chunk["usageMetadata"] = usage
    return chunk


def thinking_parts(message: Message) -> list[ThinkingData]:
    return [p.thinking for p in message.content if p.thinking is not None]


def norm_keys(value: Any) -> Any:
    """snake_case and camelCase spell the same proto field; compare them as equal."""
    if isinstance(value, dict):
        return {k.replace("_", "").lower(): norm_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [norm_keys(v) for v in value]
    return value


def pool_size(adapter: GeminiAdapter) -> int:
    return len(adapter._client()._transport._pool.connections)  # type: ignore[attr-defined]


# -- plain text -----------------------------------------------------------------------------------------
async def test_text_complete(replay_server: ReplayServer) -> None:
    inter = cassette("test_google_model.yaml")
    replay_server.enqueue_cassette(inter)
    request = Request(model="gemini-2.5-flash", messages=[Message.system("You are a chatbot."), Message.user("Hello!")])
    response = await make_adapter(replay_server).complete(request)

    assert response.text == "Hello! How can I help you today?"
    assert response.provider == "gemini"
    assert response.id == "bzlXaa_EE_aHqtsPi_zw8Ao"
    assert response.model == "gemini-2.5-flash"
    assert (response.finish_reason.reason, response.finish_reason.raw) == ("stop", "STOP")
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (9, 9 + 34, 52)
    assert usage.reasoning_tokens == 34 and usage.cache_read_tokens is None
    assert usage.raw == inter[0].response.json()["usageMetadata"]
    assert response.raw == inter[0].response.json()
    assert response.rate_limit is None

    sent = replay_server.requests[0]
    assert sent.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent.query == {}  # the key never travels in the URL
    assert sent.headers["x-goog-api-key"] == "test-key"
    body = sent.json()
    recorded = inter[0].request.body
    assert body["contents"] == recorded["contents"]
    assert body["systemInstruction"]["parts"] == recorded["systemInstruction"]["parts"]


@pytest.mark.parametrize("chunking", CHUNKINGS)
async def test_text_stream(replay_server: ReplayServer, chunking: str | int) -> None:
    inter = cassette("test_google_model_stream.yaml")
    replay_server.enqueue_cassette(inter, chunking=chunking)
    request = Request(
        model="gemini-2.0-flash-exp",
        messages=[Message.system("You are a helpful chatbot."), Message.user("What is the capital of France?")],
        temperature=0.0,
    )
    events = await collect(make_adapter(replay_server), request)

    assert [e.type for e in events] == [
        T.STREAM_START,
        T.TEXT_START,
        T.TEXT_DELTA,
        T.TEXT_DELTA,
        T.TEXT_DELTA,
        T.TEXT_END,
        T.FINISH,
    ]
    assert [e.delta for e in events if e.type == T.TEXT_DELTA] == ["The", " capital of France", " is Paris.\n"]
    assert len({e.text_id for e in events if e.text_id}) == 1
    finish = events[-1]
    assert finish.finish_reason is not None and finish.finish_reason.reason == "stop"
    assert finish.usage is not None and (finish.usage.input_tokens, finish.usage.output_tokens) == (13, 8)
    response = finish.response
    assert response is not None
    assert response.text == "The capital of France is Paris.\n"
    assert response.id == "w1peaMz6INOvnvgPgYfPiQY" and response.model == "gemini-2.0-flash-exp"
    assert response.usage.total_tokens == 21 and response.usage.reasoning_tokens is None
    assert len(response.raw["chunks"]) == 3  # type: ignore[index]

    sent = replay_server.requests[0]
    assert sent.path == "/v1beta/models/gemini-2.0-flash-exp:streamGenerateContent"
    assert sent.query == {"alt": ["sse"]}
    assert sent.json()["generationConfig"] == inter[0].request.body["generationConfig"]


# -- tools ------------------------------------------------------------------------------------------
SECRET_TOOL = ToolDefinition(
    "secret_retrieval_tool",
    "A tool that requires a password to retrieve a secret.",
    {"type": "object", "properties": {"password": {"title": "Password", "type": "string"}}, "required": ["password"]},
)


def assert_call_part(ours: dict[str, Any], recorded: dict[str, Any]) -> None:
    """Same function, same arguments, same signature bytes (ours is echoed verbatim)."""
    call = recorded.get("functionCall") or recorded.get("function_call")
    assert ours["functionCall"]["name"] == call["name"]
    assert ours["functionCall"]["args"] == call["args"]
    assert "id" not in ours["functionCall"]  # synthetic ids stay on our side
    if "thoughtSignature" in recorded:
        assert sig_bytes(ours["thoughtSignature"]) == sig_bytes(recorded["thoughtSignature"])
    else:
        assert "thoughtSignature" not in ours


def assert_response_part(ours: dict[str, Any], recorded: dict[str, Any]) -> None:
    fr = recorded.get("functionResponse") or recorded.get("function_response")
    assert ours["functionResponse"]["name"] == fr["name"]
    # The recorders wrapped results as {"output"/"return_value": ...}; we use {"result": ...}.
    assert list(ours["functionResponse"]["response"].values()) == list(fr["response"].values())


async def test_parallel_tool_calls_round_trip(replay_server: ReplayServer) -> None:
    inter = cassette("mirascope__test_call_with_tools__google_gemini_2_5_flash__sync.yaml")
    replay_server.enqueue_cassette(inter)
    adapter = make_adapter(replay_server)
    history = [
        Message.system("Use parallel tool calling."),
        Message.user("Please retrieve the secrets associated with each of these passwords: mellon,radiance"),
    ]
    first = await adapter.complete(Request(model="gemini-2.5-flash", messages=history, tools=[SECRET_TOOL]))

    body1 = replay_server.requests[0].json()
    rec1 = inter[0].request.body
    assert body1["contents"] == rec1["contents"]
    assert body1["systemInstruction"]["parts"] == rec1["systemInstruction"]["parts"]
    decl = body1["tools"][0]["functionDeclarations"][0]
    rec_decl = rec1["tools"][0]["functionDeclarations"][0]
    assert (decl["name"], decl["description"]) == (rec_decl["name"], rec_decl["description"])
    assert norm_keys(json.loads(json.dumps(decl["parameters"]).lower())) == norm_keys(
        json.loads(json.dumps(rec_decl["parameters"]).lower())
    )

    calls = first.tool_calls
    assert [(c.name, c.arguments) for c in calls] == [
        ("secret_retrieval_tool", {"password": "mellon"}),
        ("secret_retrieval_tool", {"password": "radiance"}),
    ]
    assert all(CALL_ID.match(c.id) for c in calls) and calls[0].id != calls[1].id
    recorded_sig = inter[0].response.json()["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    assert calls[0].provider_data == {"gemini": {"thoughtSignature": recorded_sig}}
    assert calls[1].provider_data is None
    assert (first.finish_reason.reason, first.finish_reason.raw) == ("tool_calls", "STOP")
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.reasoning_tokens) == (70, 116, 76)
    assert first.usage.total_tokens == 186

    history += [
        first.message,
        Message.tool_result(calls[0].id, "Welcome to Moria!"),
        Message.tool_result(calls[1].id, "Life before Death"),
    ]
    second = await adapter.complete(Request(model="gemini-2.5-flash", messages=history, tools=[SECRET_TOOL]))
    body2 = replay_server.requests[1].json()
    rec2 = inter[1].request.body
    assert [c["role"] for c in body2["contents"]] == [c["role"] for c in rec2["contents"]]
    model_parts = body2["contents"][1]["parts"]
    assert len(model_parts) == 2
    for ours, recorded in zip(model_parts, rec2["contents"][1]["parts"], strict=True):
        assert_call_part(ours, recorded)
    assert model_parts[0]["thoughtSignature"] == recorded_sig  # byte for byte what we received
    for ours, recorded in zip(body2["contents"][2]["parts"], rec2["contents"][2]["parts"], strict=True):
        assert_response_part(ours, recorded)
    assert body2["contents"][2]["parts"][0]["functionResponse"]["response"] == {"result": "Welcome to Moria!"}
    assert second.text.startswith("The secrets have been retrieved.")
    assert second.finish_reason.reason == "stop"


GET_COUNTRY = ToolDefinition("get_country", "", {"type": "object", "properties": {}, "additionalProperties": False})


@pytest.mark.parametrize("chunking", CHUNKINGS)
async def test_streamed_tool_call_thought_signature_round_trip(
    replay_server: ReplayServer, chunking: str | int
) -> None:
    inter = cassette("test_google_streaming_tool_call_thought_signature.yaml")
    replay_server.enqueue_cassette(inter, chunking=chunking)
    adapter = make_adapter(replay_server)
    history = [Message.user("What is the capital of the user country? Call the tool")]

    events = await collect(adapter, Request(model="gemini-3-pro-preview", messages=history, tools=[GET_COUNTRY]))
    assert [e.type for e in events] == [T.STREAM_START, T.TOOL_CALL_START, T.TOOL_CALL_DELTA, T.TOOL_CALL_END, T.FINISH]
    start, delta, end = events[1:4]
    assert start.tool_call is not None and end.tool_call is not None
    assert start.tool_call.id == end.tool_call.id and CALL_ID.match(end.tool_call.id)
    assert start.tool_call.name == "get_country" and delta.delta == "{}"
    assert end.tool_call.arguments == {} and end.tool_call.arguments_error is None
    recorded_sig = chunks_of(inter[0].response.body)[0]["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    assert end.tool_call.provider_data == {"gemini": {"thoughtSignature": recorded_sig}}
    first = events[-1].response
    assert first is not None
    assert first.finish_reason.reason == "tool_calls"
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.total_tokens) == (29, 212, 241)
    assert first.usage.reasoning_tokens == 202
    assert first.tool_calls[0].provider_data == end.tool_call.provider_data

    # A no-argument tool is declared without parameters (Gemini's OpenAPI subset has no "empty object").
    assert replay_server.requests[0].json()["tools"] == [
        {"functionDeclarations": [{"name": "get_country", "description": ""}]}
    ]

    history += [first.message, Message.tool_result(first.tool_calls[0].id, "Mexico")]
    events2 = await collect(adapter, Request(model="gemini-3-pro-preview", messages=history, tools=[GET_COUNTRY]))
    body2 = replay_server.requests[1].json()
    rec2 = inter[1].request.body
    assert_call_part(body2["contents"][1]["parts"][0], rec2["contents"][1]["parts"][0])
    assert body2["contents"][1]["parts"][0]["thoughtSignature"] == recorded_sig
    assert_response_part(body2["contents"][2]["parts"][0], rec2["contents"][2]["parts"][0])
    second = events2[-1].response
    assert second is not None
    assert second.text == "The capital of Mexico is Mexico City."
    assert second.finish_reason.reason == "stop"
    assert (second.usage.input_tokens, second.usage.output_tokens, second.usage.total_tokens) == (257, 8, 265)
    assert second.id == "REVVabaiCdq4qtsPnZu96Qo"


ADDITION_TOOL = ToolDefinition(
    "customAdditionImplementation",
    "Perform computation on integers.",
    {
        "type": "object",
        "properties": {"a": {"title": "A", "type": "integer"}, "b": {"title": "B", "type": "integer"}},
        "required": ["a", "b"],
    },
)
ADDITION_SCHEMA = {
    "title": "IntegerAdditionResponse",
    "description": "A simple response for testing.",
    "type": "object",
    "properties": {
        "integer_a": {"title": "Integer A", "type": "integer"},
        "integer_b": {"title": "Integer B", "type": "integer"},
        "answer": {"title": "Answer", "type": "integer"},
    },
    "required": ["integer_a", "integer_b", "answer"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("chunking", CHUNKINGS)
async def test_strict_tools_streamed_round_trip(replay_server: ReplayServer, chunking: str | int) -> None:
    inter = cassette("mirascope__test_strict_mode_with_tools_streamed__google_gemini_3_pro_preview.yaml")
    replay_server.enqueue_cassette(inter, chunking=chunking)
    adapter = make_adapter(replay_server)
    fmt = ResponseFormat("json_schema", ADDITION_SCHEMA, strict=True)
    history = [Message.user("Answer this question: What is 2 + 3, using the custom addition tool?")]

    def request() -> Request:
        return Request(model="gemini-3-pro-preview", messages=history, tools=[ADDITION_TOOL], response_format=fmt)

    events = await collect(adapter, request())
    body1 = replay_server.requests[0].json()
    rec1 = inter[0].request.body
    assert body1["contents"] == rec1["contents"]
    config = body1["generationConfig"]
    assert config["responseMimeType"] == rec1["generationConfig"]["responseMimeType"] == "application/json"
    rec_schema = rec1["generationConfig"]["responseSchema"]
    assert config["responseSchema"]["required"] == rec_schema["required"]
    assert set(config["responseSchema"]["properties"]) == set(rec_schema["properties"])
    assert "additionalProperties" not in config["responseSchema"]

    first = events[-1].response
    assert first is not None
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("customAdditionImplementation", {"a": 2, "b": 3})]
    assert first.finish_reason.reason == "tool_calls"

    history += [first.message, Message.tool_result(first.tool_calls[0].id, "13")]
    events2 = await collect(adapter, request())
    body2 = replay_server.requests[1].json()
    rec2 = inter[1].request.body
    assert_call_part(body2["contents"][1]["parts"][0], rec2["contents"][1]["parts"][0])
    assert_response_part(body2["contents"][2]["parts"][0], rec2["contents"][2]["parts"][0])
    second = events2[-1].response
    assert second is not None
    assert json.loads(second.text) == {"integer_a": 2, "integer_b": 3, "answer": 13}
    assert (second.usage.input_tokens, second.usage.total_tokens) == (271, 303)


MULTIPLY = ToolDefinition(
    "multiply",
    "Multiply two numbers.",
    {"properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"], "type": "object"},
)
SAFETY_OFF = [
    {"category": f"HARM_CATEGORY_{c}", "threshold": "BLOCK_NONE"}
    for c in ("DANGEROUS_CONTENT", "SEXUALLY_EXPLICIT", "HATE_SPEECH", "HARASSMENT")
]


@pytest.mark.parametrize("chunking", ["whole", "random:3", "random:99", 1])
async def test_json_array_stream_tools_round_trip(replay_server: ReplayServer, chunking: str | int) -> None:
    """streamGenerateContent answered with one JSON array (no SSE), gzip-recorded, two turns."""
    inter = cassette("test_tools_with_gemini_3_thought_signatures.yaml")
    replay_server.enqueue_cassette(inter, chunking=chunking)
    adapter = make_adapter(replay_server)
    options = {"gemini": {"safetySettings": SAFETY_OFF}}
    history = [Message.user("What is 5 times 3?")]

    def request() -> Request:
        return Request(model="gemini-3-flash-preview", messages=history, tools=[MULTIPLY], provider_options=options)

    events = await collect(adapter, request())
    body1 = replay_server.requests[0].json()
    rec1 = inter[0].request.body
    assert body1["contents"] == rec1["contents"]
    assert body1["safetySettings"] == rec1["safetySettings"]
    assert body1["tools"] == rec1["tools"]  # plain JSON Schema passes through unchanged

    assert [e.type for e in events] == [T.STREAM_START, T.TOOL_CALL_START, T.TOOL_CALL_DELTA, T.TOOL_CALL_END, T.FINISH]
    first = events[-1].response
    assert first is not None
    call = first.tool_calls[0]
    assert (call.name, call.arguments) == ("multiply", {"y": 3, "x": 5})
    recorded_sig = chunks_of(inter[0].response.body)[0]["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    assert call.provider_data == {"gemini": {"thoughtSignature": recorded_sig}}
    assert first.finish_reason.reason == "tool_calls"
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.total_tokens) == (60, 48, 108)

    history += [first.message, Message.tool_result(call.id, "15")]
    events2 = await collect(adapter, request())
    body2 = replay_server.requests[1].json()
    rec2 = inter[1].request.body
    rec_call = next(p for p in rec2["contents"][1]["parts"] if "function_call" in p)
    assert body2["contents"][1]["parts"] == [
        {"functionCall": {"name": "multiply", "args": {"y": 3, "x": 5}}, "thoughtSignature": recorded_sig}
    ]
    assert_call_part(body2["contents"][1]["parts"][0], rec_call)
    assert rec_call["thoughtSignature"] == recorded_sig
    assert_response_part(body2["contents"][2]["parts"][0], rec2["contents"][2]["parts"][0])
    second = events2[-1].response
    assert second is not None
    assert second.text == "5 times 3 is 15."
    assert (second.usage.input_tokens, second.usage.output_tokens, second.usage.total_tokens) == (121, 9, 130)


# -- thinking -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("chunking", ["whole", "random:5", "random:77", 1])
async def test_json_array_stream_with_thoughts(replay_server: ReplayServer, chunking: str | int) -> None:
    inter = cassette("test_prompt.yaml")
    replay_server.enqueue_cassette(inter, chunking=chunking)
    request = Request(
        model="gemini-flash-latest",
        messages=[Message.user("Name for a pet pelican, just the name")],
        provider_options={"gemini": {"safetySettings": SAFETY_OFF, "includeThoughts": True}},
    )
    events = await collect(make_adapter(replay_server), request)
    body = replay_server.requests[0].json()
    rec = inter[0].request.body
    assert body["contents"] == rec["contents"]
    assert body["safetySettings"] == rec["safetySettings"]
    assert body["generationConfig"] == rec["generationConfig"]

    recorded = chunks_of(inter[0].response.body)
    thought = recorded[0]["candidates"][0]["content"]["parts"][0]["text"]
    signature = recorded[2]["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    assert [e.type for e in events] == [
        T.STREAM_START,
        T.REASONING_START,
        T.REASONING_DELTA,
        T.REASONING_END,
        T.TEXT_START,
        T.TEXT_DELTA,
        T.TEXT_END,
        T.REASONING_START,
        T.REASONING_END,
        T.FINISH,
    ]
    assert events[2].reasoning_delta == thought
    assert events[3].thinking is not None and events[3].thinking.text == thought
    carrier = events[8].thinking
    assert carrier is not None and carrier.text == "" and carrier.signature == signature
    response = events[-1].response
    assert response is not None
    assert response.text == "Scoop" and response.reasoning == thought
    assert response.model == "gemini-3.6-flash"
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (11, 293, 304)
    assert response.usage.reasoning_tokens == 291

    # Sent back, the thought stays a thought part and the signature rides on the answer text.
    again = make_adapter(replay_server).build_body(
        Request(model="gemini-flash-latest", messages=[*request.messages, response.message, Message.user("more")]),
        stream=True,
    )
    assert again["contents"][1] == {
        "role": "model",
        "parts": [{"text": thought, "thought": True}, {"text": "Scoop", "thoughtSignature": signature}],
    }


DUMMY = ToolDefinition("dummy", "", {"type": "object", "properties": {}, "additionalProperties": False})


async def test_thinking_parts_round_trip(replay_server: ReplayServer) -> None:
    inter = cassette("test_google_model_thinking_part.yaml")
    replay_server.enqueue_cassette(inter)
    adapter = make_adapter(replay_server)
    options = {"gemini": {"includeThoughts": True}}
    history = [Message.system("You are a helpful assistant."), Message.user("How do I cross the street?")]

    def request() -> Request:
        return Request(model="gemini-3-pro-preview", messages=history, tools=[DUMMY], provider_options=options)

    first = await adapter.complete(request())
    body1 = replay_server.requests[0].json()
    rec1 = inter[0].request.body
    assert body1["contents"] == rec1["contents"]
    assert norm_keys(body1["generationConfig"]["thinkingConfig"]) == norm_keys(
        rec1["generationConfig"]["thinkingConfig"]
    )
    rec_parts = inter[0].response.json()["candidates"][0]["content"]["parts"]
    assert [p.kind for p in first.message.content] == [ContentKind.THINKING, ContentKind.TEXT, ContentKind.THINKING]
    assert first.reasoning == rec_parts[0]["text"]
    assert first.text == rec_parts[1]["text"]
    thought, carrier = thinking_parts(first.message)
    assert thought.signature is None and thought.provider_data == {"gemini": {"part": "thought"}}
    assert carrier.text == "" and carrier.signature == rec_parts[1]["thoughtSignature"]
    assert (first.usage.output_tokens, first.usage.reasoning_tokens, first.usage.total_tokens) == (1737, 1001, 1766)

    history += [
        first.message,
        Message.user("Considering the way to cross the street, analogously, how do I cross the river?"),
    ]
    second = await adapter.complete(request())
    body2 = replay_server.requests[1].json()
    rec2 = inter[1].request.body
    assert [c["role"] for c in body2["contents"]] == ["user", "model", "user"]
    ours, theirs = body2["contents"][1]["parts"], rec2["contents"][1]["parts"]
    assert len(ours) == len(theirs) == 2
    assert ours[0] == theirs[0] == {"text": rec_parts[0]["text"], "thought": True}
    assert ours[1]["text"] == theirs[1]["text"]
    assert ours[1]["thoughtSignature"] == rec_parts[1]["thoughtSignature"]
    assert sig_bytes(ours[1]["thoughtSignature"]) == sig_bytes(theirs[1]["thoughtSignature"])
    assert body2["contents"][2] == rec2["contents"][2]
    assert second.text.startswith("Crossing a river is deceptively similar")
    assert second.usage.reasoning_tokens == 1115


@pytest.mark.parametrize("chunking", ["events", "random:2", "random:31", "random:500"])
async def test_thinking_stream(replay_server: ReplayServer, chunking: str | int) -> None:
    inter = cassette("test_google_model_thinking_part_iter.yaml")
    replay_server.enqueue_cassette(inter, chunking=chunking)
    request = Request(
        model="gemini-2.5-pro",
        messages=[Message.system("You are a helpful assistant."), Message.user("How do I cross the street?")],
        tools=[ToolDefinition("dummy", "")],
        provider_options={"gemini": {"include_thoughts": True}},
    )
    events = await collect(make_adapter(replay_server), request)
    assert replay_server.requests[0].json()["generationConfig"] == inter[0].request.body["generationConfig"]

    parts = [p for c in chunks_of(inter[0].response.body) for p in c["candidates"][0]["content"]["parts"]]
    thoughts = "".join(p["text"] for p in parts if p.get("thought"))
    answer = "".join(p["text"] for p in parts if not p.get("thought"))
    signature = next(p["thoughtSignature"] for p in parts if "thoughtSignature" in p)
    kinds = [e.type for e in events]
    n_thoughts = sum(1 for p in parts if p.get("thought"))
    n_text = len(parts) - n_thoughts
    assert kinds == [
        T.STREAM_START,
        T.REASONING_START,
        *[T.REASONING_DELTA] * n_thoughts,
        T.REASONING_END,
        T.TEXT_START,
        *[T.TEXT_DELTA] * n_text,
        T.TEXT_END,
        T.REASONING_START,
        T.REASONING_END,
        T.FINISH,
    ]
    ends = [e.thinking for e in events if e.type == T.REASONING_END]
    assert ends[0] is not None and ends[0].text == thoughts and ends[0].signature is None
    assert ends[1] is not None and ends[1].signature == signature
    response = events[-1].response
    assert response is not None
    assert response.reasoning == thoughts and response.text == answer
    assert (response.usage.input_tokens, response.usage.reasoning_tokens, response.usage.total_tokens) == (
        34,
        787,
        1290,
    )
    assert response.finish_reason.reason == "stop"


@pytest.mark.parametrize("chunking", CHUNKINGS)
async def test_streamed_thinking_structured_output(replay_server: ReplayServer, chunking: str | int) -> None:
    inter = cassette("mirascope__test_strict_mode_with_streamed_thinking__google_gemini_3_pro_preview.yaml")
    replay_server.enqueue_cassette(inter, chunking=chunking)
    adapter = make_adapter(replay_server)
    messages = [Message.user("Answer this question: What is 2 + 2?")]
    fmt = ResponseFormat("json_schema", ADDITION_SCHEMA, strict=True)

    budget = {"gemini": {"thinkingConfig": {"includeThoughts": True, "thinkingBudget": 6400}}}
    events = await collect(
        adapter, Request(model="gemini-3-pro-preview", messages=messages, response_format=fmt, provider_options=budget)
    )
    config = replay_server.requests[0].json()["generationConfig"]
    rec_config = inter[0].request.body["generationConfig"]
    assert norm_keys(config["thinkingConfig"]) == norm_keys(rec_config["thinkingConfig"])
    assert config["responseMimeType"] == rec_config["responseMimeType"]
    first = events[-1].response
    assert first is not None
    assert json.loads(first.text) == {"integer_a": 2, "integer_b": 2, "answer": 4}
    assert first.reasoning is not None and first.reasoning.startswith("**Processing the Input**")
    recorded = chunks_of(inter[0].response.body)
    assert (
        thinking_parts(first.message)[-1].signature
        == recorded[-1]["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    )
    assert (first.usage.output_tokens, first.usage.reasoning_tokens, first.usage.total_tokens) == (338, 308, 351)

    # reasoning_effort on a Gemini 3 model maps to thinkingLevel, as the second recording sent it.
    events2 = await collect(
        adapter, Request(model="gemini-3-pro-preview", messages=messages, response_format=fmt, reasoning_effort="high")
    )
    config2 = replay_server.requests[1].json()["generationConfig"]
    assert norm_keys(config2["thinkingConfig"]) == norm_keys(
        inter[1].request.body["generationConfig"]["thinkingConfig"]
    )
    second = events2[-1].response
    assert second is not None
    assert json.loads(second.text) == {"integer_a": 2, "integer_b": 2, "answer": 4}
    assert second.reasoning == ""  # only the signature came back, no thought text
    assert second.usage.reasoning_tokens == 327


# -- caching --------------------------------------------------------------------------------------------
async def test_explicit_cached_content(replay_server: ReplayServer) -> None:
    inter = cassette("test_google_model_cached_content.yaml")
    generate = [i for i in inter if i.request.uri.endswith(":generateContent")]
    assert len(generate) == 2  # the cachedContents POST/DELETE are not the adapter's business
    replay_server.enqueue_cassette(generate)
    adapter = make_adapter(replay_server)
    for index, inter_ in enumerate(generate):
        recorded = inter_.request.body
        request = Request(
            model="gemini-2.5-flash",
            messages=[Message.user(recorded["contents"][0]["parts"][0]["text"])],
            provider_options={"gemini": {"cached_content": recorded["cachedContent"]}},
        )
        response = await adapter.complete(request)
        body = replay_server.requests[index].json()
        assert body["cachedContent"] == recorded["cachedContent"]
        assert body["contents"] == recorded["contents"]
        assert response.text == "Paris."
        assert response.usage.cache_read_tokens == 3512
        assert response.usage.input_tokens == 3520
    assert response.usage.reasoning_tokens == 51 and response.usage.total_tokens == 3573


async def test_implicit_cache_multi_turn(replay_server: ReplayServer) -> None:
    inter = cassette("mirascope__test_caching_multi_turn_conversation__google_gemini_2_5_flash.yaml")
    replay_server.enqueue_cassette(inter)
    adapter = make_adapter(replay_server)
    history: list[Message] = []
    cache_reads = []
    for index, inter_ in enumerate(inter):
        recorded = inter_.request.body
        history.append(Message.user(recorded["contents"][-1]["parts"][0]["text"]))
        response = await adapter.complete(Request(model="gemini-2.5-flash", messages=history))
        # Earlier model turns go back exactly as they were received.
        assert replay_server.requests[index].json()["contents"] == recorded["contents"]
        cache_reads.append(response.usage.cache_read_tokens)
        history.append(response.message)
    assert cache_reads == [3055, None, None]


# -- recorded errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize("streaming", [False, True])
async def test_invalid_api_key(replay_server: ReplayServer, streaming: bool) -> None:
    name = (
        "mirascope__test_authentication_error_stream__google_gemini_2_5_flash.yaml"
        if streaming
        else "mirascope__test_authentication_error__google_gemini_2_5_flash.yaml"
    )
    inter = cassette(name)
    assert inter[0].response.status == 400
    replay_server.enqueue_cassette(inter)
    adapter = make_adapter(replay_server)
    request = Request(model="gemini-2.5-flash", messages=[Message.user("This should fail with AuthenticationError")])
    with pytest.raises(AuthenticationError) as info:
        if streaming:
            await collect(adapter, request)
        else:
            await adapter.complete(request)
    err = info.value
    assert err.status_code == 400 and err.error_code == "API_KEY_INVALID"
    assert err.retryable is False and "API key not valid" in err.message
    assert err.raw == inter[0].response.json()
    assert replay_server.requests[0].json()["contents"] == inter[0].request.body["contents"]


async def test_model_not_found(replay_server: ReplayServer) -> None:
    inter = cassette("mirascope__test_model_not_found__google_gemini_2_5_flash.yaml")
    replay_server.enqueue_cassette(inter)
    adapter = make_adapter(replay_server)
    request = Request(
        model="this-model-does-not-exist-12345", messages=[Message.user("This should fail with NotFoundError")]
    )
    with pytest.raises(NotFoundError) as info:
        await adapter.complete(request)
    assert (info.value.status_code, info.value.error_code, info.value.retryable) == (404, "NOT_FOUND", False)
    with pytest.raises(NotFoundError):
        await collect(adapter, request)
    assert replay_server.requests[0].path == "/v1beta/models/this-model-does-not-exist-12345:generateContent"


async def test_rate_limited_inline_video(replay_server: ReplayServer) -> None:
    inter = cassette("TestAgentMultimodalGemini.test_video_file[gemini-gemini-2.0-flash].yaml")
    replay_server.enqueue_cassette(inter)
    recorded = inter[0].request.body
    rec_parts = recorded["contents"][0]["parts"]
    video = sig_bytes(rec_parts[1]["inlineData"]["data"])
    request = Request(
        model="gemini-2.0-flash",
        messages=[
            Message.system(recorded["systemInstruction"]["parts"][0]["text"]),
            Message.user(
                [
                    ContentPart.of_text(rec_parts[0]["text"]),
                    ContentPart(ContentKind.DOCUMENT, document=DocumentData(data=video, media_type="video/mp4")),
                ]
            ),
        ],
        stop_sequences=["\nObservation:"],
    )
    with pytest.raises(RateLimitError) as info:
        await make_adapter(replay_server).complete(request)
    err = info.value
    assert (err.status_code, err.error_code, err.retryable, err.retry_after) == (429, "RESOURCE_EXHAUSTED", True, None)
    body = replay_server.requests[0].json()
    assert body["generationConfig"] == recorded["generationConfig"]
    assert body["systemInstruction"]["parts"] == recorded["systemInstruction"]["parts"]
    sent = body["contents"][0]["parts"]
    assert sent[0] == rec_parts[0]
    assert sent[1]["inlineData"]["mimeType"] == "video/mp4"
    assert base64.b64decode(sent[1]["inlineData"]["data"]) == video


# -- scripted answers (synthetic: no recording has them) ---------------------------------------------
@pytest.mark.parametrize("status", [500, 502, 503])
@pytest.mark.parametrize("streaming", [False, True])
async def test_server_errors(replay_server: ReplayServer, status: int, streaming: bool) -> None:
    # Synthetic: Google's error envelope for a transient failure.
    grpc = {500: "INTERNAL", 502: "UNAVAILABLE", 503: "UNAVAILABLE"}[status]
    replay_server.enqueue(status, {"error": {"code": status, "message": "The model is overloaded.", "status": grpc}})
    adapter = make_adapter(replay_server)
    request = Request(model="gemini-2.5-flash", messages=[Message.user("hi")])
    with pytest.raises(ServerError) as info:
        if streaming:
            await collect(adapter, request)
        else:
            await adapter.complete(request)
    assert info.value.status_code == status and info.value.retryable is True and info.value.error_code == grpc


async def test_server_error_without_json_body(replay_server: ReplayServer) -> None:
    # Synthetic: a load balancer's HTML 502.
    replay_server.enqueue(502, "<html>Bad Gateway</html>", {"content-type": "text/html"})
    with pytest.raises(ServerError) as info:
        await make_adapter(replay_server).complete(Request(model="m", messages=[Message.user("hi")]))
    assert info.value.status_code == 502


@pytest.mark.parametrize(("headers", "expected"), [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "1500"}, 1.5)])
async def test_rate_limit_retry_after_headers(
    replay_server: ReplayServer, headers: dict[str, str], expected: float
) -> None:
    # Synthetic: Gemini's 429 body plus the standard headers a proxy may add.
    body = {"error": {"code": 429, "message": "Resource has been exhausted.", "status": "RESOURCE_EXHAUSTED"}}
    replay_server.enqueue(429, body, headers)
    with pytest.raises(RateLimitError) as info:
        await make_adapter(replay_server).complete(Request(model="m", messages=[Message.user("hi")]))
    assert info.value.retry_after == pytest.approx(expected) and info.value.retryable


async def test_rate_limit_retry_info_in_body(replay_server: ReplayServer) -> None:
    # Synthetic, in the shape of Gemini's quota errors: google.rpc.RetryInfo carries the delay.
    body = {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"},
            ],
        }
    }
    replay_server.enqueue(429, body)
    with pytest.raises(RateLimitError) as info:
        await collect(make_adapter(replay_server), Request(model="m", messages=[Message.user("hi")]))
    assert info.value.retry_after == 12.0 and info.value.status_code == 429


async def test_context_length_error(replay_server: ReplayServer) -> None:
    # Synthetic: the wording Gemini uses when the prompt is over the model's input limit.
    message = "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
    replay_server.enqueue(400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})
    with pytest.raises(ContextLengthError) as info:
        await make_adapter(replay_server).complete(Request(model="m", messages=[Message.user("hi")]))
    assert info.value.status_code == 400 and info.value.retryable is False
    assert info.value.error_code == "INVALID_ARGUMENT"


async def test_plain_invalid_argument(replay_server: ReplayServer) -> None:
    # Synthetic: a schema complaint stays an InvalidRequestError.
    message = "* GenerateContentRequest.generation_config.temperature: must be between 0 and 2"
    replay_server.enqueue(400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})
    with pytest.raises(InvalidRequestError):
        await make_adapter(replay_server).complete(Request(model="m", messages=[Message.user("hi")]))


async def test_connection_dropped_mid_stream(replay_server: ReplayServer) -> None:
    # Synthetic: the socket closes after two events, before the chunk with finishReason.
    body = sse(text_chunk("Hel"), text_chunk("lo"), text_chunk("!", finish="STOP"))
    replay_server.enqueue(200, body, SSE_HEADERS, chunking="events", drop_after=2)
    seen: list[StreamEvent] = []
    with pytest.raises(StreamError):
        await collect_into(make_adapter(replay_server), Request(model="m", messages=[Message.user("hi")]), seen)
    assert [e.delta for e in seen if e.type == T.TEXT_DELTA] == ["Hel", "lo"]


async def test_stalled_stream_times_out(replay_server: ReplayServer) -> None:
    # Synthetic: one event, then silence longer than stream_read.
    body = sse(text_chunk("Hel"), text_chunk("lo", finish="STOP"))
    replay_server.enqueue(200, body, SSE_HEADERS, chunking="events", stall_after=1, stall_seconds=3.0)
    adapter = make_adapter(replay_server, timeout=AdapterTimeout(connect=2.0, request=10.0, stream_read=0.3))
    with pytest.raises(RequestTimeoutError):
        await collect(adapter, Request(model="m", messages=[Message.user("hi")]))


async def test_stalled_json_array_stream_times_out(replay_server: ReplayServer) -> None:
    # Synthetic: the JSON-array flavour stalls the same way.
    body = json.dumps([text_chunk("Hel"), text_chunk("lo", finish="STOP")]).encode()
    replay_server.enqueue(
        200, body, {"content-type": "application/json"}, chunks=[body[:40], body[40:]], stall_after=1, stall_seconds=3.0
    )
    adapter = make_adapter(replay_server, timeout=AdapterTimeout(connect=2.0, request=10.0, stream_read=0.3))
    with pytest.raises(RequestTimeoutError):
        await collect(adapter, Request(model="m", messages=[Message.user("hi")]))


async def test_stream_without_finish_reason(replay_server: ReplayServer) -> None:
    # Synthetic: the body ends cleanly but no chunk ever carried a finishReason.
    replay_server.enqueue(200, sse(text_chunk("Hel"), text_chunk("lo")), SSE_HEADERS, chunking="events")
    with pytest.raises(StreamError, match="finishReason"):
        await collect(make_adapter(replay_server), Request(model="m", messages=[Message.user("hi")]))


@pytest.mark.parametrize("cut", ["unclosed", "mid-object", "empty"])
async def test_truncated_json_array_stream(replay_server: ReplayServer, cut: str) -> None:
    # Synthetic: a JSON-array stream whose body ends early.
    whole = json.dumps([text_chunk("Hi", finish="STOP")])
    body = {"unclosed": whole[:-1], "mid-object": whole[: len(whole) // 2], "empty": ""}[cut]
    replay_server.enqueue(200, body, {"content-type": "application/json"}, chunking="random:3")
    with pytest.raises(StreamError):
        await collect(make_adapter(replay_server), Request(model="m", messages=[Message.user("hi")]))


@pytest.mark.parametrize(
    ("error", "expected", "status"),
    [
        ({"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}, ServerError, 500),
        ({"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}, ServerError, 503),
        ({"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED"}, RateLimitError, 429),
    ],
)
@pytest.mark.parametrize("flavour", ["sse", "array"])
async def test_error_chunk_mid_stream(
    replay_server: ReplayServer, error: dict[str, Any], expected: type[Exception], status: int, flavour: str
) -> None:
    # Synthetic: Gemini reports failures after the 200 as an {"error": ...} chunk.
    if flavour == "sse":
        replay_server.enqueue(200, sse(text_chunk("Hel"), {"error": error}), SSE_HEADERS, chunking="events")
    else:
        body = json.dumps([text_chunk("Hel"), {"error": error}])
        replay_server.enqueue(200, body, {"content-type": "application/json"}, chunking="random:4")
    seen: list[StreamEvent] = []
    with pytest.raises(expected) as info:
        await collect_into(make_adapter(replay_server), Request(model="m", messages=[Message.user("hi")]), seen)
    assert getattr(info.value, "status_code", None) == status
    assert any(e.type == T.TEXT_DELTA for e in seen)


async def test_undecodable_sse_event(replay_server: ReplayServer) -> None:
    # Synthetic: garbage where a JSON chunk should be.
    replay_server.enqueue(200, sse(text_chunk("a")) + b"data: {not json\r\n\r\n", SSE_HEADERS)
    with pytest.raises(StreamError, match="undecodable"):
        await collect(make_adapter(replay_server), Request(model="m", messages=[Message.user("hi")]))


BLOCKED = {
    "promptFeedback": {
        "blockReason": "SAFETY",
        "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}],
    },
    "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8},
    "modelVersion": "gemini-2.5-flash",
}


@pytest.mark.parametrize("streaming", [False, True])
async def test_blocked_prompt(replay_server: ReplayServer, streaming: bool) -> None:
    # Synthetic: a prompt refused before generation (HTTP 200, no candidates).
    if streaming:
        replay_server.enqueue(200, sse(BLOCKED), SSE_HEADERS)
    else:
        replay_server.enqueue(200, BLOCKED)
    adapter = make_adapter(replay_server)
    request = Request(model="gemini-2.5-flash", messages=[Message.user("something dangerous")])
    with pytest.raises(ContentFilterError) as info:
        if streaming:
            await collect(adapter, request)
        else:
            await adapter.complete(request)
    assert info.value.error_code == "SAFETY" and info.value.retryable is False
    assert info.value.raw == BLOCKED


@pytest.mark.parametrize(
    ("raw", "with_call", "expected"),
    [
        ("STOP", False, "stop"),
        ("STOP", True, "tool_calls"),
        ("MAX_TOKENS", False, "length"),
        ("SAFETY", False, "content_filter"),
        ("RECITATION", False, "content_filter"),
        ("BLOCKLIST", False, "content_filter"),
        ("PROHIBITED_CONTENT", False, "content_filter"),
        ("MALFORMED_FUNCTION_CALL", False, "other"),
        ("OTHER", False, "other"),
    ],
)
async def test_finish_reasons(replay_server: ReplayServer, raw: str, with_call: bool, expected: str) -> None:
    # Synthetic bodies, one per finishReason value.
    parts: list[dict[str, Any]] = [{"text": "partial"}]
    if with_call:
        parts.append({"functionCall": {"name": "f", "args": {"a": 1}}})
    body = {"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": raw, "index": 0}]}
    replay_server.enqueue(200, body)
    replay_server.enqueue(200, sse(body), SSE_HEADERS)
    adapter = make_adapter(replay_server)
    request = Request(model="m", messages=[Message.user("hi")])
    response = await adapter.complete(request)
    streamed = (await collect(adapter, request))[-1].response
    assert streamed is not None
    for r in (response, streamed):
        assert (r.finish_reason.reason, r.finish_reason.raw) == (expected, raw)
        assert r.text == "partial"


async def test_unrepresented_parts(replay_server: ReplayServer) -> None:
    # Synthetic: code execution output has no unified content kind.
    parts = [
        {"executableCode": {"language": "PYTHON", "code": "print(2+2)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "4\n"}},
        {"text": "It is 4."},
    ]
    body = {"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}]}
    replay_server.enqueue(200, body)
    replay_server.enqueue(200, sse(body), SSE_HEADERS)
    adapter = make_adapter(replay_server)
    request = Request(
        model="m", messages=[Message.user("2+2?")], provider_options={"gemini": {"tools": [{"codeExecution": {}}]}}
    )
    response = await adapter.complete(request)
    assert response.text == "It is 4." and len(response.warnings) == 2
    events = await collect(adapter, request)
    assert [e.raw for e in events if e.type == T.PROVIDER_EVENT] == parts[:2]
    assert replay_server.requests[0].json()["tools"] == [{"codeExecution": {}}]


async def test_provider_call_id_is_used_and_echoed(replay_server: ReplayServer) -> None:
    # Synthetic: should Gemini return functionCall.id, it becomes the call id and goes back.
    call = {"functionCall": {"id": "fc-7", "name": "lookup", "args": {"q": "x"}}, "thoughtSignature": "c2ln"}
    body = {"candidates": [{"content": {"parts": [call], "role": "model"}, "finishReason": "STOP", "index": 0}]}
    replay_server.enqueue(200, body)
    adapter = make_adapter(replay_server)
    lookup = ToolDefinition("lookup", "Look up", {"type": "object", "properties": {"q": {"type": "string"}}})
    history = [Message.user("find x")]
    response = await adapter.complete(Request(model="m", messages=history, tools=[lookup]))
    assert response.tool_calls[0].id == "fc-7"
    history += [response.message, Message.tool_result("fc-7", {"found": True})]
    sent = adapter.build_body(Request(model="m", messages=history, tools=[lookup]), stream=False)
    assert sent["contents"][1]["parts"] == [
        {"functionCall": {"name": "lookup", "args": {"q": "x"}, "id": "fc-7"}, "thoughtSignature": "c2ln"}
    ]
    assert sent["contents"][2]["parts"] == [
        {"functionResponse": {"name": "lookup", "response": {"found": True}, "id": "fc-7"}}
    ]


async def test_complete_accepts_streamed_array(replay_server: ReplayServer) -> None:
    # Synthetic: a proxy answering generateContent with the streamed array.
    replay_server.enqueue(200, [text_chunk("Hel"), text_chunk("lo", finish="STOP", usage={"promptTokenCount": 3})])
    response = await make_adapter(replay_server).complete(Request(model="m", messages=[Message.user("hi")]))
    assert response.text == "Hello" and response.usage.input_tokens == 3 and response.finish_reason.reason == "stop"


# -- cancellation --------------------------------------------------------------------------------------
async def test_cancel_complete_closes_connection(replay_server: ReplayServer) -> None:
    adapter = make_adapter(replay_server)
    replay_server.enqueue(200, text_chunk("ok", finish="STOP"))
    await adapter.complete(Request(model="m", messages=[Message.user("hi")]))
    assert pool_size(adapter) == 1  # a finished call leaves its keep-alive connection in the pool

    body = json.dumps(text_chunk("slow", finish="STOP")).encode()
    replay_server.enqueue(200, body, {"content-type": "application/json"}, chunks=[body[:10], body[10:]], delay=2.0)
    task = asyncio.create_task(adapter.complete(Request(model="m", messages=[Message.user("hi")])))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool_size(adapter) == 0  # the half-read connection was closed, and the idle one reused for it
    await adapter.close()


async def test_cancel_stream_closes_connection(replay_server: ReplayServer) -> None:
    adapter = make_adapter(replay_server)
    body = sse(text_chunk("one"), text_chunk("two"), text_chunk("three", finish="STOP"))
    replay_server.enqueue(200, body, SSE_HEADERS, chunking="events", delay=0.2)
    got_first = asyncio.Event()
    seen: list[StreamEvent] = []

    async def consume() -> None:
        async for event in adapter.stream(Request(model="m", messages=[Message.user("hi")])):
            seen.append(event)
            if event.type == T.TEXT_DELTA:
                got_first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_first.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [e.delta for e in seen if e.type == T.TEXT_DELTA] == ["one"]
    assert pool_size(adapter) == 0
    await adapter.close()


# -- request side -----------------------------------------------------------------------------------------
def body_for(request: Request, **kw: Any) -> dict[str, Any]:
    return GeminiAdapter(api_key="k", **kw).build_body(request, stream=False)


def test_roles_system_developer_and_merging() -> None:
    call = ToolCallData("call_1", "read_file", {"path": "a.txt"})
    messages = [
        Message.system("Be brief."),
        Message.user("first"),
        Message.developer("Use tools."),
        Message.user("second"),
        Message.assistant([ContentPart.of_text("Reading."), ContentPart.of_tool_call(call)]),
        Message.tool_result("call_1", "hello"),
        Message.user("thanks"),
        Message.assistant("done"),
        Message.assistant("really"),
    ]
    body = body_for(Request(model="gemini-2.5-flash", messages=messages))
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}, {"text": "Use tools."}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "first"}, {"text": "second"}]},
        {
            "role": "model",
            "parts": [{"text": "Reading."}, {"functionCall": {"name": "read_file", "args": {"path": "a.txt"}}}],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "read_file", "response": {"result": "hello"}}}, {"text": "thanks"}],
        },
        {"role": "model", "parts": [{"text": "done"}, {"text": "really"}]},
    ]
    assert "tools" not in body and "generationConfig" not in body and "toolConfig" not in body


def test_tool_results_name_lookup_and_shapes() -> None:
    calls = [ToolCallData("c1", "alpha", {}), ToolCallData("c2", "beta", {}), ToolCallData("c3", "gamma", {})]
    messages = [
        Message.user("go"),
        Message.assistant([ContentPart.of_tool_call(c) for c in calls]),
        Message.tool_result("c1", "boom", is_error=True),
        Message.tool_result("c2", {"rows": [1, 2]}),
        Message.tool_result("c3", [1, 2, 3], image_data=b"\x89PNG", image_media_type="image/png"),
        Message.tool_result("not-in-history", "x", name="delta"),
    ]
    parts = body_for(Request(model="m", messages=messages))["contents"][2]["parts"]
    assert parts == [
        {"functionResponse": {"name": "alpha", "response": {"error": "boom"}}},
        {"functionResponse": {"name": "beta", "response": {"rows": [1, 2]}}},
        {"functionResponse": {"name": "gamma", "response": {"result": [1, 2, 3]}}},
        {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(b"\x89PNG").decode()}},
        {"functionResponse": {"name": "delta", "response": {"result": "x"}}},
    ]
    with pytest.raises(InvalidRequestError, match="function name"):
        body_for(Request(model="m", messages=[Message.user("go"), Message.tool_result("nowhere", "x")]))


def test_foreign_thinking_is_not_sent_and_bad_arguments_kept() -> None:
    assistant = Message.assistant(
        [
            ContentPart.of_thinking(ThinkingData("anthropic thoughts", signature="EqAnthropicSig")),
            ContentPart.of_thinking(ThinkingData("opaque", redacted=True)),
            ContentPart.of_text("answer"),
            ContentPart.of_tool_call(ToolCallData("c1", "f", '{"a": 1')),
            ContentPart.of_tool_call(ToolCallData("c2", "g", '{"b": 2}')),
        ]
    )
    parts = body_for(Request(model="m", messages=[Message.user("q"), assistant]))["contents"][1]["parts"]
    assert parts == [
        {"text": "answer"},
        {"functionCall": {"name": "f", "args": {"invalid_arguments": '{"a": 1'}}},
        {"functionCall": {"name": "g", "args": {"b": 2}}},
    ]


def test_text_signature_without_preceding_text_is_its_own_part() -> None:
    carrier = ThinkingData("", "U0lH", False, {"gemini": {"part": "text"}})
    call = ToolCallData("c1", "f", {}, provider_data={"gemini": {"thoughtSignature": "Q0FMTA=="}})
    assistant = Message.assistant([ContentPart.of_tool_call(call), ContentPart.of_thinking(carrier)])
    parts = body_for(Request(model="m", messages=[Message.user("q"), assistant]))["contents"][1]["parts"]
    assert parts == [
        {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "Q0FMTA=="},
        {"text": "", "thoughtSignature": "U0lH"},
    ]


def test_system_message_must_be_text() -> None:
    msg = Message(Role.SYSTEM, [ContentPart.of_image(ImageData(url="https://x/y.png"))])
    with pytest.raises(InvalidRequestError, match="only text"):
        body_for(Request(model="m", messages=[msg, Message.user("hi")]))


def test_images_by_url_bytes_and_local_path(tmp_path: Path) -> None:
    picture = tmp_path / "shot.jpg"
    picture.write_bytes(b"\xff\xd8\xff\xe0jpeg")
    parts = [
        ContentPart.of_text("compare"),
        ContentPart.of_image(ImageData(url="https://example.com/cat.png?size=2")),
        ContentPart.of_image(ImageData(url="gs://bucket/dog", media_type="image/webp")),
        ContentPart.of_image(ImageData(data=b"GIF89a", media_type="image/gif")),
        ContentPart.of_image(ImageData(url=str(picture))),
    ]
    sent = body_for(Request(model="m", messages=[Message.user(parts)]))["contents"][0]["parts"]
    assert sent == [
        {"text": "compare"},
        {"fileData": {"fileUri": "https://example.com/cat.png?size=2", "mimeType": "image/png"}},
        {"fileData": {"fileUri": "gs://bucket/dog", "mimeType": "image/webp"}},
        {"inlineData": {"mimeType": "image/gif", "data": base64.b64encode(b"GIF89a").decode()}},
        {"inlineData": {"mimeType": "image/jpeg", "data": base64.b64encode(b"\xff\xd8\xff\xe0jpeg").decode()}},
    ]
    with pytest.raises(InvalidRequestError, match="cannot read"):
        body_for(
            Request(model="m", messages=[Message.user([ContentPart.of_image(ImageData(url=str(tmp_path / "no.png")))])])
        )


def test_tool_schema_conversion() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "properties": {
            "name": {"type": ["string", "null"], "format": "email", "description": "who"},
            "kind": {"const": "circle"},
            "when": {"type": "string", "format": "date-time"},
            "size": {"type": "integer", "enum": [1, 2], "exclusiveMinimum": 0},
            "center": {"$ref": "#/$defs/Point"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "shape": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["name", "ghost"],
    }
    converted = to_gemini_schema(schema)
    assert converted == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "nullable": True, "description": "who"},
            "kind": {"type": "string", "enum": ["circle"]},
            "when": {"type": "string", "format": "date-time"},
            "size": {"type": "integer", "description": "One of: 1, 2"},
            "center": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "shape": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "maybe": {"type": "string", "nullable": True},
        },
        "required": ["name"],
    }
    assert "additionalProperties" in schema  # the caller's schema is untouched

    recursive = {"type": "object", "properties": {"child": {"$ref": "#"}}, "$defs": {}}
    assert to_gemini_schema(recursive)["properties"]["child"]["type"] == "object"
    node = {"$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}, "$ref": "#/$defs/N"}
    nested = to_gemini_schema(node)
    assert nested["properties"]["next"] == {"type": "object", "description": "(see N)"}

    tool = ToolDefinition("shapes", "Draw", schema)
    body = body_for(Request(model="m", messages=[Message.user("x")], tools=[tool]))
    assert body["tools"] == [
        {"functionDeclarations": [{"name": "shapes", "description": "Draw", "parameters": converted}]}
    ]
    raw = body_for(
        Request(
            model="m",
            messages=[Message.user("x")],
            tools=[tool],
            provider_options={"gemini": {"raw_json_schema": True}},
        )
    )
    assert raw["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == schema


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (ToolChoice.auto(), {"functionCallingConfig": {"mode": "AUTO"}}),
        (ToolChoice.none(), {"functionCallingConfig": {"mode": "NONE"}}),
        (ToolChoice.required(), {"functionCallingConfig": {"mode": "ANY"}}),
        (
            ToolChoice.named("multiply"),
            {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["multiply"]}},
        ),
        (None, None),
    ],
)
def test_tool_choice_modes(choice: ToolChoice | None, expected: dict[str, Any] | None) -> None:
    body = body_for(Request(model="m", messages=[Message.user("x")], tools=[MULTIPLY], tool_choice=choice))
    assert body.get("toolConfig") == expected
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "multiply"  # NONE keeps the tools


def test_tool_choice_errors() -> None:
    adapter = GeminiAdapter(api_key="k")
    assert all(adapter.supports_tool_choice(m) for m in ("auto", "none", "required", "named"))
    assert not adapter.supports_tool_choice("sometimes")
    with pytest.raises(InvalidRequestError, match="not among"):
        body_for(
            Request(model="m", messages=[Message.user("x")], tools=[MULTIPLY], tool_choice=ToolChoice.named("nope"))
        )
    with pytest.raises(InvalidRequestError, match="at least one tool"):
        body_for(Request(model="m", messages=[Message.user("x")], tool_choice=ToolChoice.required()))
    odd = ToolChoice.auto()
    odd.mode = "sometimes"
    with pytest.raises(UnsupportedToolChoiceError):
        body_for(Request(model="m", messages=[Message.user("x")], tools=[MULTIPLY], tool_choice=odd))
    tool_config = body_for(Request(model="m", messages=[Message.user("x")], tool_choice=ToolChoice.auto()))
    assert "toolConfig" not in tool_config


@pytest.mark.parametrize(
    ("model", "effort", "expected"),
    [
        ("gemini-2.5-flash", "low", {"thinkingBudget": 1024}),
        ("gemini-2.5-pro", "medium", {"thinkingBudget": 8192}),
        ("gemini-2.5-flash", "high", {"thinkingBudget": 24576}),
        ("gemini-2.5-flash", "none", {"thinkingBudget": 0}),
        ("gemini-3-pro-preview", "low", {"thinkingLevel": "LOW"}),
        ("models/gemini-3-flash-preview", "minimal", {"thinkingLevel": "MINIMAL"}),
        ("gemini-3.1-pro", "HIGH", {"thinkingLevel": "HIGH"}),
        ("gemini-flash-latest", "medium", {"thinkingBudget": 8192}),
    ],
)
def test_reasoning_effort(model: str, effort: str, expected: dict[str, Any]) -> None:
    body = body_for(Request(model=model, messages=[Message.user("x")], reasoning_effort=effort))
    assert body["generationConfig"] == {"thinkingConfig": expected}


def test_reasoning_effort_rejects_unknown_value() -> None:
    with pytest.raises(InvalidRequestError, match="reasoning_effort"):
        body_for(Request(model="gemini-2.5-flash", messages=[Message.user("x")], reasoning_effort="extreme"))


def test_generation_parameters_and_response_format() -> None:
    body = body_for(
        Request(
            model="m",
            messages=[Message.user("x")],
            temperature=0.2,
            top_p=0.9,
            max_tokens=256,
            stop_sequences=["END"],
            response_format=ResponseFormat("json"),
        )
    )
    assert body["generationConfig"] == {
        "temperature": 0.2,
        "topP": 0.9,
        "maxOutputTokens": 256,
        "stopSequences": ["END"],
        "responseMimeType": "application/json",
    }
    fmt = ResponseFormat("json_schema", ADDITION_SCHEMA, strict=True)
    schema_body = body_for(Request(model="m", messages=[Message.user("x")], response_format=fmt))
    assert schema_body["generationConfig"]["responseSchema"] == to_gemini_schema(ADDITION_SCHEMA)
    raw = body_for(
        Request(
            model="m",
            messages=[Message.user("x")],
            response_format=fmt,
            provider_options={"gemini": {"raw_json_schema": True}},
        )
    )
    assert raw["generationConfig"]["responseJsonSchema"] == ADDITION_SCHEMA
    assert "responseSchema" not in raw["generationConfig"]
    text = body_for(Request(model="m", messages=[Message.user("x")], response_format=ResponseFormat("text")))
    assert "generationConfig" not in text


def test_provider_options() -> None:
    options = {
        "gemini": {
            "safety_settings": SAFETY_OFF,
            "cachedContent": "cachedContents/abc",
            "tools": [{"googleSearch": {}}],
            "includeThoughts": True,
            "thinkingConfig": {"thinkingBudget": 2048},
            "generationConfig": {"candidateCount": 1, "temperature": 0.7},
            "toolConfig": {"retrievalConfig": {"languageCode": "en"}},
            "labels": {"team": "ra"},
        },
        "openai": {"ignored": True},
    }
    body = body_for(
        Request(
            model="gemini-2.5-flash",
            messages=[Message.user("news?")],
            tools=[MULTIPLY],
            tool_choice=ToolChoice.auto(),
            temperature=0.1,
            reasoning_effort="low",
            provider_options=options,
        )
    )
    assert body["safetySettings"] == SAFETY_OFF
    assert body["cachedContent"] == "cachedContents/abc"
    assert body["tools"][1] == {"googleSearch": {}} and "functionDeclarations" in body["tools"][0]
    assert body["generationConfig"] == {
        "temperature": 0.7,
        "candidateCount": 1,
        "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True},
    }
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "AUTO"},
        "retrievalConfig": {"languageCode": "en"},
    }
    assert body["labels"] == {"team": "ra"}
    assert "ignored" not in json.dumps(body)
    with pytest.raises(InvalidRequestError, match="list of tool objects"):
        body_for(
            Request(
                model="m", messages=[Message.user("x")], provider_options={"gemini": {"tools": {"googleSearch": {}}}}
            )
        )


async def test_url_header_and_base_url_variants(replay_server: ReplayServer) -> None:
    adapter = GeminiAdapter(api_key="secret", base_url=f"{replay_server.base_url}/v1beta/")
    replay_server.enqueue(200, text_chunk("ok", finish="STOP"))
    await adapter.complete(Request(model="models/gemini-2.5-flash", messages=[Message.user("hi")]))
    sent = replay_server.requests[0]
    assert sent.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent.headers["x-goog-api-key"] == "secret" and "key" not in sent.query
    assert GeminiAdapter().url("gemini-2.5-flash", stream=True) == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert GeminiAdapter(api_version="v1").url("m", stream=False).endswith("/v1/models/m:generateContent")
    assert "x-goog-api-key" not in GeminiAdapter().headers()
    assert GeminiAdapter(api_key="a", default_headers={"X-Goog-Api-Key": "b"}).headers()["X-Goog-Api-Key"] == "b"
    await adapter.close()


# -- the incremental JSON array reader ----------------------------------------------------------------
def test_json_array_stream_handles_any_split() -> None:
    items = [
        {"text": 'brace } and [bracket] in "quotes" \\ backslash'},
        {"text": "unicode: héllo ✓ 🐍", "nested": {"a": [1, {"b": "}"}]}},
        {"empty": {}},
    ]
    data = ("[\n" + ",\n".join(json.dumps(i, ensure_ascii=False) for i in items) + "\n]").encode()
    for size in (1, 2, 3, 5, 8, 13, len(data)):
        parser = JSONArrayStream()
        out: list[Any] = []
        for i in range(0, len(data), size):
            out.extend(parser.feed(data[i : i + size]))
        out.extend(parser.close())
        assert out == items, size


def test_json_array_stream_rejects_garbage() -> None:
    parser = JSONArrayStream()
    with pytest.raises(StreamError, match="unexpected"):
        parser.feed(b"[1, 2]")
    parser = JSONArrayStream()
    parser.feed(b'[{"a": 1}')
    with pytest.raises(StreamError, match="never closed"):
        parser.close()
