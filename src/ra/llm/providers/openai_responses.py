"""Native OpenAI adapter: the Responses API (``POST {base_url}/responses``).

Request translation (unified-llm-spec 7.3):

* SYSTEM messages are joined (blank line between them) into ``instructions``.
* DEVELOPER messages become ``developer``-role input items *where they stand*, so a developer
  note added mid-conversation keeps its place relative to the turns around it.
* USER / ASSISTANT messages become ``message`` input items (``input_text`` / ``input_image`` /
  ``input_file`` for the user, ``output_text`` for the assistant). ``Message.name`` has no place
  on this wire; it is dropped with a Warning.
* Tool calls and results are top-level ``function_call`` / ``function_call_output`` items. A
  result that is a dict or list is sent as JSON text; a result with an image is sent as a list
  of ``input_text`` + ``input_image`` parts.
* THINKING parts that came from this adapter carry the reasoning item (``provider_data``:
  ``type``, ``id``, ``encrypted_content``, ``summary``) and go back as ``reasoning`` items,
  verbatim, ahead of the function calls they produced. Thinking from other providers is dropped.

``store`` and encrypted reasoning: the adapter sends ``store: false`` unless
``provider_options["openai"]["store"]`` says otherwise. With ``store: false`` nothing is kept on
OpenAI's side, so reasoning can only continue across turns through ``encrypted_content``; the
adapter therefore asks for ``include: ["reasoning.encrypted_content"]`` whenever the request
looks like a reasoning request (``reasoning_effort`` or a summary was asked for, or the model is
an o-series / gpt-5 / codex model; ``encrypted_reasoning: true/false`` forces it either way).
Item ids of function calls are only sent back with ``store: true`` (the server resolves them
then); reasoning items always carry their id. Reasoning items without encrypted content are
dropped under ``store: false`` (the server could not resolve them). Under ``store: true`` a
reasoning item is only sent when a function call follows it: the server insists that a stored
reasoning item be followed by the very item it produced, and the unified model does not keep
the ids of assistant text messages.

``provider_options["openai"]`` keys the adapter understands: ``reasoning_summary``
(``"auto"``/``"concise"``/``"detailed"`` -> ``reasoning.summary``), ``store``,
``encrypted_reasoning``, ``strict_tools`` (send ``strict: true`` on every function tool).
Every other key is merged into the request body as an escape hatch: ``tools`` entries are
appended after the function tools (built-in tools such as ``{"type": "web_search"}``),
``include`` is unioned, ``reasoning`` and ``text`` dicts are merged key by key, and anything
else (``previous_response_id``, ``service_tier``, ``parallel_tool_calls``, ``prompt_cache_key``,
``truncation``...) is set at the top level, overriding what the adapter computed.

Stop sequences are not part of the Responses API: they are ignored with a Warning.

Speed: an agent sends its whole history with every step, so the request body is not rebuilt from
it. ``complete`` and ``stream`` send ``encode_body``'s bytes: the same bytes as JSON-encoding
``build_body``'s dict compactly (what the HTTP layer does with a dict, and what OpenAI's prompt
cache needs to find its prefix), assembled from cached pieces. Translating a Message is a pure
function of it and of ``store`` (which decides what an assistant turn sends back), so its input
items' JSON (or, for a system message, its text) is cached per Message object: the entry holds the
Message (so its ``id`` is not reused while cached) and a fingerprint (role, name, tool_call_id and a
copy of its parts list); adding, removing or replacing a part invalidates it, editing a part's
fields in place does not (treat sent Messages as immutable, as the agent loop does; a local image
path is read once). Items do not depend on their neighbours, so ``input`` is the cached pieces
joined by commas. Each conversation (``Request.conversation``, else its first Message) keeps where
its last request's walk ended (its instructions, item pieces and whether a name was dropped): when
the next request, with the same ``store``, starts with the same Message objects, unchanged (role,
name, call id and parts list compared by C-level ``map`` passes), only the messages after them are
looked up; when the caller vouches for them (``Request.unchanged``, the agent loop's), only their
identity is checked. What is left proportional to the history is that pass and copying pointers
and bytes, in C (``conversations``). The translation cache and the remembered conversations are
bounded (``CACHE_LIMIT`` messages, beyond the newest conversation). ``build_body`` translates afresh
and shares nothing with the cache. Provider options are applied to the body as before, so an
``input`` or ``instructions`` given there replaces the translated one, and ``previous_response_id``
is sent next to the whole ``input``, as without the cache.
"""

from __future__ import annotations

import json
import mimetypes
import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Unpack

