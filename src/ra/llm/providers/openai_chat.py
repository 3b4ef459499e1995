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
step; the tools array's encoding is reused while the tool definitions stay the same. Each
conversation (``Request.conversation``, else its first Message) also keeps where its last
request's walk ended: when the next request starts with the same Message objects, unchanged (same
role, name, call id and parts list, compared by C-level ``map`` passes, not a Python loop), only
the messages after them are looked up and translated. The agent loop vouches for what it sends
(``Request.unchanged``: its context only grows between requests, and it never edits a Message it
sent), and then one identity pass is all: a step translates its new messages, and what is left
proportional to the history is that pass and copying pointers and bytes, in C (a few µs at 600
messages). Other callers get the checks (about 0.15 µs a message, against 0.25-0.4 µs for the
per-message walk they replace). The
remembered conversations are bounded like the cache (``conversations.CACHE_LIMIT`` messages beyond the
newest; :mod:`.conversations`, shared with the Anthropic and Gemini adapters).
The stream parser
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

import operator
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any, Unpack

from ..errors import (
    ConfigurationError,
    InvalidRequestError,
    NetworkError,
    ProviderError,
    StreamError,
    UnsupportedToolChoiceError,
)
from ..http import HTTPAdapter, HTTPOptions
from ..media import data_uri, is_local_path, resolve_media, to_base64
from ..shape import MALFORMED, malformed
from ..types import (
    ContentKind,
    ContentPart,
    Message,
    Request,
    Response,
    Role,
    StreamEvent,
    StreamEventType,
    ThinkingData,
    ToolCall,
    ToolCallData,
    ToolDefinition,
    Warning,
)
from .conversations import CACHE_LIMIT, Conversations, evict
from .openai_chat_reply import (
    REPLY_SHAPE,
    _dumps,
    _json_loads,
    parse_reply,
    sse_records,
    stream_events,
)

__all__ = ["OpenAICompatibleAdapter"]

_T = StreamEventType

_K = ContentKind

OPENAI_BASE_URL = "https://api.openai.com/v1"

#: Option keys that steer the adapter; every other provider option is merged into the body.
_CONTROL_KEYS = frozenset({"developer_role", "echo_reasoning", "include_usage", "max_tokens_field", "strict_tools"})

#: Servers that cannot stream with tools say so in words like these (llama-cpp-python:
#: "Automatic streaming tool choice is not supported"; others: "streaming is not supported with
#: tools", "tool calls are not supported in stream mode").
_STREAM_TOOL_REFUSAL = re.compile(r"stream.*tool|tool.*stream", re.I | re.S)

_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


