"""Native Gemini API adapter (``POST /v1beta/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse``), unified-llm-spec 2.7, 3, 7.3 and 7.7.

Wire decisions, and why:

* **Authentication** goes in the ``x-goog-api-key`` header, never in ``?key=``. The API accepts
  both, but a key in the URL ends up in proxy logs, in tracebacks and in httpx's exception
  messages (which quote the URL); a header does not.
* **Roles.** SYSTEM and DEVELOPER messages, wherever they appear, become ``systemInstruction``
  parts in order. ASSISTANT is ``model``; TOOL results are ``functionResponse`` parts in a ``user``
  content. Consecutive contents with the same role are merged, so tool results followed by a user
  message form one ``user`` turn. ``Message.name`` has no Gemini field and is not sent (on a TOOL
  message it names the function when the call cannot be found, see below).
* **Tool call ids.** Gemini assigns none (unless a ``functionCall.id`` comes back, which is then
  used and echoed). The adapter makes ``call_<uuid hex>`` ids. A tool result carries only the id,
  while ``functionResponse`` needs the function *name*: the name is found by scanning the request's
  history for the assistant tool call with that id (stateless, so any conversation replayed from
  storage works), falling back to ``Message.name``; neither found is an
  :class:`~ra.llm.errors.InvalidRequestError`. String results are sent as ``{"result": ...}``,
  error results as ``{"error": ...}``, dicts as they are. Images attached to a tool result go as
  ``inlineData`` parts right after the ``functionResponse`` in the same ``user`` content (every
  Gemini model accepts that, unlike ``functionResponse.parts``).
* **Thought signatures.** A ``thoughtSignature`` on a ``functionCall`` part is kept in
  ``ToolCallData.provider_data["gemini"]["thoughtSignature"]`` and sent back on the same part.
  Thought parts (``"thought": true``) become THINKING parts (signature in ``ThinkingData.signature``,
  ``provider_data={"gemini": {"part": "thought"}}``) and are sent back as thought parts, as the
  recorded second turns do. A signature on an *answer* text part becomes a THINKING part with empty
  text right after that text, marked ``{"gemini": {"part": "text"}}``; on the way back it is put on
  the preceding text part again (or on an empty text part when there is none). THINKING parts that
  did not come from Gemini (another provider's signatures mean nothing here) and redacted thinking
  are not sent.
* **Tools.** ``tools: [{"functionDeclarations": [...]}]``. Gemini's ``parameters`` take an OpenAPI
  subset, so JSON Schema is converted: ``$ref``/``$defs`` are inlined, ``type: [X, "null"]`` becomes
  ``nullable``, ``const`` an ``enum``, ``oneOf`` an ``anyOf``, single ``allOf`` merged, ``required``
  names without a property dropped, formats Gemini rejects dropped, non-string enums moved into
  the description, and keys it does not know (``additionalProperties``, ``$schema``, ``$id``,
  ``patternProperties``, ``exclusiveMinimum``...) removed. A tool without parameters is declared
  without ``parameters``. Set ``provider_options["gemini"]["raw_json_schema"] = True`` to send the
  schemas untouched as ``parametersJsonSchema`` / ``responseJsonSchema`` instead.
* **tool_choice**: auto/none/required map to ``functionCallingConfig.mode`` AUTO/NONE/ANY, named to
  ANY with ``allowedFunctionNames``.
* **generationConfig**: temperature, topP, maxOutputTokens, stopSequences; response_format json ->
  ``responseMimeType: application/json``, json_schema -> plus ``responseSchema`` (Gemini always
  enforces the schema, so ``strict`` needs nothing extra).
* **reasoning_effort** -> ``thinkingConfig``. Gemini 3 and later (model id ``gemini-<N>`` with
  N >= 3) take ``thinkingLevel``: none/minimal -> MINIMAL, low -> LOW, medium -> MEDIUM,
  high and xhigh -> HIGH. Older and unrecognised model ids get ``thinkingBudget`` (which Gemini 3
  still accepts): none -> 0, minimal -> 512, low -> 1024, medium -> 8192, high and xhigh -> 24576
  (xhigh, OpenAI's extra level, maps to the strongest setting every Gemini model takes).
* **provider_options["gemini"]**: ``safetySettings``, ``cachedContent`` (explicit cache name),
  ``tools`` (extra tool objects appended, e.g. ``{"googleSearch": {}}`` for grounding or
  ``{"codeExecution": {}}``), ``toolConfig`` (merged), ``includeThoughts`` and ``thinkingConfig``
  (merged into ``generationConfig.thinkingConfig``), ``generationConfig`` (merged),
  ``raw_json_schema`` (above). Snake-case spellings of these are accepted too. Any other key is
  copied into the request body as is: the escape hatch for fields this adapter does not model.
* **Usage**: input = ``promptTokenCount`` (+ ``toolUsePromptTokenCount``), output =
  ``candidatesTokenCount`` + ``thoughtsTokenCount`` so that output means "generated, billed as
  output" as it does for OpenAI and Anthropic and input + output = ``totalTokenCount``;
  ``reasoning_tokens`` = ``thoughtsTokenCount``, ``cache_read_tokens`` =
  ``cachedContentTokenCount``; the raw ``usageMetadata`` is kept.
* **Finish reasons**: STOP -> stop (tool_calls when the reply has function calls), MAX_TOKENS ->
  length, SAFETY/RECITATION/BLOCKLIST/PROHIBITED_CONTENT/SPII/IMAGE_SAFETY -> content_filter,
  anything else -> other; a prompt refused with ``promptFeedback.blockReason`` raises
  :class:`~ra.llm.errors.ContentFilterError`.
* **Streaming**: ``alt=sse`` events each hold a whole ``GenerateContentResponse``. A body served
  as ``application/json`` (a proxy, or a server ignoring ``alt``) is one JSON array of them,
  parsed incrementally. Gemini has no terminal event: the stream is complete when a chunk carried
  a ``finishReason`` and the body ended; a body that ends before that raises StreamError. An
  ``{"error": ...}`` chunk raises the mapped error. Only the first candidate is read.
* **Speed.** ``complete`` and ``stream`` send ``encode_body``'s bytes: the same bytes as
  JSON-encoding ``build_body``'s dict compactly (what the HTTP layer does with a dict), assembled
  from cached pieces so that an agent step does not re-translate and re-encode its whole history.
  Each Message's parts and their JSON are cached per Message object, with a fingerprint (role,
  name, tool_call_id, a copy of its parts list) and, for tool results, the calls they were named
  after (the same objects must still be found under those ids); editing a part's fields in place
  is not noticed (treat sent Messages as immutable, as the agent loop does). Contents before the
  last one are closed as JSON once. Each conversation (``Request.conversation``, else its first
  Message) keeps where its last request ended, with its call index: when the next request starts
  with the same Message objects, unchanged (checked by C-level passes, or only their identity
  when the caller vouches for them with ``Request.unchanged``, as the agent loop does), only the
  new messages are looked at; a new call whose id an earlier call had, or that an earlier tool
  result could not find, means walking everything again (``conversations``). ``build_body``
  translates afresh and shares nothing with the cache.
"""

