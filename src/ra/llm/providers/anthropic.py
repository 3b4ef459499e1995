"""Anthropic Messages API adapter (``POST {base_url}/v1/messages``), spoken natively over httpx.

Request translation (unified-llm-spec 3.2, 5.3, 7.3):

* SYSTEM and DEVELOPER messages, wherever they appear, become the ``system`` list of text blocks,
  in order. ``Message.name`` has no Anthropic counterpart and is not sent.
* The Messages API demands strict user/assistant alternation, so consecutive turns of the same
  role are merged into one message. TOOL messages become ``tool_result`` blocks in a user message
  (merged with any adjacent user content); inside such a message the ``tool_result`` blocks are
  moved to the front, because the API rejects text that precedes the results of the previous turn.
* Signed thinking and redacted thinking parts are sent back verbatim in their original position
  (before the ``tool_use`` blocks of the same turn). Thinking without a signature (for instance
  reasoning produced by another provider) cannot be verified by Anthropic and is left out.
* ``max_tokens`` is required by the API: the request's value, else ``DEFAULT_MAX_TOKENS`` (4096,
  overridable per adapter) - raised to ``budget + DEFAULT_MAX_TOKENS`` when a thinking budget
  would not fit below it.
* tool_choice: auto -> ``{"type": "auto"}``, required -> ``{"type": "any"}``, named ->
  ``{"type": "tool", "name": ...}``, none -> ``tools`` and ``tool_choice`` are omitted. Exception:
  when the history already holds ``tool_use``/``tool_result`` blocks the API insists on tool
  definitions, so there the tools stay and ``{"type": "none"}`` is sent instead.

Thinking: ``provider_options["anthropic"]["thinking"]`` is passed through as is. Without it,
``reasoning_effort`` maps to an extended-thinking budget: minimal 1024, low 2048, medium 8192,
high 24576, xhigh 32768 tokens ("none" disables thinking). If the caller set ``max_tokens`` at or below that
budget, the budget shrinks to ``max_tokens - 1`` (and a clear error is raised when that would go
below the API minimum of 1024).

Structured output (``response_format``): by default the adapter forces a tool named
``json_output`` (a suffix is added if the caller owns a tool of that name) whose ``input_schema``
is the requested schema, then turns that tool's input back into a TEXT part holding the JSON
(streamed as TEXT_DELTA) with finish reason ``stop``, so ``generate_object()`` stays
provider-agnostic. A schema whose root is not an object is wrapped as ``{"value": <schema>}`` and
unwrapped again. ``strict=True`` marks the tool ``strict`` (with the structured-outputs beta).
With thinking enabled the API forbids forced tool use; the adapter then uses ``auto`` and tells
the model in the system prompt to answer through the tool. The provider option
``structured_output="native"`` uses the beta ``output_format`` field instead.

Automatic prompt caching (spec 2.10), on unless ``provider_options.anthropic.auto_cache`` is false
(or the adapter was built with ``auto_cache=False``). Up to four ``{"type": "ephemeral"}``
breakpoints (the API's maximum, counting any the caller placed), in this priority order:

1. the last cacheable block of the **last** user message - the whole prompt is written to the
   cache, so the next turn of an agent loop, which repeats it as its prefix, reads it back;
2. the last cacheable block of the **second-to-last** user message - the point the previous request
   wrote, so the prefix is still found when the newest turn added more than the API's 20-block
   look-back (many parallel tool results);
3. the last ``system`` block - survives when the conversation itself changes;
4. the last tool definition.

Thinking blocks cannot carry ``cache_control`` and are skipped. Explicit ``cache_control`` from the
caller is never duplicated: a system list or tool list that already has one is left alone, any
breakpoint already in the messages (or a top-level ``cache_control``, Anthropic's own automatic
mode) means the caller manages the conversation, and the caller's dicts are copied, not mutated.
When the body carries any ``cache_control`` the ``prompt-caching-2024-07-31`` beta is announced.

Provider options (``provider_options["anthropic"]``): ``beta_headers`` (list, joined into the
``anthropic-beta`` header), ``thinking``, ``auto_cache``, ``structured_output`` ("tool" or
"native"), ``disable_parallel_tool_use``. Every other key is merged into the body as an escape hatch
(``top_k``, ``service_tier``, ``output_config``, a top-level ``cache_control``, or even a raw
``system``), overriding what the adapter built.

Usage: ``input_tokens`` is the *whole* prompt (``input_tokens + cache_read_input_tokens +
cache_creation_input_tokens``), as OpenAI and Gemini report it, so context-window logic and cache
hit ratios compare across providers; the raw numbers stay in ``Usage.raw``. ``reasoning_tokens``
comes from ``output_tokens_details.thinking_tokens`` when the API sends it, otherwise it is an
estimate of about 4 characters per token over the visible thinking text (redacted thinking is
opaque and not counted), capped at ``output_tokens``.

Authentication: ``x-api-key`` (the ``api_key`` argument, else ``ANTHROPIC_API_KEY``; none is sent when
neither is set, for proxies that add their own) and ``anthropic-version: 2023-06-01``.

Finish reasons: end_turn/stop_sequence -> stop, max_tokens and model_context_window_exceeded ->
length, tool_use -> tool_calls, refusal -> content_filter, anything else -> other (raw kept).

Speed: an agent sends its whole history with every step, so the request body is not rebuilt from
it. ``complete`` and ``stream`` send ``encode_body``'s bytes: the same bytes as JSON-encoding
``build_body``'s dict compactly (what the HTTP layer does with a dict, and what a prompt cache
needs to find its prefix), assembled from cached pieces. Translating a Message is a pure function
of it, so its blocks, and each block's JSON, are cached per Message object: the entry holds the
Message (so its ``id`` is not reused while cached) and a fingerprint (role, name, tool_call_id and
a copy of its parts list); adding, removing or replacing a part invalidates it, editing a part's
fields in place does not (treat sent Messages as immutable, as the agent loop does; a local image
path is read once). Messages merge into wire messages, and only the last four wire messages stay
open as blocks (the roles alternate, so the last two user messages, where the breakpoints go, are
among them, and the newest may still grow by a merge); the ones before are closed as JSON, once.
A breakpoint's copy of a block is encoded by splicing the mark into the block's cached JSON. Each
conversation (``Request.conversation``, else its first Message) keeps where its last request's
walk ended: when the next request starts with the same Message objects, unchanged (role, name,
call id and parts list compared by C-level ``map`` passes), only the messages after them are looked
up. When the caller vouches for them (``Request.unchanged``, the agent loop's), only their identity
is checked. What is left proportional to the history is that pass and copying pointers and bytes,
in C (``conversations``). The translation cache and the remembered conversations are bounded
(``CACHE_LIMIT`` messages, beyond the newest conversation). ``build_body`` translates afresh and
shares nothing with the cache.
"""