class OpenAICompatibleAdapter(HTTPAdapter):
    """Chat Completions adapter for OpenAI-compatible servers (see the module docstring)."""

    name = "openai-compatible"
    default_base_url = OPENAI_BASE_URL

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        name: str | None = None,
        developer_role: bool = False,
        echo_reasoning: bool | str = False,
        include_usage: bool = True,
        **http: Unpack[HTTPOptions],
    ) -> None:
        if not base_url and not api_key:
            raise ConfigurationError(
                "OpenAICompatibleAdapter needs base_url (e.g. http://127.0.0.1:8000/v1 for a local "
                "vLLM or llama.cpp server); without one it needs api_key and talks to api.openai.com"
            )
        super().__init__(api_key, base_url, **http)
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
        #: Per conversation, where the last request's walk ended and what it made: its mode, the
        #: wire dicts or JSON pieces so far, the image follow-ups not yet placed. One for each
        #: kind of output (``build_body``'s dicts, ``encode_body``'s JSON).
        self._conversations: dict[bool, Conversations[tuple[tuple[bool, bool | str], list[Any], list[Any]]]] = {
            True: Conversations(),
            False: Conversations(),
        }
        self._option_keys = tuple(dict.fromkeys(("openai-compatible", "openai_compatible", self.name)))

    # -- headers and options -----------------------------------------------------------------
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

        messages = self._messages(request.messages, mode, fragments, request.conversation, request.unchanged)
        body: dict[str, Any] = {"model": request.model, "messages": messages}
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
        self,
        messages: list[Message],
        mode: tuple[bool, bool | str],
        fragments: list[bytes] | None = None,
        conversation: object | None = None,
        unchanged: int = 0,
    ) -> list[dict[str, Any]]:
        """The wire messages. With ``fragments``, their JSON instead: one bytes piece per Message
        (its wire messages joined by commas) is appended to that list in body order, and the
        returned list stays empty. ``conversation`` and ``unchanged``: ``Request``'s."""
        get = self._msg_cache.get
        acc: list[Any] = [] if fragments is None else fragments
        # Image follow-ups (dicts, or their JSON), sent after the run of tool messages.
        pending: list[Any] = []
        owner: object = conversation if conversation is not None else messages[0] if messages else None
        conversations = self._conversations[fragments is None]
        prefix = conversations.recall(id(owner), messages, unchanged)
        start = 0
        if prefix is not None and prefix.state[0] == mode:
            start = len(prefix.messages)
            acc.extend(prefix.state[1])
            pending.extend(prefix.state[2])
        else:
            prefix = None
        for message in messages[start:] if start else messages:
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
                acc.extend(pending)
                pending = []
            if fragments is None:
                acc.extend(entry[6])
                if entry[7]:
                    pending.extend(entry[7])
            else:
                wire_json = entry[8]
                if wire_json is None:
                    wire_json = entry[8] = ",".join(map(_dumps, entry[6])).encode("utf-8")
                    entry[9] = ",".join(map(_dumps, entry[7])).encode("utf-8")
                if wire_json:
                    acc.append(wire_json)
                if entry[7]:
                    pending.append(entry[9])
        if messages:
            conversations.remember(id(owner), owner, messages, prefix, start, (mode, acc[:], pending[:]))
        acc.extend(pending)
        return acc if fragments is None else []

    def _new_entry(self, message: Message, mode: tuple[bool, bool | str]) -> list[Any]:
        """Translate ``message`` and cache the result. The entry holds the message and a copy of
        its parts list (so their ids cannot be reused while it lives), the translation, the JSON
        of it (filled on first need) and whether it starts with a tool message."""
        wire, deferred = self._translate(message, mode)
        cache = self._msg_cache
        evict(cache)
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
        if len(cache) >= CACHE_LIMIT:
            cache.clear()
        cache[id(tool)] = (tool, strict, (tool.name, tool.description), tool.parameters, wire)
        return wire

    # -- non-streaming ---------------------------------------------------------------------------
    async def complete(self, request: Request) -> Response:
        body = self.encode_body(request, stream=False)
        data, headers = await self.post_json(self.url, body, self.headers())
        try:
            return parse_reply(self.name, data, headers)
        except MALFORMED as exc:
            raise malformed(self.name, data, REPLY_SHAPE, exc, stream=False) from exc

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
                    except (ValueError, RecursionError) as exc:
                        raise StreamError(f"{self.name}: unreadable answer to a streamed request", cause=exc)
                    try:
                        result = parse_reply(self.name, data, response.headers)
                    except MALFORMED as exc:
                        raise malformed(self.name, data, REPLY_SHAPE, exc, stream=False) from exc
                    async for event in self._synthesise(result, None):
                        yield event
                    return
                # STREAM_START is held back until the stream shows life, so that a stream that
                # breaks off at once can still fall back without the caller seeing two starts.
                held: StreamEvent | None = None
                async for event in stream_events(self.name, sse_records(self.iter_bytes(response)), response.headers):
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


# -- helpers -------------------------------------------------------------------------------------
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


def _refuses_stream_with_tools(exc: ProviderError) -> bool:
    if exc.status_code not in (400, 422, 500, 501):
        return False
    return bool(_STREAM_TOOL_REFUSAL.search(exc.message or ""))
