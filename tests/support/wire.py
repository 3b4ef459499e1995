"""Scripted model answers spoken in each provider's own wire format.

The parity and smoke suites (tests/parity) drive real Sessions through the real adapters against
:class:`~tests.support.replay.ReplayServer`. No model is involved: a test scripts what the "model"
says at each turn (text, tool calls, reasoning), and this module renders that answer the way the
provider would send it - non-streaming JSON or an SSE stream, chosen by what the adapter asked
for - and reads the provider-shaped requests back into one neutral view the test can assert on.

* :class:`Answer` / :func:`say` / :func:`use` / :func:`tool` - what the model says.
* :class:`OpenAIWire`, :class:`AnthropicWire`, :class:`GeminiWire` - render answers
  (``render_json``, ``render_sse``) and parse requests (``parse``) for one provider; build its
  real adapter, client and profile.
* :class:`ScriptedModel` - answers a ReplayServer's requests from a script, turn by turn. A step
  is an Answer or a function of the request it answers (so the model can "read" tool results);
  lanes route requests (a subagent's, say) to their own script.

The shapes follow the recorded traffic in ``tests/fixtures/provider-cassettes``: OpenAI
Responses ``response`` objects and ``response.*`` events, Anthropic ``message`` objects and
``message_start`` ... ``message_stop`` events, Gemini ``GenerateContentResponse`` objects and
``alt=sse`` chunks.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.replay import Received, ReplayServer, Scripted, chunked

__all__ = [
    "WIRES",
    "Answer",
    "AnthropicWire",
    "Call",
    "GeminiWire",
    "Lane",
    "OpenAIWire",
    "ScriptedModel",
    "ToolResultView",
    "Wire",
    "WireRequest",
    "say",
    "tool",
    "use",
]


# ==================================================================================================
# What the model says
# ==================================================================================================


@dataclass(slots=True)
class Call:
    """One tool call the scripted model makes."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Answer:
    """One model response: optional reasoning, then text, then tool calls (in that order)."""

    text: str = ""
    calls: list[Call] = field(default_factory=list)
    reasoning: str = ""

    def __post_init__(self) -> None:
        if not self.text and not self.calls:
            raise ValueError("an Answer needs text or at least one tool call")


def tool(name: str, /, **arguments: Any) -> Call:
    return Call(name, arguments)


def say(text: str, *, reasoning: str = "") -> Answer:
    """A text-only answer (natural completion)."""
    return Answer(text=text, reasoning=reasoning)


def use(*calls: Call, text: str = "", reasoning: str = "") -> Answer:
    """An answer with tool calls (several make a parallel round)."""
    return Answer(text=text, calls=list(calls), reasoning=reasoning)


# ==================================================================================================
# What the client sent, in one neutral view
# ==================================================================================================


@dataclass(slots=True)
class ToolResultView:
    """A tool result as it went over the wire.

    ``call_id`` is the provider's correlation id (Gemini has none unless the model sent one; the
    function name stands in). ``is_error`` is the wire's own error marking: Anthropic's
    ``is_error`` flag, Gemini's ``response.error`` key; None where the wire has no such marking
    (OpenAI Responses: the error is only in the text).
    """

    call_id: str
    name: str
    output: str
    is_error: bool | None
    raw: dict[str, Any]


@dataclass(slots=True)
class Entry:
    """One item of the conversation a request carries, in order."""

    kind: str  # "user" | "assistant" | "call" | "result"
    text: str = ""
    call: tuple[str, str, dict[str, Any]] | None = None  # (id, name, arguments)
    result: ToolResultView | None = None


