"""Cross-provider proof of the unified-llm-spec Definition of Done (section 8).

The per-adapter suites prove each adapter against recorded traffic. This file sends the *same*
unified calls through all four real adapters (OpenAI Responses, Anthropic Messages, Gemini, and
OpenAI-compatible Chat Completions) over real HTTP on 127.0.0.1, with the server answering in each
provider's own wire format, and checks that the high-level API behaves identically on top of them:
request translation, streaming shape, the tool loop, structured output, usage, middleware, retries,
errors and cancellation.

Every answer here is synthetic (scripted in the provider's documented wire shape); the recorded
cassettes are exercised by the per-adapter suites.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import importlib
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from ra.llm import client as client_module
from ra.llm.client import Client, Middleware, set_default_client
from ra.llm.errors import (
    AbortError,
    AccessDeniedError,
    AuthenticationError,
    InvalidRequestError,
    NoObjectGeneratedError,
    NotFoundError,
    RateLimitError,
    StreamError,
)
from ra.llm.generation import (
    AbortController,
    generate,
    generate_object,
    stream,
    stream_object,
)
from ra.llm.http import AdapterTimeout
from ra.llm.providers.anthropic import AnthropicAdapter
from ra.llm.providers.gemini import GeminiAdapter
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.llm.providers.openai_responses import OpenAIAdapter
from ra.llm.retrying import RetryPolicy
from ra.llm.types import (
    AudioData,
    ContentPart,
    DocumentData,
    ImageData,
    Message,
    Request,
    Response,
    StreamEvent,
    StreamEventType,
    Tool,
    ToolCallData,
    ToolChoice,
    ToolDefinition,
    Usage,
)
from tests.support.replay import ReplayServer

T = StreamEventType
retry_module = importlib.import_module("ra.llm.retrying")
TIMEOUT = AdapterTimeout(connect=2, request=10, stream_read=5)
Call = tuple[str, str, dict[str, Any]]  # (id, name, arguments)

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR-inline"
LOCAL_PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR-local"
IMAGE_URL = "https://example.com/cat.png"
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def sse(events: list[tuple[str | None, Any]]) -> list[bytes]:
    """One SSE event per chunk, as providers flush them."""
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {payload}\n\n".encode())
    return out


def halves(text: str) -> list[str]:
    mid = len(text) // 2
    return [text[:mid], text[mid:]]


# ==================================================================================================
# Each provider's wire format
# ==================================================================================================


class Wire:
    """How one provider is reached and how it answers."""

    name: str
    model: str

    def adapter(self, base_url: str) -> Any:
        raise NotImplementedError

    def path(self, *, stream: bool) -> str:
        raise NotImplementedError

    def text(self, text: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def calls(self, calls: list[Call]) -> dict[str, Any]:
        raise NotImplementedError

    def text_events(self, pieces: list[str]) -> list[bytes]:
        raise NotImplementedError

    def call_events(self, calls: list[Call]) -> list[bytes]:
        raise NotImplementedError

    def object_answer(self, value: Any) -> dict[str, Any]:
        return self.text(json.dumps(value))

    def object_events(self, pieces: list[str]) -> list[bytes]:
        return self.text_events(pieces)

    def tool_results(self, body: dict[str, Any]) -> list[tuple[str, Any]]:
        """(call id - or function name for Gemini - , content) of each tool result sent."""
        raise NotImplementedError

    def auth_error(self) -> tuple[int, dict[str, Any]]:
        return 401, {
            "error": {
                "message": "Incorrect API key provided: sk-bad.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }

    def rate_limit_error(self) -> tuple[int, dict[str, Any]]:
        return 429, {
            "error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}
        }

    def not_found_error(self) -> tuple[int, dict[str, Any]]:
        return 404, {
            "error": {
                "message": "The model `nonexistent-model-xyz` does not exist",
                "type": "invalid_request_error",
                "code": "model_not_found",
            }
        }

    def forbidden_error(self) -> tuple[int, dict[str, Any]]:
        message = "You are not allowed to sample from this model"
        return 403, {"error": {"message": message, "type": "invalid_request_error", "code": None}}

    def temperature(self, body: dict[str, Any]) -> Any:
        return body.get("temperature")

    def call_key(self, call: Call) -> str:
        """What identifies ``call``'s result on this wire."""
        return call[0]


