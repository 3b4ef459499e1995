"""The unified data model (unified-llm-spec section 3 and 5.1-5.4).

Everything here is a plain stdlib dataclass with ``slots=True``: these objects are built on every
model call and every stream event, so they must be cheap to create and to read. Nothing in this
module does I/O or imports an optional dependency.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

__all__ = [
    "TOOL_CHOICE_MODES",
    "AudioData",
    "ContentKind",
    "ContentPart",
    "DocumentData",
    "FinishReason",
    "ImageData",
    "Message",
    "RateLimitInfo",
    "Request",
    "Response",
    "ResponseFormat",
    "Role",
    "StreamEvent",
    "StreamEventType",
    "ThinkingData",
    "Tool",
    "ToolCall",
    "ToolCallData",
    "ToolChoice",
    "ToolDefinition",
    "ToolResult",
    "ToolResultData",
    "Usage",
    "Warning",
]


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    DEVELOPER = "developer"


class ContentKind(StrEnum):
    TEXT = "text"
    IMAGE = "image"
    AUDIO = "audio"
    DOCUMENT = "document"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    THINKING = "thinking"
    REDACTED_THINKING = "redacted_thinking"


@dataclass(slots=True)
class ImageData:
    """An image by URL, raw bytes, or local path (a ``url`` starting with ``/``, ``./`` or ``~``).

    Adapters turn a local path into inline base64 data; see ``ra.llm.media``.
    """

    url: str | None = None
    data: bytes | None = None
    media_type: str | None = None
    detail: str | None = None

    def __post_init__(self) -> None:
        if (self.url is None) == (self.data is None):
            raise ValueError("ImageData needs exactly one of url or data")
        if self.data is not None and self.media_type is None:
            self.media_type = "image/png"


@dataclass(slots=True)
class AudioData:
    url: str | None = None
    data: bytes | None = None
    media_type: str | None = None


@dataclass(slots=True)
class DocumentData:
    url: str | None = None
    data: bytes | None = None
    media_type: str | None = None
    file_name: str | None = None


@dataclass(slots=True)
class ToolCallData:
    """A tool call inside a message.

    ``arguments`` is the parsed JSON object, or the raw string when the model's arguments were not
    valid JSON (kept verbatim so the failure can be reported to the model and round-tripped).
    """

    id: str
    name: str
    arguments: dict[str, Any] | str
    type: str = "function"
    #: Provider data that must travel back with the call (e.g. Gemini's thoughtSignature, the
    #: Responses API item id). Adapters own the keys they put here.
    provider_data: dict[str, Any] | None = None


@dataclass(slots=True)
class ToolResultData:
    tool_call_id: str
    content: str | dict[str, Any] | list[Any]
    is_error: bool = False
    image_data: bytes | None = None
    image_media_type: str | None = None


@dataclass(slots=True)
class ThinkingData:
    """Reasoning text. ``signature`` (Anthropic, Gemini) or the opaque ``text`` of redacted thinking
    must go back to the same provider byte for byte, or the provider rejects the conversation."""

    text: str
    signature: str | None = None
    redacted: bool = False
    #: Provider data that must round-trip (e.g. OpenAI encrypted reasoning content and item id).
    provider_data: dict[str, Any] | None = None


@dataclass(slots=True)
class ContentPart:
    """Tagged union: ``kind`` says which of the other fields is set."""

    kind: ContentKind | str
    text: str | None = None
    image: ImageData | None = None
    audio: AudioData | None = None
    document: DocumentData | None = None
    tool_call: ToolCallData | None = None
    tool_result: ToolResultData | None = None
    thinking: ThinkingData | None = None

    @classmethod
    def of_text(cls, text: str) -> ContentPart:
        return cls(ContentKind.TEXT, text=text)

    @classmethod
    def of_image(cls, image: ImageData) -> ContentPart:
        return cls(ContentKind.IMAGE, image=image)

    @classmethod
    def of_tool_call(cls, call: ToolCallData) -> ContentPart:
        return cls(ContentKind.TOOL_CALL, tool_call=call)

    @classmethod
    def of_thinking(cls, thinking: ThinkingData) -> ContentPart:
        kind = ContentKind.REDACTED_THINKING if thinking.redacted else ContentKind.THINKING
        return cls(kind, thinking=thinking)


@dataclass(slots=True)
class Message:
    role: Role
    content: list[ContentPart] = field(default_factory=list)
    name: str | None = None
    tool_call_id: str | None = None

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(Role.SYSTEM, [ContentPart(ContentKind.TEXT, text=text)])

    @classmethod
    def developer(cls, text: str) -> Message:
        return cls(Role.DEVELOPER, [ContentPart(ContentKind.TEXT, text=text)])

    @classmethod
    def user(cls, content: str | list[ContentPart]) -> Message:
        if isinstance(content, str):
            return cls(Role.USER, [ContentPart(ContentKind.TEXT, text=content)])
        return cls(Role.USER, list(content))

    @classmethod
    def assistant(cls, content: str | list[ContentPart]) -> Message:
        if isinstance(content, str):
            return cls(Role.ASSISTANT, [ContentPart(ContentKind.TEXT, text=content)])
        return cls(Role.ASSISTANT, list(content))

    @classmethod
    def tool_result(
        cls,
        tool_call_id: str,
        content: str | dict[str, Any] | list[Any],
        is_error: bool = False,
        *,
        name: str | None = None,
        image_data: bytes | None = None,
        image_media_type: str | None = None,
    ) -> Message:
        result = ToolResultData(tool_call_id, content, is_error, image_data, image_media_type)
        return cls(
            Role.TOOL,
            [ContentPart(ContentKind.TOOL_RESULT, tool_result=result)],
            name=name,
            tool_call_id=tool_call_id,
        )

    @property
    def text(self) -> str:
        """All text parts joined; empty when there are none."""
        return "".join(p.text for p in self.content if p.kind == ContentKind.TEXT and p.text)

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [ToolCall.from_data(p.tool_call) for p in self.content if p.tool_call is not None]


@dataclass(slots=True)
class ToolCall:
    """A tool call extracted for execution. ``arguments_error`` is set (and ``arguments`` is empty)
    when ``raw_arguments`` was not a JSON object, so callers can answer with an error result."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None
    type: str = "function"
    arguments_error: str | None = None
    provider_data: dict[str, Any] | None = None

    @classmethod
    def from_data(cls, data: ToolCallData) -> ToolCall:
        args = data.arguments
        if isinstance(args, dict):
            return cls(data.id, data.name, args, None, data.type, None, data.provider_data)
        parsed, error = parse_arguments(args)
        return cls(data.id, data.name, parsed, args, data.type, error, data.provider_data)

    def with_arguments(self, arguments: dict[str, Any]) -> ToolCall:
        """This call with other arguments (a policy rewrote them); the raw text no longer applies."""
        return ToolCall(self.id, self.name, arguments, None, self.type, None, self.provider_data)

    def to_data(self) -> ToolCallData:
        args: dict[str, Any] | str = self.arguments
        if self.arguments_error is not None and self.raw_arguments is not None:
            args = self.raw_arguments
        return ToolCallData(self.id, self.name, args, self.type, self.provider_data)


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Parse a model's argument string. Empty means no arguments; anything that is not a JSON
    object yields ``({}, reason)`` instead of raising, because model output is untrusted input."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