from __future__ import annotations

import codecs
import copy
import json
import mimetypes
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Unpack

import httpx

from ..accumulator import StreamAccumulator
from ..errors import (
    AuthenticationError,
    ContentFilterError,
    InvalidRequestError,
    ProviderError,
    SDKError,
    StreamError,
    UnsupportedToolChoiceError,
    error_from_response,
    in_answer_status,
)
from ..http import HTTPAdapter, HTTPOptions
from ..media import resolve_media, to_base64
from ..shape import MALFORMED, NUM, STR, arr, malformed, obj
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
    ToolChoice,
    ToolResultData,
    Usage,
    Warning,
    parse_arguments,
)
from .body_json import dumps as _dumps
from .body_json import join_body
from .conversations import Conversations, Prefix, conversation_key, evict, still_valid

__all__ = ["GeminiAdapter", "to_gemini_schema"]

_T = StreamEventType
_PROVIDER = "gemini"

_CONTENT_FILTER = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
    }
)

# "xhigh" (offered by OpenAI's newest models) maps to Gemini's strongest setting: HIGH, or the
# largest budget every Gemini 2.5 model accepts.
# The shapes the parsers rely on (checked only when a reply breaks them, to name the field).
_PART = obj(
    False,
    text=STR,
    thought={"type": ["boolean", "null"]},
    thoughtSignature=STR,
    functionCall=obj(name=STR, args={"type": ["object", "null"]}, id=STR),
)
RESPONSE_SHAPE = obj(
    False,
    candidates=arr(obj(False, content=obj(parts=arr(_PART)), finishReason=STR)),
    usageMetadata=obj(promptTokenCount=NUM, candidatesTokenCount=NUM, thoughtsTokenCount=NUM),
    responseId=STR,
    modelVersion=STR,
)

_LEVELS = {"none": "MINIMAL", "minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH", "xhigh": "HIGH"}
_BUDGETS = {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 24576}
_MODEL_MAJOR = re.compile(r"gemini-(\d+)")

# provider_options keys this adapter interprets (camelCase and snake_case spellings).
_OPTION_ALIASES = {
    "safety_settings": "safetySettings",
    "cached_content": "cachedContent",
    "tool_config": "toolConfig",
    "include_thoughts": "includeThoughts",
    "thinking_config": "thinkingConfig",
    "generation_config": "generationConfig",
    "system_instruction": "systemInstruction",
}
_HANDLED_OPTIONS = frozenset({"tools", "toolConfig", "includeThoughts", "thinkingConfig", "generationConfig"})


@dataclass(slots=True)
class _Walk:
    """The translated history of one request: the system parts, the JSON of the contents that can
    no longer change (each followed by a comma), the last content's role and the JSON of its
    messages' parts (it grows when the next message has its role), every tool call by id, and the
    ids of tool results that found no call (a later call with such an id renames them)."""

    system: list[dict[str, Any]]
    closed: list[bytes]
    last_role: str | None
    last: list[bytes]
    calls: dict[str, ToolCallData]
    unresolved: set[str]