from __future__ import annotations

import json
import operator
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Unpack

from ..accumulator import StreamAccumulator
from ..errors import InvalidRequestError, SDKError, StreamError, error_in_answer
from ..http import HTTPAdapter, HTTPOptions, SSEEvent
from ..media import resolve_media, to_base64
from ..shape import MALFORMED, NUM, STR, arr, malformed, obj
from ..types import (
    ContentKind,
    ContentPart,
    DocumentData,
    FinishReason,
    ImageData,
    Message,
    RateLimitInfo,
    Request,
    Response,
    Role,
    StreamEvent,
    StreamEventType,
    ThinkingData,
    ToolCall,
    ToolCallData,
    ToolResultData,
    Usage,
    Warning,
    parse_arguments,
)
from .body_json import dumps as _dumps
from .body_json import join_body
from .conversations import Conversations, conversation_key, evict, still_valid

__all__ = [
    "API_VERSION",
    "DEFAULT_MAX_TOKENS",
    "EFFORT_BUDGETS",
    "AnthropicAdapter",
]

API_VERSION = "2023-06-01"
#: Sent when the request names no ``max_tokens`` (the API requires one).
DEFAULT_MAX_TOKENS = 4096
#: ``reasoning_effort`` -> extended-thinking ``budget_tokens`` (None: thinking off).
EFFORT_BUDGETS: dict[str, int | None] = {
    "none": None,
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 24576,
    # OpenAI's extra level: the strongest budget that still fits the 64k output of Claude 4.x.
    "xhigh": 32768,
}
_MIN_THINKING_BUDGET = 1024

# The shapes the parsers rely on (checked only when a reply breaks them, to name the field).
_BLOCK = obj(False, type=STR, text=STR, thinking=STR, signature=STR, data=STR, id=STR, name=STR)
_USAGE_SHAPE = obj(input_tokens=NUM, output_tokens=NUM, cache_read_input_tokens=NUM, cache_creation_input_tokens=NUM)
MESSAGE_SHAPE = obj(False, id=STR, model=STR, content=arr(_BLOCK), stop_reason=STR, usage=_USAGE_SHAPE)
EVENT_SHAPE = obj(
    False,
    type=STR,
    index={"type": ["integer", "null"]},
    message=obj(id=STR, model=STR, usage=_USAGE_SHAPE),
    content_block=_BLOCK,
    delta=obj(type=STR, text=STR, partial_json=STR, thinking=STR, signature=STR, stop_reason=STR, stop_sequence=STR),
    usage=_USAGE_SHAPE,
)
_MAX_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}
_CACHE_BETA = "prompt-caching-2024-07-31"
_STRUCTURED_BETA = "structured-outputs-2025-11-13"
_KNOWN_OPTIONS = frozenset({"beta_headers", "thinking", "auto_cache", "structured_output", "disable_parallel_tool_use"})
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})
_TOOL_BLOCKS = frozenset({"tool_use", "tool_result"})

#: Wire messages kept open (as blocks, not yet as closed JSON) at the end of a conversation. The
#: wire roles alternate, so the last two user messages - where the automatic breakpoints go - are
#: among the last four.
_OPEN = 4


_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}

_T = StreamEventType


def _bad_request(message: str) -> InvalidRequestError:
    return InvalidRequestError(message, provider="anthropic")


def _estimate_tokens(chars: int) -> int:
    """About four characters a token: Anthropic reports no separate thinking-token count."""
    return (chars + 3) // 4


@dataclass(slots=True, frozen=True)
class _JsonPlan:
    """How ``response_format`` is realised for one request."""

    mode: str  # "tool" | "native"
    tool_name: str
    schema: dict[str, Any]
    wrapped: bool  # the schema root was not an object and sits under {"value": ...}
    strict: bool


@dataclass(slots=True)
class _Prepared:
    body: dict[str, Any]
    headers: dict[str, str]
    plan: _JsonPlan | None
    data: bytes | None = None  # the body's encoding, when asked for


@dataclass(slots=True)
class _Wire:
    """One wire message while it may still grow (the next Message of its role is merged into it):
    its ``tool_result`` blocks, which a user message sends first, the other blocks, and the JSON of
    each block (from the translation cache)."""

    role: str
    results: list[dict[str, Any]]
    results_json: list[bytes]
    rest: list[dict[str, Any]]
    rest_json: list[bytes]

    def copy(self) -> _Wire:
        return _Wire(self.role, self.results[:], self.results_json[:], self.rest[:], self.rest_json[:])

    def message(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.results + self.rest}

    def json(self) -> bytes:
        return _wire_head(self.role) + b",".join(self.results_json + self.rest_json) + b"]}"


@dataclass(slots=True)
class _Walk:
    """The translated history of one request: the system blocks, the JSON of the wire messages
    that can no longer change (each followed by a comma) and the last wire messages, still open."""

    system: list[dict[str, Any]]
    closed: list[bytes]
    wires: list[_Wire]
    has_tool_blocks: bool


