"""Reading Chat Completions answers: the streamed parser and the non-streamed parse.

The answer side of :mod:`ra.llm.providers.openai_chat` (which builds requests and decides how to
ask): :func:`sse_records` splits a ``text/event-stream`` body into ``(event, data)`` records on
bytes, :func:`stream_events` turns the records into unified stream events (text, reasoning with
OpenRouter's ``reasoning_details``, tool calls by index, usage, FINISH with the whole Response),
and :func:`parse_reply` reads a non-streamed answer. A reply of the wrong shape raises what
``ra.llm.shape`` turns into a malformed-response error naming the field; an ``error`` object inside
a 200 answer becomes the error the same failure gets over HTTP.

Most chunks of a streamed answer are plain text chunks like the previous one: those are
recognised by their bytes (:mod:`.chunk_template`) and only their text is decoded.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..accumulator import StreamAccumulator
from ..errors import ProviderError, SDKError, StreamError, error_in_answer
from ..http import drain
from ..shape import ANY, INT, MALFORMED, STR, MalformedStreamError, arr, malformed, obj
from ..types import (
    ContentKind,
    ContentPart,
    FinishReason,
    Message,
    RateLimitInfo,
    Response,
    Role,
    StreamEvent,
    StreamEventType,
    ThinkingData,
    ToolCall,
    ToolCallData,
    Usage,
)
from .chunk_template import TextChunkTemplate

__all__ = ["CHUNK_SHAPE", "REPLY_SHAPE", "parse_reply", "sse_records", "stream_events"]

_T = StreamEventType
_K = ContentKind

# The shapes the parsers rely on (checked only when a reply breaks them, to name the field).
_TEXT_OR_PARTS = {"type": ["string", "array", "null"], "items": {"type": ["object", "string"]}}
_USAGE_SHAPE = obj(prompt_tokens=INT, completion_tokens=INT, total_tokens=INT)
_FUNCTION = obj(name=STR, arguments={"type": ["string", "object", "null"]})
REPLY_SHAPE = obj(
    False,
    choices=arr(
        obj(
            False,
            message=obj(
                content=_TEXT_OR_PARTS,
                refusal=STR,
                reasoning_content=STR,
                reasoning=STR,
                reasoning_details=arr(ANY),
                tool_calls=arr(obj(False, id=STR, function=_FUNCTION)),
                function_call=_FUNCTION,
            ),
            finish_reason=STR,
        ),
        nullable=False,
    ),
    usage=_USAGE_SHAPE,
)
CHUNK_SHAPE = obj(
    False,
    choices=arr(
        obj(
            False,
            index=INT,
            delta=obj(
                content=STR,
                reasoning_content=STR,
                reasoning=STR,
                reasoning_details=arr(ANY),
                tool_calls=arr(obj(False, index={"type": ["integer", "string", "null"]}, id=STR, function=_FUNCTION)),
            ),
            finish_reason=STR,
        )
    ),
    usage=_USAGE_SHAPE,
)
_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
}

_json_loads = json.loads
#: ``json.loads`` minus its per-call argument handling and encoding sniffing: payloads are
#: decoded as UTF-8 (the only encoding SSE allows) and handed to the C scanner directly.
_decode_json = json.JSONDecoder().decode


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- a non-streamed answer ---------------------------------------------------------------------------
def parse_reply(name: str, data: Any, headers: Mapping[str, str]) -> Response:
    """A non-streamed Chat Completions answer as a Response (``name``: the provider)."""
    if not isinstance(data, dict):
        raise ProviderError("answer is not a JSON object", provider=name, status_code=200, raw=data)
    if data.get("error"):
        raise _stream_error(name, data)
    choices = data.get("choices")
    if choices is not None and (not isinstance(choices, list) or (choices and not isinstance(choices[0], dict))):
        raise TypeError("choices is not a list of objects")  # -> MalformedResponseError, naming the field
    if not choices:
        raise ProviderError("answer has no choices", provider=name, status_code=200, raw=data)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        # A null or missing message is no answer at all, not an empty one: ending the run as
        # "completed" with no text would hide a broken server or proxy.
        raise TypeError("the choice has no message")  # -> MalformedResponseError
    parts: list[ContentPart] = []
    thinking = _thinking_from(message)
    if thinking is not None:
        parts.append(ContentPart.of_thinking(thinking))
    content = message.get("content")
    if isinstance(content, list):  # a few servers answer with content parts
        content = "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    if content is not None and not isinstance(content, str):
        raise TypeError("content is not text")
    if content:
        parts.append(ContentPart(_K.TEXT, text=content))
    refusal = message.get("refusal")
    if refusal and not content:
        parts.append(ContentPart(_K.TEXT, text=refusal))
    has_calls = False
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        if not isinstance(call.get("id") or "", str) or not isinstance(fn.get("name") or "", str):
            raise TypeError("a tool call's id or name is not text")
        raw = fn.get("arguments")
        if isinstance(raw, dict):  # Ollama-style parsed arguments
            raw = _dumps(raw)
        parts.append(
            ContentPart(_K.TOOL_CALL, tool_call=_call_data(call.get("id") or _new_id(), fn.get("name") or "", raw))
        )
        has_calls = True
    function_call = message.get("function_call")
    if isinstance(function_call, dict) and not has_calls:  # the legacy single-function shape
        raw = function_call.get("arguments")
        parts.append(ContentPart(_K.TOOL_CALL, tool_call=_call_data(_new_id(), function_call.get("name") or "", raw)))
        has_calls = True
    return Response(
        id=str(data.get("id") or ""),
        model=str(data.get("model") or ""),
        provider=name,
        message=Message(Role.ASSISTANT, parts),
        finish_reason=_finish(choice.get("finish_reason"), has_calls),
        usage=_usage(data.get("usage")),
        raw=data,
        rate_limit=RateLimitInfo.from_headers(headers),
    )


# -- a streamed answer -------------------------------------------------------------------------------
async def stream_events(
    name: str, records: AsyncIterator[tuple[str, bytes]], headers: Mapping[str, str]
) -> AsyncIterator[StreamEvent]:
    """Translate a Chat Completions stream (``records`` from :func:`sse_records`) into unified
    events, ending with FINISH and its Response; ``name`` is the provider reported in errors."""
    acc = StreamAccumulator(name)
    process = acc.process
    start = StreamEvent(_T.STREAM_START)
    process(start)
    yield start

    text_id: str | None = None  # the open text segment
    text_n = 0
    reasoning_open = False
    reasoning_buf: list[str] = []
    reasoning_field = "reasoning_content"
    details: dict[Any, dict[str, Any]] = {}
    last_thinking: ThinkingData | None = None
    tools: dict[Any, _ToolState] = {}  # index -> open call
    order: list[_ToolState] = []
    finish_raw: str | None = None
    usage_raw: dict[str, Any] | None = None
    first: dict[str, Any] | None = None
    done = False
    #: Whether any chunk carried the answer's choice (text ones included, which skip the decode).
    answered = False
    ev = StreamEvent

    def close_reasoning() -> StreamEvent:
        nonlocal reasoning_open, last_thinking
        reasoning_open = False
        thinking = _thinking_data("".join(reasoning_buf), reasoning_field, details)
        reasoning_buf.clear()
        last_thinking = thinking
        return ev(_T.REASONING_END, thinking=thinking)

    chunk: Any = None
    # Most chunks of an answer are the last plain text chunk with other text: those are
    # recognised by their bytes and only their text is decoded (see chunk_template).
    template = TextChunkTemplate("content", _with_content)
    text_of = template.text_of
    try:
        sse = records
        async for event_name, data in sse:
            content = None if event_name else text_of(data)
            delta = tool_calls = None
            if content is not None:
                answered = True
            else:
                if data == b"[DONE]":
                    done = True
                    break
                try:
                    raw_chunk = data.decode()
                    chunk = _decode_json(raw_chunk)
                except (ValueError, RecursionError) as exc:  # UnicodeDecodeError included
                    raise StreamError(f"{name}: undecodable stream chunk: {data[:200]!r}", cause=exc)
                if not isinstance(chunk, dict):
                    raise StreamError(f"{name}: unexpected stream chunk: {data[:200]!r}")
                if event_name == "error" or chunk.get("error"):
                    raise _stream_error(name, chunk)
                if first is None:
                    first = chunk
                usage = chunk.get("usage")
                if usage:
                    usage_raw = usage
                choices = chunk.get("choices")
                if not choices:
                    continue
                choice = choices[0]
                if choice.get("index", 0) != 0:  # n > 1: only the first choice is followed
                    choice = next((c for c in choices if c.get("index", 0) == 0), None)
                    if choice is None:
                        continue
                delta = choice.get("delta")
                if delta is not None and not isinstance(delta, dict):
                    raise TypeError("delta is not an object")
                if not delta:
                    if reason := choice.get("finish_reason"):
                        finish_raw = reason
                        answered = True
                    elif delta is not None:
                        answered = True  # {"delta": {}}: a choice, with nothing in it yet
                    continue
                answered = True
                # -- reasoning -------------------------------------------------------------------
                rtext = delta.get("reasoning_content")
                field = "reasoning_content"
                if not rtext:
                    rtext = delta.get("reasoning")
                    field = "reasoning"
                if rtext and not isinstance(rtext, str):
                    raise TypeError(f"{field} is not text")
                rdetails = delta.get("reasoning_details")
                if rdetails:
                    _merge_details(details, rdetails)
                    if not reasoning_open and last_thinking is not None and not rtext:
                        # A signature that trails its (already closed) reasoning.
                        _refresh_thinking(last_thinking, details)
                if rtext:
                    if not reasoning_open:
                        reasoning_open = True
                        reasoning_field = field
                        if text_id is not None:
                            e = ev(_T.TEXT_END, text_id=text_id)
                            process(e)
                            yield e
                            text_id = None
                        e = ev(_T.REASONING_START)
                        process(e)
                        yield e
                    reasoning_buf.append(rtext)
                    e = ev(_T.REASONING_DELTA, reasoning_delta=rtext)
                    process(e)
                    yield e
                content = delta.get("content")
                if content and not isinstance(content, str):
                    raise TypeError("content is not text")
                tool_calls = delta.get("tool_calls")
                reason = choice.get("finish_reason")
                if reason:
                    finish_raw = reason
                elif content and not (event_name or usage or rtext or rdetails or tool_calls) and len(choices) == 1:
                    template.learn(raw_chunk, chunk, content)  # a plain text chunk
            # -- text --------------------------------------------------------------------------
            if content:
                if reasoning_open:
                    e = close_reasoning()
                    process(e)
                    yield e
                if text_id is None:
                    text_id = f"text-{text_n}"
                    text_n += 1
                    e = ev(_T.TEXT_START, text_id=text_id)
                    process(e)
                    yield e
                e = ev(_T.TEXT_DELTA, content, text_id)
                process(e)
                yield e
            # -- tool calls --------------------------------------------------------------------
            if delta is not None and tool_calls:
                for pos, tc in enumerate(tool_calls):
                    index = tc.get("index", pos)
                    fn = tc.get("function") or {}
                    call_id = tc.get("id")
                    if (call_id and not isinstance(call_id, str)) or not isinstance(fn.get("name") or "", str):
                        raise TypeError("a tool call's id or name is not text")
                    state = tools.get(index)
                    if state is None or (call_id and state.started and call_id != state.id):
                        # A new call: earlier ones are complete.
                        if reasoning_open:
                            e = close_reasoning()
                            process(e)
                            yield e
                        if text_id is not None:
                            e = ev(_T.TEXT_END, text_id=text_id)
                            process(e)
                            yield e
                            text_id = None
                        for e in _end_calls(order):
                            process(e)
                            yield e
                        state = _ToolState(call_id or "", fn.get("name") or "")
                        tools[index] = state
                        order.append(state)
                    elif not state.name and fn.get("name"):
                        state.name = fn["name"]
                    if not state.id and call_id:
                        state.id = call_id
                    if not state.started and state.name:
                        state.started = True
                        if not state.id:
                            state.id = _new_id()
                        state.head = ToolCall(state.id, state.name)
                        e = ev(_T.TOOL_CALL_START, tool_call=state.head)
                        process(e)
                        yield e
                        if state.buf:
                            e = ev(_T.TOOL_CALL_DELTA, "".join(state.buf), tool_call=state.head)
                            process(e)
                            yield e
                    args = fn.get("arguments")
                    if args:
                        if isinstance(args, dict):
                            args = _dumps(args)
                        elif not isinstance(args, str):
                            raise TypeError("a tool call's arguments are neither text nor an object")
                        state.buf.append(args)
                        if state.started:
                            e = ev(_T.TOOL_CALL_DELTA, args, tool_call=state.head)
                            process(e)
                            yield e

        if not done:
            raise StreamError(f"{name}: the stream ended without its final 'data: [DONE]'")
        if not answered:
            # Only [DONE], chunks without choices, or choices with a null delta and no finish
            # reason: nothing was answered, which must not pass for an empty answer.
            raise MalformedStreamError(f"{name}: malformed stream: no chunk carried a choice (no answer)")
        # Read the rest of the body (normally only the chunked terminator, often buffered already)
        # before FINISH, so the connection goes back to the pool: left unread, httpx closes it and
        # the next step pays a new TCP (and TLS) handshake. Bounded, for servers that linger.
        await drain(sse, close=True)

        # -- close what is open, then FINISH -------------------------------------------------
        if reasoning_open:
            e = close_reasoning()
            process(e)
            yield e
        elif details and last_thinking is None:
            # Reasoning that came only as details (e.g. encrypted), never as text.
            e = ev(_T.REASONING_START)
            process(e)
            yield e
            e = close_reasoning()
            process(e)
            yield e
        if text_id is not None:
            e = ev(_T.TEXT_END, text_id=text_id)
            process(e)
            yield e
        for e in _end_calls(order):
            process(e)
            yield e
        finish = _finish(finish_raw, bool(order))
        usage_obj = _usage(usage_raw)
        acc.finish_reason = finish
        acc.usage = usage_obj
        result = acc.response()
        head = first or {}
        result.id = str(head.get("id") or "")
        result.model = str(head.get("model") or "")
        result.rate_limit = RateLimitInfo.from_headers(headers)
        raw: dict[str, Any] = {"id": head.get("id"), "model": head.get("model"), "finish_reason": finish_raw}
        if usage_raw is not None:
            raw["usage"] = usage_raw
        for key in ("created", "system_fingerprint", "provider"):
            if key in head:
                raw[key] = head[key]
        result.raw = raw
        e = ev(_T.FINISH, finish_reason=finish, usage=usage_obj, response=result)
        process(e)
        yield e
    except MALFORMED as exc:
        # A chunk of the wrong shape: ra's error, naming the field (see ra.llm.shape).
        raise malformed(name, chunk, CHUNK_SHAPE, exc, stream=True) from exc


async def sse_records(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[str, bytes]]:
    """Yield ``(event name, data)`` per SSE event, working on bytes.

    Handles LF, CRLF and CR line ends (also split across chunks), comment lines, multi-line
    data and ``data:`` with or without the space. Payloads stay bytes until the caller
    decodes them whole, so a character split across network chunks is never a problem.
    """
    buf = b""
    data_lines: list[bytes] = []
    event = ""
    async for chunk in chunks:
        if buf:
            chunk = buf + chunk
        carry = b""
        if b"\r" in chunk:
            if chunk[-1:] == b"\r":  # may be half of a CRLF
                chunk, carry = chunk[:-1], b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        buf = lines.pop() + carry
        for line in lines:
            if not line:
                if data_lines:
                    yield event, data_lines[0] if len(data_lines) == 1 else b"\n".join(data_lines)
                    data_lines = []
                event = ""
            elif line[0] == 58:  # ':' comment (": OPENROUTER PROCESSING", keep-alives)
                continue
            elif line[:5] == b"data:":
                value = line[5:]
                data_lines.append(value[1:] if value[:1] == b" " else value)
            elif line[:6] == b"event:":
                event = line[6:].strip().decode("utf-8", "replace")
    # A final event without its blank line still counts (lenient; some servers do this).
    buf = buf.rstrip(b"\r")
    if buf[:5] == b"data:":
        value = buf[5:]
        data_lines.append(value[1:] if value[:1] == b" " else value)
    if data_lines:
        yield event, b"\n".join(data_lines)


class _ToolState:
    __slots__ = ("buf", "ended", "head", "id", "name", "started")

    def __init__(self, call_id: str, name: str) -> None:
        self.id = call_id
        self.name = name
        self.buf: list[str] = []
        self.started = False
        self.ended = False
        self.head: ToolCall | None = None


def _end_calls(order: list[_ToolState]) -> list[StreamEvent]:
    """TOOL_CALL_END for every call not yet ended (a call without a name is started first)."""
    events: list[StreamEvent] = []
    for state in order:
        if state.ended:
            continue
        state.ended = True
        if not state.started:
            state.started = True
            state.id = state.id or _new_id()
            state.head = ToolCall(state.id, state.name)
            events.append(StreamEvent(_T.TOOL_CALL_START, tool_call=state.head))
            if state.buf:
                events.append(StreamEvent(_T.TOOL_CALL_DELTA, "".join(state.buf), tool_call=state.head))
        raw = "".join(state.buf)
        events.append(
            StreamEvent(_T.TOOL_CALL_END, tool_call=ToolCall.from_data(_call_data(state.id, state.name, raw)))
        )
    return events


# -- helpers -----------------------------------------------------------------------------------------
def _with_content(chunk: dict[str, Any], text: str) -> dict[str, Any]:
    """``chunk`` (a plain text chunk) with ``text`` as its first choice's content."""
    choice = chunk["choices"][0]
    return {**chunk, "choices": [{**choice, "delta": {**choice["delta"], "content": text}}]}