class GeminiAdapter(HTTPAdapter):
    """Speaks Google's native Gemini API (not the OpenAI-compatible shim)."""

    name = _PROVIDER
    default_base_url = "https://generativelanguage.googleapis.com"
    #: The spec's variable, with Google's common alternative as a fallback.
    api_key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        api_version: str = "v1beta",
        **http: Unpack[HTTPOptions],
    ) -> None:
        super().__init__(api_key, base_url, **http)
        self.api_version = api_version.strip("/")
        self._msg_cache: dict[int, list[Any]] = {}
        #: Per conversation, where the last request's walk ended.
        self._conversations: Conversations[_Walk] = Conversations()

    # -- plumbing --------------------------------------------------------------------------
    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = super().headers(extra)
        if self.api_key and not any(k.lower() == "x-goog-api-key" for k in headers):
            headers["x-goog-api-key"] = self.api_key
        return headers

    def url(self, model: str, *, stream: bool) -> str:
        """Endpoint for ``model``; a base URL that already names an API version is used as is."""
        model = model.removeprefix("models/")
        base = self.base_url
        if not re.search(r"/v\d+(?:alpha|beta)?\d*$", base):
            base = f"{base}/{self.api_version}"
        if stream:
            return f"{base}/models/{model}:streamGenerateContent?alt=sse"
        return f"{base}/models/{model}:generateContent"

    def classify_error(self, status: int, body: Any, headers: Mapping[str, str] | None) -> SDKError:
        return _error(status, body, headers)

    # -- request ---------------------------------------------------------------------------
    def build_body(self, request: Request, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request`` (identical for both endpoints; ``stream`` only selects
        the URL, kept in the signature for symmetry with the other adapters), translated afresh:
        nothing in it is shared with the translation cache."""
        return self._build(request, None)[0]

    def encode_body(self, request: Request, *, stream: bool) -> bytes:
        """``build_body`` as the bytes that go on the wire: the same bytes as encoding that dict
        with compact separators (``ensure_ascii=False``), but the history's JSON comes from the
        translation cache, so a step encodes only what is new (see "Speed" in the module doc)."""
        contents: list[dict[str, Any]] = []  # stands for the contents in the body until encoded
        body, walk = self._build(request, contents)
        assert walk is not None
        if walk.last_role is None:
            pieces = [b"[", b"]"]
        else:
            pieces = [b"[", *walk.closed, _content_head(walk.last_role), b",".join(walk.last), b"]}]"]
        return join_body(body, "contents", contents, pieces)

    def _build(self, request: Request, contents: list[dict[str, Any]] | None) -> tuple[dict[str, Any], _Walk | None]:
        """The body. With ``contents`` (a list that stands for them in the body), the history is
        walked through the translation cache instead, and the walk is returned for the encoder."""
        options = _normalise_options(request.options_for(self.name))
        raw_schema = bool(options.pop("raw_json_schema", False))
        body: dict[str, Any] = {}

        walk: _Walk | None = None
        if contents is None:
            system_parts, contents = _contents(request.messages)
        else:
            walk = self._walk(request)
            system_parts = walk.system[:]
        body["contents"] = contents
        if system_parts:
            body["systemInstruction"] = {"parts": system_parts}

        tools: list[dict[str, Any]] = []
        if request.tools:
            declarations = [_declaration(t.name, t.description, t.parameters, raw_schema) for t in request.tools]
            tools.append({"functionDeclarations": declarations})
        extra_tools = options.get("tools")
        if extra_tools is not None:
            if not isinstance(extra_tools, list):
                raise InvalidRequestError(
                    "provider_options['gemini']['tools'] must be a list of tool objects", provider=self.name
                )
            tools.extend(copy.deepcopy(extra_tools))
        if tools:
            body["tools"] = tools

        tool_config = self._tool_config(request)
        if isinstance(options.get("toolConfig"), dict):
            tool_config = _deep_merge(tool_config or {}, options["toolConfig"])
        if tool_config:
            body["toolConfig"] = tool_config

        generation = self._generation_config(request, options, raw_schema)
        if generation:
            body["generationConfig"] = generation

        for key, value in options.items():
            if key in _HANDLED_OPTIONS:
                continue
            if key == "systemInstruction" and "systemInstruction" in body and isinstance(value, dict):
                body[key] = _deep_merge(body[key], value)
            else:
                body[key] = copy.deepcopy(value)
        return body, walk

    # -- the translation cache and the conversation prefix ------------------------------------
    def _walk(self, request: Request) -> _Walk:
        """Translate ``request.messages`` into system parts and contents' JSON, starting where the
        conversation's previous request ended when its messages are still there, unchanged, and
        taking each new message's translation from the cache when it is still valid."""
        messages = request.messages
        key, owner = conversation_key(request)
        prefix = self._conversations.recall(key, messages, request.unchanged)
        start = len(prefix.messages) if prefix is not None else 0
        calls = dict(prefix.state.calls) if prefix is not None else {}
        # Tool results name their function from the history's calls, later ones included: a new
        # call whose id was already taken, or that a tool result sent before could not find,
        # changes what was sent, and then everything is walked again.
        for message in messages[start:] if start else messages:
            for part in message.content:
                call = part.tool_call
                if call is not None:
                    if prefix is not None:
                        known = calls.get(call.id)
                        if (known is not None and known is not call) or call.id in prefix.state.unresolved:
                            return self._walk_from(messages, key, owner, None, _call_index(messages))
                    calls[call.id] = call
        return self._walk_from(messages, key, owner, prefix, calls)

    def _walk_from(
        self,
        messages: list[Message],
        key: int,
        owner: object,
        prefix: Prefix[_Walk] | None,
        calls: dict[str, ToolCallData],
    ) -> _Walk:
        """The walk over ``messages`` after ``prefix``'s (all of them without one), with ``calls``
        the request's tool calls by id, and its record for the next request."""
        start = 0
        if prefix is None:
            system: list[dict[str, Any]] = []
            closed: list[bytes] = []
            last_role: str | None = None
            last: list[bytes] = []
            unresolved: set[str] = set()
        else:
            start = len(prefix.messages)
            state = prefix.state
            system, closed, last_role, last = state.system[:], state.closed[:], state.last_role, state.last[:]
            unresolved = set(state.unresolved) if state.unresolved else set()
        get = self._msg_cache.get
        for message in messages[start:] if start else messages:
            entry = get(id(message))
            if (
                entry is None
                or not still_valid(entry, message)
                or (entry[8] and any(calls.get(i) is not c for i, c in entry[8]))
            ):
                entry = self._new_entry(message, calls)
            role = entry[5]
            if role is None:  # system or developer
                system.extend(entry[6])
                continue
            for call_id, call in entry[8]:
                if call is None:
                    unresolved.add(call_id)
            if not entry[7]:
                continue  # nothing to send; it does not end a run of its role either
            if role == last_role:
                last.append(entry[7])
            else:
                if last_role is not None:
                    closed.append(_content_head(last_role) + b",".join(last) + b"]},")
                last_role, last = role, [entry[7]]
        walk = _Walk(system, closed, last_role, last, calls, unresolved)
        if messages:
            self._conversations.remember(key, owner, messages, prefix, start, walk)
        return walk

    def _new_entry(self, message: Message, calls: Mapping[str, ToolCallData]) -> list[Any]:
        """Translate ``message`` and cache the result: the message and a copy of its parts list
        (so that their ids cannot be reused while the entry lives), its wire role (None for system
        text), its parts (the system parts, for system text), their JSON, and the calls its tool
        results were named after (by id; None where none was found)."""
        role, parts = _message_parts(message, calls)
        deps: tuple[tuple[str, ToolCallData | None], ...] = ()
        if role == "user":
            deps = tuple(
                (p.tool_result.tool_call_id, calls.get(p.tool_result.tool_call_id))
                for p in message.content
                if p.kind == ContentKind.TOOL_RESULT and p.tool_result is not None
            )
        cache = self._msg_cache
        evict(cache)
        entry = [
            message,
            message.role,
            message.name,
            message.tool_call_id,
            message.content[:],
            role,
            parts,
            b",".join(map(_dumps, parts)) if role is not None else b"",
            deps,
        ]
        cache[id(message)] = entry
        return entry

    def _tool_config(self, request: Request) -> dict[str, Any] | None:
        choice: ToolChoice | None = request.tool_choice
        if choice is None:
            return None
        if not self.supports_tool_choice(choice.mode):
            raise UnsupportedToolChoiceError(f"gemini: tool_choice mode {choice.mode!r} is not supported")
        if not request.tools:
            if choice.mode in ("required", "named"):
                raise InvalidRequestError(
                    f"tool_choice {choice.mode!r} needs at least one tool in the request", provider=self.name
                )
            return None
        if choice.mode == "named":
            names = {t.name for t in request.tools}
            if choice.tool_name not in names:
                raise InvalidRequestError(
                    f"tool_choice names {choice.tool_name!r}, which is not among the request's tools "
                    f"({', '.join(sorted(names))})",
                    provider=self.name,
                )
            return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice.tool_name]}}
        mode = {"auto": "AUTO", "none": "NONE", "required": "ANY"}[choice.mode]
        return {"functionCallingConfig": {"mode": mode}}

    def _generation_config(self, request: Request, options: dict[str, Any], raw_schema: bool) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.top_p is not None:
            config["topP"] = request.top_p
        if request.max_tokens is not None:
            config["maxOutputTokens"] = request.max_tokens
        if request.stop_sequences:
            config["stopSequences"] = list(request.stop_sequences)
        fmt = request.response_format
        if fmt is not None and fmt.type in ("json", "json_schema"):
            config["responseMimeType"] = "application/json"
            if fmt.type == "json_schema" and fmt.json_schema is not None:
                if raw_schema:
                    config["responseJsonSchema"] = copy.deepcopy(fmt.json_schema)
                else:
                    config["responseSchema"] = to_gemini_schema(fmt.json_schema)

        thinking: dict[str, Any] = {}
        if request.reasoning_effort is not None:
            thinking.update(_thinking_for(request.model, request.reasoning_effort))
        if "includeThoughts" in options:
            thinking["includeThoughts"] = bool(options["includeThoughts"])
        if isinstance(options.get("thinkingConfig"), dict):
            thinking = _deep_merge(thinking, options["thinkingConfig"])
        if thinking:
            config["thinkingConfig"] = thinking
        if isinstance(options.get("generationConfig"), dict):
            config = _deep_merge(config, options["generationConfig"])
        return config

    # -- complete ----------------------------------------------------------------------------
    async def complete(self, request: Request) -> Response:
        body = self.encode_body(request, stream=False)
        data, headers = await self.post_json(self.url(request.model, stream=False), body, self.headers())
        try:
            response = self.parse_response(data, request.model)
        except MALFORMED as exc:
            raise malformed(_PROVIDER, data, RESPONSE_SHAPE, exc, stream=False) from exc
        response.rate_limit = RateLimitInfo.from_headers(headers)
        return response

    def parse_response(self, data: Any, model: str = "") -> Response:
        """A ``GenerateContentResponse`` (or a list of streamed ones) as a unified Response."""
        if isinstance(data, list):
            # Some proxies answer generateContent with the streamed array; fold it like a stream.
            state = _StreamState(model)
            for chunk in data:
                state.feed(_check_chunk(chunk))
            state.finish()
            assert state.response is not None
            return state.response
        data = _check_chunk(data)
        parts: list[ContentPart] = []
        warnings: list[Warning] = []
        candidate = _first_candidate(data)
        has_calls = False
        for raw_part in _parts(candidate):
            kind = _part_kind(raw_part)
            sig = raw_part.get("thoughtSignature")
            if kind == "thought":
                parts.append(ContentPart.of_thinking(_thought(raw_part.get("text") or "", sig)))
            elif kind == "text":
                text = raw_part.get("text") or ""
                if text:
                    parts.append(ContentPart.of_text(text))
                if isinstance(sig, str) and sig:
                    parts.append(ContentPart.of_thinking(_text_signature(sig)))
            elif kind == "call":
                has_calls = True
                parts.append(ContentPart.of_tool_call(_tool_call_data(raw_part)))
            else:
                names = ", ".join(sorted(raw_part)) or "empty"
                warnings.append(Warning(f"gemini part not represented in the message ({names}); see raw"))
        finish = _finish(candidate.get("finishReason") if candidate else None, has_calls)
        return Response(
            id=str(data.get("responseId") or ""),
            model=str(data.get("modelVersion") or model),
            provider=self.name,
            message=Message(Role.ASSISTANT, parts),
            finish_reason=finish,
            usage=_usage(data.get("usageMetadata")),
            raw=data,
            warnings=warnings,
        )

    # -- stream ----------------------------------------------------------------------------
    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        body = self.encode_body(request, stream=True)
        async with self.open_stream(self.url(request.model, stream=True), body, self.headers()) as response:
            state = _StreamState(request.model, RateLimitInfo.from_headers(response.headers))
            ctype = response.headers.get("content-type", "").lower()
            chunks = self._sse_chunks(response) if "text/event-stream" in ctype else self._array_chunks(response)
            started = False
            chunk: Any = None
            try:
                async for chunk in chunks:
                    if not started:
                        started = True
                        yield state.emit(StreamEvent(_T.STREAM_START))
                    for event in state.feed(_check_chunk(chunk)):
                        yield event
                for event in state.finish():
                    yield event
            except MALFORMED as exc:
                raise malformed(_PROVIDER, chunk, RESPONSE_SHAPE, exc, stream=True) from exc

    async def _sse_chunks(self, response: httpx.Response) -> AsyncIterator[Any]:
        async for sse in self.iter_sse(response):
            if not sse.data.strip():
                continue
            payload = sse.json(_PROVIDER, object_only=False)
            if isinstance(payload, list):
                for item in payload:
                    yield item
            else:
                yield payload

    async def _array_chunks(self, response: httpx.Response) -> AsyncIterator[Any]:
        parser = JSONArrayStream()
        async for piece in self.iter_bytes(response):
            for item in parser.feed(piece):
                yield item
        for item in parser.close():
            yield item