class AnthropicAdapter(HTTPAdapter):
    """Adapter for the Anthropic Messages API (see the module docstring for every mapping)."""

    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    api_key_env = ("ANTHROPIC_API_KEY",)

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        auto_cache: bool = True,
        api_version: str = API_VERSION,
        **http: Unpack[HTTPOptions],
    ) -> None:
        super().__init__(api_key, base_url, **http)
        self.default_max_tokens = default_max_tokens
        self.auto_cache = auto_cache
        self.api_version = api_version
        self._msg_cache: dict[int, list[Any]] = {}
        #: Per conversation, where the last request's walk ended.
        self._conversations: Conversations[_Walk] = Conversations()

    @property
    def messages_url(self) -> str:
        base = self.base_url
        return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"

    # -- request side ----------------------------------------------------------------------
    def build_body(self, request: Request, *, stream: bool) -> dict[str, Any]:
        """The JSON body sent for ``request`` (public so request-side tests can inspect it),
        translated afresh: nothing in it is shared with the translation cache."""
        return self._prepare(request, stream=stream).body

    def encode_body(self, request: Request, *, stream: bool) -> bytes:
        """``build_body`` as the bytes that go on the wire: the same bytes as encoding that dict
        with compact separators (``ensure_ascii=False``), but the history's JSON comes from the
        translation cache, so a step encodes only what is new (see "Speed" in the module doc)."""
        data = self._prepare(request, stream=stream, encode=True).data
        assert data is not None
        return data

    def build_headers(self, request: Request) -> dict[str, str]:
        """The HTTP headers sent for ``request``."""
        return self._prepare(request, stream=False).headers

    def _prepare(self, request: Request, *, stream: bool, encode: bool = False) -> _Prepared:
        """The body, headers and JSON plan of ``request``. With ``encode``, also the body's bytes:
        the history then comes from the translation cache, and ``body["messages"]`` holds only
        the last wire messages (the ones breakpoints may go on; the earlier ones are JSON)."""
        opts = dict(request.options_for(self.name))
        betas = _as_list(opts.get("beta_headers"))
        plan = _json_plan(request, opts)

        walk: _Walk | None = None
        if encode:
            walk = self._walk(request)
            system, messages, has_tool_blocks = walk.system, [w.message() for w in walk.wires], walk.has_tool_blocks
        else:
            system, messages = _convert_messages(request.messages)
            has_tool_blocks = _has_tool_blocks(messages)
        sent = messages[:]  # the wire dicts as built, before breakpoints replace any of them
        body: dict[str, Any] = {"model": request.model}

        # Thinking and max_tokens go together: the budget must stay below max_tokens.
        thinking = opts.get("thinking")
        from_effort = False
        if thinking is None and request.reasoning_effort is not None:
            effort = request.reasoning_effort.lower()
            if effort not in EFFORT_BUDGETS:
                known = ", ".join(EFFORT_BUDGETS)
                raise _bad_request(f"unknown reasoning_effort {request.reasoning_effort!r} (use one of: {known})")
            budget = EFFORT_BUDGETS[effort]
            if budget is not None:
                thinking = {"type": "enabled", "budget_tokens": budget}
                from_effort = True
        max_tokens = request.max_tokens
        budget_tokens = _budget(thinking)
        if max_tokens is None:
            max_tokens = self.default_max_tokens
            if budget_tokens is not None and max_tokens <= budget_tokens:
                max_tokens = budget_tokens + self.default_max_tokens
        elif from_effort and budget_tokens is not None and max_tokens <= budget_tokens:
            if max_tokens - 1 < _MIN_THINKING_BUDGET:
                raise _bad_request(
                    f"max_tokens={max_tokens} leaves no room for reasoning_effort="
                    f"{request.reasoning_effort!r}: Anthropic needs a thinking budget of at least "
                    f"{_MIN_THINKING_BUDGET} tokens below max_tokens"
                )
            thinking = {"type": "enabled", "budget_tokens": max_tokens - 1}
        body["max_tokens"] = max_tokens
        thinking_on = isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")

        if plan is not None and plan.mode == "tool" and thinking_on:
            system.append(
                {
                    "type": "text",
                    "text": f"Give your final answer by calling the `{plan.tool_name}` tool; its input is the answer.",
                }
            )
        if system:
            body["system"] = system
        body["messages"] = messages

        tools, tool_choice = _tools_and_choice(request, has_tool_blocks, plan, thinking_on)
        if tools and opts.get("disable_parallel_tool_use"):
            tool_choice = tool_choice or {"type": "auto"}
            if tool_choice["type"] != "none":
                tool_choice["disable_parallel_tool_use"] = True
        if tools:
            body["tools"] = tools
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
        if plan is not None and plan.strict and plan.mode == "tool":
            betas.append(_STRUCTURED_BETA)
        if plan is not None and plan.mode == "native":
            body["output_format"] = {"type": "json_schema", "schema": plan.schema}
            betas.append(_STRUCTURED_BETA)

        if thinking is not None:
            body["thinking"] = thinking
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop_sequences:
            body["stop_sequences"] = list(request.stop_sequences)
        if request.metadata and request.metadata.get("user_id"):
            # The API accepts only ``user_id`` here; other metadata stays on the caller's side.
            body["metadata"] = {"user_id": request.metadata["user_id"]}
        if stream:
            body["stream"] = True

        body.update({key: value for key, value in opts.items() if key not in _KNOWN_OPTIONS})

        auto_cache = opts.get("auto_cache", self.auto_cache)
        if auto_cache:
            _place_breakpoints(body)
        if _has_cache_control(body):
            betas.append(_CACHE_BETA)
        data = None if walk is None else _encode(body, messages, sent, walk)
        return _Prepared(body, self._headers(betas, stream=stream), plan, data)

    # -- the translation cache and the conversation prefix ------------------------------------
    def _walk(self, request: Request) -> _Walk:
        """Translate ``request.messages`` into system blocks and wire messages, starting where
        the conversation's previous request ended when its messages are still there, unchanged,
        and taking each new message's translation from the cache when it is still valid."""
        messages = request.messages
        key, owner = conversation_key(request)
        prefix = self._conversations.recall(key, messages, request.unchanged)
        start = 0
        if prefix is None:
            system: list[dict[str, Any]] = []
            closed: list[bytes] = []
            wires: list[_Wire] = []
            has_tool_blocks = False
        else:
            start = len(prefix.messages)
            last = prefix.state
            system, closed, has_tool_blocks = last.system[:], last.closed[:], last.has_tool_blocks
            wires = [w.copy() for w in last.wires]
        get = self._msg_cache.get
        for message in messages[start:] if start else messages:
            entry = get(id(message))
            if entry is None or not still_valid(entry, message):
                entry = self._new_entry(message)
            role = entry[5]
            if role is None:  # system or developer
                system.extend(entry[6])
                continue
            if not entry[6] and not entry[8]:
                continue  # nothing to send; it does not end a run of its role either
            has_tool_blocks = has_tool_blocks or entry[10]
            if wires and wires[-1].role == role:
                wire = wires[-1]
                wire.results += entry[6]
                wire.results_json += entry[7]
                wire.rest += entry[8]
                wire.rest_json += entry[9]
            else:
                if len(wires) == _OPEN:
                    closed.append(wires.pop(0).json() + b",")
                wires.append(_Wire(role, entry[6][:], entry[7][:], entry[8][:], entry[9][:]))
        walk = _Walk(system, closed, wires, has_tool_blocks)
        if messages:
            self._conversations.remember(key, owner, messages, prefix, start, walk)
            walk = _Walk(system[:], closed, wires, has_tool_blocks)  # the request's own system list
        return walk

    def _new_entry(self, message: Message) -> list[Any]:
        """Translate ``message`` and cache the result: the message and a copy of its parts list
        (so that their ids cannot be reused while the entry lives), then its wire role (None for
        system text) and its blocks, tool results apart from the rest, each with its JSON."""
        role, blocks = _message_blocks(message)
        results = [b for b in blocks if b["type"] == "tool_result"] if role == "user" else []
        rest = [b for b in blocks if b["type"] != "tool_result"] if results else blocks
        cache = self._msg_cache
        evict(cache)
        entry = [
            message,
            message.role,
            message.name,
            message.tool_call_id,
            message.content[:],
            role,
            results if role is not None else blocks,
            [_dumps(b) for b in results],
            rest if role is not None else [],
            [_dumps(b) for b in rest] if role is not None else [],
            any(b["type"] in _TOOL_BLOCKS for b in blocks),
        ]
        cache[id(message)] = entry
        return entry

    def _headers(self, betas: list[str], *, stream: bool) -> dict[str, str]:
        extra = {"anthropic-version": self.api_version, "accept": "text/event-stream" if stream else "application/json"}
        if self.api_key:
            extra["x-api-key"] = self.api_key
        headers = self.headers(extra)
        # Betas from default_headers and from the request are combined, not replaced.
        existing = [k for k in headers if k.lower() == "anthropic-beta"]
        merged: list[str] = []
        for key in existing:
            merged.extend(_as_list(headers.pop(key)))
        merged.extend(betas)
        if merged:
            headers["anthropic-beta"] = ",".join(dict.fromkeys(b.strip() for b in merged if b.strip()))
        return headers

    # -- calls -----------------------------------------------------------------------------
    async def complete(self, request: Request) -> Response:
        prepared = self._prepare(request, stream=False, encode=True)
        assert prepared.data is not None
        data, headers = await self.post_json(self.messages_url, prepared.data, prepared.headers)
        try:
            if data.get("type") == "error":
                raise _stream_error_from(self.name, data)
            return self.parse_response(data, request, headers, plan=prepared.plan)
        except MALFORMED as exc:
            raise malformed(self.name, data, MESSAGE_SHAPE, exc, stream=False) from exc

    def parse_response(
        self,
        data: dict[str, Any],
        request: Request | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        plan: _JsonPlan | None = None,
    ) -> Response:
        """Translate a Messages API ``message`` object into a unified Response."""
        if plan is None and request is not None:
            plan = _json_plan(request, dict(request.options_for(self.name)))
        parts: list[ContentPart] = []
        warnings: list[Warning] = []
        thinking_chars: int | None = None
        other_calls = False
        for block in data.get("content") or []:
            kind = block.get("type")
            if kind == "text":
                text = _text(block.get("text"))
                if text:
                    parts.append(ContentPart(ContentKind.TEXT, text=text))
            elif kind == "thinking":
                text = _text(block.get("thinking"))
                thinking_chars = (thinking_chars or 0) + len(text)
                parts.append(ContentPart.of_thinking(ThinkingData(text, block.get("signature"))))
            elif kind == "redacted_thinking":
                parts.append(ContentPart.of_thinking(ThinkingData(block.get("data") or "", None, True)))
            elif kind == "tool_use":
                args = block.get("input")
                if plan is not None and plan.mode == "tool" and block.get("name") == plan.tool_name:
                    parts.append(ContentPart(ContentKind.TEXT, text=_json_text(args, plan)))
                    continue
                other_calls = True
                call = ToolCallData(
                    _text(block.get("id")),
                    _text(block.get("name")),
                    args if isinstance(args, dict) else json.dumps(args),
                )
                parts.append(ContentPart(ContentKind.TOOL_CALL, tool_call=call))
            else:
                warnings.append(Warning(f"content block of type {kind!r} is not supported and was left out", kind))
        stop = data.get("stop_reason")
        return Response(
            id=str(data.get("id") or ""),
            model=str(data.get("model") or (request.model if request else "")),
            provider=self.name,
            message=Message(Role.ASSISTANT, parts),
            finish_reason=_finish(stop, plan, other_calls),
            usage=_usage(data.get("usage") or {}, thinking_chars),
            raw=data,
            warnings=warnings,
            rate_limit=RateLimitInfo.from_headers(headers) if headers is not None else None,
        )

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        prepared = self._prepare(request, stream=True, encode=True)
        assert prepared.data is not None
        async with self.open_stream(self.messages_url, prepared.data, prepared.headers) as response:
            ctype = response.headers.get("content-type", "")
            if "text/event-stream" not in ctype:
                content = await response.aread()
                try:
                    payload = json.loads(content) if content else None
                except (ValueError, RecursionError):
                    payload = None
                if isinstance(payload, dict) and payload.get("type") == "error":
                    raise _stream_error_from(self.name, payload)
                raise StreamError(f"anthropic: expected an event stream, got content-type {ctype or 'none'!r}")
            translator = _StreamTranslator(self.name, request.model, prepared.plan)
            translator.rate_limit = RateLimitInfo.from_headers(response.headers)
            async for event in self.relay_sse(response, translator, terminal="message_stop"):
                yield event