def _new_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _call_data(call_id: str, name: str, raw: Any) -> ToolCallData:
    """A ToolCallData from the model's argument string, keeping that string for the round trip."""
    if raw is None:
        raw = ""
    elif not isinstance(raw, str):
        raw = _dumps(raw)
    call = ToolCall.from_data(ToolCallData(call_id, name, raw))
    if call.arguments_error is not None:
        return ToolCallData(call_id, name, raw)
    return ToolCallData(call_id, name, call.arguments, provider_data={"raw_arguments": raw} if raw else None)


def _merge_details(acc: dict[Any, dict[str, Any]], items: list[Any]) -> None:
    """Fold streamed ``reasoning_details`` fragments (OpenRouter) by their ``index``."""
    for pos, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        key = item.get("index", pos)
        have = acc.get(key)
        if have is None:
            acc[key] = dict(item)
            continue
        for k, v in item.items():
            if k in ("text", "summary", "data") and isinstance(v, str):
                have[k] = (have.get(k) or "") + v
            elif v not in (None, "") or k not in have:
                have[k] = v


def _details_list(details: dict[Any, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in d.items() if v is not None} for d in details.values()]


def _signature(details: list[dict[str, Any]]) -> str | None:
    for d in details:
        sig = d.get("signature")
        if sig:
            return str(sig)
    return None