# -- errors -------------------------------------------------------------------------------------
def _error(status: int, body: Any, headers: Mapping[str, str] | None = None) -> SDKError:
    """error_from_response plus Gemini specifics: a bad key arrives as 400 INVALID_ARGUMENT with
    reason API_KEY_INVALID, and error_code is the ErrorInfo reason or gRPC status (not "400")."""
    err = error_from_response(_PROVIDER, status, body, headers)
    if not isinstance(err, ProviderError):
        return err
    if isinstance(body, list) and body and isinstance(body[0], dict):
        body = body[0]  # an error answer to a streamed request can come wrapped in an array
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return err
    reason = None
    for detail in error.get("details") or []:
        if isinstance(detail, dict) and isinstance(detail.get("reason"), str):
            reason = detail["reason"]
            break
    grpc = error.get("status") if isinstance(error.get("status"), str) else None
    if reason == "API_KEY_INVALID" and not isinstance(err, AuthenticationError):
        err = AuthenticationError(
            err.message, provider=_PROVIDER, status_code=status, retry_after=err.retry_after, raw=body
        )
    err.error_code = reason or grpc or err.error_code
    return err


def _check_chunk(chunk: Any) -> dict[str, Any]:
    """Raise for error payloads and refused prompts; return the chunk otherwise."""
    if not isinstance(chunk, dict):
        raise StreamError(f"gemini: expected a JSON object, got {type(chunk).__name__}")
    if chunk.get("error") is not None:
        raise _error(in_answer_status(chunk), chunk)
    feedback = chunk.get("promptFeedback")
    if isinstance(feedback, dict) and feedback.get("blockReason") and not chunk.get("candidates"):
        reason = str(feedback["blockReason"])
        message = feedback.get("blockReasonMessage") or f"the prompt was blocked ({reason})"
        raise ContentFilterError(str(message), provider=_PROVIDER, error_code=reason, raw=chunk)
    return chunk