@dataclass(slots=True)
class WireRequest:
    """A request the server received, parsed by the wire that spoke it."""

    received: Received
    body: dict[str, Any]
    stream: bool
    system: str
    entries: list[Entry]
    #: Names of the function tools declared in the request.
    tool_names: list[str]
    #: The provider's reasoning setting as sent: OpenAI ``reasoning.effort``, Anthropic
    #: ``thinking.budget_tokens``, Gemini ``generationConfig.thinkingConfig`` (None: absent).
    reasoning: Any

    @property
    def user_texts(self) -> list[str]:
        return [e.text for e in self.entries if e.kind == "user"]

    @property
    def first_user_text(self) -> str:
        texts = self.user_texts
        return texts[0] if texts else ""

    @property
    def tool_results(self) -> list[ToolResultView]:
        return [e.result for e in self.entries if e.result is not None]

    @property
    def tool_calls(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [e.call for e in self.entries if e.call is not None]

    def _tail(self) -> list[Entry]:
        """What follows the last assistant item: the new input of this request."""
        last = max((i for i, e in enumerate(self.entries) if e.kind in ("assistant", "call")), default=-1)
        return self.entries[last + 1 :]

    @property
    def new_results(self) -> list[ToolResultView]:
        """The tool results answering the previous response (empty on a fresh input)."""
        return [e.result for e in self._tail() if e.result is not None]

    @property
    def new_user_texts(self) -> list[str]:
        """User messages after the last assistant item (the input, steering, loop warnings)."""
        return [e.text for e in self._tail() if e.kind == "user"]

    def result(self, index: int = -1) -> ToolResultView:
        results = self.new_results
        if not results:
            raise AssertionError(f"the request carries no new tool results: {self.entries!r}")
        return results[index]


# ==================================================================================================
# The three wires
# ==================================================================================================


def _pieces(text: str, n: int = 3) -> list[str]:
    """Split ``text`` in up to ``n`` pieces, as a provider streams deltas."""
    if len(text) < n:
        return [text] if text else []
    size = -(-len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _text_of(value: Any) -> str:
    """A tool result's content as text (strings as they are, block lists joined, JSON otherwise)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [b.get("text", "") for b in value if isinstance(b, dict) and b.get("type") in ("text", "input_text")]
        if texts:
            return "".join(texts)
    return json.dumps(value, ensure_ascii=False)


class Wire(ABC):
    """One provider: how it is reached, how it answers, how its requests read."""

    name: str
    model: str
    #: Whether a tool result's error marking is part of the wire format (not only its text).
    error_flag_on_wire: bool = True

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._id_lock = threading.Lock()

    def next_id(self) -> int:
        with self._id_lock:
            return next(self._ids)

    # -- client side -------------------------------------------------------------------------------
    @abstractmethod
    def adapter(self, base_url: str) -> Any: ...

    def client(self, base_url: str) -> Any:
        from ra.llm.client import Client

        return Client({self.name: self.adapter(base_url)}, default_provider=self.name)

    @abstractmethod
    def profile(self, **options: Any) -> Any: ...

    @staticmethod
    def _timeout() -> Any:
        from ra.llm.http import AdapterTimeout

        return AdapterTimeout(connect=2, request=20, stream_read=10)

    # -- answers ----------------------------------------------------------------------------------
    @abstractmethod
    def render_json(self, answer: Answer, *, prompt_tokens: int = 100, model: str | None = None) -> dict[str, Any]:
        """The non-streaming response body."""

    @abstractmethod
    def render_sse(self, answer: Answer, *, prompt_tokens: int = 100, model: str | None = None) -> list[bytes]:
        """The streamed response body, one SSE event per chunk (as providers flush them)."""

    def render(
        self,
        answer: Answer,
        *,
        stream: bool,
        prompt_tokens: int = 100,
        model: str | None = None,
        chunking: str | int | None = "events",
    ) -> Scripted:
        if not stream:
            body = json.dumps(self.render_json(answer, prompt_tokens=prompt_tokens, model=model)).encode()
            return Scripted(200, {"content-type": "application/json"}, [body])
        events = self.render_sse(answer, prompt_tokens=prompt_tokens, model=model)
        chunks = events if chunking in (None, "events") else chunked(b"".join(events), chunking)
        return Scripted(200, {"content-type": "text/event-stream; charset=utf-8"}, chunks)

    def error(self, status: int, message: str) -> Scripted:
        """An API error in this provider's error shape."""
        body = json.dumps(self.error_body(status, message)).encode()
        return Scripted(status, {"content-type": "application/json"}, [body])

    @abstractmethod
    def error_body(self, status: int, message: str) -> dict[str, Any]: ...

    # -- requests ---------------------------------------------------------------------------------
    def is_stream(self, received: Received, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def parse(self, received: Received) -> WireRequest:
        body = received.json()
        if not isinstance(body, dict):
            raise ValueError(f"{self.name}: request body is not a JSON object: {body!r}")
        return self._parse(received, body)

    @abstractmethod
    def _parse(self, received: Received, body: dict[str, Any]) -> WireRequest: ...


def _usage_tokens(answer: Answer) -> int:
    return max(
        1, (len(answer.text) + len(json.dumps([c.arguments for c in answer.calls])) + len(answer.reasoning)) // 4
    )


# -- OpenAI Responses ------------------------------------------------------------------------------


class OpenAIWire(Wire):
    name = "openai"
    model = "gpt-5.2-codex"
    error_flag_on_wire = False

    def adapter(self, base_url: str) -> Any:
        from ra.llm.providers.openai_responses import OpenAIAdapter

        return OpenAIAdapter(api_key="sk-test", base_url=f"{base_url}/v1", timeout=self._timeout())

    def profile(self, **options: Any) -> Any:
        from ra.profiles import create_openai_profile

        return create_openai_profile(self.model, **options)

    def _items(self, answer: Answer, n: int) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if answer.reasoning:
            items.append(
                {
                    "id": f"rs_{n:04d}",
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": answer.reasoning}],
                    "encrypted_content": f"gAAAAenc{n:04d}",
                }
            )
        if answer.text:
            items.append(
                {
                    "id": f"msg_{n:04d}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": answer.text}],
                }
            )
        for k, call in enumerate(answer.calls):
            items.append(
                {
                    "id": f"fc_{n:04d}_{k}",
                    "type": "function_call",
                    "status": "completed",
                    "arguments": json.dumps(call.arguments),
                    "call_id": f"call_{n:04d}_{k}",
                    "name": call.name,
                }
            )
        return items

    def _response(self, n: int, model: str, status: str, output: list[dict[str, Any]], usage: Any) -> dict[str, Any]:
        return {
            "id": f"resp_{n:04d}",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "model": model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": False,
            "tool_choice": "auto",
            "tools": [],
            "truncation": "disabled",
            "usage": usage,
            "metadata": {},
        }

    def _usage(self, answer: Answer, prompt_tokens: int) -> dict[str, Any]:
        out = _usage_tokens(answer)
        reasoning = len(answer.reasoning) // 4
        return {
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt_tokens + out,
        }

    def render_json(self, answer: Answer, *, prompt_tokens: int = 100, model: str | None = None) -> dict[str, Any]:
        n = self.next_id()
        return self._response(
            n, model or self.model, "completed", self._items(answer, n), self._usage(answer, prompt_tokens)
        )

    def render_sse(self, answer: Answer, *, prompt_tokens: int = 100, model: str | None = None) -> list[bytes]:
        n = self.next_id()
        model = model or self.model
        seq = itertools.count()
        out: list[bytes] = []

        def emit(kind: str, **payload: Any) -> None:
            data = {"type": kind, "sequence_number": next(seq), **payload}
            out.append(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())

        items = self._items(answer, n)
        emit("response.created", response=self._response(n, model, "in_progress", [], None))
        emit("response.in_progress", response=self._response(n, model, "in_progress", [], None))
        for index, item in enumerate(items):
            item_id = item["id"]
            if item["type"] == "reasoning":
                emit("response.output_item.added", output_index=index, item={**item, "summary": []})
                text = item["summary"][0]["text"]
                part = {"type": "summary_text", "text": ""}
                emit(
                    "response.reasoning_summary_part.added",
                    item_id=item_id,
                    output_index=index,
                    summary_index=0,
                    part=part,
                )
                for piece in _pieces(text):
                    emit(
                        "response.reasoning_summary_text.delta",
                        item_id=item_id,
                        output_index=index,
                        summary_index=0,
                        delta=piece,
                    )
                emit(
                    "response.reasoning_summary_text.done",
                    item_id=item_id,
                    output_index=index,
                    summary_index=0,
                    text=text,
                )
                emit(
                    "response.reasoning_summary_part.done",
                    item_id=item_id,
                    output_index=index,
                    summary_index=0,
                    part={**part, "text": text},
                )
            elif item["type"] == "message":
                text = item["content"][0]["text"]
                emit(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "content": []},
                )
                part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
                emit("response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=part)
                for piece in _pieces(text):
                    emit(
                        "response.output_text.delta",
                        item_id=item_id,
                        output_index=index,
                        content_index=0,
                        delta=piece,
                        logprobs=[],
                    )
                emit(
                    "response.output_text.done",
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    text=text,
                    logprobs=[],
                )
                emit(
                    "response.content_part.done",
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    part={**part, "text": text},
                )
            else:
                emit(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "arguments": ""},
                )
                for piece in _pieces(item["arguments"]):
                    emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
                emit(
                    "response.function_call_arguments.done",
                    item_id=item_id,
                    output_index=index,
                    arguments=item["arguments"],
                )
            emit("response.output_item.done", output_index=index, item=item)
        emit(
            "response.completed",
            response=self._response(n, model, "completed", items, self._usage(answer, prompt_tokens)),
        )
        return out

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}

    def _parse(self, received: Received, body: dict[str, Any]) -> WireRequest:
        entries: list[Entry] = []
        names: dict[str, str] = {}
        for item in body.get("input") or []:
            kind = item.get("type", "message")
            if kind == "message":
                content = item.get("content")
                if isinstance(content, str):
                    texts = [content]
                else:
                    texts = [c.get("text", "") for c in content or [] if c.get("type") in ("input_text", "output_text")]
                role = "assistant" if item.get("role") == "assistant" else "user"
                entries.extend(Entry(role, text=t) for t in texts)
            elif kind == "function_call":
                names[item["call_id"]] = item["name"]
                entries.append(Entry("call", call=(item["call_id"], item["name"], json.loads(item["arguments"]))))
            elif kind == "function_call_output":
                call_id = item["call_id"]
                view = ToolResultView(call_id, names.get(call_id, ""), _text_of(item.get("output")), None, item)
                entries.append(Entry("result", result=view))
        tools = [t["name"] for t in body.get("tools") or [] if t.get("type") == "function"]
        reasoning = (body.get("reasoning") or {}).get("effort")
        return WireRequest(
            received, body, self.is_stream(received, body), body.get("instructions") or "", entries, tools, reasoning
        )


