"""OpenAI-compatible Chat Completions adapter (``POST {base_url}/chat/completions``).

One adapter for the many servers that speak the Chat Completions wire format: vLLM, Ollama,
llama.cpp (and llama-cpp-python), LM Studio, OpenRouter, Groq, DeepSeek, and api.openai.com
itself. OpenAI's own models should go through the Responses API adapter (spec 2.7); this one is
for everything else, and it is the hot path of the ``ra`` command, which sends one request per
agent step.

Configuration
-------------
* ``base_url`` is required unless ``api_key`` is given; with a key and no URL the adapter talks
  to ``https://api.openai.com/v1``. There is no implicit localhost default: a missing URL is far
  more often a mistake than a wish to reach port 8000.
* ``Authorization: Bearer <key>`` is sent only when a key is set (local servers need none).
* ``name`` (default ``"openai-compatible"``) is the provider name reported in responses and
  errors, and one of the keys under which provider options are read.

Provider options
----------------
Read from ``request.provider_options`` under ``"openai-compatible"``, ``"openai_compatible"`` and
``self.name`` (merged in that order, later wins). These keys steer the adapter and are not sent:

* ``developer_role`` (bool, default from the constructor, itself default False): send
  ``Role.DEVELOPER`` as ``developer``. Most compatible servers reject that role, so by default
  developer messages go out as ``system``.
* ``echo_reasoning`` (False | True | field name, default False): when sending history back,
  reasoning (THINKING parts) is dropped, because several servers reject it in input (DeepSeek's
  original reasoner answered 400). True echoes it in the field it arrived in (``reasoning_content``
  for DeepSeek, ``reasoning`` + ``reasoning_details`` with signatures for OpenRouter); a string
  names the field to use. Turn it on for servers that need the reasoning of a tool-calling turn
  back (DeepSeek thinking with tools, OpenRouter + Anthropic models).
* ``include_usage`` (bool, default True): send ``stream_options.include_usage`` on streamed
  requests; turn off for servers that reject ``stream_options``.
* ``max_tokens_field`` (str, default ``"max_tokens"``): the body field that carries
  ``Request.max_tokens``; use ``"max_completion_tokens"`` for OpenAI reasoning models.
* ``strict_tools`` (bool): add ``"strict": true`` to every function definition.

Every other key is merged into the request body as is (the escape hatch), after the adapter's own
fields, so ``{"parallel_tool_calls": False}``, ``{"seed": 7}``, ``{"max_completion_tokens": 50}``,
``{"reasoning": {"enabled": True}}`` (OpenRouter) or ``{"top_k": 20}`` (vLLM) go straight to the
server. Unified fields (temperature, top_p, max_tokens, stop, reasoning_effort, response_format,
tool_choice) are sent only when set, so a server's own defaults stay in force.

Translation notes
-----------------
* System messages stay in place as ``system`` messages (Chat Completions allows several).
* User content is a plain string when it is a single text part, otherwise a content-part array
  (``text``, ``image_url`` with a URL or data URI and ``detail``, ``input_audio``, ``file``).
  Local image paths are read and sent inline.
* Assistant messages carry ``content`` (null when there is only tool calls) and ``tool_calls``;
  arguments are always a JSON string: the model's own string when it is still equivalent to the
  parsed arguments (byte-identical history keeps server-side prefix caches warm), the raw string
  when it was malformed, else a fresh encoding.
* Tool results become ``role: tool`` messages; dict/list content is JSON-encoded, ``is_error``
  has no wire field and is left to the content. Images returned by tools go in a ``user`` message
  placed after the run of tool messages (tool messages cannot carry images).
* ``Message.name`` is sent as ``name`` on system/user/assistant messages.
* Finish reasons: ``stop``, ``length``, ``tool_calls``, ``content_filter`` map to themselves,
  ``function_call`` to ``tool_calls``, ``error`` to ``error``, anything else to ``other``. A
  ``stop`` that comes with tool calls (some local servers) is reported as ``tool_calls``.
* Usage: ``prompt_tokens``, ``completion_tokens``, ``completion_tokens_details.reasoning_tokens``,
  ``prompt_tokens_details.cached_tokens`` (or DeepSeek's ``prompt_cache_hit_tokens``) and
  ``prompt_tokens_details.cache_write_tokens`` where a server reports it.

Speed
-----
Translating a Message to its wire dicts is a pure function of the Message and of two options, so
the result is cached per Message object: an agent's history is translated once, and each step
only translates what is new. The cache holds the Message itself (so its ``id`` cannot be reused
while cached) and a cheap fingerprint (role, name, tool_call_id and a copy of its parts list);
adding, removing or replacing a part invalidates the entry, editing a part's fields in place does
not. Treat sent Messages as immutable, which the agent loop does. The entry also keeps the
message's JSON, encoded once, so the request body is joined from cached bytes (``encode_body``,
byte-identical to encoding ``build_body``'s dict) instead of re-encoding the whole history every
step; the tools array's encoding is reused while the tool definitions stay the same. What is
left proportional to the history per step is the walk that checks each cached entry (a few
hundred nanoseconds per message) and joining the bytes. The stream parser
works on bytes (no per-line text decoding) and decodes each ``data:`` payload once, for the JSON
parser, which is most of the remaining per-event cost. After ``data: [DONE]`` the rest of the
body is read (briefly bounded) so that the connection is reused by the next request.

Streaming fallback
------------------
Some servers refuse to stream when tools are present (llama-cpp-python answers HTTP 500
"Automatic streaming tool choice is not supported"). When a streamed request with tools is
refused with such a message, the adapter makes the same call without streaming, turns the answer
into the usual event sequence, and remembers the refusal: later streamed requests with tools on
this adapter instance go straight to a non-streaming call. A streamed request with tools whose
200 answer breaks off before its first event (llama-cpp-python 0.3's server does this instead of
refusing) counts as a refusal too. The first such answer says so in a
Warning (code ``stream_fallback``) on STREAM_START and in ``Response.warnings``. A server that
ignores ``stream: true`` and answers with plain JSON is handled the same way.
"""