# -- response pieces -------------------------------------------------------------------------------
def _first_candidate(data: Mapping[str, Any]) -> dict[str, Any] | None:
    candidates = data.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        return None
    for cand in candidates:
        if isinstance(cand, dict) and cand.get("index", 0) == 0:
            return cand
    return None


def _parts(candidate: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not candidate:
        return []
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _part_kind(part: Mapping[str, Any]) -> str:
    if "functionCall" in part:
        return "call"
    if "text" in part:
        return "thought" if part.get("thought") else "text"
    if part.get("thought") and "thoughtSignature" in part:
        return "thought"
    return "other"


def _thought(text: str, signature: Any) -> ThinkingData:
    sig = signature if isinstance(signature, str) and signature else None
    return ThinkingData(text, sig, False, {"gemini": {"part": "thought"}})


def _text_signature(signature: str) -> ThinkingData:
    """The signature of an answer text part, carried as a text-less THINKING part."""
    return ThinkingData("", signature, False, {"gemini": {"part": "text"}})


def _tool_call_data(part: Mapping[str, Any]) -> ToolCallData:
    call = part.get("functionCall") or {}
    provider_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
    call_id = provider_id or f"call_{uuid.uuid4().hex}"
    extra: dict[str, Any] = {}
    sig = part.get("thoughtSignature")
    if isinstance(sig, str) and sig:
        extra["thoughtSignature"] = sig
    if provider_id:
        extra["id"] = provider_id
    args = call.get("args")
    arguments: dict[str, Any] | str
    if args is None:
        arguments = {}
    elif isinstance(args, dict):
        arguments = args
    else:
        arguments = json.dumps(args)
    return ToolCallData(
        call_id, str(call.get("name") or ""), arguments, "function", {"gemini": extra} if extra else None
    )


def _finish(raw: Any, has_calls: bool) -> FinishReason:
    if not isinstance(raw, str) or not raw:
        return FinishReason("tool_calls" if has_calls else "other", None)
    if raw == "STOP":
        return FinishReason("tool_calls" if has_calls else "stop", raw)
    if raw == "MAX_TOKENS":
        return FinishReason("length", raw)
    if raw in _CONTENT_FILTER:
        return FinishReason("content_filter", raw)
    return FinishReason("other", raw)


def _usage(meta: Any) -> Usage:
    if not isinstance(meta, dict):
        return Usage()

    def count(key: str) -> int | None:
        value = meta.get(key)
        return int(value) if isinstance(value, (int, float)) else None

    prompt = (count("promptTokenCount") or 0) + (count("toolUsePromptTokenCount") or 0)
    thoughts = count("thoughtsTokenCount")
    output = (count("candidatesTokenCount") or 0) + (thoughts or 0)
    total = count("totalTokenCount")
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        total_tokens=total if total is not None else prompt + output,
        reasoning_tokens=thoughts,
        cache_read_tokens=count("cachedContentTokenCount"),
        cache_write_tokens=None,
        raw=dict(meta),
    )