# -- Anthropic Messages ----------------------------------------------------------------------------


class AnthropicWire(Wire):
    name = "anthropic"
    model = "claude-sonnet-4-5"

    def adapter(self, base_url: str) -> Any:
        from ra.llm.providers.anthropic import AnthropicAdapter

        return AnthropicAdapter(api_key="sk-ant-test", base_url=base_url, timeout=self._timeout())

    def profile(self, **options: Any) -> Any:
        from ra.profiles import create_anthropic_profile

        return create_anthropic_profile(self.model, **options)

    def _blocks(self, answer: Answer, n: int) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if answer.reasoning:
            blocks.append({"type": "thinking", "thinking": answer.reasoning, "signature": f"EqQBsig{n:04d}"})
        if answer.text:
            blocks.append({"type": "text", "text": answer.text})
        for k, call in enumerate(answer.calls):
            blocks.append({"type": "tool_use", "id": f"toolu_{n:04d}_{k}", "name": call.name, "input": call.arguments})
        return blocks

    @staticmethod
    def _stop(answer: Answer) -> str:
        return "tool_use" if answer.calls else "end_turn"

    @staticmethod
    def _usage(prompt_tokens: int, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": prompt_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }

    def render_json(self, answer: Answer, *, prompt_tokens: int = 100, model: str | None = None) -> dict[str, Any]:
        n = self.next_id()
        return {
            "id": f"msg_{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": model or self.model,
            "content": self._blocks(answer, n),
            "stop_reason": self._stop(answer),
            "stop_sequence": None,
            "usage": self._usage(prompt_tokens, _usage_tokens(answer)),
        }

    def render_sse(self, answer: Answer, *, prompt_tokens: int = 100, model: str | None = None) -> list[bytes]:
        n = self.next_id()
        out: list[bytes] = []

        def emit(kind: str, **payload: Any) -> None:
            out.append(f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n".encode())

        message = {
            "id": f"msg_{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": model or self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._usage(prompt_tokens, 1),
        }
        emit("message_start", message=message)
        for index, block in enumerate(self._blocks(answer, n)):
            kind = block["type"]
            if kind == "thinking":
                emit("content_block_start", index=index, content_block={"type": "thinking", "thinking": ""})
                for piece in _pieces(block["thinking"]):
                    emit("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": piece})
                emit(
                    "content_block_delta",
                    index=index,
                    delta={"type": "signature_delta", "signature": block["signature"]},
                )
            elif kind == "text":
                emit("content_block_start", index=index, content_block={"type": "text", "text": ""})
                for piece in _pieces(block["text"]):
                    emit("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
            else:
                emit("content_block_start", index=index, content_block={**block, "input": {}})
                emit("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": ""})
                for piece in _pieces(json.dumps(block["input"])):
                    emit("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
            if index == 0:
                out.append(b'event: ping\ndata: {"type": "ping"}\n\n')
            emit("content_block_stop", index=index)
        emit(
            "message_delta",
            delta={"stop_reason": self._stop(answer), "stop_sequence": None},
            usage={"output_tokens": _usage_tokens(answer)},
        )
        emit("message_stop")
        return out

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}

    def _parse(self, received: Received, body: dict[str, Any]) -> WireRequest:
        entries: list[Entry] = []
        names: dict[str, str] = {}
        for message in body.get("messages") or []:
            role = message.get("role")
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            for block in blocks:
                kind = block.get("type")
                if kind == "text":
                    entries.append(Entry("assistant" if role == "assistant" else "user", text=block.get("text", "")))
                elif kind == "tool_use":
                    names[block["id"]] = block["name"]
                    entries.append(Entry("call", call=(block["id"], block["name"], dict(block.get("input") or {}))))
                elif kind == "tool_result":
                    call_id = block["tool_use_id"]
                    view = ToolResultView(
                        call_id,
                        names.get(call_id, ""),
                        _text_of(block.get("content", "")),
                        bool(block.get("is_error", False)),
                        block,
                    )
                    entries.append(Entry("result", result=view))
        system = body.get("system") or ""
        if isinstance(system, list):
            system = "\n\n".join(b.get("text", "") for b in system if isinstance(b, dict))
        tools = [t["name"] for t in body.get("tools") or [] if "name" in t]
        thinking = body.get("thinking")
        reasoning = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
        return WireRequest(received, body, self.is_stream(received, body), system, entries, tools, reasoning)


# -- Gemini ----------------------------------------------------------------------------------------


class GeminiWire(Wire):
    name = "gemini"
    model = "gemini-3-flash-preview"
    #: Gemini 3 sends a thought signature on the first function call of a turn; clients echo it.
    SIGNATURE = "CiQBcsjafQ3ZJq0y0PBa+signature"

    def adapter(self, base_url: str) -> Any:
        from ra.llm.providers.gemini import GeminiAdapter

        return GeminiAdapter(api_key="gm-test", base_url=base_url, timeout=self._timeout())

    def profile(self, **options: Any) -> Any:
        from ra.profiles import create_gemini_profile

        return create_gemini_profile(self.model, **options)

    def _parts(self, answer: Answer) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if answer.reasoning:
            parts.append({"text": answer.reasoning, "thought": True})
        if answer.text:
            parts.append({"text": answer.text})
        for k, call in enumerate(answer.calls):
            part: dict[str, Any] = {"functionCall": {"name": call.name, "args": call.arguments}}
            if k == 0:
                part["thoughtSignature"] = self.SIGNATURE
            parts.append(part)
        return parts

    def _chunk(
        self, parts: list[dict[str, Any]], n: int, model: str, usage: dict[str, Any], finish: bool
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = "STOP"
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": f"resp{n:04d}"}

    @staticmethod
    def _usage(answer: Answer, prompt_tokens: int) -> dict[str, Any]:
        out = _usage_tokens(answer)
        thoughts = len(answer.reasoning) // 4
        usage = {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": out,
            "totalTokenCount": prompt_tokens + out + thoughts,
        }
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        return usage

    def render_json(self, answer: Answer, *, prompt_tokens: int = 100, model: str | None = None) -> dict[str, Any]:
        n = self.next_id()
        return self._chunk(self._parts(answer), n, model or self.model, self._usage(answer, prompt_tokens), True)

    def render_sse(self, answer: Answer, *, prompt_tokens: int = 100, model: str | None = None) -> list[bytes]:
        n = self.next_id()
        model = model or self.model
        usage = self._usage(answer, prompt_tokens)
        chunks: list[list[dict[str, Any]]] = []
        if answer.reasoning:
            chunks.append([{"text": answer.reasoning, "thought": True}])
        chunks.extend([{"text": piece}] for piece in _pieces(answer.text))
        calls = [p for p in self._parts(answer) if "functionCall" in p]
        if calls:
            chunks.append(calls)
        chunks.append([{"text": ""}])  # as recorded: the finishing chunk carries an empty text part
        return [
            b"data: " + json.dumps(self._chunk(parts, n, model, usage, i == len(chunks) - 1)).encode() + b"\r\n\r\n"
            for i, parts in enumerate(chunks)
        ]

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}

    def is_stream(self, received: Received, body: dict[str, Any]) -> bool:
        return received.path.endswith(":streamGenerateContent")

    def _parse(self, received: Received, body: dict[str, Any]) -> WireRequest:
        entries: list[Entry] = []
        for content in body.get("contents") or []:
            role = content.get("role")
            for part in content.get("parts") or []:
                if "functionCall" in part:
                    fc = part["functionCall"]
                    entries.append(
                        Entry("call", call=(fc.get("id") or fc["name"], fc["name"], dict(fc.get("args") or {})))
                    )
                elif "functionResponse" in part:
                    fr = part["functionResponse"]
                    response = fr.get("response") or {}
                    failed = "error" in response
                    value = response.get("error") if failed else response.get("result", response)
                    view = ToolResultView(fr.get("id") or fr["name"], fr["name"], _text_of(value), failed, fr)
                    entries.append(Entry("result", result=view))
                elif "text" in part and not part.get("thought"):
                    entries.append(Entry("assistant" if role == "model" else "user", text=part["text"]))
        system = "\n\n".join(p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts") or [])
        tools = [
            d["name"]
            for group in body.get("tools") or []
            for d in group.get("functionDeclarations") or []
            if "name" in d
        ]
        reasoning = (body.get("generationConfig") or {}).get("thinkingConfig")
        return WireRequest(received, body, self.is_stream(received, body), system, entries, tools, reasoning)


#: One fresh wire per provider, by name (fresh so id counters do not leak between tests).
WIRES: dict[str, Callable[[], Wire]] = {"openai": OpenAIWire, "anthropic": AnthropicWire, "gemini": GeminiWire}


# ==================================================================================================
# The scripted model: answers a ReplayServer turn by turn
# ==================================================================================================

#: A script step: a fixed answer, or one computed from the request it answers.
Step = Answer | Callable[[WireRequest], Answer]


@dataclass
class Lane:
    """A script of its own for the requests ``match`` selects (e.g. a subagent's)."""

    name: str
    match: Callable[[WireRequest], bool] | None
    steps: deque[Step] = field(default_factory=deque)
    requests: list[WireRequest] = field(default_factory=list)

    def then(self, *steps: Step) -> Lane:
        self.steps.extend(steps)
        return self


class ScriptedModel:
    """Plays the model behind a ReplayServer: each request gets the next step of its lane,
    rendered in the wire's format (stream or JSON, as the request asked).

    A request that finds its lane's script used up, or a step that raises, is answered with a
    400 in the provider's error shape (non-retryable, so the session stops at once) and recorded
    in ``failures``; :meth:`verify` raises on failures and on steps left unused.
    """

    def __init__(self, server: ReplayServer, wire: Wire, *, chunking: str | int | None = "events") -> None:
        self.server = server
        self.wire = wire
        self.chunking = chunking
        self.main = Lane("main", None)
        self.lanes: list[Lane] = []
        #: Every request in arrival order.
        self.requests: list[WireRequest] = []
        self.failures: list[str] = []
        self._reported = 0  # failures already raised by raise_failures()
        self._lock = threading.Lock()
        server.responder = self._respond

    # -- scripting --------------------------------------------------------------------------------
    def then(self, *steps: Step) -> ScriptedModel:
        """Append steps to the main lane."""
        self.main.then(*steps)
        return self

    def lane(self, name: str, match: Callable[[WireRequest], bool], *steps: Step) -> Lane:
        """A lane checked before the main one (in creation order)."""
        lane = Lane(name, match)
        lane.then(*steps)
        with self._lock:
            self.lanes.append(lane)
        return lane

    # -- serving ----------------------------------------------------------------------------------
    def _respond(self, received: Received) -> Scripted:
        try:
            request = self.wire.parse(received)
        except Exception as exc:
            return self._fail(f"unparseable request to {received.path}: {type(exc).__name__}: {exc}")
        with self._lock:
            self.requests.append(request)
            lane = next((ln for ln in self.lanes if ln.match is not None and ln.match(request)), self.main)
            lane.requests.append(request)
            step = lane.steps.popleft() if lane.steps else None
        if step is None:
            seen = [r.output[:200] for r in request.new_results]
            return self._fail(
                f"lane {lane.name!r}: script used up at request {len(lane.requests)} "
                f"(new input: {request.new_user_texts!r}, new results: {seen!r})"
            )
        try:
            answer = step(request) if callable(step) else step
        except Exception as exc:
            return self._fail(f"lane {lane.name!r}: step {len(lane.requests)} raised {type(exc).__name__}: {exc}")
        prompt_tokens = max(1, len(received.body) // 4)
        return self.wire.render(answer, stream=request.stream, prompt_tokens=prompt_tokens, chunking=self.chunking)

    def _fail(self, message: str) -> Scripted:
        with self._lock:
            self.failures.append(message)
        return self.wire.error(400, f"scripted model: {message}")

    # -- checking ---------------------------------------------------------------------------------
    def raise_failures(self) -> None:
        """Raise when a request went unanswered (a step raised, or a lane ran out)."""
        if self.failures:
            self._reported = len(self.failures)
            raise AssertionError("scripted model: " + "; ".join(self.failures))

    def verify(self) -> None:
        """Raise when a request went unanswered (unless already raised) or, when none did, steps
        were left over (after a failure, leftovers are expected and say nothing new)."""
        problems = self.failures[self._reported :]
        for lane in [self.main, *self.lanes]:
            if lane.steps and not self.failures:
                problems.append(f"lane {lane.name!r}: {len(lane.steps)} scripted step(s) never requested")
        if problems:
            raise AssertionError("scripted model: " + "; ".join(problems))