def _thinking_data(text: str, field: str, details: dict[Any, dict[str, Any]]) -> ThinkingData:
    if details:
        items = _details_list(details)
        if not text:
            text = "".join(str(d.get("text") or d.get("summary") or "") for d in items)
        return ThinkingData(text, _signature(items), False, {"field": field, "reasoning_details": items})
    return ThinkingData(text, None, False, {"field": field})


def _refresh_thinking(thinking: ThinkingData, details: dict[Any, dict[str, Any]]) -> None:
    items = _details_list(details)
    thinking.signature = _signature(items) or thinking.signature
    pd = dict(thinking.provider_data or {})
    pd["reasoning_details"] = items
    thinking.provider_data = pd


def _thinking_from(message: dict[str, Any]) -> ThinkingData | None:
    """Reasoning of a non-streamed answer: DeepSeek ``reasoning_content``, OpenRouter/Groq
    ``reasoning`` and ``reasoning_details``."""
    text = message.get("reasoning_content")
    field = "reasoning_content"
    if not text:
        text = message.get("reasoning")
        field = "reasoning"
    raw_details = message.get("reasoning_details")
    details: dict[Any, dict[str, Any]] = {}
    if isinstance(raw_details, list) and raw_details:
        _merge_details(details, raw_details)
    if not text and not details:
        return None
    return _thinking_data(text if isinstance(text, str) else "", field, details)