# -- streaming state ---------------------------------------------------------------------------------
class _StreamState:
    """Turns GenerateContentResponse chunks into unified events, feeding each event it makes into a
    StreamAccumulator so the FINISH event can carry the whole response."""

    def __init__(self, model: str, rate_limit: RateLimitInfo | None = None) -> None:
        self.acc = StreamAccumulator(_PROVIDER, model)
        self.model = model
        self.rate_limit = rate_limit
        self.segment: str | None = None  # "text" | "reasoning" | None
        self.text_id: str | None = None
        self.text_count = 0
        self.text_signature: str | None = None
        self.reasoning: list[str] = []
        self.reasoning_signature: str | None = None
        self.finish_raw: str | None = None
        self.usage_meta: dict[str, Any] | None = None
        self.has_calls = False
        self.response_id = ""
        self.model_version = ""
        self.chunks: list[dict[str, Any]] = []
        self.response: Response | None = None
        self._out: list[StreamEvent] = []

    def emit(self, event: StreamEvent) -> StreamEvent:
        self.acc.process(event)
        return event

    def _push(self, event: StreamEvent) -> None:
        self._out.append(self.emit(event))

    def _drain(self) -> list[StreamEvent]:
        out, self._out = self._out, []
        return out

    # segments -----------------------------------------------------------------------------------
    def _open_text(self) -> None:
        self.text_count += 1
        self.text_id = f"text_{self.text_count}"
        self.segment = "text"
        self._push(StreamEvent(_T.TEXT_START, text_id=self.text_id))

    def _close_text(self) -> None:
        self._push(StreamEvent(_T.TEXT_END, text_id=self.text_id))
        self.segment = None
        sig, self.text_signature = self.text_signature, None
        if sig is not None:
            self._signature_part(sig)

    def _signature_part(self, sig: str) -> None:
        self._push(StreamEvent(_T.REASONING_START))
        self._push(StreamEvent(_T.REASONING_END, thinking=_text_signature(sig)))

    def _open_reasoning(self) -> None:
        self.segment = "reasoning"
        self.reasoning = []
        self.reasoning_signature = None
        self._push(StreamEvent(_T.REASONING_START))

    def _close_reasoning(self) -> None:
        thinking = _thought("".join(self.reasoning), self.reasoning_signature)
        self._push(StreamEvent(_T.REASONING_END, thinking=thinking))
        self.segment = None
        self.reasoning = []
        self.reasoning_signature = None

    def _close_segment(self) -> None:
        if self.segment == "text":
            self._close_text()
        elif self.segment == "reasoning":
            self._close_reasoning()

    # chunks -------------------------------------------------------------------------------------
    def feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        self.chunks.append(chunk)
        if isinstance(chunk.get("usageMetadata"), dict):
            self.usage_meta = chunk["usageMetadata"]
        if chunk.get("responseId"):
            self.response_id = str(chunk["responseId"])
        if chunk.get("modelVersion"):
            self.model_version = str(chunk["modelVersion"])
        candidate = _first_candidate(chunk)
        for part in _parts(candidate):
            self._part(part)
        if candidate and isinstance(candidate.get("finishReason"), str):
            self.finish_raw = candidate["finishReason"]
        return self._drain()

    def _part(self, part: dict[str, Any]) -> None:
        kind = _part_kind(part)
        sig = part.get("thoughtSignature")
        sig = sig if isinstance(sig, str) and sig else None
        if kind == "thought":
            if self.segment == "text":
                self._close_text()
            if self.segment != "reasoning":
                self._open_reasoning()
            text = part.get("text") or ""
            if text:
                self.reasoning.append(text)
                self._push(StreamEvent(_T.REASONING_DELTA, reasoning_delta=text))
            if sig is not None:
                # A signature closes its thought part; a later thought starts a new one.
                self.reasoning_signature = sig
                self._close_reasoning()
        elif kind == "text":
            if self.segment == "reasoning":
                self._close_reasoning()
            text = part.get("text") or ""
            if sig is not None and self.segment == "text" and self.text_signature is not None:
                self._close_text()  # a second signature: the previous text part is finished
            if text:
                if self.segment != "text":
                    self._open_text()
                self._push(StreamEvent(_T.TEXT_DELTA, delta=text, text_id=self.text_id))
            if sig is not None:
                if self.segment == "text":
                    self.text_signature = sig
                else:
                    self._signature_part(sig)
        elif kind == "call":
            self._close_segment()
            self.has_calls = True
            data = _tool_call_data(part)
            head = ToolCall(data.id, data.name, {}, None, data.type, None, data.provider_data)
            args = data.arguments if isinstance(data.arguments, str) else json.dumps(data.arguments)
            self._push(StreamEvent(_T.TOOL_CALL_START, tool_call=head))
            self._push(StreamEvent(_T.TOOL_CALL_DELTA, tool_call=head, delta=args))
            self._push(StreamEvent(_T.TOOL_CALL_END, tool_call=ToolCall.from_data(data)))
        else:
            self._push(StreamEvent(_T.PROVIDER_EVENT, raw=part))

    def finish(self) -> list[StreamEvent]:
        if self.finish_raw is None:
            raise StreamError("gemini: the stream ended before a chunk with finishReason arrived")
        self._close_segment()
        finish = _finish(self.finish_raw, self.has_calls)
        usage = _usage(self.usage_meta)
        response = self.acc.response()
        response.id = self.response_id
        response.model = self.model_version or self.model
        response.provider = _PROVIDER
        response.finish_reason = finish
        response.usage = usage
        response.rate_limit = self.rate_limit
        response.raw = {"chunks": self.chunks}
        self.response = response
        self._push(StreamEvent(_T.FINISH, finish_reason=finish, usage=usage, response=response))
        return self._drain()


class JSONArrayStream:
    """Pulls complete top-level objects out of a JSON array (or bare objects) arriving in byte
    pieces cut anywhere, even inside a UTF-8 character or a string escape.

    A scanner tracks string/escape state and brace depth, so each object is decoded exactly once,
    when its closing brace arrives: linear in the body size whatever the chunking.
    """

    _INSIDE = re.compile(r'["{}\[\]]')
    _IN_STRING = re.compile(r'["\\]')

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._text = ""
        self._pos = 0
        self._start = -1  # start of the object being read, -1 between objects
        self._depth = 0
        self._in_string = False
        self._array = False
        self._closed = False

    def feed(self, data: bytes) -> list[Any]:
        self._text += self._decoder.decode(data)
        return self._scan()

    def close(self) -> list[Any]:
        self._text += self._decoder.decode(b"", final=True)
        out = self._scan()
        if self._start >= 0:
            raise StreamError("gemini: the streamed JSON ended inside an object")
        if self._array and not self._closed:
            raise StreamError("gemini: the streamed JSON array was never closed")
        return out

    def _scan(self) -> list[Any]:
        out: list[Any] = []
        text, i = self._text, self._pos
        n = len(text)
        while i < n:
            if self._start < 0:
                ch = text[i]
                if ch in " \t\r\n,":
                    i += 1
                elif ch == "{" and not self._closed:
                    self._start, self._depth = i, 1
                    i += 1
                elif ch == "[" and not self._array and not self._closed:
                    self._array = True
                    i += 1
                elif ch == "]" and self._array and not self._closed:
                    self._closed = True
                    i += 1
                else:
                    raise StreamError(f"gemini: unexpected {text[i : i + 40]!r} in the streamed JSON")
                continue
            if self._in_string:
                m = self._IN_STRING.search(text, i)
                if m is None:
                    i = n
                    break
                if m.group() == "\\":
                    i = m.start() + 2  # may point past the end: the escaped char is in the next piece
                    continue
                self._in_string = False
                i = m.end()
                continue
            m = self._INSIDE.search(text, i)
            if m is None:
                i = n
                break
            ch = m.group()
            i = m.end()
            if ch == '"':
                self._in_string = True
            elif ch in "{[":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 0:
                    piece = text[self._start : i]
                    try:
                        out.append(json.loads(piece))
                    except (ValueError, RecursionError) as exc:
                        raise StreamError(f"gemini: malformed JSON in the stream: {piece[:200]!r}", cause=exc) from exc
                    text = text[i:]
                    n, i, self._start = len(text), 0, -1
        self._text, self._pos = text, i
        if self._start < 0 and i >= n:
            self._text, self._pos = "", i - n
        return out