from __future__ import annotations

import asyncio
import json
import operator
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from ..accumulator import StreamAccumulator
from ..errors import (
    ConfigurationError,
    InvalidRequestError,
    NetworkError,
    ProviderError,
    SDKError,
    StreamError,
    UnsupportedToolChoiceError,
    error_from_response,
)
from ..http import AdapterTimeout, HTTPAdapter
from ..media import data_uri, is_local_path, resolve_media, to_base64
from ..shape import ANY, INT, MALFORMED, STR, arr, malformed, obj
from ..types import (
    ContentKind,
    ContentPart,
    FinishReason,
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
    ToolDefinition,
    Usage,
    Warning,
)
from .chunk_template import TextChunkTemplate

__all__ = ["OpenAICompatibleAdapter"]

_T = StreamEventType

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
_K = ContentKind

OPENAI_BASE_URL = "https://api.openai.com/v1"

#: Option keys that steer the adapter; every other provider option is merged into the body.
_CONTROL_KEYS = frozenset({"developer_role", "echo_reasoning", "include_usage", "max_tokens_field", "strict_tools"})

_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
}

#: Servers that cannot stream with tools say so in words like these (llama-cpp-python:
#: "Automatic streaming tool choice is not supported"; others: "streaming is not supported with
#: tools", "tool calls are not supported in stream mode").
_STREAM_TOOL_REFUSAL = re.compile(r"stream.*tool|tool.*stream", re.I | re.S)

#: Bound on cached translations; an agent history is a few hundred messages, so this only bites
#: for long-lived adapters that serve many unrelated conversations.
_CACHE_LIMIT = 8192

#: How long the rest of a stream body is awaited after ``data: [DONE]`` (see ``_drain``).
_DRAIN_SECONDS = 0.25

_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}