# -- request helpers ---------------------------------------------------------------------------
def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def _budget(thinking: Any) -> int | None:
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int):
            return budget
    return None


def _json_plan(request: Request, opts: Mapping[str, Any]) -> _JsonPlan | None:
    fmt = request.response_format
    if fmt is None or fmt.type == "text":
        return None
    mode = opts.get("structured_output", "tool")
    if mode not in ("tool", "native"):
        raise _bad_request(f"provider_options.anthropic.structured_output must be 'tool' or 'native', got {mode!r}")
    schema: dict[str, Any] = (
        fmt.json_schema if fmt.type == "json_schema" and fmt.json_schema is not None else {"type": "object"}
    )
    taken = {t.name for t in request.tools or []}
    name, n = "json_output", 1
    while name in taken:
        name, n = f"json_output_{n}", n + 1
    wrapped = mode == "tool" and schema.get("type") != "object"
    return _JsonPlan(mode, name, schema, wrapped, fmt.strict)


def _json_tool(plan: _JsonPlan) -> dict[str, Any]:
    schema = plan.schema
    if plan.wrapped:
        schema = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    tool: dict[str, Any] = {
        "name": plan.tool_name,
        "description": "Return the final answer. The tool input is the answer, as JSON matching the schema.",
        "input_schema": schema,
    }
    if plan.strict:
        tool["strict"] = True
    return tool