# -- request pieces ------------------------------------------------------------------------------
def _normalise_options(options: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in options.items():
        out[_OPTION_ALIASES.get(key, key)] = value
    return out


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _thinking_for(model: str, effort: str) -> dict[str, Any]:
    key = effort.strip().lower()
    if key not in _LEVELS:
        raise InvalidRequestError(
            f"reasoning_effort {effort!r} is not one of none, minimal, low, medium, high, xhigh", provider=_PROVIDER
        )
    match = _MODEL_MAJOR.search(model)
    if match and int(match.group(1)) >= 3:
        return {"thinkingLevel": _LEVELS[key]}
    return {"thinkingBudget": _BUDGETS[key]}


def _call_index(messages: list[Message]) -> dict[str, ToolCallData]:
    """Every assistant tool call in the history by id, so tool results can name their function."""
    index: dict[str, ToolCallData] = {}
    for message in messages:
        for part in message.content:
            if part.tool_call is not None:
                index[part.tool_call.id] = part.tool_call
    return index


def _message_parts(message: Message, calls: Mapping[str, ToolCallData]) -> tuple[str | None, list[dict[str, Any]]]:
    """One Message's wire role and parts; the role is None for system text parts."""
    role = message.role
    if role in (Role.SYSTEM, Role.DEVELOPER):
        system: list[dict[str, Any]] = []
        for part in message.content:
            if part.kind != ContentKind.TEXT:
                raise InvalidRequestError(
                    f"a {role} message can hold only text for Gemini (got {part.kind})", provider=_PROVIDER
                )
            if part.text:
                system.append({"text": part.text})
        return None, system
    if role == Role.ASSISTANT:
        return "model", _model_parts(message)
    if role in (Role.USER, Role.TOOL):
        return "user", _user_parts(message, calls)
    raise InvalidRequestError(f"unknown message role {role!r}", provider=_PROVIDER)


def _contents(messages: list[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    calls = _call_index(messages)
    for message in messages:
        wire_role, parts = _message_parts(message, calls)
        if wire_role is None:
            system.extend(parts)
            continue
        if not parts:
            continue
        if contents and contents[-1]["role"] == wire_role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": wire_role, "parts": parts})
    return system, contents


_CONTENT_HEADS: dict[str, bytes] = {}


def _content_head(role: str) -> bytes:
    head = _CONTENT_HEADS.get(role)
    if head is None:
        head = _CONTENT_HEADS[role] = b'{"role":' + _dumps(role) + b',"parts":['
    return head


def _model_parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in message.content:
        kind = part.kind
        if kind == ContentKind.TEXT:
            if part.text:
                parts.append({"text": part.text})
        elif kind == ContentKind.THINKING and part.thinking is not None:
            _thinking_part(parts, part.thinking)
        elif kind == ContentKind.REDACTED_THINKING:
            continue  # opaque data from another provider; Gemini cannot use it
        elif kind == ContentKind.TOOL_CALL and part.tool_call is not None:
            parts.append(_function_call(part.tool_call))
        elif kind in (ContentKind.IMAGE, ContentKind.AUDIO, ContentKind.DOCUMENT):
            parts.append(_media(part))
        else:
            raise InvalidRequestError(f"an assistant message cannot hold a {kind} part", provider=_PROVIDER)
    return parts


def _thinking_part(parts: list[dict[str, Any]], thinking: ThinkingData) -> None:
    marker = (thinking.provider_data or {}).get("gemini")
    if not isinstance(marker, dict) or thinking.redacted:
        return  # another provider's reasoning: its signature means nothing to Gemini
    if marker.get("part") == "text":
        if not thinking.signature:
            return
        last = parts[-1] if parts else None
        if last is not None and "text" in last and not last.get("thought") and "thoughtSignature" not in last:
            last["thoughtSignature"] = thinking.signature
        else:
            parts.append({"text": "", "thoughtSignature": thinking.signature})
        return
    item: dict[str, Any] = {"text": thinking.text, "thought": True}
    if thinking.signature:
        item["thoughtSignature"] = thinking.signature
    parts.append(item)


def _function_call(call: ToolCallData) -> dict[str, Any]:
    args: dict[str, Any]
    if isinstance(call.arguments, dict):
        args = call.arguments
    else:
        parsed, error = parse_arguments(call.arguments)
        # Keep unparseable arguments visible to the model instead of dropping them.
        args = parsed if error is None else {"invalid_arguments": call.arguments}
    extra = (call.provider_data or {}).get("gemini")
    extra = extra if isinstance(extra, dict) else {}
    function: dict[str, Any] = {"name": call.name, "args": args}
    if isinstance(extra.get("id"), str):
        function["id"] = extra["id"]
    part: dict[str, Any] = {"functionCall": function}
    if isinstance(extra.get("thoughtSignature"), str):
        part["thoughtSignature"] = extra["thoughtSignature"]
    return part


def _user_parts(message: Message, calls: Mapping[str, ToolCallData]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in message.content:
        kind = part.kind
        if kind == ContentKind.TEXT:
            if part.text:
                parts.append({"text": part.text})
        elif kind in (ContentKind.IMAGE, ContentKind.AUDIO, ContentKind.DOCUMENT):
            parts.append(_media(part))
        elif kind == ContentKind.TOOL_RESULT and part.tool_result is not None:
            parts.extend(_function_response(part.tool_result, message, calls))
        else:
            raise InvalidRequestError(f"a {message.role} message cannot hold a {kind} part", provider=_PROVIDER)
    return parts


def _function_response(
    result: ToolResultData, message: Message, calls: Mapping[str, ToolCallData]
) -> list[dict[str, Any]]:
    call = calls.get(result.tool_call_id)
    name = call.name if call is not None else message.name
    if not name:
        raise InvalidRequestError(
            f"tool result {result.tool_call_id!r}: no tool call with that id in the history and no "
            "Message.name, but Gemini's functionResponse needs the function name",
            provider=_PROVIDER,
        )
    content = result.content
    response: dict[str, Any]
    if result.is_error:
        response = {"error": content}
    elif isinstance(content, dict):
        response = content
    else:
        response = {"result": content}
    function: dict[str, Any] = {"name": name, "response": response}
    extra = (call.provider_data or {}).get("gemini") if call is not None else None
    if isinstance(extra, dict) and isinstance(extra.get("id"), str):
        function["id"] = extra["id"]
    out: list[dict[str, Any]] = [{"functionResponse": function}]
    if result.image_data is not None:
        mime = result.image_media_type or "image/png"
        out.append({"inlineData": {"mimeType": mime, "data": to_base64(result.image_data)}})
    return out


def _media(part: ContentPart) -> dict[str, Any]:
    media = part.image or part.audio or part.document
    if media is None:
        raise InvalidRequestError(f"{part.kind} part without data", provider=_PROVIDER)
    try:
        url, data, mime = resolve_media(media.url, media.data, media.media_type)
    except OSError as exc:
        raise InvalidRequestError(f"cannot read {part.kind} {media.url!r}: {exc}", provider=_PROVIDER) from exc
    if data is not None:
        return {"inlineData": {"mimeType": mime or "application/octet-stream", "data": to_base64(data)}}
    assert url is not None
    file_data: dict[str, Any] = {"fileUri": url}
    mime = mime or mimetypes.guess_type(url.split("?", 1)[0])[0]
    if mime:
        file_data["mimeType"] = mime
    return {"fileData": file_data}


def _declaration(name: str, description: str, parameters: dict[str, Any], raw: bool) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": name, "description": description}
    if raw:
        declaration["parametersJsonSchema"] = copy.deepcopy(parameters)
        return declaration
    schema = to_gemini_schema(parameters)
    if schema.get("properties") or set(schema) - {"type", "properties", "required", "description", "title"}:
        declaration["parameters"] = schema
    return declaration


# -- JSON Schema -> Gemini Schema ------------------------------------------------------------------
_SCHEMA_KEYS = frozenset(
    {
        *("type", "format", "title", "description", "nullable", "enum", "items", "maxItems", "minItems"),
        *("properties", "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern"),
        *("example", "anyOf", "propertyOrdering", "default", "minimum", "maximum"),
    }
)
_FORMATS = {
    "string": {"date-time", "enum"},
    "integer": {"int32", "int64"},
    "number": {"float", "double"},
}


def to_gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Convert a JSON Schema into the OpenAPI subset Gemini's ``parameters`` / ``responseSchema``
    accept (see the module docstring for what changes). The input is not modified."""
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            defs.update(schema[key])
    return _convert(schema, defs, ())


def _convert(schema: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        return {}
    node: dict[str, Any] = dict(schema)
    ref = node.pop("$ref", None)
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        target = defs.get(name)
        if target is None or name in seen:
            # Unknown or recursive reference: Gemini has no references, so stop at an open object.
            return {"type": "object", "description": node.get("description") or f"(see {name})"}
        merged = {**target, **node}
        return _convert(merged, defs, (*seen, name))

    all_of = node.pop("allOf", None)
    if isinstance(all_of, list):
        for sub in all_of:
            resolved = _convert(sub, defs, seen)
            for key, value in resolved.items():
                if key == "properties":
                    node.setdefault("properties", {}).update(value)
                elif key == "required":
                    node["required"] = list(dict.fromkeys([*node.get("required", []), *value]))
                else:
                    node.setdefault(key, value)

    out: dict[str, Any] = {}
    kind = node.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        if len(types) < len(kind):
            out["nullable"] = True
        if len(types) == 1:
            kind = types[0]
        elif types:
            out["anyOf"] = [{"type": t} for t in types]
            kind = None
        else:
            kind = None
    if "const" in node and "enum" not in node:
        node["enum"] = [node["const"]]
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node["oneOf"]
    if "examples" in node and "example" not in node and isinstance(node["examples"], list) and node["examples"]:
        node["example"] = node["examples"][0]
    if kind is None and "properties" in node:
        kind = "object"
    if kind is None and isinstance(node.get("enum"), list) and all(isinstance(v, str) for v in node["enum"]):
        kind = "string"
    if isinstance(kind, str):
        out["type"] = kind

    for key, value in node.items():
        if key not in _SCHEMA_KEYS or (key in ("type", "nullable") and key in out):
            continue
        if key == "properties" and isinstance(value, Mapping):
            out["properties"] = {k: _convert(v, defs, seen) for k, v in value.items()}
        elif key == "items":
            out["items"] = _convert(value, defs, seen)
        elif key == "anyOf" and isinstance(value, list):
            variants = [v for v in value if not (isinstance(v, Mapping) and v.get("type") == "null")]
            if len(variants) < len(value):
                out["nullable"] = True
            converted = [_convert(v, defs, seen) for v in variants]
            if len(converted) == 1:
                for k, v in converted[0].items():
                    out.setdefault(k, v)
            elif converted:
                out["anyOf"] = converted
        elif key == "format":
            if isinstance(kind, str) and value in _FORMATS.get(kind.lower(), ()):
                out["format"] = value
        elif key == "enum" and isinstance(value, list):
            if all(isinstance(v, str) for v in value):
                out["enum"] = list(value)
            else:
                allowed = ", ".join(json.dumps(v) for v in value)
                desc = node.get("description")
                out["description"] = f"{desc} (one of: {allowed})" if desc else f"One of: {allowed}"
        elif key == "description" and "description" in out:
            continue
        elif key != "type":
            out[key] = copy.deepcopy(value)
    if "required" in out:
        props = out.get("properties") or {}
        required = [r for r in out["required"] if isinstance(r, str) and r in props]
        if required:
            out["required"] = required
        else:
            del out["required"]
    return out