@dataclass(slots=True)
class ToolResult:
    tool_call_id: str
    content: str | dict[str, Any] | list[Any]
    is_error: bool = False
    image_data: bytes | None = None
    image_media_type: str | None = None


#: Every provider ra speaks to accepts ``[a-zA-Z0-9_-]``; a hyphen is kept because MCP tool names carry
#: server names such as ``my-server`` (``mcp__my-server__tool``), as Claude Code and codex name them.
_TOOL_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")


@dataclass(slots=True)
class ToolDefinition:
    """What the model is told about a tool. ``parameters`` is a JSON Schema with an object root."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def __post_init__(self) -> None:
        if not _TOOL_NAME.match(self.name):
            raise ValueError(
                f"invalid tool name {self.name!r}: use letters, digits, underscores and hyphens, "
                "start with a letter, at most 64 characters"
            )
        if self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: parameters schema must have type 'object' at the root")


ToolHandler = Callable[..., Any | Awaitable[Any]]


@dataclass(slots=True)
class Tool(ToolDefinition):
    """A tool definition plus an optional ``execute`` handler (active when set, passive when None)."""

    execute: ToolHandler | None = None

    def definition(self) -> ToolDefinition:
        return ToolDefinition(self.name, self.description, self.parameters)


#: Every ToolChoice mode; the adapters that support them all answer ``supports_tool_choice`` from it.
TOOL_CHOICE_MODES = frozenset({"auto", "none", "required", "named"})


@dataclass(slots=True)
class ToolChoice:
    mode: str = "auto"  # auto | none | required | named
    tool_name: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in TOOL_CHOICE_MODES:
            raise ValueError(f"unknown tool_choice mode {self.mode!r}")
        if self.mode == "named" and not self.tool_name:
            raise ValueError("tool_choice mode 'named' needs tool_name")

    @classmethod
    def auto(cls) -> ToolChoice:
        return cls("auto")

    @classmethod
    def none(cls) -> ToolChoice:
        return cls("none")

    @classmethod
    def required(cls) -> ToolChoice:
        return cls("required")

    @classmethod
    def named(cls, tool_name: str) -> ToolChoice:
        return cls("named", tool_name)


@dataclass(slots=True)
class ResponseFormat:
    type: str = "text"  # text | json | json_schema
    json_schema: dict[str, Any] | None = None
    strict: bool = False
    name: str = "response"

    def __post_init__(self) -> None:
        if self.type not in ("text", "json", "json_schema"):
            raise ValueError(f"unknown response format type {self.type!r}")
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("response format 'json_schema' needs json_schema")


@dataclass(slots=True)
class Request:
    model: str
    messages: list[Message]
    provider: str | None = None
    tools: list[ToolDefinition] | None = None
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop_sequences: list[str] | None = None
    reasoning_effort: str | None = None
    metadata: dict[str, str] | None = None
    provider_options: dict[str, Any] | None = None
    #: Set by a caller that sends one growing conversation, request after request (the agent
    #: loop does): an object that names the conversation, and how many of ``messages``, from the
    #: first, are the very Message objects of its previous request, unchanged. An adapter may then
    #: reuse what it made of those instead of looking at each one, so that a step's work does not
    #: grow with the history (it still checks that they are the same objects). Other callers
    #: leave both unset: every message is then checked, parts and all.
    conversation: object | None = None
    unchanged: int = 0

    def options_for(self, provider: str) -> dict[str, Any]:
        """This provider's slice of ``provider_options`` (empty dict when absent)."""
        if not self.provider_options:
            return {}
        return self.provider_options.get(provider) or {}