from ..accumulator import StreamAccumulator
from ..errors import (
    InvalidRequestError,
    SDKError,
    StreamError,
    UnsupportedToolChoiceError,
    error_in_answer,
)
from ..http import HTTPAdapter, HTTPOptions, SSEEvent
from ..media import data_uri, resolve_media
from ..shape import MALFORMED, NUM, STR, arr, malformed, obj
from ..types import (
    TOOL_CHOICE_MODES,
    ContentKind,
    ContentPart,
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
    ToolChoice,
    ToolResultData,
    Usage,
    Warning,
    parse_arguments,
)
from .body_json import dumps as _dumps
from .body_json import join_body
from .conversations import Conversations, conversation_key, evict, still_valid

__all__ = ["OpenAIAdapter"]

_T = StreamEventType
_ENCRYPTED = "reasoning.encrypted_content"
_REASONING_MODEL = re.compile(r"^(?:[\w.-]+/)?(?:o\d|gpt-5|codex)", re.I)
#: Option keys the adapter consumes itself; everything else is merged into the body.
_CONSUMED = frozenset({"reasoning_summary", "store", "encrypted_reasoning", "strict_tools"})


# The shapes the parsers rely on (checked only when a reply breaks them, to name the field).
_ITEM = obj(
    False,
    type=STR,
    id=STR,
    call_id=STR,
    name=STR,
    arguments={"type": ["string", "object", "null"]},
    content=arr(obj(False, type=STR, text=STR, refusal=STR)),
    summary=arr(obj(False, text=STR)),
)
_USAGE_SHAPE = obj(input_tokens=NUM, output_tokens=NUM, total_tokens=NUM)
RESPONSE_SHAPE = obj(False, id=STR, model=STR, status=STR, output=arr(_ITEM), usage=_USAGE_SHAPE)
EVENT_SHAPE = obj(
    False, type=STR, item=_ITEM, delta=STR, output_index={"type": ["integer", "null"]}, response=RESPONSE_SHAPE
)


@dataclass(slots=True)
class _Walk:
    """The translated history of one request: the ``store`` it was made for, the system texts
    (joined into ``instructions``), the JSON of each message's input items (one piece a message
    that has any, its items joined by commas) and whether a message had a name to drop."""

    store: bool
    system: list[str]
    items: list[bytes]
    named: bool