class OpenAIWire(Wire):
    name = "openai"
    model = "gpt-5.2"

    def adapter(self, base_url: str) -> OpenAIAdapter:
        return OpenAIAdapter(api_key="sk-test", base_url=base_url, timeout=TIMEOUT)

    def path(self, *, stream: bool) -> str:
        return "/responses"

    def _response(self, output: list[Any], usage: dict[str, Any] | None = None, status: str = "completed") -> Any:
        return {
            "id": "resp_1",
            "object": "response",
            "status": status,
            "model": self.model,
            "output": output,
            "usage": usage
            or {
                "input_tokens": 12,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 6,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 18,
            },
        }

    def _message(self, text: str) -> dict[str, Any]:
        content = [{"type": "output_text", "text": text, "annotations": []}]
        return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": content}

    def _call(self, i: int, call: Call, arguments: str | None = None) -> dict[str, Any]:
        args = json.dumps(call[2]) if arguments is None else arguments
        return {"type": "function_call", "id": f"fc_{i}", "call_id": call[0], "name": call[1], "arguments": args}

    def _created(self) -> tuple[str, Any]:
        return "response.created", {"type": "response.created", "response": self._response([], {}, "in_progress")}

    def text(self, text: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._response([self._message(text)], usage)

    def calls(self, calls: list[Call]) -> dict[str, Any]:
        return self._response([self._call(i, c) for i, c in enumerate(calls)])

    def text_events(self, pieces: list[str]) -> list[bytes]:
        full = "".join(pieces)
        item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
        events = [
            self._created(),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
        ]
        for piece in pieces:
            delta = {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": piece}
            events.append(("response.output_text.delta", delta))
        done = {"type": "response.output_item.done", "output_index": 0, "item": self._message(full)}
        events.append(("response.output_item.done", done))
        events.append(("response.completed", {"type": "response.completed", "response": self.text(full)}))
        return sse(events)

    def call_events(self, calls: list[Call]) -> list[bytes]:
        events = [self._created()]
        for i, call in enumerate(calls):
            raw = json.dumps(call[2])
            added = {"type": "response.output_item.added", "output_index": i, "item": self._call(i, call, "")}
            events.append(("response.output_item.added", added))
            for piece in halves(raw):
                kind = "response.function_call_arguments.delta"
                events.append((kind, {"type": kind, "item_id": f"fc_{i}", "output_index": i, "delta": piece}))
            kind = "response.function_call_arguments.done"
            events.append((kind, {"type": kind, "item_id": f"fc_{i}", "output_index": i, "arguments": raw}))
            done = {"type": "response.output_item.done", "output_index": i, "item": self._call(i, call)}
            events.append(("response.output_item.done", done))
        events.append(("response.completed", {"type": "response.completed", "response": self.calls(calls)}))
        return sse(events)

    def tool_results(self, body: dict[str, Any]) -> list[tuple[str, Any]]:
        return [(i["call_id"], i["output"]) for i in body["input"] if i["type"] == "function_call_output"]


class AnthropicWire(Wire):
    name = "anthropic"
    model = "claude-opus-4-6"

    def adapter(self, base_url: str) -> AnthropicAdapter:
        return AnthropicAdapter(api_key="ak-test", base_url=base_url, timeout=TIMEOUT)

    def path(self, *, stream: bool) -> str:
        return "/v1/messages"

    def _message(self, content: list[Any], stop: str | None, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage or {"input_tokens": 12, "output_tokens": 6},
        }

    def text(self, text: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._message([{"type": "text", "text": text}], "end_turn", usage)

    def calls(self, calls: list[Call]) -> dict[str, Any]:
        blocks = [{"type": "tool_use", "id": c[0], "name": c[1], "input": c[2]} for c in calls]
        return self._message(blocks, "tool_use")

    def object_answer(self, value: Any) -> dict[str, Any]:
        return self._message(
            [{"type": "tool_use", "id": "toolu_json", "name": "json_output", "input": value}], "tool_use"
        )

    def _events(self, blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]], stop: str) -> list[bytes]:
        start = self._message([], None, {"input_tokens": 12, "output_tokens": 1})
        events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start", "message": start})]
        for index, (block, deltas) in enumerate(blocks):
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            )
            events.extend(
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas
            )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
        events.append(("message_delta", {**delta, "usage": {"output_tokens": 6}}))
        events.append(("message_stop", {"type": "message_stop"}))
        return sse(events)

    def text_events(self, pieces: list[str]) -> list[bytes]:
        deltas = [{"type": "text_delta", "text": p} for p in pieces]
        return self._events([({"type": "text", "text": ""}, deltas)], "end_turn")

    def call_events(self, calls: list[Call]) -> list[bytes]:
        blocks = [
            (
                {"type": "tool_use", "id": c[0], "name": c[1], "input": {}},
                [{"type": "input_json_delta", "partial_json": p} for p in halves(json.dumps(c[2]))],
            )
            for c in calls
        ]
        return self._events(blocks, "tool_use")

    def object_events(self, pieces: list[str]) -> list[bytes]:
        block = {"type": "tool_use", "id": "toolu_json", "name": "json_output", "input": {}}
        return self._events([(block, [{"type": "input_json_delta", "partial_json": p} for p in pieces])], "tool_use")

    def tool_results(self, body: dict[str, Any]) -> list[tuple[str, Any]]:
        return [
            (b["tool_use_id"], b["content"])
            for m in body["messages"]
            if m["role"] == "user"
            for b in m["content"]
            if b["type"] == "tool_result"
        ]

    def auth_error(self) -> tuple[int, dict[str, Any]]:
        return 401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}

    def rate_limit_error(self) -> tuple[int, dict[str, Any]]:
        message = "Number of request tokens has exceeded your per-minute rate limit"
        return 429, {"type": "error", "error": {"type": "rate_limit_error", "message": message}}

    def not_found_error(self) -> tuple[int, dict[str, Any]]:
        return 404, {"type": "error", "error": {"type": "not_found_error", "message": "model: nonexistent-model-xyz"}}

    def forbidden_error(self) -> tuple[int, dict[str, Any]]:
        message = "Your API key does not have permission to use the specified resource."
        return 403, {"type": "error", "error": {"type": "permission_error", "message": message}}