_json_loads = json.loads
#: ``json.loads`` minus its per-call argument handling and encoding sniffing: payloads are
#: decoded as UTF-8 (the only encoding SSE allows) and handed to the C scanner directly.
_decode_json = json.JSONDecoder().decode


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class OpenAICompatibleAdapter(HTTPAdapter):
    """Chat Completions adapter for OpenAI-compatible servers (see the module docstring)."""

    name = "openai-compatible"
    default_base_url = OPENAI_BASE_URL

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        default_headers: Mapping[str, str] | None = None,
        timeout: float | AdapterTimeout | None = None,
        http_client: httpx.AsyncClient | None = None,
        name: str | None = None,
        developer_role: bool = False,
        echo_reasoning: bool | str = False,
        include_usage: bool = True,
    ) -> None:
        if not base_url and not api_key:
            raise ConfigurationError(
                "OpenAICompatibleAdapter needs base_url (e.g. http://127.0.0.1:8000/v1 for a local "
                "vLLM or llama.cpp server); without one it needs api_key and talks to api.openai.com"
            )
        super().__init__(
            api_key,
            base_url,
            default_headers=default_headers,
            timeout=timeout,
            http_client=http_client,
        )
        if name:
            self.name = name
        self.developer_role = developer_role
        self.echo_reasoning = echo_reasoning
        self.include_usage = include_usage
        self.url = f"{self.base_url}/chat/completions"
        #: Set once the server refused to stream with tools; such requests then skip streaming.
        self.no_stream_with_tools = False
        self._fallback_warned = False
        self._msg_cache: dict[int, list[Any]] = {}
        self._tool_cache: dict[int, tuple[Any, ...]] = {}
        self._last_tools: tuple[list[dict[str, Any]], bytes] | None = None
        self._option_keys = tuple(dict.fromkeys(("openai-compatible", "openai_compatible", self.name)))

    # -- capabilities ------------------------------------------------------------------------
    def supports_tool_choice(self, mode: str) -> bool:
        return mode in ("auto", "none", "required", "named")

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = super().headers(extra)
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    def options(self, request: Request) -> dict[str, Any]:
        """This adapter's provider options, merged across the keys it answers to."""
        po = request.provider_options
        if not po:
            return {}
        merged: dict[str, Any] = {}
        for key in self._option_keys:
            value = po.get(key)
            if value:
                merged.update(value)
        return merged

    # -- request body --------------------------------------------------------------------------
    def build_body(self, request: Request, *, stream: bool) -> dict[str, Any]:
        """The Chat Completions JSON body for ``request``.

        The message dicts inside are shared with the translation cache (that is what makes a
        long history cheap): treat the body as read-only, copy before editing.
        """
        return self._build(request, stream)

    def encode_body(self, request: Request, *, stream: bool) -> bytes:
        """``build_body`` as the bytes that go on the wire: the same bytes as encoding that dict
        with compact separators, but each message's JSON comes from the translation cache, so a
        step encodes only what is new instead of the whole history."""
        fragments: list[bytes] = []
        built: dict[str, Any] = {}
        body = self._build(request, stream, fragments, built)
        return self._encode(body, fragments, built)

    def _build(
        self,
        request: Request,
        stream: bool,
        fragments: list[bytes] | None = None,
        built: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The body; ``fragments`` collects the messages' JSON, ``built`` the messages and tools
        lists made here (a provider option of the same name replaces them in the body)."""
        opts = self.options(request)
        developer = bool(opts.get("developer_role", self.developer_role))
        echo = opts.get("echo_reasoning", self.echo_reasoning)
        mode = (developer, echo if isinstance(echo, str) else bool(echo))

        body: dict[str, Any] = {"model": request.model, "messages": self._messages(request.messages, mode, fragments)}
        if built is not None:
            built["messages"] = body["messages"]

        tools = request.tools
        if tools:
            strict = bool(opts.get("strict_tools"))
            body["tools"] = [self._tool(t, strict) for t in tools]
            if built is not None:
                built["tools"] = body["tools"]
            choice = request.tool_choice
            if choice is not None:
                if not self.supports_tool_choice(choice.mode):
                    raise UnsupportedToolChoiceError(f"{self.name} does not support tool_choice {choice.mode!r}")
                if choice.mode == "named":
                    body["tool_choice"] = {"type": "function", "function": {"name": choice.tool_name}}
                else:
                    body["tool_choice"] = choice.mode
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.max_tokens is not None:
            body[opts.get("max_tokens_field") or "max_tokens"] = request.max_tokens
        if request.stop_sequences:
            body["stop"] = list(request.stop_sequences)
        if request.reasoning_effort is not None:
            body["reasoning_effort"] = request.reasoning_effort
        fmt = request.response_format
        if fmt is not None and fmt.type != "text":
            if fmt.type == "json":
                body["response_format"] = {"type": "json_object"}
            else:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": fmt.name, "schema": fmt.json_schema, "strict": fmt.strict},
                }
        if stream:
            body["stream"] = True
            if opts.get("include_usage", self.include_usage):
                body["stream_options"] = {"include_usage": True}
        body.update({k: v for k, v in opts.items() if k not in _CONTROL_KEYS})
        if "max_completion_tokens" in body and "max_tokens" in body and "max_tokens_field" not in opts:
            # An explicit max_completion_tokens option replaces max_tokens; OpenAI rejects both.
            del body["max_tokens"]
        return body

    def _messages(
        self, messages: list[Message], mode: tuple[bool, bool | str], fragments: list[bytes] | None = None
    ) -> list[dict[str, Any]]:
        """The wire messages. With ``fragments``, their JSON instead: one bytes piece per Message
        (its wire messages joined by commas) is appended to that list in body order, and the
        returned list stays empty."""
        get = self._msg_cache.get
        out: list[dict[str, Any]] = []
        # Image follow-ups (dicts, or their JSON), sent after the run of tool messages.
        pending: list[Any] = []
        for message in messages:
            entry = get(id(message))
            # Unchanged: the same object, with the same role, name, call id and parts. Identity
            # checks first; the parts list compares item by item, identity first, so an unchanged
            # message costs a few hundred nanoseconds whatever its size.
            if (
                entry is None
                or entry[0] is not message
                or entry[2] is not message.role
                or entry[3] is not message.name
                or entry[4] is not message.tool_call_id
                or entry[1] != mode
                or entry[5] != message.content
            ):
                entry = self._new_entry(message, mode)
            if pending and not entry[10]:
                if fragments is None:
                    out.extend(pending)
                else:
                    fragments.extend(pending)
                pending = []
            if fragments is None:
                out.extend(entry[6])
                if entry[7]:
                    pending.extend(entry[7])
            else:
                wire_json = entry[8]
                if wire_json is None:
                    wire_json = entry[8] = ",".join(map(_dumps, entry[6])).encode("utf-8")
                    entry[9] = ",".join(map(_dumps, entry[7])).encode("utf-8")
                if wire_json:
                    fragments.append(wire_json)
                if entry[7]:
                    pending.append(entry[9])
        if fragments is None:
            out.extend(pending)
        else:
            fragments.extend(pending)
        return out

    def _new_entry(self, message: Message, mode: tuple[bool, bool | str]) -> list[Any]:
        """Translate ``message`` and cache the result. The entry holds the message and a copy of
        its parts list (so their ids cannot be reused while it lives), the translation, the JSON
        of it (filled on first need) and whether it starts with a tool message."""
        wire, deferred = self._translate(message, mode)
        cache = self._msg_cache
        if len(cache) >= _CACHE_LIMIT:
            for key in list(cache)[: _CACHE_LIMIT // 4]:
                del cache[key]
        starts_with_tool = bool(wire) and wire[0]["role"] == "tool"
        entry = [
            message,
            mode,
            message.role,
            message.name,
            message.tool_call_id,
            message.content[:],
            wire,
            deferred,
            None,
            None,
            starts_with_tool,
        ]
        cache[id(message)] = entry
        return entry

    def _encode(self, body: dict[str, Any], fragments: list[bytes], built: dict[str, Any]) -> bytes:
        """``_dumps(body)`` as UTF-8, with the messages array joined from ``fragments`` and the
        tools array from its cached encoding (when they are the lists ``_build`` made)."""
        out: list[bytes] = []
        for key, value in body.items():
            if not isinstance(key, str):  # json would coerce it; let it, for the whole body
                return _dumps(body).encode("utf-8")
            out.append(b'{"' if not out else b',"')
            out.append(_dumps(key)[1:].encode("utf-8") + b":")
            if key == "messages" and value is built.get("messages"):
                out += (b"[", b",".join(fragments), b"]")  # the history is copied twice, no more
            elif key == "tools" and value is built.get("tools"):
                out.append(self._tools_json(value))
            else:
                out.append(_dumps(value).encode("utf-8"))
        out.append(b"}" if out else b"{}")
        return b"".join(out)

    def _tools_json(self, tools: list[dict[str, Any]]) -> bytes:
        """The tools array's JSON, re-encoded only when its (cached) definitions change."""
        last = self._last_tools
        if last is not None and len(last[0]) == len(tools) and all(map(operator.is_, last[0], tools)):
            return last[1]
        encoded = _dumps(tools).encode("utf-8")
        self._last_tools = (list(tools), encoded)
        return encoded

    def _translate(
        self, message: Message, mode: tuple[bool, bool | str]
    ) -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]:
        """Wire messages for one Message, plus user messages to send after its tool results."""
        role = message.role
        parts = message.content
        wire: list[dict[str, Any]] = []
        deferred: list[dict[str, Any]] = []

        # Tool results go out as role=tool messages, wherever they sit.
        rest: list[ContentPart] = []
        for part in parts:
            if part.tool_result is not None:
                result = part.tool_result
                content = result.content
                text = content if isinstance(content, str) else _dumps(content)
                wire.append({"role": "tool", "tool_call_id": result.tool_call_id, "content": text})
                if result.image_data is not None:
                    url = data_uri(result.image_data, result.image_media_type or "image/png")
                    deferred.append(
                        {
                            "role": "user",
                            "content": [
                                {"type": "text", "text": f"Image returned by tool call {result.tool_call_id}:"},
                                {"type": "image_url", "image_url": {"url": url}},
                            ],
                        }
                    )
            else:
                rest.append(part)
        if role == Role.TOOL:
            if rest:
                if message.tool_call_id is None:
                    raise self._bad("a tool message with text content needs tool_call_id")
                wire.append(
                    {"role": "tool", "tool_call_id": message.tool_call_id, "content": self._text_only(rest, "tool")}
                )
            return tuple(wire), tuple(deferred)
        if wire and not rest:
            return tuple(wire), tuple(deferred)

        if role == Role.SYSTEM or role == Role.DEVELOPER:
            wire_role = "developer" if role == Role.DEVELOPER and mode[0] else "system"
            msg: dict[str, Any] = {"role": wire_role, "content": self._text_only(rest, str(role))}
        elif role == Role.USER:
            msg = {"role": "user", "content": self._user_content(rest)}
        elif role == Role.ASSISTANT:
            msg = self._assistant(rest, mode[1])
        else:
            raise self._bad(f"unknown message role {role!r}")
        if message.name:
            msg["name"] = message.name
        wire.append(msg)
        return tuple(wire), tuple(deferred)

    def _bad(self, message: str) -> InvalidRequestError:
        return InvalidRequestError(message, provider=self.name)

    def _text_only(self, parts: list[ContentPart], role: str) -> str:
        texts = []
        for part in parts:
            if part.kind == _K.TEXT:
                texts.append(part.text or "")
            elif part.kind not in (_K.THINKING, _K.REDACTED_THINKING):
                raise self._bad(f"{part.kind} content is not supported in a {role} message")
        return "".join(texts)

    def _user_content(self, parts: list[ContentPart]) -> str | list[dict[str, Any]]:
        if not parts:
            return ""
        if len(parts) == 1 and parts[0].kind == _K.TEXT:
            return parts[0].text or ""
        out: list[dict[str, Any]] = []
        for part in parts:
            kind = part.kind
            if kind == _K.TEXT:
                out.append({"type": "text", "text": part.text or ""})
            elif kind == _K.IMAGE and part.image is not None:
                out.append(self._image(part))
            elif kind == _K.AUDIO and part.audio is not None:
                audio = part.audio
                data, media_type = self._inline(audio.url, audio.data, audio.media_type, "audio")
                fmt = _AUDIO_FORMATS.get((media_type or "").lower())
                if fmt is None:
                    raise self._bad(f"audio type {media_type!r} is not supported (use wav or mp3)")
                out.append({"type": "input_audio", "input_audio": {"data": to_base64(data), "format": fmt}})
            elif kind == _K.DOCUMENT and part.document is not None:
                doc = part.document
                data, media_type = self._inline(doc.url, doc.data, doc.media_type, "documents")
                file: dict[str, Any] = {"file_data": data_uri(data, media_type or "application/pdf")}
                name = doc.file_name or (doc.url.rsplit("/", 1)[-1] if doc.url and is_local_path(doc.url) else None)
                if name:
                    file["filename"] = name
                out.append({"type": "file", "file": file})
            elif kind in (_K.THINKING, _K.REDACTED_THINKING):
                continue
            else:
                raise self._bad(f"{kind} content is not supported in a user message")
        return out

    def _inline(self, url: str | None, data: bytes | None, media_type: str | None, what: str) -> tuple[bytes, str]:
        """Bytes and media type of inline data, a data URI or a local file; Chat Completions
        cannot fetch remote audio or documents, so a remote URL is an error."""
        if data is None and not (url and (url.startswith("data:") or is_local_path(url))):
            raise self._bad(f"{what} must be inline data, a data URI or a local file for Chat Completions")
        _, raw, mime = resolve_media(None if data is not None else url, data, media_type)
        assert raw is not None
        return raw, mime or "application/octet-stream"

    def _image(self, part: ContentPart) -> dict[str, Any]:
        image = part.image
        assert image is not None
        if image.data is not None:
            url = data_uri(image.data, image.media_type or "image/png")
        elif image.url is not None and is_local_path(image.url):
            _, data, media_type = resolve_media(image.url, None, image.media_type)
            assert data is not None
            url = data_uri(data, media_type or "image/png")
        else:
            url = image.url or ""  # remote URL or a data URI, sent as is
        spec: dict[str, Any] = {"url": url}
        if image.detail:
            spec["detail"] = image.detail
        return {"type": "image_url", "image_url": spec}

    def _assistant(self, parts: list[ContentPart], echo: bool | str) -> dict[str, Any]:
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        thinking: list[ThinkingData] = []
        for part in parts:
            kind = part.kind
            if kind == _K.TEXT:
                if part.text:
                    texts.append(part.text)
            elif kind == _K.TOOL_CALL and part.tool_call is not None:
                calls.append(_wire_call(part.tool_call))
            elif kind in (_K.THINKING, _K.REDACTED_THINKING) and part.thinking is not None:
                thinking.append(part.thinking)
            else:
                raise self._bad(f"{kind} content is not supported in an assistant message")
        # An empty string, not null, beside tool calls: OpenAI accepts both, and stricter servers
        # (llama-cpp-python's) reject null.
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
        if calls:
            msg["tool_calls"] = calls
        if echo and thinking:
            _echo_reasoning(msg, thinking, echo)
        return msg

    def _tool(self, tool: ToolDefinition, strict: bool) -> dict[str, Any]:
        cache = self._tool_cache
        entry = cache.get(id(tool))
        if (
            entry is not None
            and entry[0] is tool
            and entry[1] == strict
            and entry[2] == (tool.name, tool.description)
            and entry[3] is tool.parameters
        ):
            return entry[4]
        function: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        if strict:
            function["strict"] = True
        wire = {"type": "function", "function": function}
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[id(tool)] = (tool, strict, (tool.name, tool.description), tool.parameters, wire)
        return wire

    # -- non-streaming ---------------------------------------------------------------------------
    async def complete(self, request: Request) -> Response:
        body = self.encode_body(request, stream=False)
        data, headers = await self.post_json(self.url, body, self.headers())
        try:
            return self._parse_response(data, headers)
        except MALFORMED as exc:
            raise malformed(self.name, data, REPLY_SHAPE, exc, stream=False) from exc

    def _parse_response(self, data: Any, headers: Mapping[str, str]) -> Response:
        if not isinstance(data, dict):
            raise ProviderError("answer is not a JSON object", provider=self.name, status_code=200, raw=data)
        if data.get("error"):
            raise _stream_error(self.name, data)
        choices = data.get("choices")
        if choices is not None and (not isinstance(choices, list) or (choices and not isinstance(choices[0], dict))):
            raise TypeError("choices is not a list of objects")  # -> MalformedResponseError, naming the field
        if not choices:
            raise ProviderError("answer has no choices", provider=self.name, status_code=200, raw=data)
        choice = choices[0]
        message = choice.get("message") or {}
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
            parts.append(
                ContentPart(_K.TOOL_CALL, tool_call=_call_data(_new_id(), function_call.get("name") or "", raw))
            )
            has_calls = True
        return Response(
            id=str(data.get("id") or ""),
            model=str(data.get("model") or ""),
            provider=self.name,
            message=Message(Role.ASSISTANT, parts),
            finish_reason=_finish(choice.get("finish_reason"), has_calls),
            usage=_usage(data.get("usage")),
            raw=data,
            rate_limit=RateLimitInfo.from_headers(headers),
        )

    # -- streaming -------------------------------------------------------------------------------
    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        if request.tools and self.no_stream_with_tools:
            async for event in self._stream_via_complete(request, refused=None):
                yield event
            return
        body = self.encode_body(request, stream=True)
        started = delivered = False
        try:
            async with self.open_stream(self.url, body, self.headers()) as response:
                started = True
                ctype = response.headers.get("content-type", "")
                if "json" in ctype and "event-stream" not in ctype:
                    # The server ignored stream=true and answered in one piece.
                    content = b"".join([piece async for piece in self.iter_bytes(response)])
                    try:
                        data = _json_loads(content)
                    except ValueError as exc:
                        raise StreamError(f"{self.name}: unreadable answer to a streamed request", cause=exc)
                    result = self._parse_response(data, response.headers)
                    async for event in self._synthesise(result, None):
                        yield event
                    return
                # STREAM_START is held back until the stream shows life, so that a stream that
                # breaks off at once can still fall back without the caller seeing two starts.
                held: StreamEvent | None = None
                async for event in self._events(response):
                    if event.type is _T.STREAM_START and not delivered:
                        held = event
                        continue
                    if held is not None:
                        yield held
                        held = None
                    delivered = True
                    yield event
        except ProviderError as exc:
            if started or not (request.tools and _refuses_stream_with_tools(exc)):
                raise
            self.no_stream_with_tools = True
            refused = exc
        except (StreamError, NetworkError) as exc:
            # llama-cpp-python's server (0.3.x) drops the connection of a streamed request with
            # tools before sending a single event: a refusal in all but name. It is remembered only
            # once the non-streaming call has worked, since a real network failure fails there too.
            if delivered or not request.tools:
                raise
            refused = ProviderError(f"the stream broke off before any event ({exc.message})", provider=self.name)
        else:
            return
        async for event in self._stream_via_complete(request, refused=refused):
            yield event
        self.no_stream_with_tools = True

    async def _stream_via_complete(self, request: Request, refused: ProviderError | None) -> AsyncIterator[StreamEvent]:
        warning = None
        if not self._fallback_warned:
            self._fallback_warned = True
            why = f" ({refused.message})" if refused is not None else ""
            warning = Warning(
                f"{self.name} refused to stream a request with tools{why}; answered without streaming, "
                "and later requests with tools on this adapter skip streaming",
                "stream_fallback",
            )
        try:
            result = await self.complete(request)
        except NetworkError:
            if refused is None or refused.status_code is not None:
                raise
            # The refusal was a dropped connection; the pool may hand back its twin. Once more.
            result = await self.complete(request)
        async for event in self._synthesise(result, warning):
            yield event

    async def _synthesise(self, result: Response, warning: Warning | None) -> AsyncIterator[StreamEvent]:
        """The event sequence of a stream that would have produced ``result``."""
        warnings = [warning] if warning is not None else None
        if warning is not None:
            result.warnings.append(warning)
        yield StreamEvent(_T.STREAM_START, warnings=warnings)
        n = 0
        for part in result.message.content:
            if part.thinking is not None:
                yield StreamEvent(_T.REASONING_START)
                if part.thinking.text:
                    yield StreamEvent(_T.REASONING_DELTA, reasoning_delta=part.thinking.text)
                yield StreamEvent(_T.REASONING_END, thinking=part.thinking)
            elif part.kind == _K.TEXT and part.text:
                text_id = f"text-{n}"
                n += 1
                yield StreamEvent(_T.TEXT_START, text_id=text_id)
                yield StreamEvent(_T.TEXT_DELTA, part.text, text_id)
                yield StreamEvent(_T.TEXT_END, text_id=text_id)
            elif part.tool_call is not None:
                call = ToolCall.from_data(part.tool_call)
                head = ToolCall(call.id, call.name)
                yield StreamEvent(_T.TOOL_CALL_START, tool_call=head)
                args = part.tool_call.arguments
                raw = args if isinstance(args, str) else _raw_arguments(part.tool_call)
                if raw:
                    yield StreamEvent(_T.TOOL_CALL_DELTA, raw, tool_call=head)
                yield StreamEvent(_T.TOOL_CALL_END, tool_call=call)
        yield StreamEvent(_T.FINISH, finish_reason=result.finish_reason, usage=result.usage, response=result)

    async def _events(self, response: httpx.Response) -> AsyncIterator[StreamEvent]:
        """Translate a Chat Completions SSE stream into unified events."""
        name = self.name
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
            sse = self._sse(response)
            async for event_name, data in sse:
                content = None if event_name else text_of(data)
                delta = tool_calls = None
                if content is None:
                    if data == b"[DONE]":
                        done = True
                        break
                    try:
                        raw_chunk = data.decode()
                        chunk = _decode_json(raw_chunk)
                    except ValueError as exc:  # UnicodeDecodeError included
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
                    if not delta:
                        if reason := choice.get("finish_reason"):
                            finish_raw = reason
                        continue
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
            # Read the rest of the body (normally only the chunked terminator, often buffered already)
            # before FINISH, so the connection goes back to the pool: left unread, httpx closes it and
            # the next step pays a new TCP (and TLS) handshake. Bounded, for servers that linger.
            await _drain(sse)

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
            result.rate_limit = RateLimitInfo.from_headers(response.headers)
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

    async def _sse(self, response: httpx.Response) -> AsyncIterator[tuple[str, bytes]]:
        """Yield ``(event name, data)`` per SSE event, working on bytes.

        Handles LF, CRLF and CR line ends (also split across chunks), comment lines, multi-line
        data and ``data:`` with or without the space. Payloads stay bytes until the caller
        decodes them whole, so a character split across network chunks is never a problem.
        """
        buf = b""
        data_lines: list[bytes] = []
        event = ""
        async for chunk in self.iter_bytes(response):
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