def _json_text(value: Any, plan: _JsonPlan) -> str:
    if plan.wrapped and isinstance(value, dict) and "value" in value:
        value = value["value"]
    return json.dumps(value, ensure_ascii=False)


def _tools_and_choice(
    request: Request, has_tool_blocks: bool, plan: _JsonPlan | None, thinking_on: bool
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    tools = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools or []]
    choice = request.tool_choice
    mode = choice.mode if choice is not None else None
    tool_choice: dict[str, Any] | None = None
    if mode == "none":
        if tools and has_tool_blocks:
            tool_choice = {"type": "none"}  # the API wants definitions for tool blocks in the history
        else:
            tools = []
    elif mode == "auto":
        tool_choice = {"type": "auto"}
    elif mode == "required":
        tool_choice = {"type": "any"}
    elif mode == "named":
        assert choice is not None
        tool_choice = {"type": "tool", "name": choice.tool_name}
    if plan is not None and plan.mode == "tool":
        caller_tools = bool(tools) and mode != "none"
        tools.append(_json_tool(plan))
        if thinking_on:
            tool_choice = {"type": "auto"}  # forced tool use is not allowed with extended thinking
        elif not caller_tools:
            tool_choice = {"type": "tool", "name": plan.tool_name}
        elif mode != "named":
            tool_choice = {"type": "any"}  # a real tool, or the answer through json_output
    return tools, tool_choice


def _has_tool_blocks(messages: list[dict[str, Any]]) -> bool:
    for message in messages:
        for block in message["content"]:
            if block.get("type") in ("tool_use", "tool_result"):
                return True
    return False


def _message_blocks(message: Message) -> tuple[str | None, list[dict[str, Any]]]:
    """One Message's wire role and blocks; the role is None for system text blocks."""
    role = message.role
    if role in (Role.SYSTEM, Role.DEVELOPER):
        system: list[dict[str, Any]] = []
        for part in message.content:
            if part.kind != ContentKind.TEXT:
                raise _bad_request(f"{role} messages may hold only text for Anthropic, got a {part.kind} part")
            if part.text:
                system.append({"type": "text", "text": part.text})
        return None, system
    if role == Role.ASSISTANT:
        api_role = "assistant"
    elif role in (Role.USER, Role.TOOL):
        api_role = "user"
    else:
        raise _bad_request(f"unknown message role {role!r}")
    return api_role, [b for b in (_block(p) for p in message.content) if b is not None]


