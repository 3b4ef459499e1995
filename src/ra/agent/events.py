"""Session events (coding-agent-loop-spec 2.9): one kind per moment, one typed payload per kind.

Every event is a :class:`SessionEvent` carrying a small frozen dataclass (its *payload*), e.g.
:class:`ToolCallEnd` for ``TOOL_CALL_END``. Hosts that want types match on the payload::

    match event.payload:
        case ToolCallEnd(tool_name=name, is_error=True, output=text): ...

``event.data`` is the same payload as a plain dict (built on first access, then kept), for JSON
output and for code that reads ``event["tool_name"]``. Optional fields that are unset (``None``
or ``False``) are left out of the dict, exactly as the documented event table lists them.
Payload values are the loop's own objects, never copies: treat them as read-only.

Delivery (the hub, backlog, listeners and async iterators) lives in :mod:`ra.agent.event_hub`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from .config import SessionState, StopReason

if TYPE_CHECKING:
    from ra.llm.types import ToolCall, Usage
    from ra.tools.sources import ToolSourceStatus

__all__ = [
    "AssistantReasoningDelta",
    "AssistantStreamEvent",
    "AssistantTextDelta",
    "AssistantTextEnd",
    "AssistantTextStart",
    "BudgetLimit",
    "CompactionEnd",
    "CompactionStart",
    "ContextPruned",
    "ErrorEvent",
    "EventData",
    "EventKind",
    "HookRan",
    "LoopDetected",
    "PermissionDenied",
    "ProcessingEnd",
    "RetryEvent",
    "SessionEnd",
    "SessionEvent",
    "SessionStart",
    "SteeringInjected",
    "SubagentEvent",
    "ToolCallEnd",
    "ToolCallOutputDelta",
    "ToolCallStart",
    "TurnEnd",
    "TurnLimit",
    "TurnStart",
    "UsageEvent",
    "UserInput",
    "WarningEvent",
]


class EventKind(StrEnum):
    # lifecycle
    SESSION_START = "session_start"  # session created
    SESSION_END = "session_end"  # session closed (abort, close(), fatal error); last event
    USER_INPUT = "user_input"  # an input (submitted or follow-up) starts processing
    PROCESSING_END = "processing_end"  # an input and its follow-ups are done; state is IDLE/AWAITING_INPUT
    TURN_START = "turn_start"  # a step begins: one model call and the tools it asks for
    TURN_END = "turn_end"  # that step is done
    # model output
    ASSISTANT_TEXT_START = "assistant_text_start"  # streamed text began
    ASSISTANT_TEXT_DELTA = "assistant_text_delta"  # a piece of streamed text
    ASSISTANT_TEXT_END = "assistant_text_end"  # the model's answer is complete (full text, reasoning)
    ASSISTANT_REASONING_DELTA = "assistant_reasoning_delta"  # a piece of streamed reasoning
    #: the rest of a streamed response's shape: the stream opened, a block (text, reasoning, tool
    #: call) started or ended, a tool call's input grew, the stream finished
    ASSISTANT_STREAM_EVENT = "assistant_stream_event"
    USAGE = "usage"  # token usage and cost of one model call, and the session's running totals
    # tools
    TOOL_CALL_START = "tool_call_start"
    TOOL_CALL_OUTPUT_DELTA = "tool_call_output_delta"
    TOOL_CALL_END = "tool_call_end"  # carries the FULL untruncated output
    # control
    STEERING_INJECTED = "steering_injected"
    TURN_LIMIT = "turn_limit"
    BUDGET_LIMIT = "budget_limit"  # the session's spend reached max_budget_usd
    LOOP_DETECTION = "loop_detection"
    RETRY = "retry"  # a transient model error; the call is retried after ``delay`` seconds
    CONTEXT_PRUNED = "context_pruned"  # old context was dropped after a context-length error
    COMPACTION_START = "compaction_start"  # compaction begins (the window is nearly full, overflow, compact())
    COMPACTION_END = "compaction_end"  # it ended: tokens before and after, or cancelled
    WARNING = "warning"  # non-fatal: context usage, context overflow, a failing cleanup
    HOOK = "hook"  # a hook ran and had something to say (a decision, a message) or failed
    PERMISSION_DENIED = "permission_denied"  # a tool call was denied (by a hook, a rule, the mode or the host)
    ERROR = "error"  # an error that ends the input (``fatal``: the session closes too)
    # subagents
    SUBAGENT_EVENT = "subagent_event"  # a child agent's event: data agent_id, kind, event (the child's)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True, slots=True)
class EventData:
    """Base of every payload. ``kind`` is the event kind the payload belongs to."""

    kind: ClassVar[EventKind]
    #: Fields left out of the dict view while they are ``None`` / ``False`` / empty.
    optional: ClassVar[frozenset[str]] = frozenset()

    def as_dict(self) -> dict[str, Any]:
        """The payload as a plain dict (``SessionEvent.data``)."""
        cls = type(self)
        names = _FIELD_NAMES.get(cls)
        if names is None:
            names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(self))
        optional = self.optional
        out: dict[str, Any] = {}
        for name in names:
            value = getattr(self, name)
            if name in optional and (value is None or value is False):
                continue
            out[name] = value
        return out


# -- lifecycle ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionStart(EventData):
    kind = EventKind.SESSION_START
    profile: str
    model: str
    depth: int
    state: SessionState
    #: How each MCP server (or other tool source) stood once the sources started: name,
    #: transport, state ("connected", "failed"), tool count, error (``ra.tools.sources``).
    mcp_servers: tuple[ToolSourceStatus, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionEnd(EventData):
    kind = EventKind.SESSION_END
    state: SessionState
    #: "closed", "aborted", "error" or "cancelled".
    reason: str
    error: BaseException | None
    turns: int
    usage: Usage


@dataclass(frozen=True, slots=True)
class UserInput(EventData):
    kind = EventKind.USER_INPUT
    content: str
    #: "submit" or "follow_up".
    source: str


@dataclass(frozen=True, slots=True)
class ProcessingEnd(EventData):
    kind = EventKind.PROCESSING_END
    state: SessionState
    stop_reason: StopReason
    text: str
    inputs: int


@dataclass(frozen=True, slots=True)
class TurnStart(EventData):
    kind = EventKind.TURN_START
    #: Session-wide step number (1-based).
    step: int
    #: Tool rounds done so far in this input.
    round: int


@dataclass(frozen=True, slots=True)
class TurnEnd(EventData):
    kind = EventKind.TURN_END
    step: int
    tool_calls: int
    #: "completed", "error" or "aborted".
    status: str


# -- model output ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssistantTextStart(EventData):
    kind = EventKind.ASSISTANT_TEXT_START


@dataclass(frozen=True, slots=True)
class AssistantTextDelta(EventData):
    kind = EventKind.ASSISTANT_TEXT_DELTA
    delta: str


@dataclass(frozen=True, slots=True)
class AssistantReasoningDelta(EventData):
    kind = EventKind.ASSISTANT_REASONING_DELTA
    delta: str


@dataclass(frozen=True, slots=True)
class AssistantStreamEvent(EventData):
    """A stream event the text and reasoning deltas do not cover, so that a host can rebuild the
    response's blocks as they stream (the SDK's ``stream_event`` messages are made from these)."""

    kind = EventKind.ASSISTANT_STREAM_EVENT
    optional = frozenset({"block_id", "tool_name", "delta", "finish_reason", "usage"})
    #: ``stream_start``, ``text_start``, ``text_end``, ``reasoning_start``, ``reasoning_end``,
    #: ``tool_call_start``, ``tool_call_delta``, ``tool_call_end`` or ``finish`` (``ra.llm``'s names).
    type: str
    #: The text block's id or the tool call's id, when the provider gives one.
    block_id: str | None = None
    tool_name: str | None = None
    #: A tool call's argument fragment (``tool_call_delta``).
    delta: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class AssistantTextEnd(EventData):
    kind = EventKind.ASSISTANT_TEXT_END
    text: str
    reasoning: str | None
    tool_calls: list[ToolCall]
    response_id: str | None
    finish_reason: str


@dataclass(frozen=True, slots=True)
class UsageEvent(EventData):
    kind = EventKind.USAGE
    #: This call's tokens.
    usage: Usage
    #: The session's running total (its own calls).
    total: Usage
    step: int
    #: The model that answered (a fallback model when the primary failed).
    model: str = ""
    #: This call's cost in USD; None when the model's price is unknown.
    cost_usd: float | None = None
    #: The session's spend so far, subagents included (unknown prices count as $0).
    total_cost_usd: float = 0.0
    #: Where the price came from: "configured", "catalog", "genai-prices" or "unknown".
    price_source: str = "unknown"


@dataclass(frozen=True, slots=True)
class RetryEvent(EventData):
    kind = EventKind.RETRY
    attempt: int
    delay: float
    error: BaseException
    error_type: str
    message: str
    #: Text already streamed by the failed attempt is void: the retry answers afresh.
    discard_partial: bool


# -- tools ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCallStart(EventData):
    kind = EventKind.TOOL_CALL_START
    tool_name: str
    call_id: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class ToolCallOutputDelta(EventData):
    kind = EventKind.TOOL_CALL_OUTPUT_DELTA
    tool_name: str
    call_id: str
    stream: str
    delta: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd(EventData):
    kind = EventKind.TOOL_CALL_END
    optional = frozenset({"error", "skipped", "metadata", "denied"})
    tool_name: str
    call_id: str
    #: The full, untruncated output (the model's copy may be cut).
    output: str
    is_error: bool
    truncated: bool
    duration_ms: int
    #: The output again when ``is_error`` (the spec's name for it).
    error: str | None = None
    #: The call was not run (steering arrived, per-step limit, a stop).
    skipped: bool = False
    metadata: dict[str, Any] | None = None
    #: A check (permissions, a hook) denied the call; ``output`` is the reason the model read.
    denied: bool = False


# -- control ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SteeringInjected(EventData):
    kind = EventKind.STEERING_INJECTED
    content: str


@dataclass(frozen=True, slots=True)
class TurnLimit(EventData):
    kind = EventKind.TURN_LIMIT
    optional = frozenset({"round", "total_turns"})
    #: The limit reached (seconds for scope "time").
    limit: int | float
    #: "input" (tool rounds per input), "session" (model calls per session), "turns_per_input"
    #: (model calls per input) or "time" (seconds per input).
    scope: str
    round: int | None = None
    total_turns: int | None = None


@dataclass(frozen=True, slots=True)
class BudgetLimit(EventData):
    kind = EventKind.BUDGET_LIMIT
    limit_usd: float
    spent_usd: float


@dataclass(frozen=True, slots=True)
class LoopDetected(EventData):
    kind = EventKind.LOOP_DETECTION
    message: str
    window: int


@dataclass(frozen=True, slots=True)
class ContextPruned(EventData):
    kind = EventKind.CONTEXT_PRUNED
    dropped_messages: int
    dropped_chars: int
    remaining_messages: int
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class CompactionStart(EventData):
    kind = EventKind.COMPACTION_START
    #: "auto" (the window was nearly full), "overflow" (the provider refused), "manual" (compact()).
    trigger: str
    tokens_before: int


@dataclass(frozen=True, slots=True)
class CompactionEnd(EventData):
    """A compaction ended. ``strategy`` says what it did: "tool_outputs" (the cheap pass cleared
    old tool outputs and that was enough), "summary" (older turns were summarised; a
    CompactionTurn was added) or "none" (cancelled, or it failed: ``reason`` says why)."""

    kind = EventKind.COMPACTION_END
    optional = frozenset({"cancelled", "reason"})
    trigger: str
    strategy: str
    tokens_before: int
    tokens_after: int
    #: Turns the summary replaced, turns kept verbatim, tool outputs the cheap pass cleared.
    summarized_turns: int = 0
    kept_turns: int = 0
    cleared_tool_outputs: int = 0
    #: User messages repeated verbatim after the summary.
    user_messages: int = 0
    cancelled: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class WarningEvent(EventData):
    """A non-fatal problem. ``details`` holds what the code adds (e.g. ``estimated_tokens``); the
    dict view flattens it next to ``code`` and ``message``."""

    kind = EventKind.WARNING
    code: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.details}


@dataclass(frozen=True, slots=True)
class HookRan(EventData):
    """A hook answered (with a decision, a reason or a message for the user) or failed."""

    kind = EventKind.HOOK
    optional = frozenset({"decision", "reason", "system_message", "error", "output"})
    #: The hook event ("PreToolUse", ...).
    event: str
    hook: str
    decision: str | None
    reason: str | None
    #: Text for the user (never sent to the model).
    system_message: str | None
    duration_ms: int
    error: str | None = None
    #: What a command hook printed on stdout, for the user's verbose view (None when the hook
    #: answered ``"suppressOutput": true``).
    output: str | None = None


@dataclass(frozen=True, slots=True)
class PermissionDenied(EventData):
    kind = EventKind.PERMISSION_DENIED
    tool_name: str
    call_id: str
    arguments: Any
    #: What the model reads.
    reason: str
    #: Who decided: "hook", "rule", "mode", "callback" or "no_prompt" (nobody could be asked).
    source: str


@dataclass(frozen=True, slots=True)
class ErrorEvent(EventData):
    kind = EventKind.ERROR
    message: str
    error: BaseException
    error_type: str
    retryable: bool
    #: The session closes because of this error.
    fatal: bool


@dataclass(frozen=True, slots=True)
class SubagentEvent(EventData):
    kind = EventKind.SUBAGENT_EVENT
    agent_id: str
    #: The child event's kind (same as ``event.kind``; ``"kind"`` in the dict view).
    child_kind: EventKind
    event: SessionEvent

    def as_dict(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "kind": self.child_kind, "event": self.event}


# -- the event --------------------------------------------------------------------------------------------


class SessionEvent:
    """One thing that happened in a session: ``kind``, when, which session, and the payload."""

    __slots__ = ("_data", "payload", "session_id", "timestamp")

    def __init__(self, payload: EventData, timestamp: float, session_id: str) -> None:
        self.payload = payload
        #: Seconds since the epoch (``time.time()``).
        self.timestamp = timestamp
        self.session_id = session_id
        self._data: dict[str, Any] | None = None

    @property
    def kind(self) -> EventKind:
        return self.payload.kind

    @property
    def data(self) -> dict[str, Any]:
        """The payload as a dict (derived once; do not mutate)."""
        data = self._data
        if data is None:
            data = self._data = self.payload.as_dict()
        return data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def __repr__(self) -> str:
        return f"SessionEvent({self.kind.value}, {self.payload!r})"