async def _drain(sse: AsyncIterator[Any]) -> None:
    """Consume what follows ``[DONE]``, waiting at most ``_DRAIN_SECONDS``; then close ``sse``."""
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in sse:
                pass
    except (TimeoutError, SDKError):
        pass
    finally:
        await sse.aclose()  # type: ignore[attr-defined]


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


# -- helpers -------------------------------------------------------------------------------------
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


def _raw_arguments(call: ToolCallData) -> str:
    args = call.arguments
    if isinstance(args, str):
        return args
    pd = call.provider_data
    raw = pd.get("raw_arguments") if pd else None
    if isinstance(raw, str):
        try:
            if _json_loads(raw) == args:
                return raw
        except ValueError:
            pass
    return _dumps(args)


def _wire_call(call: ToolCallData) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": _raw_arguments(call)},
    }


def _echo_reasoning(msg: dict[str, Any], thinking: list[ThinkingData], echo: bool | str) -> None:
    text = "".join(t.text for t in thinking if not t.redacted)
    field = echo if isinstance(echo, str) else None
    details: list[Any] = []
    for t in thinking:
        pd = t.provider_data or {}
        if field is None and isinstance(pd.get("field"), str):
            field = pd["field"]
        found = pd.get("reasoning_details")
        if isinstance(found, list):
            details.extend(found)
    field = field or "reasoning_content"
    if field == "reasoning_details":
        if details:
            msg["reasoning_details"] = details
        return
    msg[field] = text
    if details and field == "reasoning":
        msg["reasoning_details"] = details


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


_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "server_error": 500,
    "overloaded_error": 529,
    "context_length_exceeded": 400,
    "invalid_api_key": 401,
    "model_not_found": 404,
    "insufficient_quota": 429,
}


def _stream_error(provider: str, payload: dict[str, Any]) -> SDKError:
    """The error an ``{"error": {...}}`` payload inside a 200 answer stands for, with the HTTP
    status it would have had (the error's numeric code, else its type, else 500)."""
    error = payload.get("error")
    status = 500
    if isinstance(error, dict):
        code = error.get("code")
        if isinstance(code, int) and 400 <= code <= 599:
            status = code
        elif isinstance(code, str) and code.isdigit() and 400 <= int(code) <= 599:
            status = int(code)
        else:
            status = _ERROR_TYPE_STATUS.get(str(code), 0) or _ERROR_TYPE_STATUS.get(str(error.get("type")), 500)
    return error_from_response(provider, status, payload, default_message="error inside a 200 answer")


def _refuses_stream_with_tools(exc: ProviderError) -> bool:
    if exc.status_code not in (400, 422, 500, 501):
        return False
    return bool(_STREAM_TOOL_REFUSAL.search(exc.message or ""))