@dataclass(slots=True, frozen=True)
class FinishReason:
    reason: str  # stop | length | tool_calls | content_filter | error | other
    raw: str | None = None


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    raw: dict[str, Any] | None = None

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
            _add_opt(self.reasoning_tokens, other.reasoning_tokens),
            _add_opt(self.cache_read_tokens, other.cache_read_tokens),
            _add_opt(self.cache_write_tokens, other.cache_write_tokens),
        )


def _add_opt(a: int | None, b: int | None) -> int | None:
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


@dataclass(slots=True, frozen=True)
class Warning:
    message: str
    code: str | None = None


@dataclass(slots=True)
class RateLimitInfo:
    requests_remaining: int | None = None
    requests_limit: int | None = None
    tokens_remaining: int | None = None
    tokens_limit: int | None = None
    reset_at: datetime | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> RateLimitInfo | None:
        """Read OpenAI-style ``x-ratelimit-*`` and Anthropic ``anthropic-ratelimit-*`` headers.

        Returns None when the response carried none of them.
        """
        lower = {k.lower(): v for k, v in headers.items()}

        def num(*names: str) -> int | None:
            for name in names:
                value = lower.get(name)
                if value is not None:
                    try:
                        return int(float(value))
                    except ValueError:
                        continue
            return None

        info = cls(
            requests_remaining=num("x-ratelimit-remaining-requests", "anthropic-ratelimit-requests-remaining"),
            requests_limit=num("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit"),
            tokens_remaining=num(
                "x-ratelimit-remaining-tokens",
                "anthropic-ratelimit-tokens-remaining",
                "anthropic-ratelimit-input-tokens-remaining",
            ),
            tokens_limit=num(
                "x-ratelimit-limit-tokens",
                "anthropic-ratelimit-tokens-limit",
                "anthropic-ratelimit-input-tokens-limit",
            ),
            reset_at=_reset_at(lower),
        )
        if info == cls():
            return None
        return info


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def _reset_at(lower: Mapping[str, str]) -> datetime | None:
    for name in ("anthropic-ratelimit-requests-reset", "anthropic-ratelimit-tokens-reset"):
        value = lower.get(name)
        if value:
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                pass
    for name in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"):
        value = lower.get(name)
        if value:
            # OpenAI sends durations such as "6m0s", "1s", "120ms".
            seconds = 0.0
            matched = False
            for amount, unit in _DURATION.findall(value):
                matched = True
                seconds += float(amount) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
            if matched:
                from datetime import timedelta

                return datetime.now(UTC) + timedelta(seconds=seconds)
    return None