def _convert_messages(messages: Iterable[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        api_role, blocks = _message_blocks(message)
        if api_role is None:
            system.extend(blocks)
            continue
        if not blocks:
            continue
        if out and out[-1]["role"] == api_role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": api_role, "content": blocks})
    for message in out:
        content = message["content"]
        if message["role"] == "user" and len(content) > 1:
            results = [b for b in content if b["type"] == "tool_result"]
            if results and len(results) < len(content):
                message["content"] = results + [b for b in content if b["type"] != "tool_result"]
    return system, out


def _block(part: ContentPart) -> dict[str, Any] | None:
    kind = part.kind
    if kind == ContentKind.TEXT:
        return {"type": "text", "text": part.text} if part.text else None
    if kind == ContentKind.TOOL_CALL and part.tool_call is not None:
        call = part.tool_call
        args = call.arguments
        if not isinstance(args, dict):
            # The API requires an object; malformed model output has already been answered with
            # an error result, so an empty input keeps the history valid.
            args = parse_arguments(args)[0]
        return {"type": "tool_use", "id": call.id, "name": call.name, "input": args}
    if kind == ContentKind.TOOL_RESULT and part.tool_result is not None:
        return _tool_result(part.tool_result)
    if kind == ContentKind.THINKING and part.thinking is not None:
        if not part.thinking.signature:
            return None
        return {"type": "thinking", "thinking": part.thinking.text, "signature": part.thinking.signature}
    if kind == ContentKind.REDACTED_THINKING and part.thinking is not None:
        return {"type": "redacted_thinking", "data": part.thinking.text}
    if kind == ContentKind.IMAGE and part.image is not None:
        return _image(part.image)
    if kind == ContentKind.DOCUMENT and part.document is not None:
        return _document(part.document)
    if kind == ContentKind.AUDIO:
        raise _bad_request("the Anthropic Messages API does not accept audio input")
    raise _bad_request(f"content part of kind {kind!r} has no Anthropic translation (or its data is missing)")


def _image(image: ImageData) -> dict[str, Any]:
    url, data, media_type = resolve_media(image.url, image.data, image.media_type)
    if url is not None:
        return {"type": "image", "source": {"type": "url", "url": url}}
    assert data is not None
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": to_base64(data)}}


def _document(doc: DocumentData) -> dict[str, Any]:
    url, data, media_type = resolve_media(doc.url, doc.data, doc.media_type)
    source: dict[str, Any]
    if url is not None:
        source = {"type": "url", "url": url}
    elif media_type == "application/pdf":
        assert data is not None
        source = {"type": "base64", "media_type": "application/pdf", "data": to_base64(data)}
    elif media_type and media_type.startswith("text/"):
        assert data is not None
        source = {"type": "text", "media_type": "text/plain", "data": data.decode("utf-8", "replace")}
    else:
        raise _bad_request(f"Anthropic documents must be PDF or plain text, got {media_type!r}")
    block: dict[str, Any] = {"type": "document", "source": source}
    if doc.file_name:
        block["title"] = doc.file_name
    return block


def _tool_result(result: ToolResultData) -> dict[str, Any]:
    content: str | list[dict[str, Any]]
    raw = result.content
    if isinstance(raw, str):
        content = raw
    elif isinstance(raw, list) and raw and all(isinstance(x, ContentPart) for x in raw):
        content = [b for b in (_block(x) for x in raw) if b is not None]
    else:
        content = json.dumps(raw, ensure_ascii=False)
    if result.image_data is not None:
        blocks: list[dict[str, Any]] = (
            content if isinstance(content, list) else ([{"type": "text", "text": content}] if content else [])
        )
        blocks.append(_image(ImageData(data=result.image_data, media_type=result.image_media_type or "image/png")))
        content = blocks
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.tool_call_id, "content": content}
    if result.is_error:
        block["is_error"] = True
    return block


# -- encoding ----------------------------------------------------------------------------------
_WIRE_HEADS: dict[str, bytes] = {}


def _wire_head(role: str) -> bytes:
    head = _WIRE_HEADS.get(role)
    if head is None:
        head = _WIRE_HEADS[role] = b'{"role":' + _dumps(role) + b',"content":['
    return head


def _encode(body: dict[str, Any], messages: list[Any], sent: list[Any], walk: _Walk) -> bytes:
    """``_dumps(body)``, with the history joined from cached JSON: ``messages`` (the list in the
    body, unless an option replaced it) holds the open wire messages as sent, or a breakpoint's
    copy of one; the closed ones before them are ``walk.closed``, each followed by a comma."""
    open_json = b",".join([_wire_json(m, s, w) for m, s, w in zip(messages, sent, walk.wires, strict=True)])
    return join_body(body, "messages", messages, [b"[", *walk.closed, open_json, b"]"])


def _wire_json(message: Any, sent: dict[str, Any], wire: _Wire) -> bytes:
    """One open wire message's JSON. ``message`` is the dict sent, or the copy a breakpoint made
    of it, whose blocks are the sent ones but for the marked one."""
    if message is sent:
        return wire.json()
    content = message.get("content") if isinstance(message, dict) else None
    blocks = sent["content"]
    if (
        list(message) != ["role", "content"]
        or message["role"] is not wire.role
        or not isinstance(content, list)
        or len(content) != len(blocks)
    ):
        return _dumps(message)
    pieces = wire.results_json + wire.rest_json
    for j, (block, original) in enumerate(zip(content, blocks, strict=True)):
        if block is not original:
            pieces[j] = _marked_json(block, original, pieces[j])
    return _wire_head(wire.role) + b",".join(pieces) + b"]}"


def _marked_json(block: Any, original: dict[str, Any], encoded: bytes) -> bytes:
    """A block's JSON when it is ``{**original, "cache_control": ...}``: the original's JSON with
    the mark spliced in before its closing brace, so that a large block (an image) is not encoded
    again; anything else is encoded."""
    if (
        isinstance(block, dict)
        and len(block) == len(original) + 1
        and next(reversed(block)) == "cache_control"
        and list(block)[:-1] == list(original)
        and all(map(operator.is_, block.values(), original.values()))
    ):
        return encoded[:-1] + b',"cache_control":' + _dumps(block["cache_control"]) + b"}"
    return _dumps(block)


# -- prompt caching ----------------------------------------------------------------------------
def _has_cache_control(body: Mapping[str, Any]) -> bool:
    if "cache_control" in body:
        return True
    system = body.get("system")
    if isinstance(system, list) and any(isinstance(b, dict) and "cache_control" in b for b in system):
        return True
    if any(isinstance(t, dict) and "cache_control" in t for t in body.get("tools") or []):
        return True
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(isinstance(b, dict) and "cache_control" in b for b in content):
            return True
    return False


def _count_marks(blocks: Any) -> int:
    if not isinstance(blocks, list):
        return 0
    return sum(1 for b in blocks if isinstance(b, dict) and b.get("cache_control"))


def _place_breakpoints(body: dict[str, Any]) -> None:
    """Add ``cache_control`` breakpoints per the module docstring's heuristic, in place on
    ``body`` but without mutating any dict the caller passed in (marked blocks are copies)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return
    system = body.get("system")
    tools = body.get("tools")
    message_marks = sum(_count_marks(m.get("content")) for m in messages if isinstance(m, dict))
    used = _count_marks(system) + _count_marks(tools) + message_marks + (1 if "cache_control" in body else 0)
    budget = _MAX_BREAKPOINTS - used

    if message_marks == 0 and "cache_control" not in body:
        user_turns = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
        for i in reversed(user_turns[-2:]):
            if budget <= 0:
                break
            if _mark_last_block(messages, i):
                budget -= 1
    if budget > 0 and system and _count_marks(system) == 0:
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
        if isinstance(blocks[-1], dict):
            blocks[-1] = {**blocks[-1], "cache_control": dict(_EPHEMERAL)}
            body["system"] = blocks
            budget -= 1
    if budget > 0 and isinstance(tools, list) and tools and _count_marks(tools) == 0 and isinstance(tools[-1], dict):
        tools = list(tools)
        tools[-1] = {**tools[-1], "cache_control": dict(_EPHEMERAL)}
        body["tools"] = tools


def _mark_last_block(messages: list[Any], index: int) -> bool:
    message = messages[index]
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return False
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return False
    for j in range(len(content) - 1, -1, -1):
        block = content[j]
        if not isinstance(block, dict) or block.get("type") in _UNCACHEABLE:
            continue
        if block.get("type") == "text" and not block.get("text"):
            continue
        content = list(content)
        content[j] = {**block, "cache_control": dict(_EPHEMERAL)}
        messages[index] = {**message, "content": content}
        return True
    return False


# -- response helpers --------------------------------------------------------------------------
def _finish(stop: str | None, plan: _JsonPlan | None, other_calls: bool) -> FinishReason:
    if stop == "tool_use" and plan is not None and plan.mode == "tool" and not other_calls:
        return FinishReason("stop", stop)  # the answer came through the json_output tool
    if stop is None:
        return FinishReason("other", None)
    return FinishReason(_FINISH.get(stop, "other"), stop)


def _text(value: Any) -> str:
    """A text field: "" when absent, TypeError (a malformed reply) when it is not text."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value


def _opt_int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None


def _usage(raw: Mapping[str, Any], thinking_chars: int | None) -> Usage:
    fresh = _opt_int(raw.get("input_tokens")) or 0
    cache_read = _opt_int(raw.get("cache_read_input_tokens"))
    cache_write = _opt_int(raw.get("cache_creation_input_tokens"))
    output = _opt_int(raw.get("output_tokens")) or 0
    reasoning: int | None = None
    details = raw.get("output_tokens_details")
    if isinstance(details, Mapping) and isinstance(details.get("thinking_tokens"), int):
        reasoning = details["thinking_tokens"]
    elif thinking_chars is not None:
        reasoning = min(output, _estimate_tokens(thinking_chars)) if output else _estimate_tokens(thinking_chars)
    prompt = fresh + (cache_read or 0) + (cache_write or 0)
    return Usage(prompt, output, prompt + output, reasoning, cache_read, cache_write, dict(raw))


def _stream_error_from(provider: str, payload: Mapping[str, Any]) -> SDKError:
    error = payload.get("error")
    kind = error.get("type") if isinstance(error, Mapping) else None
    return error_in_answer(provider, dict(payload), default_message=f"{kind or 'error'} in stream")


# -- streaming ---------------------------------------------------------------------------------
class _Block:
    """One content block of a streamed message while it is being received."""

    __slots__ = ("head", "id", "kind", "name", "parts", "signature", "start", "text_id")

    def __init__(self, kind: str, index: int, start: dict[str, Any]) -> None:
        self.kind = kind  # text | thinking | redacted | tool | json | other
        self.text_id = str(index)
        self.start = start
        self.parts: list[str] = []
        self.signature: str | None = None
        self.id = ""
        self.name = ""
        self.head: ToolCall | None = None


class _StreamTranslator:
    """Turns the Messages API event stream into unified StreamEvents (feeding an accumulator)."""

    def __init__(self, provider: str, model: str, plan: _JsonPlan | None) -> None:
        self.provider = provider
        self.plan = plan if plan is not None and plan.mode == "tool" else None
        self.acc = StreamAccumulator(provider, model)
        self.blocks: dict[int, _Block] = {}
        self.order: list[_Block] = []
        self.message: dict[str, Any] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.other_calls = False
        self.rate_limit: RateLimitInfo | None = None
        self.finished = False

    def _emit(self, out: list[StreamEvent], event: StreamEvent) -> None:
        self.acc.process(event)
        out.append(event)

    def feed(self, sse: SSEEvent) -> list[StreamEvent]:
        payload = sse.json(self.provider)
        try:
            return self._feed(sse.event, payload)
        except MALFORMED as exc:
            raise malformed(self.provider, payload, EVENT_SHAPE, exc, stream=True) from exc

    def _feed(self, event_name: str, payload: dict[str, Any]) -> list[StreamEvent]:
        kind = payload.get("type") or event_name
        out: list[StreamEvent] = []
        if kind == "content_block_delta":
            self._delta(payload, out)
        elif kind == "content_block_start":
            self._start(payload, out)
        elif kind == "content_block_stop":
            self._stop(payload, out)
        elif kind == "ping":
            pass
        elif kind == "message_start":
            message = payload.get("message") or {}
            self.message = message
            self.acc.response_id = str(message.get("id") or "")
            self.acc.model = str(message.get("model") or self.acc.model)
            self.usage = dict(message.get("usage") or {})
            self._emit(out, StreamEvent(_T.STREAM_START, raw=payload))
        elif kind == "message_delta":
            delta = payload.get("delta") or {}
            if "stop_reason" in delta:
                self.stop_reason = delta["stop_reason"]
                self.stop_sequence = delta.get("stop_sequence")
            usage = payload.get("usage")
            if isinstance(usage, dict):
                self.usage.update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            self._finish(out)
        elif kind == "error":
            raise _stream_error_from(self.provider, payload)
        else:
            self._emit(out, StreamEvent(_T.PROVIDER_EVENT, raw=payload))
        return out

    def _start(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        index = payload.get("index", len(self.order))
        content = payload.get("content_block") or {}
        ctype = content.get("type")
        if ctype == "text":
            block = _Block("text", index, content)
            self._emit(out, StreamEvent(_T.TEXT_START, text_id=block.text_id))
            if _text(content.get("text")):
                block.parts.append(content["text"])
                self._emit(out, StreamEvent(_T.TEXT_DELTA, delta=content["text"], text_id=block.text_id))
        elif ctype == "thinking":
            block = _Block("thinking", index, content)
            self._emit(out, StreamEvent(_T.REASONING_START))
            if _text(content.get("thinking")):
                block.parts.append(content["thinking"])
                self._emit(out, StreamEvent(_T.REASONING_DELTA, reasoning_delta=content["thinking"]))
            if _text(content.get("signature")):
                block.signature = content["signature"]
        elif ctype == "redacted_thinking":
            block = _Block("redacted", index, content)
            block.parts.append(_text(content.get("data")))
            self._emit(out, StreamEvent(_T.REASONING_START))
        elif ctype == "tool_use":
            name = _text(content.get("name"))
            is_json = self.plan is not None and name == self.plan.tool_name
            block = _Block("json" if is_json else "tool", index, content)
            block.id = _text(content.get("id"))
            block.name = name
            if is_json:
                self._emit(out, StreamEvent(_T.TEXT_START, text_id=block.text_id))
            else:
                self.other_calls = True
                block.head = ToolCall(block.id, name)
                self._emit(out, StreamEvent(_T.TOOL_CALL_START, tool_call=block.head))
            initial = content.get("input")
            if isinstance(initial, dict) and initial:
                # Some blocks arrive with their input complete instead of as deltas.
                self._arguments(block, json.dumps(initial), out)
        else:
            block = _Block("other", index, content)
            self._emit(out, StreamEvent(_T.PROVIDER_EVENT, raw=payload))
        self.blocks[index] = block
        self.order.append(block)

    def _delta(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        block = self.blocks.get(payload.get("index", -1))
        delta = payload.get("delta") or {}
        dtype = delta.get("type")
        if block is None:
            raise StreamError(f"anthropic: delta for unknown content block {payload.get('index')!r}")
        if dtype == "text_delta":
            text = _text(delta.get("text"))
            block.parts.append(text)
            self._emit(out, StreamEvent(_T.TEXT_DELTA, delta=text, text_id=block.text_id))
        elif dtype == "input_json_delta":
            fragment = _text(delta.get("partial_json"))
            if fragment:
                self._arguments(block, fragment, out)
        elif dtype == "thinking_delta":
            text = _text(delta.get("thinking"))
            if text:
                block.parts.append(text)
                self._emit(out, StreamEvent(_T.REASONING_DELTA, reasoning_delta=text))
        elif dtype == "signature_delta":
            block.signature = (block.signature or "") + _text(delta.get("signature"))
        else:
            self._emit(out, StreamEvent(_T.PROVIDER_EVENT, raw=payload))

    def _arguments(self, block: _Block, fragment: str, out: list[StreamEvent]) -> None:
        block.parts.append(fragment)
        if block.kind == "json":
            if self.plan is not None and not self.plan.wrapped:
                self._emit(out, StreamEvent(_T.TEXT_DELTA, delta=fragment, text_id=block.text_id))
        else:
            self._emit(out, StreamEvent(_T.TOOL_CALL_DELTA, tool_call=block.head, delta=fragment))

    def _stop(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        block = self.blocks.get(payload.get("index", -1))
        if block is None:
            raise StreamError(f"anthropic: stop for unknown content block {payload.get('index')!r}")
        kind = block.kind
        if kind == "text":
            self._emit(out, StreamEvent(_T.TEXT_END, text_id=block.text_id))
        elif kind == "thinking":
            thinking = ThinkingData("".join(block.parts), block.signature or None)
            self._emit(out, StreamEvent(_T.REASONING_END, thinking=thinking))
        elif kind == "redacted":
            self._emit(out, StreamEvent(_T.REASONING_END, thinking=ThinkingData(block.parts[0], None, True)))
        elif kind == "tool":
            call = ToolCall.from_data(ToolCallData(block.id, block.name, "".join(block.parts)))
            self._emit(out, StreamEvent(_T.TOOL_CALL_END, tool_call=call))
        elif kind == "json":
            assert self.plan is not None
            if self.plan.wrapped:
                raw = "".join(block.parts)
                value, error = parse_arguments(raw)
                text = _json_text(value, self.plan) if error is None else raw
                self._emit(out, StreamEvent(_T.TEXT_DELTA, delta=text, text_id=block.text_id))
            elif not block.parts:
                self._emit(out, StreamEvent(_T.TEXT_DELTA, delta="{}", text_id=block.text_id))
            self._emit(out, StreamEvent(_T.TEXT_END, text_id=block.text_id))
        else:
            self._emit(out, StreamEvent(_T.PROVIDER_EVENT, raw=payload))

    def _raw_message(self) -> dict[str, Any]:
        """The message object ``complete()`` would have returned, rebuilt from the stream."""
        content: list[dict[str, Any]] = []
        for block in self.order:
            if block.kind == "text":
                content.append({"type": "text", "text": "".join(block.parts)})
            elif block.kind == "thinking":
                content.append({"type": "thinking", "thinking": "".join(block.parts), "signature": block.signature})
            elif block.kind == "redacted":
                content.append({"type": "redacted_thinking", "data": block.parts[0]})
            elif block.kind in ("tool", "json"):
                args, error = parse_arguments("".join(block.parts))
                value: Any = "".join(block.parts) if error else args
                content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": value})
            else:
                content.append(block.start)
        raw = dict(self.message)
        raw.update(
            content=content, stop_reason=self.stop_reason, stop_sequence=self.stop_sequence, usage=dict(self.usage)
        )
        return raw

    def _finish(self, out: list[StreamEvent]) -> None:
        thinking_chars: int | None = None
        for block in self.order:
            if block.kind == "thinking":
                thinking_chars = (thinking_chars or 0) + sum(len(p) for p in block.parts)
        usage = _usage(self.usage, thinking_chars)
        reason = _finish(self.stop_reason, self.plan, self.other_calls)
        response = self.acc.response()
        response.provider = self.provider
        response.usage = usage
        response.finish_reason = reason
        response.rate_limit = self.rate_limit
        response.raw = self._raw_message()
        self._emit(out, StreamEvent(_T.FINISH, finish_reason=reason, usage=usage, response=response))
        self.finished = True