class OpenAIAdapter(HTTPAdapter):
    """OpenAI Responses API adapter (provider name ``"openai"``)."""

    name = "openai"
    default_base_url = "https://api.openai.com/v1"
    api_key_env = ("OPENAI_API_KEY",)

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        organization: str | None = None,
        project: str | None = None,
        **http: Unpack[HTTPOptions],
    ) -> None:
        super().__init__(api_key, base_url, **http)
        self.organization = organization
        self.project = project
        self._msg_cache: dict[int, list[Any]] = {}
        #: Per conversation, where the last request's walk ended.
        self._conversations: Conversations[_Walk] = Conversations()

    # -- headers ---------------------------------------------------------------------------
    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Auth first, then ``default_headers`` (so a proxy can override them), then ``extra``.
        Names are lower-cased so an override replaces instead of duplicating a header."""
        out: dict[str, str] = {"content-type": "application/json"}
        if self.api_key:
            out["authorization"] = f"Bearer {self.api_key}"
        if self.organization:
            out["openai-organization"] = self.organization
        if self.project:
            out["openai-project"] = self.project
        for source in (self.default_headers, extra or {}):
            for key, value in source.items():
                out[key.lower()] = value
        return out

    @property
    def url(self) -> str:
        return f"{self.base_url}/responses"

    # -- request translation ---------------------------------------------------------------
    def build_body(self, request: Request, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request``, translated afresh: nothing in it is shared with the
        translation cache (warnings about ignored settings are dropped here; ``complete`` /
        ``stream`` report them on the Response / STREAM_START)."""
        return self._build(request, stream=stream)[0]

    def encode_body(self, request: Request, *, stream: bool) -> bytes:
        """``build_body`` as the bytes that go on the wire: the same bytes as encoding that dict
        with compact separators (``ensure_ascii=False``), but the history's JSON comes from the
        translation cache, so a step encodes only what is new (see "Speed" in the module doc)."""
        return self._encode(request, stream=stream)[0]

    def _encode(self, request: Request, *, stream: bool) -> tuple[bytes, list[Warning]]:
        """``encode_body``'s bytes and the warnings ``_build`` gives."""
        items: list[dict[str, Any]] = []  # stands for the input items in the body until encoded
        body, warnings, walk = self._build(request, stream=stream, items=items)
        assert walk is not None
        # "[", the pieces with commas between them, "]": laid out by C-level list operations and
        # copied once, by the final join (a join of the pieces first would copy the history twice).
        pieces = walk.items
        out = [b"[", *[b","] * (2 * len(pieces) - 1), b"]"]
        out[1:-1:2] = pieces
        return join_body(body, "input", items, out), warnings

    def _build(
        self, request: Request, *, stream: bool, items: list[dict[str, Any]] | None = None
    ) -> tuple[dict[str, Any], list[Warning], _Walk | None]:
        """The body and its warnings. With ``items`` (a list that stands for the input items in
        the body), the history is walked through the translation cache instead, and the walk is
        returned for the encoder."""
        options = request.options_for(self.name)
        warnings: list[Warning] = []
        store = bool(options.get("store", False))

        walk: _Walk | None = None
        if items is None:
            instructions, items = _translate_messages(request.messages, store=store, warnings=warnings)
        else:
            walk = self._walk(request, store)
            instructions = "\n\n".join(walk.system)
            if walk.named:
                warnings.append(_name_warning())
        body: dict[str, Any] = {"model": request.model}
        if instructions:
            body["instructions"] = instructions
        body["input"] = items

        if request.tools:
            strict = bool(options.get("strict_tools", False))
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "strict": strict,
                }
                for tool in request.tools
            ]
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)

        reasoning: dict[str, Any] = {}
        if request.reasoning_effort is not None:
            reasoning["effort"] = request.reasoning_effort
        if options.get("reasoning_summary") is not None:
            reasoning["summary"] = options["reasoning_summary"]
        if reasoning:
            body["reasoning"] = reasoning

        include: list[str] = []
        wants_encrypted = options.get("encrypted_reasoning")
        if wants_encrypted is None:
            wants_encrypted = not store and (bool(reasoning) or bool(_REASONING_MODEL.match(request.model)))
        if wants_encrypted:
            include.append(_ENCRYPTED)
        if include:
            body["include"] = include

        if request.response_format is not None and request.response_format.type != "text":
            fmt = request.response_format
            if fmt.type == "json":
                body["text"] = {"format": {"type": "json_object"}}
            else:
                body["text"] = {
                    "format": {"type": "json_schema", "name": fmt.name, "schema": fmt.json_schema, "strict": fmt.strict}
                }
        if request.max_tokens is not None:
            body["max_output_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop_sequences:
            warnings.append(
                Warning("stop sequences are not supported by the OpenAI Responses API; ignored", "unsupported_stop")
            )
        if request.metadata:
            body["metadata"] = dict(request.metadata)
        body["store"] = store
        if stream:
            body["stream"] = True

        _merge_options(body, options)
        return body, warnings, walk

    # -- the translation cache and the conversation prefix ------------------------------------
    def _walk(self, request: Request, store: bool) -> _Walk:
        """Translate ``request.messages`` into system texts and input items' JSON, starting where
        the conversation's previous request ended when its messages are still there, unchanged,
        and it was made for the same ``store``; each new message's translation comes from the
        cache when it is still valid."""
        messages = request.messages
        key, owner = conversation_key(request)
        prefix = self._conversations.recall(key, messages, request.unchanged)
        if prefix is not None and prefix.state.store != store:
            prefix = None
        start = 0
        if prefix is None:
            system: list[str] = []
            pieces: list[bytes] = []
            named = False
        else:
            start = len(prefix.messages)
            state = prefix.state
            system, pieces, named = state.system[:], state.items[:], state.named
        get = self._msg_cache.get
        for message in messages[start:] if start else messages:
            entry = get(id(message))
            if entry is None or entry[5] != store or not still_valid(entry, message):
                entry = self._new_entry(message, store)
            if entry[6] is not None:
                if entry[6]:
                    system.append(entry[6])
            elif entry[7]:
                pieces.append(entry[7])
            named = named or entry[8]
        walk = _Walk(store, system, pieces, named)
        if messages:
            self._conversations.remember(key, owner, messages, prefix, start, walk)
        return walk

    def _new_entry(self, message: Message, store: bool) -> list[Any]:
        """Translate ``message`` and cache the result: the message and its fingerprint (a copy of
        its parts list, so that their ids cannot be reused while the entry lives), the ``store``
        it was made for, its system text (None unless it is a system message), the JSON of its
        input items and whether it has a name that is dropped."""
        role = message.role
        system: str | None = None
        items_json = b""
        if role == Role.SYSTEM:
            system = _system_text(message)
        else:
            items_json = b",".join(map(_dumps, _message_items(message, store=store)))
        cache = self._msg_cache
        evict(cache)
        entry = [
            message,
            role,
            message.name,
            message.tool_call_id,
            message.content[:],
            store,
            system,
            items_json,
            _named(message),
        ]
        cache[id(message)] = entry
        return entry

    # -- calls -----------------------------------------------------------------------------
    async def complete(self, request: Request) -> Response:
        body, warnings = self._encode(request, stream=False)
        data, headers = await self.post_json(self.url, body, self.headers())
        try:
            if data.get("status") == "failed" and isinstance(data.get("error"), dict):
                raise _failure(self.name, data["error"])
            response = parse_response(data, provider=self.name, model=request.model)
        except MALFORMED as exc:
            raise malformed(self.name, data, RESPONSE_SHAPE, exc, stream=False) from exc
        response.warnings.extend(warnings)
        response.rate_limit = RateLimitInfo.from_headers(headers)
        return response

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        body, warnings = self._encode(request, stream=True)
        headers = self.headers({"accept": "text/event-stream"})
        async with self.open_stream(self.url, body, headers) as http_response:
            translator = _StreamTranslator(
                self.name, request.model, warnings, RateLimitInfo.from_headers(http_response.headers)
            )
            async for event in self.relay_sse(http_response, translator, terminal="response.completed"):
                yield event


# -- message translation -------------------------------------------------------------------
def _translate_messages(
    messages: list[Message], *, store: bool, warnings: list[Warning]
) -> tuple[str, list[dict[str, Any]]]:
    system: list[str] = []
    items: list[dict[str, Any]] = []
    named = False
    for message in messages:
        named = named or _named(message)
        if message.role == Role.SYSTEM:
            text = _system_text(message)
            if text:
                system.append(text)
        else:
            items.extend(_message_items(message, store=store))
    if named:
        warnings.append(_name_warning())
    return "\n\n".join(system), items


def _named(message: Message) -> bool:
    """Whether ``message`` has a name that this wire has no place for (it is dropped)."""
    return bool(message.name) and message.role in (Role.USER, Role.ASSISTANT, Role.DEVELOPER)


def _name_warning() -> Warning:
    return Warning("Message.name is not supported by the OpenAI Responses API; ignored", "unsupported_name")


def _message_items(message: Message, *, store: bool) -> list[dict[str, Any]]:
    """The input items of a message that is not a system message."""
    role = message.role
    if role == Role.ASSISTANT:
        return _assistant_items(message, store=store)
    if role == Role.TOOL:
        return _tool_items(message)
    return _input_items(message)  # USER, DEVELOPER


def _system_text(message: Message) -> str:
    for part in message.content:
        if part.kind != ContentKind.TEXT:
            raise InvalidRequestError(
                f"system messages may only hold text, got a {part.kind} part", provider=OpenAIAdapter.name
            )
    return message.text


def _input_items(message: Message) -> list[dict[str, Any]]:
    """A user or developer message; tool results inside it become their own items."""
    role = "developer" if message.role == Role.DEVELOPER else "user"
    items: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []

    def flush() -> None:
        if content:
            items.append({"type": "message", "role": role, "content": list(content)})
            content.clear()

    for part in message.content:
        kind = part.kind
        if kind == ContentKind.TEXT:
            content.append({"type": "input_text", "text": part.text or ""})
        elif kind == ContentKind.IMAGE and part.image is not None:
            content.append(_input_image(part.image))
        elif kind == ContentKind.DOCUMENT and part.document is not None:
            doc = part.document
            url, data, media_type = resolve_media(doc.url, doc.data, doc.media_type)
            if url is not None:
                content.append({"type": "input_file", "file_url": url})
            else:
                assert data is not None
                mime = media_type or "application/pdf"
                name = doc.file_name or f"document{mimetypes.guess_extension(mime) or ''}"
                content.append({"type": "input_file", "filename": name, "file_data": data_uri(data, mime)})
        elif kind == ContentKind.TOOL_RESULT and part.tool_result is not None:
            flush()
            items.append(_function_call_output(part.tool_result))
        elif kind == ContentKind.AUDIO:
            raise InvalidRequestError(
                "audio input is not supported by the OpenAI Responses API", provider=OpenAIAdapter.name
            )
        elif kind in (ContentKind.THINKING, ContentKind.REDACTED_THINKING):
            continue  # only the model's own reasoning can go back, and only on assistant turns
        else:
            raise InvalidRequestError(
                f"a {role} message cannot carry a {kind} part on the OpenAI Responses API",
                provider=OpenAIAdapter.name,
            )
    flush()
    return items


def _input_image(image: ImageData) -> dict[str, Any]:
    url, data, media_type = resolve_media(image.url, image.data, image.media_type)
    if url is None:
        assert data is not None
        url = data_uri(data, media_type or "image/png")
    # ``detail`` is required by the API's schema; "auto" is its documented default.
    return {"type": "input_image", "image_url": url, "detail": image.detail or "auto"}


def _reasoning_item(thinking: ThinkingData | None) -> dict[str, Any] | None:
    """The reasoning input item stored in ``provider_data`` by this adapter, or None."""
    data = thinking.provider_data if thinking is not None else None
    if not isinstance(data, dict) or data.get("type") != "reasoning" or not data.get("id"):
        return None
    item: dict[str, Any] = {"type": "reasoning", "id": data["id"], "summary": list(data.get("summary") or [])}
    if data.get("encrypted_content") is not None:
        item["encrypted_content"] = data["encrypted_content"]
    if data.get("content"):
        item["content"] = data["content"]
    return item


def _assistant_items(message: Message, *, store: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []

    def flush() -> None:
        if content:
            items.append({"type": "message", "role": "assistant", "content": list(content)})
            content.clear()

    for part in message.content:
        kind = part.kind
        if kind == ContentKind.TEXT:
            if part.text:
                content.append({"type": "output_text", "text": part.text})
        elif kind == ContentKind.TOOL_CALL and part.tool_call is not None:
            flush()
            items.append(_function_call(part.tool_call, store=store))
        elif kind in (ContentKind.THINKING, ContentKind.REDACTED_THINKING):
            item = _reasoning_item(part.thinking)
            if item is None or (not store and "encrypted_content" not in item):
                continue
            flush()
            items.append(item)
        elif kind == ContentKind.TOOL_RESULT and part.tool_result is not None:
            flush()
            items.append(_function_call_output(part.tool_result))
        else:
            raise InvalidRequestError(
                f"an assistant message cannot carry a {kind} part on the OpenAI Responses API",
                provider=OpenAIAdapter.name,
            )
    flush()
    if store:
        # A stored reasoning item must be followed by the item it produced; only function calls
        # keep their ids in the unified model, so reasoning followed by anything else goes.
        items = [
            item
            for i, item in enumerate(items)
            if item["type"] != "reasoning" or (i + 1 < len(items) and items[i + 1]["type"] == "function_call")
        ]
    return items


def _function_call(call: ToolCallData, *, store: bool) -> dict[str, Any]:
    args = call.arguments
    item: dict[str, Any] = {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
    }
    item_id = (call.provider_data or {}).get("id")
    if store and isinstance(item_id, str) and item_id:
        item["id"] = item_id
    return item


def _tool_items(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    texts: list[str] = []
    for part in message.content:
        if part.kind == ContentKind.TOOL_RESULT and part.tool_result is not None:
            items.append(_function_call_output(part.tool_result))
        elif part.kind == ContentKind.TEXT:
            texts.append(part.text or "")
    if not items and message.tool_call_id:
        items.append({"type": "function_call_output", "call_id": message.tool_call_id, "output": "".join(texts)})
    elif not items:
        raise InvalidRequestError(
            "a tool message needs a tool result part or a tool_call_id", provider=OpenAIAdapter.name
        )
    return items


def _function_call_output(result: ToolResultData) -> dict[str, Any]:
    content = result.content
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    output: str | list[dict[str, Any]] = text
    if result.image_data is not None:
        image = ImageData(data=result.image_data, media_type=result.image_media_type or "image/png")
        output = [_input_image(image)]
        if text:
            output.insert(0, {"type": "input_text", "text": text})
    return {"type": "function_call_output", "call_id": result.tool_call_id, "output": output}


def _tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if choice.mode not in TOOL_CHOICE_MODES:
        raise UnsupportedToolChoiceError(f"openai: unsupported tool_choice mode {choice.mode!r}")
    if choice.mode == "named":
        return {"type": "function", "name": choice.tool_name}
    return choice.mode


def _merge_options(body: dict[str, Any], options: Mapping[str, Any]) -> None:
    for key, value in options.items():
        if key in _CONSUMED:
            continue
        if key == "tools" and isinstance(value, list):
            body["tools"] = [*body.get("tools", []), *value]
        elif key == "include" and isinstance(value, list):
            merged = list(body.get("include", []))
            merged.extend(v for v in value if v not in merged)
            body["include"] = merged
        elif key in ("reasoning", "text") and isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value


# -- response translation ------------------------------------------------------------------
def parse_response(data: Mapping[str, Any], *, provider: str = "openai", model: str = "") -> Response:
    """A decoded Responses API response object -> unified Response (``raw`` = ``data``)."""
    parts: list[ContentPart] = []
    for item in data.get("output") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            text = _message_text(item)
            if text:
                parts.append(ContentPart(ContentKind.TEXT, text=text))
        elif kind == "reasoning":
            parts.append(ContentPart.of_thinking(_thinking(item)))
        elif kind == "function_call":
            parts.append(ContentPart.of_tool_call(_call_data(item)))
    message = Message(Role.ASSISTANT, parts)
    has_calls = any(p.kind == ContentKind.TOOL_CALL for p in parts)
    return Response(
        id=str(data.get("id") or ""),
        model=str(data.get("model") or model),
        provider=provider,
        message=message,
        finish_reason=_finish_reason(data, has_calls),
        usage=_usage(data.get("usage")),
        raw=dict(data),
    )


def _message_text(item: Mapping[str, Any]) -> str:
    out: list[str] = []
    for block in item.get("content") or []:
        if isinstance(block, dict):
            if block.get("type") == "output_text":
                out.append(str(block.get("text") or ""))
            elif block.get("type") == "refusal":
                out.append(str(block.get("refusal") or ""))
    return "".join(out)


def _thinking(item: Mapping[str, Any]) -> ThinkingData:
    summary = [s for s in item.get("summary") or [] if isinstance(s, dict)]
    texts = [str(s.get("text") or "") for s in summary]
    if not texts:  # open-weight models stream raw reasoning as ``content`` instead
        texts = [str(c.get("text") or "") for c in item.get("content") or [] if isinstance(c, dict)]
    data: dict[str, Any] = {
        "type": "reasoning",
        "id": item.get("id"),
        "encrypted_content": item.get("encrypted_content"),
        "summary": summary,
    }
    if item.get("content"):
        data["content"] = item["content"]
    return ThinkingData("\n\n".join(texts), provider_data=data)


def _call_data(item: Mapping[str, Any], arguments: str | None = None) -> ToolCallData:
    raw = arguments if arguments is not None else str(item.get("arguments") or "")
    parsed, error = parse_arguments(raw)
    return ToolCallData(
        id=str(item.get("call_id") or item.get("id") or ""),
        name=str(item.get("name") or ""),
        arguments=raw if error else parsed,
        provider_data={"id": item.get("id")} if item.get("id") else None,
    )


def _finish_reason(data: Mapping[str, Any], has_calls: bool) -> FinishReason:
    status = data.get("status")
    if status == "completed":
        refused = any(
            isinstance(block, dict) and block.get("type") == "refusal"
            for item in data.get("output") or []
            if isinstance(item, dict) and item.get("type") == "message"
            for block in item.get("content") or []
        )
        if has_calls:
            return FinishReason("tool_calls", "completed")
        return FinishReason("content_filter", "refusal") if refused else FinishReason("stop", "completed")
    if status == "incomplete":
        details = data.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if reason == "max_output_tokens":
            return FinishReason("length", reason)
        if reason == "content_filter":
            return FinishReason("content_filter", reason)
        return FinishReason("other", reason or "incomplete")
    if status == "failed":
        return FinishReason("error", "failed")
    return FinishReason("other", str(status) if status is not None else None)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    inp = int(raw.get("input_tokens") or 0)
    out = int(raw.get("output_tokens") or 0)
    in_details = raw.get("input_tokens_details") if isinstance(raw.get("input_tokens_details"), dict) else {}
    out_details = raw.get("output_tokens_details") if isinstance(raw.get("output_tokens_details"), dict) else {}

    def opt(details: Mapping[str, Any], key: str) -> int | None:
        value = details.get(key)
        return int(value) if isinstance(value, (int, float)) else None

    return Usage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=int(raw.get("total_tokens") or inp + out),
        reasoning_tokens=opt(out_details, "reasoning_tokens"),
        cache_read_tokens=opt(in_details, "cached_tokens"),
        cache_write_tokens=opt(in_details, "cache_write_tokens"),
        raw=dict(raw),
    )


def _failure(provider: str, error: Mapping[str, Any] | None, fallback: str = "the response failed") -> SDKError:
    """Map an error object found inside a 200 answer (``response.failed``, an ``error`` event,
    or a failed non-streaming response) to the error the same failure gets over HTTP."""
    return error_in_answer(provider, {"error": dict(error or {})}, default_message=fallback)


# -- streaming -----------------------------------------------------------------------------
@dataclass(slots=True)
class _Call:
    call_id: str
    name: str
    item_id: str
    args: list[str] = field(default_factory=list)
    final_args: str | None = None

    def head(self) -> ToolCall:
        return ToolCall(self.call_id, self.name, {}, provider_data={"id": self.item_id} if self.item_id else None)


#: Events that carry nothing the unified stream needs (their content arrives elsewhere too).
_QUIET = frozenset(
    {
        "response.in_progress",
        "response.queued",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.refusal.done",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.done",
    }
)


class _StreamTranslator:
    """Turns Responses API SSE events into unified StreamEvents, folding each one into a
    StreamAccumulator so the FINISH event can carry the whole Response."""

    def __init__(self, provider: str, model: str, warnings: list[Warning], rate_limit: RateLimitInfo | None) -> None:
        self.provider = provider
        self.acc = StreamAccumulator(provider, model)
        self.warnings = warnings
        self.rate_limit = rate_limit
        self.started = False
        self.finished = False
        self.calls: dict[str, _Call] = {}
        self.calls_by_index: dict[int, _Call] = {}
        self.text_open: set[str] = set()
        self.text_streamed: set[str] = set()
        self.reasoning_open: set[str] = set()
        self._out: list[StreamEvent] = []

    def _emit(self, event: StreamEvent) -> None:
        self.acc.process(event)
        self._out.append(event)

    def feed(self, sse: SSEEvent) -> list[StreamEvent]:
        self._out = []
        data = sse.data.strip()
        if not data or data == "[DONE]":
            return self._out
        payload = sse.json(self.provider)
        try:
            return self._feed(sse, payload)
        except MALFORMED as exc:
            raise malformed(self.provider, payload, EVENT_SHAPE, exc, stream=True) from exc

    def _feed(self, sse: SSEEvent, payload: dict[str, Any]) -> list[StreamEvent]:
        kind = str(payload.get("type") or sse.event or "")
        if kind == "error":
            inner = payload.get("error")
            if not isinstance(inner, dict):
                inner = {k: payload[k] for k in ("code", "message", "param") if payload.get(k) is not None}
            raise _failure(self.provider, inner, "error event in the stream")
        if kind == "response.failed":
            response = payload.get("response") or {}
            raise _failure(self.provider, response.get("error") if isinstance(response, dict) else None)
        if not self.started:
            self.started = True
            response = payload.get("response")
            if isinstance(response, dict):
                self.acc.response_id = str(response.get("id") or "")
                self.acc.model = str(response.get("model") or self.acc.model)
            self._emit(StreamEvent(_T.STREAM_START, raw=payload, warnings=list(self.warnings) or None))
            if kind == "response.created":
                return self._out
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, payload)
        elif kind not in _QUIET and kind != "response.created":
            self._emit(StreamEvent(_T.PROVIDER_EVENT, raw=payload))
        return self._out

    # -- item lifecycle ----------------------------------------------------------------------
    def _item_added(self, payload: dict[str, Any]) -> None:
        item = payload.get("item") or {}
        kind = item.get("type")
        item_id = str(item.get("id") or "")
        if kind == "message":
            self._open_text(item_id)
        elif kind == "reasoning":
            self._open_reasoning(item_id)
        elif kind == "function_call":
            self._call(payload, item)
        else:
            self._emit(StreamEvent(_T.PROVIDER_EVENT, raw=payload))

    def _item_done(self, payload: dict[str, Any]) -> None:
        item = payload.get("item") or {}
        kind = item.get("type")
        item_id = str(item.get("id") or "")
        if kind == "message":
            if item_id not in self.text_streamed:
                text = _message_text(item)
                if text:  # nothing arrived as deltas: deliver the item's text in one piece
                    self._open_text(item_id)
                    self._emit(StreamEvent(_T.TEXT_DELTA, delta=text, text_id=item_id))
            if item_id in self.text_open:
                self.text_open.discard(item_id)
                self._emit(StreamEvent(_T.TEXT_END, text_id=item_id))
        elif kind == "reasoning":
            self._open_reasoning(item_id)
            self.reasoning_open.discard(item_id)
            self._emit(StreamEvent(_T.REASONING_END, thinking=_thinking(item)))
        elif kind == "function_call":
            call = self._call(payload, item)
            raw = item.get("arguments")
            if not isinstance(raw, str) or (not raw and call.args):
                raw = call.final_args if call.final_args is not None else "".join(call.args)
            tool_call = ToolCall.from_data(
                ToolCallData(call.call_id, call.name, raw, provider_data=call.head().provider_data)
            )
            self._emit(StreamEvent(_T.TOOL_CALL_END, tool_call=tool_call, raw=payload))
        else:
            self._emit(StreamEvent(_T.PROVIDER_EVENT, raw=payload))

    def _open_text(self, item_id: str) -> None:
        if item_id not in self.text_open:
            self.text_open.add(item_id)
            self._emit(StreamEvent(_T.TEXT_START, text_id=item_id))

    def _open_reasoning(self, item_id: str) -> None:
        if item_id not in self.reasoning_open:
            self.reasoning_open.add(item_id)
            self._emit(StreamEvent(_T.REASONING_START))

    def _call(self, payload: dict[str, Any], item: Mapping[str, Any] | None = None) -> _Call:
        """The call an event belongs to, by item id or output index; created (with its
        TOOL_CALL_START) the first time it is seen."""
        item_id = str((item or {}).get("id") or payload.get("item_id") or "")
        index = payload.get("output_index")
        call = self.calls.get(item_id) if item_id else None
        if call is None and isinstance(index, int):
            call = self.calls_by_index.get(index)
        if call is None:
            if item is None:
                raise StreamError(f"{self.provider}: argument delta for an unknown function call {item_id!r}")
            call = _Call(str(item.get("call_id") or item_id), str(item.get("name") or ""), item_id)
            self.calls[item_id] = call
            if isinstance(index, int):
                self.calls_by_index[index] = call
            self._emit(StreamEvent(_T.TOOL_CALL_START, tool_call=call.head(), raw=dict(payload)))
        return call

    # -- deltas ----------------------------------------------------------------------------
    def _text_delta(self, payload: dict[str, Any]) -> None:
        item_id = str(payload.get("item_id") or "")
        self._open_text(item_id)
        self.text_streamed.add(item_id)
        self._emit(StreamEvent(_T.TEXT_DELTA, delta=str(payload.get("delta") or ""), text_id=item_id))

    def _args_delta(self, payload: dict[str, Any]) -> None:
        call = self._call(payload)
        delta = str(payload.get("delta") or "")
        call.args.append(delta)
        self._emit(StreamEvent(_T.TOOL_CALL_DELTA, delta=delta, tool_call=call.head()))

    def _args_done(self, payload: dict[str, Any]) -> None:
        arguments = payload.get("arguments")
        if isinstance(arguments, str):
            self._call(payload).final_args = arguments

    def _summary_part(self, payload: dict[str, Any]) -> None:
        item_id = str(payload.get("item_id") or "")
        self._open_reasoning(item_id)
        index = payload.get("summary_index")
        if isinstance(index, int) and index > 0:
            # Summary parts are joined with a blank line, as in the non-streaming Response.
            self._emit(StreamEvent(_T.REASONING_DELTA, reasoning_delta="\n\n"))

    def _reasoning_delta(self, payload: dict[str, Any]) -> None:
        self._open_reasoning(str(payload.get("item_id") or ""))
        self._emit(StreamEvent(_T.REASONING_DELTA, reasoning_delta=str(payload.get("delta") or "")))

    # -- the end ---------------------------------------------------------------------------
    def _finish(self, payload: dict[str, Any]) -> None:
        data = payload.get("response")
        if not isinstance(data, dict):
            raise StreamError(f"{self.provider}: {payload.get('type')} event without a response object")
        for item_id in list(self.text_open):
            self.text_open.discard(item_id)
            self._emit(StreamEvent(_T.TEXT_END, text_id=item_id))
        reason = _finish_reason(data, bool(self.calls))
        usage = _usage(data.get("usage"))
        self.acc.finish_reason = reason
        self.acc.usage = usage
        response = self.acc.response()
        response.id = str(data.get("id") or self.acc.response_id)
        response.model = str(data.get("model") or self.acc.model)
        response.raw = data
        response.rate_limit = self.rate_limit
        self._emit(StreamEvent(_T.FINISH, finish_reason=reason, usage=usage, response=response, raw=payload))
        self.finished = True


_HANDLERS: dict[str, Callable[[_StreamTranslator, dict[str, Any]], None]] = {
    "response.output_item.added": _StreamTranslator._item_added,
    "response.output_item.done": _StreamTranslator._item_done,
    "response.output_text.delta": _StreamTranslator._text_delta,
    "response.refusal.delta": _StreamTranslator._text_delta,
    "response.function_call_arguments.delta": _StreamTranslator._args_delta,
    "response.function_call_arguments.done": _StreamTranslator._args_done,
    "response.reasoning_summary_part.added": _StreamTranslator._summary_part,
    "response.reasoning_summary_text.delta": _StreamTranslator._reasoning_delta,
    "response.reasoning_text.delta": _StreamTranslator._reasoning_delta,
    "response.completed": _StreamTranslator._finish,
    "response.incomplete": _StreamTranslator._finish,
}