@dataclass(slots=True)
class Response:
    id: str
    model: str
    provider: str
    message: Message
    finish_reason: FinishReason
    usage: Usage = field(default_factory=Usage)
    raw: dict[str, Any] | None = None
    warnings: list[Warning] = field(default_factory=list)
    rate_limit: RateLimitInfo | None = None

    @property
    def text(self) -> str:
        return self.message.text

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.message.tool_calls

    @property
    def reasoning(self) -> str | None:
        parts = [
            p.thinking.text for p in self.message.content if p.kind == ContentKind.THINKING and p.thinking is not None
        ]
        return "".join(parts) if parts else None


class StreamEventType(StrEnum):
    STREAM_START = "stream_start"
    TEXT_START = "text_start"
    TEXT_DELTA = "text_delta"
    TEXT_END = "text_end"
    REASONING_START = "reasoning_start"
    REASONING_DELTA = "reasoning_delta"
    REASONING_END = "reasoning_end"
    TOOL_CALL_START = "tool_call_start"
    TOOL_CALL_DELTA = "tool_call_delta"
    TOOL_CALL_END = "tool_call_end"
    FINISH = "finish"
    ERROR = "error"
    PROVIDER_EVENT = "provider_event"
    #: Emitted by the high-level ``stream()`` between tool-loop steps (spec 5.9).
    STEP_FINISH = "step_finish"


@dataclass(slots=True)
class StreamEvent:
    """One normalised stream event.

    For TOOL_CALL_START/DELTA ``tool_call`` carries the id and name, and ``delta`` the argument
    fragment; TOOL_CALL_END carries the complete call. REASONING_END carries the finished
    ``thinking`` (with its signature), so consumers can rebuild the message without the adapter.
    """

    type: StreamEventType | str
    delta: str | None = None
    text_id: str | None = None
    reasoning_delta: str | None = None
    tool_call: ToolCall | None = None
    thinking: ThinkingData | None = None
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    response: Response | None = None
    error: Exception | None = None
    raw: dict[str, Any] | None = None
    warnings: list[Warning] | None = None