def _finish(raw: str | None, has_calls: bool) -> FinishReason:
    if raw is None:
        return FinishReason("tool_calls" if has_calls else "stop", None)
    unified = _FINISH.get(raw, "other")
    if has_calls and unified == "stop":
        unified = "tool_calls"
    return FinishReason(unified, raw)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    inp = _int(raw.get("prompt_tokens")) or 0
    out = _int(raw.get("completion_tokens")) or 0
    total = _int(raw.get("total_tokens")) or inp + out
    cdet = raw.get("completion_tokens_details")
    pdet = raw.get("prompt_tokens_details")
    reasoning = _int(cdet.get("reasoning_tokens")) if isinstance(cdet, dict) else None
    cache_read = _int(pdet.get("cached_tokens")) if isinstance(pdet, dict) else None
    hit = _int(raw.get("prompt_cache_hit_tokens"))  # DeepSeek
    if hit is not None and not cache_read:
        cache_read = hit
    cache_write = _int(pdet.get("cache_write_tokens")) if isinstance(pdet, dict) else None
    return Usage(inp, out, total, reasoning, cache_read, cache_write, raw)


def _stream_error(provider: str, payload: dict[str, Any]) -> SDKError:
    """The error an ``{"error": {...}}`` payload inside a 200 answer stands for."""
    return error_in_answer(provider, payload, default_message="error inside a 200 answer")