class GeminiWire(Wire):
    name = "gemini"
    model = "gemini-3-flash-preview"

    def adapter(self, base_url: str) -> GeminiAdapter:
        return GeminiAdapter(api_key="g-test", base_url=base_url, timeout=TIMEOUT)

    def path(self, *, stream: bool) -> str:
        method = "streamGenerateContent" if stream else "generateContent"
        return f"/v1beta/models/{self.model}:{method}"

    def _chunk(self, parts: list[Any], finish: str | None = None, usage: dict[str, Any] | None = None) -> Any:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": self.model, "responseId": "resp-g1"}
        if finish is not None:
            candidate["finishReason"] = finish
            chunk["usageMetadata"] = usage or {"promptTokenCount": 12, "candidatesTokenCount": 6, "totalTokenCount": 18}
        return chunk

    def text(self, text: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._chunk([{"text": text}], "STOP", usage)

    def calls(self, calls: list[Call]) -> dict[str, Any]:
        return self._chunk([{"functionCall": {"name": c[1], "args": c[2]}} for c in calls], "STOP")

    def text_events(self, pieces: list[str]) -> list[bytes]:
        chunks = [self._chunk([{"text": p}]) for p in pieces[:-1]]
        chunks.append(self._chunk([{"text": pieces[-1]}], "STOP"))
        return sse([(None, c) for c in chunks])

    def call_events(self, calls: list[Call]) -> list[bytes]:
        return sse([(None, self.calls(calls))])

    def tool_results(self, body: dict[str, Any]) -> list[tuple[str, Any]]:
        return [
            (p["functionResponse"]["name"], p["functionResponse"]["response"])
            for c in body["contents"]
            if c["role"] == "user"
            for p in c["parts"]
            if "functionResponse" in p
        ]

    def call_key(self, call: Call) -> str:
        return call[1]  # Gemini answers by function name; it assigns no call ids

    def auth_error(self) -> tuple[int, dict[str, Any]]:
        # Gemini's real answer to a bad key: 400 INVALID_ARGUMENT with reason API_KEY_INVALID.
        return 400, {
            "error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}],
            }
        }

    def rate_limit_error(self) -> tuple[int, dict[str, Any]]:
        message = "Resource has been exhausted (e.g. check quota)."
        return 429, {"error": {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED"}}

    def not_found_error(self) -> tuple[int, dict[str, Any]]:
        message = "models/nonexistent-model-xyz is not found for API version v1beta"
        return 404, {"error": {"code": 404, "message": message, "status": "NOT_FOUND"}}

    def forbidden_error(self) -> tuple[int, dict[str, Any]]:
        message = "Permission denied on resource project demo."
        return 403, {"error": {"code": 403, "message": message, "status": "PERMISSION_DENIED"}}

    def temperature(self, body: dict[str, Any]) -> Any:
        return body.get("generationConfig", {}).get("temperature")


class ChatWire(Wire):
    name = "openai-compatible"
    model = "qwen3-coder"

    def adapter(self, base_url: str) -> OpenAICompatibleAdapter:
        return OpenAICompatibleAdapter(api_key="local-key", base_url=f"{base_url}/v1", timeout=TIMEOUT)

    def path(self, *, stream: bool) -> str:
        return "/v1/chat/completions"

    def _completion(self, message: dict[str, Any], finish: str, usage: dict[str, Any] | None = None) -> Any:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage or {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
        }

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> Any:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": self.model,
            "choices": [choice],
        }

    def _tail(self, finish: str) -> list[tuple[str | None, Any]]:
        usage = {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18}
        return [
            (None, self._chunk({}, finish)),
            (None, {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": usage}),
            (None, "[DONE]"),
        ]

    def text(self, text: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._completion({"role": "assistant", "content": text}, "stop", usage)

    def calls(self, calls: list[Call]) -> dict[str, Any]:
        wire = [
            {"id": c[0], "type": "function", "function": {"name": c[1], "arguments": json.dumps(c[2])}} for c in calls
        ]
        return self._completion({"role": "assistant", "content": None, "tool_calls": wire}, "tool_calls")

    def text_events(self, pieces: list[str]) -> list[bytes]:
        events: list[tuple[str | None, Any]] = [(None, self._chunk({"role": "assistant", "content": pieces[0]}))]
        events += [(None, self._chunk({"content": p})) for p in pieces[1:]]
        return sse(events + self._tail("stop"))

    def call_events(self, calls: list[Call]) -> list[bytes]:
        events: list[tuple[str | None, Any]] = []
        for i, (cid, name, args) in enumerate(calls):
            head = {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
            events.append((None, self._chunk({"tool_calls": [head]})))
            events.extend(
                (None, self._chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
                for piece in halves(json.dumps(args))
            )
        return sse(events + self._tail("tool_calls"))

    def tool_results(self, body: dict[str, Any]) -> list[tuple[str, Any]]:
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]


WIRES = [OpenAIWire(), AnthropicWire(), GeminiWire(), ChatWire()]


@pytest.fixture(params=WIRES, ids=[w.name for w in WIRES])
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param


@pytest.fixture
async def client(replay_server: ReplayServer, wire: Wire) -> AsyncIterator[Client]:
    c = Client(providers={wire.name: wire.adapter(replay_server.base_url)})
    yield c
    await c.close()


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record retry delays instead of sleeping them."""
    delays: list[float] = []

    async def fake_sleep(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(retry_module, "_sleep", fake_sleep)
    return delays


def answer(server: ReplayServer, body: dict[str, Any]) -> None:
    server.enqueue(200, body)


def answer_stream(server: ReplayServer, events: list[bytes], **kwargs: Any) -> None:
    server.enqueue(200, b"".join(events), {"content-type": "text/event-stream"}, chunks=events, **kwargs)


def sent(server: ReplayServer, index: int = -1) -> dict[str, Any]:
    return server.requests[index].json()


def strip_cache_control(value: Any) -> Any:
    """Anthropic bodies carry automatic cache breakpoints; comparisons ignore them."""
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


# ==================================================================================================
# One unified request, four native bodies
# ==================================================================================================


def rich_messages(local_image: Path) -> list[Message]:
    """System + developer + multimodal user (inline, URL and local-path images) + an assistant
    tool call + its result + a follow-up user turn: every role and the common content kinds."""
    return [
        Message.system("You are terse."),
        Message.developer("Prefer metric units."),
        Message.user(
            [
                ContentPart.of_text("What is in these pictures?"),
                ContentPart.of_image(ImageData(data=PNG, media_type="image/png")),
                ContentPart.of_image(ImageData(url=IMAGE_URL)),
                ContentPart.of_image(ImageData(url=str(local_image))),
            ]
        ),
        Message.assistant(
            [
                ContentPart.of_text("Let me check the weather."),
                ContentPart.of_tool_call(ToolCallData("call_w1", "get_weather", {"city": "Paris"})),
            ]
        ),
        Message.tool_result("call_w1", "18C and sunny", name="get_weather"),
        Message.user("Thanks. Anything else?"),
    ]


WEATHER = ToolDefinition("get_weather", "Current weather for a city", WEATHER_SCHEMA)


def expected_body(wire: Wire) -> dict[str, Any]:
    """The native translation of :func:`rich_messages` + WEATHER + tool_choice auto."""
    if isinstance(wire, OpenAIWire):
        return {
            "instructions": "You are terse.",
            "input": [
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "Prefer metric units."}],
                },
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is in these pictures?"},
                        {"type": "input_image", "image_url": f"data:image/png;base64,{b64(PNG)}", "detail": "auto"},
                        {"type": "input_image", "image_url": IMAGE_URL, "detail": "auto"},
                        {
                            "type": "input_image",
                            "image_url": f"data:image/png;base64,{b64(LOCAL_PNG)}",
                            "detail": "auto",
                        },
                    ],
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Let me check the weather."}],
                },
                {
                    "type": "function_call",
                    "call_id": "call_w1",
                    "name": "get_weather",
                    "arguments": '{"city": "Paris"}',
                },
                {"type": "function_call_output", "call_id": "call_w1", "output": "18C and sunny"},
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Thanks. Anything else?"}],
                },
            ],
            "tools": [
                {
                    "type": "function",
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parameters": WEATHER_SCHEMA,
                    "strict": False,
                }
            ],
            "tool_choice": "auto",
        }
    if isinstance(wire, AnthropicWire):
        return {
            "system": [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Prefer metric units."}],
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in these pictures?"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
                        {"type": "image", "source": {"type": "url", "url": IMAGE_URL}},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": b64(LOCAL_PNG)},
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Let me check the weather."},
                        {"type": "tool_use", "id": "call_w1", "name": "get_weather", "input": {"city": "Paris"}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "call_w1", "content": "18C and sunny"},
                        {"type": "text", "text": "Thanks. Anything else?"},
                    ],
                },
            ],
            "tools": [
                {"name": "get_weather", "description": "Current weather for a city", "input_schema": WEATHER_SCHEMA}
            ],
            "tool_choice": {"type": "auto"},
        }
    if isinstance(wire, GeminiWire):
        return {
            "systemInstruction": {"parts": [{"text": "You are terse."}, {"text": "Prefer metric units."}]},
            "contents": [
                {
                    "role": "user",
                    "parts": [
                        {"text": "What is in these pictures?"},
                        {"inlineData": {"mimeType": "image/png", "data": b64(PNG)}},
                        {"fileData": {"fileUri": IMAGE_URL, "mimeType": "image/png"}},
                        {"inlineData": {"mimeType": "image/png", "data": b64(LOCAL_PNG)}},
                    ],
                },
                {
                    "role": "model",
                    "parts": [
                        {"text": "Let me check the weather."},
                        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"name": "get_weather", "response": {"result": "18C and sunny"}}},
                        {"text": "Thanks. Anything else?"},
                    ],
                },
            ],
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": "get_weather",
                            "description": "Current weather for a city",
                            "parameters": WEATHER_SCHEMA,
                        }
                    ]
                }
            ],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        }
    return {
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "system", "content": "Prefer metric units."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these pictures?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}},
                    {"type": "image_url", "image_url": {"url": IMAGE_URL}},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(LOCAL_PNG)}"}},
                ],
            },
            {
                "role": "assistant",
                "content": "Let me check the weather.",
                "tool_calls": [
                    {
                        "id": "call_w1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_w1", "content": "18C and sunny"},
            {"role": "user", "content": "Thanks. Anything else?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parameters": WEATHER_SCHEMA,
                },
            }
        ],
        "tool_choice": "auto",
    }


@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
async def test_one_unified_request_becomes_each_native_body(
    wire: Wire, client: Client, replay_server: ReplayServer, tmp_path: Path, streaming: bool
) -> None:
    local = tmp_path / "shot.png"
    local.write_bytes(LOCAL_PNG)
    request = Request(
        model=wire.model,
        messages=rich_messages(local),
        provider=wire.name,
        tools=[WEATHER],
        tool_choice=ToolChoice.auto(),
    )
    if streaming:
        answer_stream(replay_server, wire.text_events(["Nothing ", "else."]))
        events = [e async for e in client.stream(request)]
        response = events[-1].response
        assert events[-1].type == T.FINISH and response is not None
    else:
        answer(replay_server, wire.text("Nothing else."))
        response = await client.complete(request)
    assert response.text == "Nothing else." and response.finish_reason.reason == "stop"
    assert response.provider == wire.name and response.usage.input_tokens > 0

    got = replay_server.requests[0]
    assert got.path == wire.path(stream=streaming)
    body = got.json()
    expected = expected_body(wire)
    assert strip_cache_control({k: body.get(k) for k in expected}) == expected
    if isinstance(wire, AnthropicWire):
        assert body["max_tokens"] > 0  # required by the Messages API
        assert "prompt-caching-2024-07-31" in got.headers["anthropic-beta"]  # automatic breakpoints
    if isinstance(wire, GeminiWire):
        assert got.query.get("alt") == (["sse"] if streaming else None)


# ==================================================================================================
# Simple generation and streaming shape
# ==================================================================================================


async def test_generate_simple_text(wire: Wire, client: Client, replay_server: ReplayServer) -> None:
    answer(replay_server, wire.text("Hello there."))
    result = await generate(wire.model, "Say hello in one sentence.", max_tokens=100, provider=wire.name, client=client)
    assert result.text == "Hello there."
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.finish_reason.reason == "stop" and len(result.steps) == 1


async def test_stream_start_delta_end_and_finish(wire: Wire, client: Client, replay_server: ReplayServer) -> None:
    pieces = ["Autumn ", "leaves ", "fall, caf\u00e9 \U0001f342"]
    answer_stream(replay_server, wire.text_events(pieces))
    result = stream(wire.model, "Write a haiku.", provider=wire.name, client=client)
    events = [e async for e in result]
    types = [e.type for e in events]
    assert types[0] == T.STREAM_START and types[-1] == T.FINISH
    deltas = [e.delta for e in events if e.type == T.TEXT_DELTA]
    assert "".join(deltas) == "".join(pieces) == (await result.response()).text
    first_delta = types.index(T.TEXT_DELTA)
    assert types.index(T.TEXT_START) < first_delta
    assert max(i for i, t in enumerate(types) if t == T.TEXT_DELTA) < types.index(T.TEXT_END) < types.index(T.FINISH)
    finish = events[-1]
    assert finish.finish_reason is not None and finish.finish_reason.reason == "stop"
    assert finish.usage is not None and finish.usage.output_tokens > 0
    assert finish.response is not None and finish.response.provider == wire.name


# ==================================================================================================
# Tool loop over each real adapter
# ==================================================================================================


async def test_generate_with_an_active_tool(wire: Wire, client: Client, replay_server: ReplayServer) -> None:
    seen: list[dict[str, Any]] = []

    def get_weather(city: str) -> str:
        seen.append({"city": city})
        return f"{city}: 18C"

    tool = Tool("get_weather", "Current weather for a city", WEATHER_SCHEMA, execute=get_weather)
    call: Call = ("call_a1", "get_weather", {"city": "Paris"})
    answer(replay_server, wire.calls([call]))
    answer(replay_server, wire.text("It is 18C in Paris."))
    result = await generate(wire.model, "Weather in Paris?", tools=[tool], provider=wire.name, client=client)

    assert seen == [{"city": "Paris"}]
    assert result.text == "It is 18C in Paris." and len(result.steps) == 2
    first = result.steps[0]
    assert [c.name for c in first.tool_calls] == ["get_weather"] and first.tool_calls[0].arguments == {"city": "Paris"}
    assert [r.content for r in first.tool_results] == ["Paris: 18C"] and not first.tool_results[0].is_error
    assert first.finish_reason.reason == "tool_calls"
    assert result.total_usage == first.usage + result.steps[1].usage
    assert result.total_usage.input_tokens == 24
    # The continuation carries the call and its result in this provider's format.
    results = wire.tool_results(sent(replay_server, 1))
    assert len(results) == 1 and results[0][0] in (wire.call_key(call), first.tool_calls[0].id)
    assert "Paris: 18C" in json.dumps(results[0][1])


async def test_parallel_tool_calls_run_concurrently_and_return_together(
    wire: Wire, client: Client, replay_server: ReplayServer
) -> None:
    running = 0
    both = asyncio.Event()

    async def get_weather(city: str) -> str:
        nonlocal running
        running += 1
        if running == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 2)  # times out unless both calls run at once
        return f"{city}: mild"

    tool = Tool("get_weather", "Current weather for a city", WEATHER_SCHEMA, execute=get_weather)
    calls: list[Call] = [
        ("call_sf", "get_weather", {"city": "San Francisco"}),
        ("call_ny", "get_weather", {"city": "New York"}),
    ]
    answer(replay_server, wire.calls(calls))
    answer(replay_server, wire.text("San Francisco and New York are both mild."))
    result = await generate(
        wire.model, "Weather in SF and NY?", tools=[tool], max_tool_rounds=3, provider=wire.name, client=client
    )

    assert "San Francisco" in result.text and "New York" in result.text and len(result.steps) >= 2
    assert [r.is_error for r in result.steps[0].tool_results] == [False, False]
    assert len(replay_server.requests) == 2  # all results in one continuation
    results = wire.tool_results(sent(replay_server, 1))
    assert ["mild" in json.dumps(c) for _, c in results] == [True, True]
    # In call order, each answering its own call.
    assert ["San Francisco" in json.dumps(results[0][1]), "New York" in json.dumps(results[1][1])] == [True, True]
    keys = [k for k, _ in results]
    if not isinstance(wire, GeminiWire):
        assert keys == ["call_sf", "call_ny"]


async def test_multi_step_tool_loop_of_three_rounds(wire: Wire, client: Client, replay_server: ReplayServer) -> None:
    log: list[int] = []

    def step(n: int) -> str:
        log.append(n)
        return f"done {n}"

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    tool = Tool("step", "Run one step", schema, execute=step)
    for n in (1, 2, 3):
        answer(replay_server, wire.calls([(f"call_{n}", "step", {"n": n})]))
    answer(replay_server, wire.text("All three steps ran."))
    result = await generate(
        wire.model, "Run three steps.", tools=[tool], max_tool_rounds=3, provider=wire.name, client=client
    )

    assert log == [1, 2, 3] and result.text == "All three steps ran."
    assert len(result.steps) == 4 and len(replay_server.requests) == 4
    # Each continuation replays the whole history: 1, then 2, then 3 tool results.
    assert [len(wire.tool_results(sent(replay_server, i))) for i in range(4)] == [0, 1, 2, 3]
    assert result.total_usage.input_tokens == 4 * 12


async def test_max_tool_rounds_stops_the_loop_over_http(
    wire: Wire, client: Client, replay_server: ReplayServer
) -> None:
    tool = Tool("step", "Run one step", {"type": "object", "properties": {}}, execute=lambda: "ok")
    answer(replay_server, wire.calls([("call_1", "step", {})]))
    answer(replay_server, wire.calls([("call_2", "step", {})]))
    result = await generate(wire.model, "loop", tools=[tool], max_tool_rounds=1, provider=wire.name, client=client)
    assert len(replay_server.requests) == 2 and len(result.steps) == 2
    assert result.finish_reason.reason == "tool_calls" and result.tool_results == []  # the last calls are handed back


async def test_streaming_with_tool_calls(wire: Wire, client: Client, replay_server: ReplayServer) -> None:
    tool = Tool("get_weather", "Current weather", WEATHER_SCHEMA, execute=lambda city: f"{city}: 18C")
    calls: list[Call] = [("call_s1", "get_weather", {"city": "Paris"}), ("call_s2", "get_weather", {"city": "Oslo"})]
    answer_stream(replay_server, wire.call_events(calls))
    answer_stream(replay_server, wire.text_events(["Paris 18C, ", "Oslo 18C."]))
    result = stream(wire.model, "Weather?", tools=[tool], provider=wire.name, client=client)
    events = [e async for e in result]
    types = [e.type for e in events]

    ends = [e.tool_call for e in events if e.type == T.TOOL_CALL_END]
    assert [(c.name, c.arguments) for c in ends if c] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Oslo"}),
    ]
    assert types.count(T.TOOL_CALL_START) == 2 and T.TOOL_CALL_DELTA in types
    assert types.count(T.STEP_FINISH) == 1 and types.count(T.FINISH) == 2
    assert types.index(T.STEP_FINISH) < types.index(T.TEXT_DELTA)
    assert "".join(e.delta or "" for e in events if e.type == T.TEXT_DELTA) == "Paris 18C, Oslo 18C."
    assert len(result.steps) == 2 and [r.content for r in result.steps[0].tool_results] == ["Paris: 18C", "Oslo: 18C"]
    assert len(wire.tool_results(sent(replay_server, 1))) == 2


async def test_tool_errors_and_unknown_tools_go_back_to_the_model(
    wire: Wire, client: Client, replay_server: ReplayServer
) -> None:
    def broken(city: str) -> str:
        raise RuntimeError("weather service down")

    tool = Tool("get_weather", "Current weather", WEATHER_SCHEMA, execute=broken)
    calls: list[Call] = [("call_e1", "get_weather", {"city": "Rome"}), ("call_e2", "teleport", {"to": "Mars"})]
    answer(replay_server, wire.calls(calls))
    answer(replay_server, wire.text("Sorry, I could not check."))
    result = await generate(wire.model, "Weather?", tools=[tool], provider=wire.name, client=client)
    assert result.text == "Sorry, I could not check."
    errors = result.steps[0].tool_results
    assert [r.is_error for r in errors] == [True, True]
    assert "weather service down" in str(errors[0].content) and "Unknown tool 'teleport'" in str(errors[1].content)
    sent_results = wire.tool_results(sent(replay_server, 1))
    assert len(sent_results) == 2 and "weather service down" in json.dumps(sent_results[0][1])
    if isinstance(wire, AnthropicWire):
        blocks = [b for m in sent(replay_server, 1)["messages"] for b in m["content"] if b["type"] == "tool_result"]
        assert [b.get("is_error") for b in blocks] == [True, True]
    if isinstance(wire, GeminiWire):
        assert all("error" in content for _, content in sent_results)


@pytest.mark.parametrize("mode", ["auto", "none", "required", "named"])
async def test_tool_choice_modes_on_the_wire(
    wire: Wire, client: Client, replay_server: ReplayServer, mode: str
) -> None:
    choice = ToolChoice.named("get_weather") if mode == "named" else ToolChoice(mode)
    answer(replay_server, wire.text("ok"))
    await client.complete(
        Request(wire.model, [Message.user("hi")], provider=wire.name, tools=[WEATHER], tool_choice=choice)
    )
    body = sent(replay_server)
    expected: dict[str, Any] = {
        "openai": {
            "auto": "auto",
            "none": "none",
            "required": "required",
            "named": {"type": "function", "name": "get_weather"},
        },
        "anthropic": {
            "auto": {"type": "auto"},
            "none": None,
            "required": {"type": "any"},
            "named": {"type": "tool", "name": "get_weather"},
        },
        "gemini": {
            "auto": {"functionCallingConfig": {"mode": "AUTO"}},
            "none": {"functionCallingConfig": {"mode": "NONE"}},
            "required": {"functionCallingConfig": {"mode": "ANY"}},
            "named": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
        },
        "openai-compatible": {
            "auto": "auto",
            "none": "none",
            "required": "required",
            "named": {"type": "function", "function": {"name": "get_weather"}},
        },
    }[wire.name]
    field = "toolConfig" if isinstance(wire, GeminiWire) else "tool_choice"
    assert body.get(field) == expected[mode]
    if isinstance(wire, AnthropicWire) and mode == "none":
        assert "tools" not in body  # Anthropic has no "none": the tools are left out


async def test_passive_tools_hand_the_calls_back(wire: Wire, client: Client, replay_server: ReplayServer) -> None:
    calls: list[Call] = [("call_q1", "get_weather", {"city": "Quito"})]
    answer(replay_server, wire.calls(calls))
    result = await generate(
        wire.model, "Weather?", tools=[WEATHER], max_tool_rounds=5, provider=wire.name, client=client
    )
    assert len(replay_server.requests) == 1 and len(result.steps) == 1  # no loop without execute
    assert result.finish_reason.reason == "tool_calls" and result.tool_results == []
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_weather", {"city": "Quito"})]
    # The caller answers and continues the same conversation.
    answer(replay_server, wire.text("Quito is cool."))
    messages = [*result.messages, Message.tool_result(result.tool_calls[0].id, "12C", name="get_weather")]
    follow = await generate(wire.model, messages=messages, tools=[WEATHER], provider=wire.name, client=client)
    assert follow.text == "Quito is cool."
    results = wire.tool_results(sent(replay_server))
    assert len(results) == 1 and "12C" in json.dumps(results[0][1])


async def test_provider_options_and_feature_headers_pass_through(wire: Wire, replay_server: ReplayServer) -> None:
    adapter = wire.adapter(replay_server.base_url)
    adapter.default_headers["x-feature-flag"] = "beta-1"
    client = Client(providers={wire.name: adapter})
    own: dict[str, Any] = {"custom_field": {"enabled": True}}
    if isinstance(wire, AnthropicWire):
        own["beta_headers"] = ["interleaved-thinking-2025-05-14", "token-efficient-tools-2025-02-19"]
    others = {w.name: {"foreign_field": 1} for w in WIRES if w.name != wire.name}
    try:
        answer(replay_server, wire.text("ok"))
        await generate(wire.model, "hi", provider=wire.name, provider_options={wire.name: own, **others}, client=client)
    finally:
        await client.close()
    got = replay_server.requests[0]
    body = got.json()
    assert body["custom_field"] == {"enabled": True} and "foreign_field" not in json.dumps(body)
    assert got.headers["x-feature-flag"] == "beta-1"
    if isinstance(wire, AnthropicWire):
        betas = got.headers["anthropic-beta"].split(",")
        assert betas[:2] == ["interleaved-thinking-2025-05-14", "token-efficient-tools-2025-02-19"]
        assert "beta_headers" not in body


# ==================================================================================================
# Structured output over each real adapter
# ==================================================================================================


async def test_generate_object(wire: Wire, client: Client, replay_server: ReplayServer) -> None:
    answer(replay_server, wire.object_answer({"name": "Alice", "age": 30}))
    result = await generate_object(
        wire.model,
        "Extract: Alice is 30 years old",
        schema=PERSON_SCHEMA,
        schema_name="person",
        provider=wire.name,
        client=client,
    )
    assert result.output == {"name": "Alice", "age": 30}
    assert result.finish_reason.reason == "stop"
    got = replay_server.requests[0]
    body = got.json()
    if isinstance(wire, OpenAIWire):
        assert body["text"]["format"] == {
            "type": "json_schema",
            "name": "person",
            "schema": PERSON_SCHEMA,
            "strict": True,
        }
    elif isinstance(wire, GeminiWire):
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        schema = config["responseSchema"]
        assert schema["required"] == ["name", "age"] and schema["properties"]["age"] == {"type": "integer"}
        assert "additionalProperties" not in schema  # outside Gemini's schema subset
    elif isinstance(wire, AnthropicWire):
        json_tool = strip_cache_control(body["tools"][-1])
        assert json_tool["name"] == "json_output" and json_tool["input_schema"] == PERSON_SCHEMA and json_tool["strict"]
        assert body["tool_choice"] == {"type": "tool", "name": "json_output"}
        assert "structured-outputs-2025-11-13" in got.headers["anthropic-beta"]
    else:
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON_SCHEMA, "strict": True},
        }


async def test_generate_object_rejects_an_answer_off_the_schema(
    wire: Wire, client: Client, replay_server: ReplayServer
) -> None:
    answer(replay_server, wire.object_answer({"name": "Alice"}))
    with pytest.raises(NoObjectGeneratedError, match="age") as info:
        await generate_object(wire.model, "Extract", schema=PERSON_SCHEMA, provider=wire.name, client=client)
    assert json.loads(info.value.text) == {"name": "Alice"}
    assert len(replay_server.requests) == 1  # the call worked; a bad answer is not retried


async def test_stream_object_partials(wire: Wire, client: Client, replay_server: ReplayServer) -> None:
    pieces = ['{"name": "Al', 'ice", "ag', 'e": 3', "0}"]
    answer_stream(replay_server, wire.object_events(pieces))
    result = stream_object(wire.model, "Extract", schema=PERSON_SCHEMA, provider=wire.name, client=client)
    partials = [p async for p in result]
    assert partials[0] == {"name": "Al"}
    assert {"name": "Alice"} in partials
    assert partials[-1] == {"name": "Alice", "age": 30} == await result.object()
    assert len(partials) >= 3


# ==================================================================================================
# Usage across providers
# ==================================================================================================


RICH_USAGE: dict[str, tuple[dict[str, Any], Usage]] = {
    "openai": (
        {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 60},
            "output_tokens": 40,
            "output_tokens_details": {"reasoning_tokens": 25},
            "total_tokens": 140,
        },
        Usage(100, 40, 140, reasoning_tokens=25, cache_read_tokens=60),
    ),
    "anthropic": (
        {"input_tokens": 20, "cache_read_input_tokens": 70, "cache_creation_input_tokens": 10, "output_tokens": 30},
        Usage(100, 30, 130, reasoning_tokens=None, cache_read_tokens=70, cache_write_tokens=10),
    ),
    "gemini": (
        {
            "promptTokenCount": 100,
            "cachedContentTokenCount": 50,
            "candidatesTokenCount": 20,
            "thoughtsTokenCount": 15,
            "totalTokenCount": 135,
        },
        Usage(100, 35, 135, reasoning_tokens=15, cache_read_tokens=50),
    ),
    "openai-compatible": (
        {
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "total_tokens": 110,
            "prompt_tokens_details": {"cached_tokens": 40},
            "completion_tokens_details": {"reasoning_tokens": 4},
        },
        Usage(100, 10, 110, reasoning_tokens=4, cache_read_tokens=40),
    ),
}


def _same_counts(usage: Usage) -> tuple[Any, ...]:
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.total_tokens,
        usage.reasoning_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )


async def test_usage_is_normalised_and_adds_up_across_providers(replay_server: ReplayServer) -> None:
    client = Client(providers={w.name: w.adapter(replay_server.base_url) for w in WIRES})
    total = Usage()
    try:
        for w in WIRES:
            raw, expected = RICH_USAGE[w.name]
            answer(replay_server, w.text("ok", raw))
            response = await client.complete(Request(w.model, [Message.user("hi")], provider=w.name))
            assert _same_counts(response.usage) == _same_counts(expected), w.name
            # Reasoning is reported on its own and is part of (never more than) the output.
            assert (
                response.usage.reasoning_tokens is None
                or response.usage.reasoning_tokens <= response.usage.output_tokens
            )
            assert response.usage.raw  # the provider's own numbers stay available
            total = total + response.usage
    finally:
        await client.close()
    assert _same_counts(total) == (400, 115, 515, 44, 220, 10)


# ==================================================================================================
# Middleware through a real adapter
# ==================================================================================================


class Recorder(Middleware):
    """Sets a temperature on the way in, tags responses on the way out, watches stream events."""

    def __init__(self, label: str, log: list[str]) -> None:
        self.label = label
        self.log = log
        self.events: list[str] = []

    async def complete(self, request: Request, call_next: Any) -> Response:
        self.log.append(f"{self.label}:request")
        response = await call_next(dataclasses.replace(request, temperature=0.25))
        self.log.append(f"{self.label}:response")
        response.message.content.append(ContentPart.of_text(f"[{self.label}]"))
        return response

    async def stream(self, request: Request, call_next: Any) -> AsyncIterator[StreamEvent]:
        self.log.append(f"{self.label}:request")
        async for event in call_next(dataclasses.replace(request, temperature=0.25)):
            self.events.append(str(event.type))
            if event.type == T.TEXT_DELTA and event.delta:
                event = dataclasses.replace(event, delta=event.delta.upper())
            yield event
        self.log.append(f"{self.label}:response")


async def test_middleware_wraps_complete_and_stream_through_a_real_adapter(
    wire: Wire, replay_server: ReplayServer
) -> None:
    log: list[str] = []
    outer, inner = Recorder("outer", log), Recorder("inner", log)
    client = Client(providers={wire.name: wire.adapter(replay_server.base_url)}, middleware=[outer, inner])
    try:
        answer(replay_server, wire.text("plain"))
        response = await client.complete(Request(wire.model, [Message.user("hi")], provider=wire.name))
        assert log == ["outer:request", "inner:request", "inner:response", "outer:response"]
        assert response.text == "plain[inner][outer]"
        assert wire.temperature(sent(replay_server)) == 0.25

        log.clear()
        answer_stream(replay_server, wire.text_events(["quiet ", "words"]))
        result = stream(wire.model, "hi", provider=wire.name, client=client)
        texts = [t async for t in result.text_stream]
        assert "".join(texts) == "QUIET WORDS"
        assert log == ["outer:request", "inner:request", "inner:response", "outer:response"]
        assert outer.events == inner.events and outer.events[0] == T.STREAM_START and outer.events[-1] == T.FINISH
        assert wire.temperature(sent(replay_server)) == 0.25
    finally:
        await client.close()


# ==================================================================================================
# Errors and retries through generate() and a real adapter
# ==================================================================================================


async def test_rate_limit_is_retried_after_retry_after(
    wire: Wire, client: Client, replay_server: ReplayServer, slept: list[float]
) -> None:
    status, body = wire.rate_limit_error()
    replay_server.enqueue(status, body, {"retry-after": "7"})
    answer(replay_server, wire.text("after the wait"))
    retries: list[tuple[str, int, float]] = []
    policy = RetryPolicy(max_retries=2, on_retry=lambda e, n, d: retries.append((type(e).__name__, n, d)))
    result = await generate(wire.model, "hi", provider=wire.name, retry_policy=policy, client=client)
    assert result.text == "after the wait"
    assert retries == [("RateLimitError", 1, 7.0)] and slept == [7.0]
    assert len(replay_server.requests) == 2


async def test_rate_limit_surfaces_with_retry_after_when_retries_are_off(
    wire: Wire, client: Client, replay_server: ReplayServer
) -> None:
    status, body = wire.rate_limit_error()
    replay_server.enqueue(status, body, {"retry-after": "3"})
    with pytest.raises(RateLimitError) as info:
        await generate(wire.model, "hi", provider=wire.name, max_retries=0, client=client)
    assert info.value.retry_after == 3.0 and info.value.retryable and info.value.provider == wire.name
    assert len(replay_server.requests) == 1


@pytest.mark.parametrize("kind", ["auth", "forbidden", "not_found"])
async def test_non_retryable_errors_are_raised_at_once(
    wire: Wire, client: Client, replay_server: ReplayServer, slept: list[float], kind: str
) -> None:
    status, body = {"auth": wire.auth_error, "forbidden": wire.forbidden_error, "not_found": wire.not_found_error}[
        kind
    ]()
    replay_server.enqueue(status, body)
    expected = {"auth": AuthenticationError, "forbidden": AccessDeniedError, "not_found": NotFoundError}[kind]
    with pytest.raises(expected) as info:
        await generate("nonexistent-model-xyz", "test", provider=wire.name, max_retries=3, client=client)
    assert not info.value.retryable and info.value.status_code == status and info.value.provider == wire.name
    assert len(replay_server.requests) == 1 and slept == []


async def test_retries_apply_per_step_not_to_the_whole_loop(
    wire: Wire, client: Client, replay_server: ReplayServer, slept: list[float]
) -> None:
    runs: list[str] = []
    tool = Tool("get_weather", "Current weather", WEATHER_SCHEMA, execute=lambda city: runs.append(city) or "ok")
    answer(replay_server, wire.calls([("call_p1", "get_weather", {"city": "Lima"})]))
    status, body = wire.rate_limit_error()
    replay_server.enqueue(status, body, {"retry-after": "0"})
    answer(replay_server, wire.text("done"))
    result = await generate(wire.model, "hi", tools=[tool], provider=wire.name, client=client)
    assert result.text == "done" and runs == ["Lima"]  # step 1 and its tool ran once
    assert len(replay_server.requests) == 3 and slept == []  # Retry-After 0: retried at once
    assert len(wire.tool_results(sent(replay_server, 1))) == len(wire.tool_results(sent(replay_server, 2))) == 1


async def test_stream_opening_is_retried_but_not_after_partial_data(
    wire: Wire, client: Client, replay_server: ReplayServer, slept: list[float]
) -> None:
    status, body = wire.rate_limit_error()
    replay_server.enqueue(status, body, {"retry-after": "1"})
    answer_stream(replay_server, wire.text_events(["second ", "try"]))
    result = stream(wire.model, "hi", provider=wire.name, client=client)
    assert "".join([t async for t in result.text_stream]) == "second try"
    assert slept == [1.0] and len(replay_server.requests) == 2

    events = wire.text_events(["partial ", "answer ", "lost"])
    first_delta = next(i for i, e in enumerate(events) if b"partial" in e)
    answer_stream(replay_server, events, drop_after=first_delta + 1)
    broken = stream(wire.model, "hi", provider=wire.name, max_retries=3, client=client)
    seen: list[StreamEvent] = []
    with pytest.raises(StreamError):
        async for event in broken:
            seen.append(event)  # noqa: PERF401 - the list must survive the exception
    assert [e.delta for e in seen if e.type == T.TEXT_DELTA] == ["partial "]
    assert seen[-1].type == T.ERROR
    assert len(replay_server.requests) == 3  # no retry once text was delivered


# ==================================================================================================
# Audio and documents: translated or rejected cleanly, per provider
# ==================================================================================================


async def test_audio_and_documents_are_translated_or_rejected_cleanly(
    wire: Wire, client: Client, replay_server: ReplayServer
) -> None:
    pdf = b"%PDF-1.4 tiny"
    wav = b"RIFF....WAVEfmt "
    doc_request = Request(
        wire.model,
        [
            Message.user(
                [
                    ContentPart.of_text("Summarise"),
                    ContentPart(
                        "document", document=DocumentData(data=pdf, media_type="application/pdf", file_name="a.pdf")
                    ),
                ]
            )
        ],
        provider=wire.name,
    )
    answer(replay_server, wire.text("A tiny PDF."))
    assert (await client.complete(doc_request)).text == "A tiny PDF."
    assert b64(pdf) in json.dumps(sent(replay_server))

    audio_request = Request(
        wire.model,
        [
            Message.user(
                [
                    ContentPart.of_text("Transcribe"),
                    ContentPart("audio", audio=AudioData(data=wav, media_type="audio/wav")),
                ]
            )
        ],
        provider=wire.name,
    )
    before = len(replay_server.requests)
    if isinstance(wire, (OpenAIWire, AnthropicWire)):
        with pytest.raises(InvalidRequestError, match="audio"):
            await client.complete(audio_request)
        assert len(replay_server.requests) == before  # rejected before anything was sent
    else:
        answer(replay_server, wire.text("Silence."))
        assert (await client.complete(audio_request)).text == "Silence."
        assert b64(wav) in json.dumps(sent(replay_server))


# ==================================================================================================
# Configuration from the environment reaches the wire
# ==================================================================================================


def env_for(base_url: str) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "sk-env",
        "OPENAI_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "ak-env",
        "ANTHROPIC_BASE_URL": base_url,
        "GEMINI_API_KEY": "g-env",
        "GEMINI_BASE_URL": base_url,
        "OPENAI_COMPATIBLE_BASE_URL": f"{base_url}/v1",
        "OPENAI_COMPATIBLE_API_KEY": "local-env",
    }


AUTH_HEADER = {
    "openai": ("authorization", "Bearer sk-env"),
    "anthropic": ("x-api-key", "ak-env"),
    "gemini": ("x-goog-api-key", "g-env"),
    "openai-compatible": ("authorization", "Bearer local-env"),
}


async def test_from_env_keys_reach_each_provider(wire: Wire, replay_server: ReplayServer) -> None:
    client = Client.from_env(env_for(replay_server.base_url))
    try:
        assert client.default_provider == "openai"
        answer(replay_server, wire.text("hi from env"))
        result = await generate(wire.model, "hi", provider=wire.name, client=client)
        assert result.text == "hi from env"
        got = replay_server.requests[0]
        header, value = AUTH_HEADER[wire.name]
        assert got.headers[header] == value and got.path == wire.path(stream=False)
    finally:
        await client.close()


@pytest.fixture
def saved_default_client() -> Iterator[None]:
    saved = client_module._default_client
    try:
        yield
    finally:
        set_default_client(saved)


async def test_module_default_client_is_built_from_the_environment_on_first_use(
    replay_server: ReplayServer, monkeypatch: pytest.MonkeyPatch, saved_default_client: None
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_COMPATIBLE_BASE_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", replay_server.base_url)
    monkeypatch.setenv("GEMINI_API_KEY", "g-env")
    monkeypatch.setenv("GEMINI_BASE_URL", replay_server.base_url)
    set_default_client(None)
    wire = AnthropicWire()
    answer(replay_server, wire.text("lazy"))
    result = await generate(wire.model, "hi")  # no client, no provider: the env's first provider
    assert result.text == "lazy" and replay_server.requests[0].headers["x-api-key"] == "ak-env"
    default = client_module._default_client
    assert default is not None and sorted(default.providers) == ["anthropic", "gemini"]
    await default.close()


# ==================================================================================================
# Cancellation closes the real connection
# ==================================================================================================


class HoldingServer:
    """Raw HTTP on 127.0.0.1: answers a request with ``head`` (or nothing) and then holds the
    connection open, noting when the client hangs up."""

    def __init__(self, head: bytes | None) -> None:
        self.head = head
        self.got_request = asyncio.Event()
        self.client_closed = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            header = await reader.readuntil(b"\r\n\r\n")
            match = re.search(rb"content-length: *(\d+)", header, re.I)
            await reader.readexactly(int(match.group(1)) if match else 0)
            self.got_request.set()
            if self.head is not None:
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                    + b"%x\r\n%s\r\n" % (len(self.head), self.head)
                )
                await writer.drain()
            await reader.read()  # b"" once the client closes its end
            self.client_closed.set()
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


async def test_abort_of_a_real_stream_closes_the_connection(wire: Wire) -> None:
    events = wire.text_events(["Hel", "lo"])
    first = next(i for i, e in enumerate(events) if b'"Hel"' in e)
    holder = HoldingServer(b"".join(events[: first + 1]))
    async with holder as url:
        client = Client(providers={wire.name: wire.adapter(url)})
        controller = AbortController()
        result = stream(wire.model, "hi", provider=wire.name, abort_signal=controller.signal, client=client)
        seen: list[StreamEvent] = []
        with pytest.raises(AbortError):
            async for event in result:
                seen.append(event)
                if event.type == T.TEXT_DELTA:
                    asyncio.get_running_loop().call_later(0.02, controller.abort)
        await asyncio.wait_for(holder.client_closed.wait(), 5)
        assert [e.delta for e in seen if e.type == T.TEXT_DELTA] == ["Hel"] and seen[-1].type == T.ERROR
        await client.close()


async def test_abort_of_a_pending_generate_closes_the_connection(wire: Wire) -> None:
    holder = HoldingServer(None)
    async with holder as url:
        client = Client(providers={wire.name: wire.adapter(url)})
        controller = AbortController()
        task = asyncio.create_task(
            generate(wire.model, "hi", provider=wire.name, abort_signal=controller.signal, client=client)
        )
        await asyncio.wait_for(holder.got_request.wait(), 5)
        controller.abort("user pressed stop")
        with pytest.raises(AbortError, match="user pressed stop"):
            await task
        await asyncio.wait_for(holder.client_closed.wait(), 5)
        await client.close()
