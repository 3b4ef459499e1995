"""The SDK-style message stream: typed messages projected from a Session's events.

What a host of the Claude Agent SDK reads - a system ``init``, ``assistant`` messages, ``user``
messages carrying tool results, ``tool_progress`` before and after each tool call, optional
partial ``stream_event``\\ s, a ``compact_boundary``, and one final ``result`` - built from the
events the session already emits (:class:`MessageStream`),
not by a second loop. ``to_json()`` gives each message in the shape ``claude -p --output-format
stream-json`` writes (same field names where they mean the same thing), so tools that read Claude
Code's stream can read ra's; ``docs/sdk.md`` maps every field.

The result's ``subtype`` and ``stop_reason`` follow the Go-port spec's exit reasons:

==================================  ==========================  ====================
ra's stop reason                    ``subtype``                 ``stop_reason``
==================================  ==========================  ====================
completed                           success                     end_turn
max_tokens                          error_during_execution      max_tokens
turn_limit, round_limit             error_max_turns             max_turns
budget_limit                        error_max_budget_usd        error_max_budget_usd
interrupted, time_limit             error_during_execution      interrupted
aborted                             error_during_execution      aborted
error, context_overflow             error_during_execution      error
==================================  ==========================  ====================

``ra_stop_reason`` always carries ra's own value. An input that ends at the output token limit
(the loop continues a cut reply a few times, then stops) is an error (``is_error``): the last
reply's tool calls did not run and its text may stop mid-sentence.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ra.agent.config import StopReason
from ra.agent.events import EventKind
from ra.agent.permissions.rules import claude_mode
from ra.agent.result import exit_reason

if TYPE_CHECKING:
    from ra.agent.events import SessionEvent
    from ra.agent.session import Session
    from ra.llm.types import ToolCall, Usage

__all__ = [
    "AssistantMessage",
    "Message",
    "MessageStream",
    "ResultMessage",
    "StreamEvent",
    "SystemMessage",
    "TextBlock",
    "ThinkingBlock",
    "ToolProgressMessage",
    "ToolResultBlock",
    "ToolUseBlock",
    "UserMessage",
    "exit_reason",
    "result_subtype",
]


# -- content blocks ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    thinking: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "thinking", "thinking": self.thinking}


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    id: str
    name: str
    input: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"type": "tool_use", "id": self.id, "name": self.name, "input": self.input}


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    tool_use_id: str
    content: str
    is_error: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "tool_result",
            "tool_use_id": self.tool_use_id,
            "content": self.content,
            "is_error": self.is_error,
        }


ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock


# -- messages -------------------------------------------------------------------------------------------


def _uuid() -> str:
    return str(uuid.uuid4())


def usage_json(usage: Usage | None) -> dict[str, Any]:
    """Token usage under the Anthropic/Claude field names."""
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens or 0,
        "cache_creation_input_tokens": usage.cache_write_tokens or 0,
    }


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """``init`` (at the start of a query) or ``compact_boundary`` (old context was dropped)."""

    subtype: str
    session_id: str
    data: dict[str, Any] = field(default_factory=dict)
    uuid: str = field(default_factory=_uuid)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "system",
            "subtype": self.subtype,
            **self.data,
            "session_id": self.session_id,
            "uuid": self.uuid,
        }


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    content: list[ContentBlock]
    model: str
    session_id: str
    usage: Usage | None = None
    #: The model's own reason for ending this response ("end_turn", "tool_use", "max_tokens", ...).
    stop_reason: str | None = None
    message_id: str | None = None
    cost_usd: float | None = None
    parent_tool_use_id: str | None = None
    uuid: str = field(default_factory=_uuid)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "assistant",
            "message": {
                "id": self.message_id or f"msg_{self.uuid.replace('-', '')[:24]}",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [block.to_json() for block in self.content],
                "stop_reason": self.stop_reason,
                "stop_sequence": None,
                "usage": usage_json(self.usage),
            },
            "parent_tool_use_id": self.parent_tool_use_id,
            "session_id": self.session_id,
            "uuid": self.uuid,
        }


@dataclass(frozen=True, slots=True)
class UserMessage:
    """Tool results (one block per call, in call order), or a prompt when echoed."""

    content: list[ToolResultBlock] | str
    session_id: str
    parent_tool_use_id: str | None = None
    uuid: str = field(default_factory=_uuid)

    def to_json(self) -> dict[str, Any]:
        content = self.content if isinstance(self.content, str) else [b.to_json() for b in self.content]
        return {
            "type": "user",
            "message": {"role": "user", "content": content},
            "parent_tool_use_id": self.parent_tool_use_id,
            "session_id": self.session_id,
            "uuid": self.uuid,
        }


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of the response being streamed (``include_partial_messages``), shaped as an
    Anthropic streaming event: ``message_start``, ``content_block_start`` / ``content_block_delta``
    (``text_delta``, ``thinking_delta``, ``input_json_delta``) / ``content_block_stop`` per block,
    ``message_delta`` (the stop reason and output tokens) and ``message_stop``."""

    event: dict[str, Any]
    session_id: str
    parent_tool_use_id: str | None = None
    uuid: str = field(default_factory=_uuid)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "stream_event",
            "event": self.event,
            "parent_tool_use_id": self.parent_tool_use_id,
            "session_id": self.session_id,
            "uuid": self.uuid,
        }


@dataclass(frozen=True, slots=True)
class ToolProgressMessage:
    """A tool call is about to run (``status="started"``, elapsed 0) or has finished
    (``"finished"``, with how long it took); the call's result follows in the ``user`` message.
    Denied and skipped calls get both too: the result says what happened."""

    tool_use_id: str
    tool_name: str
    elapsed_time_seconds: float
    status: str
    session_id: str
    parent_tool_use_id: str | None = None
    uuid: str = field(default_factory=_uuid)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "tool_progress",
            "tool_use_id": self.tool_use_id,
            "tool_name": self.tool_name,
            "parent_tool_use_id": self.parent_tool_use_id,
            "elapsed_time_seconds": self.elapsed_time_seconds,
            "status": self.status,
            "session_id": self.session_id,
            "uuid": self.uuid,
        }


@dataclass(frozen=True, slots=True)
class ResultMessage:
    """The end of one query (one submitted prompt and what it led to)."""

    subtype: str
    is_error: bool
    duration_ms: int
    duration_api_ms: int
    num_turns: int
    session_id: str
    #: The final answer (the last assistant text).
    result: str
    #: The Go-port spec's exit reason (see the module table); ``ra_stop_reason`` is ra's own.
    stop_reason: str
    ra_stop_reason: str
    total_cost_usd: float
    usage: Usage | None
    permission_denials: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    uuid: str = field(default_factory=_uuid)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": "result",
            "subtype": self.subtype,
            "is_error": self.is_error,
            "duration_ms": self.duration_ms,
            "duration_api_ms": self.duration_api_ms,
            "num_turns": self.num_turns,
            "result": self.result,
            "stop_reason": self.stop_reason,
            "ra_stop_reason": self.ra_stop_reason,
            "session_id": self.session_id,
            "total_cost_usd": self.total_cost_usd,
            "usage": usage_json(self.usage),
            "permission_denials": self.permission_denials,
            "uuid": self.uuid,
        }
        if self.errors:
            data["errors"] = self.errors
        return data


Message = SystemMessage | AssistantMessage | UserMessage | ToolProgressMessage | StreamEvent | ResultMessage


_SUBTYPES = {
    StopReason.COMPLETED: "success",
    StopReason.TURN_LIMIT: "error_max_turns",
    StopReason.ROUND_LIMIT: "error_max_turns",
    StopReason.BUDGET_LIMIT: "error_max_budget_usd",
}


def result_subtype(reason: StopReason | str) -> str:
    return _SUBTYPES.get(StopReason(reason), "error_during_execution")


_MODEL_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens", "content_filter": "refusal"}


# -- the projection ---------------------------------------------------------------------------------------


class MessageStream:
    """Turns one session's events into messages, calling ``emit(message)`` for each.

    Attach it as a listener (``session.add_listener(stream)``); call :meth:`start` when a query
    begins (it emits the ``init`` message). Messages come in the order the SDK promises:
    ``init``, then assistant and user messages as the loop produces them (each tool call framed
    by two ``tool_progress`` messages), then one ``result`` when the input (and its follow-ups)
    are done. With ``include_partial`` every event of a streamed response comes first as a
    ``stream_event``; a model call that is retried after it began streaming is announced by a
    ``system``/``api_retry`` message and starts again with ``message_start``. Subagents' events
    are not projected (their spend is in the parent's result).
    """

    def __init__(self, session: Session, emit: Callable[[Message], None], *, include_partial: bool = False) -> None:
        self.session = session
        self.emit = emit
        self.include_partial = include_partial
        self._pending: Any = None  # the ASSISTANT_TEXT_END payload waiting for its USAGE
        self._calls: list[ToolCall] = []
        self._results: dict[str, ToolResultBlock] = {}
        self._started = time.monotonic()
        self._cost_at_start = 0.0
        self._turns = 0
        self._usage: Usage | None = None
        self._errors: list[str] = []
        self._denials_at_start = 0
        self._api_at_start = 0.0
        self._partial = _PartialMessage()
        #: A query is open: started and not yet answered by a result.
        self.open = False

    def start(self, *, tools: list[str] | None = None) -> SystemMessage:
        """A query begins: reset the counters and emit the ``init`` message."""
        session = self.session
        self._started = time.monotonic()
        self._cost_at_start = session.total_cost_usd
        self._turns = 0
        self._usage = None
        self._errors = []
        self._denials_at_start = len(session.permission_denials)
        self._api_at_start = session.api_seconds
        self.open = True
        init = SystemMessage(
            "init",
            session.id,
            {
                "cwd": session.execution_env.working_directory(),
                "model": session.model,
                "tools": tools if tools is not None else offered_tools(session),
                "mcp_servers": mcp_server_list(session),
                "permissionMode": claude_mode(session.permission_mode),
                "profile": session.profile.id,
            },
        )
        self.emit(init)
        return init

    def __call__(self, event: SessionEvent) -> None:
        kind = event.kind
        p = event.payload
        sid = self.session.id
        if kind is EventKind.ASSISTANT_TEXT_END:
            self._pending = p
        elif kind is EventKind.USAGE:
            self._turns += 1
            self._usage = p.usage if self._usage is None else self._usage + p.usage
            pending, self._pending = self._pending, None
            if pending is not None:
                self._calls = list(pending.tool_calls)
                self._results = {}
                self.emit(self._assistant(pending, p))
        elif kind is EventKind.TOOL_CALL_START:
            self.emit(ToolProgressMessage(p.call_id, p.tool_name, 0.0, "started", sid))
        elif kind is EventKind.TOOL_CALL_END:
            self._results[p.call_id] = ToolResultBlock(p.call_id, p.output, p.is_error)
            elapsed = round((p.duration_ms or 0) / 1000, 3)
            self.emit(ToolProgressMessage(p.call_id, p.tool_name, elapsed, "finished", sid))
        elif kind is EventKind.TURN_END:
            if self._calls:
                blocks = [self._results[c.id] for c in self._calls if c.id in self._results]
                self._calls = []
                if blocks:
                    self.emit(UserMessage(blocks, sid))
        elif kind is EventKind.CONTEXT_PRUNED:
            self.emit(
                SystemMessage(
                    "compact_boundary",
                    sid,
                    {
                        "compact_metadata": {
                            "trigger": "auto",
                            "pre_tokens": None,
                            "dropped_messages": p.dropped_messages,
                            "strategy": "prune",
                        }
                    },
                )
            )
        elif kind is EventKind.COMPACTION_END and p.strategy == "summary":
            self.emit(
                SystemMessage(
                    "compact_boundary",
                    sid,
                    {
                        "compact_metadata": {
                            "trigger": "manual" if p.trigger == "manual" else "auto",
                            "pre_tokens": p.tokens_before,
                            "post_tokens": p.tokens_after,
                            "strategy": "summary",
                        }
                    },
                )
            )
        elif kind is EventKind.ERROR:
            self._errors.append(p.message)
        elif kind is EventKind.PROCESSING_END:
            self.emit(self.result(p.stop_reason, p.text))
        elif kind is EventKind.SESSION_END and self.open:
            reason = StopReason.ERROR if p.error is not None else StopReason.ABORTED
            self.emit(self.result(reason, ""))
        elif self.include_partial:
            for partial in self._partial.project(event, self.session.model):
                self.emit(partial if isinstance(partial, SystemMessage) else StreamEvent(partial, sid))

    def _assistant(self, end: Any, usage_event: Any) -> AssistantMessage:
        blocks: list[ContentBlock] = []
        if end.reasoning:
            blocks.append(ThinkingBlock(end.reasoning))
        if end.text:
            blocks.append(TextBlock(end.text))
        blocks.extend(ToolUseBlock(c.id, c.name, c.arguments) for c in end.tool_calls)
        return AssistantMessage(
            blocks,
            usage_event.model or self.session.model,
            self.session.id,
            usage_event.usage,
            _MODEL_STOP.get(end.finish_reason, end.finish_reason),
            end.response_id or None,
            usage_event.cost_usd,
        )

    def refused(self, why: str) -> ResultMessage:
        """The ``result`` of a query that never reached the model (its message could not be read):
        an error naming why, so a host waiting for the query's end gets one."""
        self._errors.append(why)
        return self.result(StopReason.ERROR, "")

    def result(self, reason: StopReason, text: str) -> ResultMessage:
        """The ``result`` message for a query that ended with ``reason``."""
        self.open = False
        session = self.session
        reason = StopReason(reason)
        subtype = result_subtype(reason)
        denials = session.permission_denials[self._denials_at_start :]
        return ResultMessage(
            subtype=subtype,
            is_error=subtype != "success",
            duration_ms=int((time.monotonic() - self._started) * 1000),
            duration_api_ms=int((session.api_seconds - self._api_at_start) * 1000),
            num_turns=self._turns,
            session_id=session.id,
            result=text,
            stop_reason=exit_reason(reason),
            ra_stop_reason=reason.value,
            total_cost_usd=round(session.total_cost_usd - self._cost_at_start, 10),
            usage=self._usage,
            permission_denials=[
                {"tool_name": d.tool_name, "tool_use_id": d.tool_use_id, "tool_input": d.tool_input} for d in denials
            ],
            errors=list(self._errors),
        )


def mcp_server_list(session: Session) -> list[dict[str, Any]]:
    """The ``init`` message's ``mcp_servers``: ``name`` and ``status`` as the Claude SDK has them
    (``error`` when one failed), and ra's own ``ra_transport`` and ``ra_tools`` (how many tools it
    offers)."""
    out: list[dict[str, Any]] = []
    for status in session.mcp_servers:
        entry: dict[str, Any] = {"name": status.name, "status": status.state}
        if status.error:
            entry["error"] = status.error
        entry["ra_transport"] = status.transport
        entry["ra_tools"] = status.tools
        out.append(entry)
    return out


def offered_tools(session: Session) -> list[str]:
    """The tool names the model is offered: the profile's, minus those a bare deny rule hides."""
    from ra.agent.permissions import visible_tools

    return [d.name for d in visible_tools(session.profile.tools(), session.config.disallowed_tools)]


class _PartialMessage:
    """Anthropic-shaped streaming events for one streamed response at a time: numbers the blocks
    (text, thinking, tool_use) in the order they start, as the Messages API does."""

    __slots__ = ("index", "open", "text", "thinking", "tools")

    def __init__(self) -> None:
        self.open = False
        self.index = -1
        self.text: int | None = None
        self.thinking: int | None = None
        self.tools: dict[str, int] = {}

    def project(self, event: SessionEvent, model: str) -> list[dict[str, Any] | SystemMessage]:
        kind = event.kind
        p = event.payload
        out: list[dict[str, Any] | SystemMessage] = []
        if kind is EventKind.RETRY:
            if self.open:  # the attempt had begun streaming: what it sent is void
                self.open = False
                out.append(
                    SystemMessage(
                        "api_retry",
                        event.session_id,
                        {
                            "attempt": p.attempt,
                            "retry_delay_ms": int(p.delay * 1000),
                            "error_type": p.error_type,
                            "error": p.message,
                            "discard_partial": True,
                        },
                    )
                )
            return out
        if kind is EventKind.ASSISTANT_TEXT_DELTA:
            self._begin(out, model)
            if self.text is None:
                self.text = self._block(out, {"type": "text", "text": ""})
            out.append(_delta(self.text, {"type": "text_delta", "text": p.delta}))
        elif kind is EventKind.ASSISTANT_REASONING_DELTA:
            self._begin(out, model)
            if self.thinking is None:
                self.thinking = self._block(out, {"type": "thinking", "thinking": ""})
            out.append(_delta(self.thinking, {"type": "thinking_delta", "thinking": p.delta}))
        elif kind is EventKind.ASSISTANT_STREAM_EVENT:
            self._shape(out, p, model)
        return out

    def _begin(self, out: list[Any], model: str) -> None:
        if self.open:
            return
        self.open = True
        self.index = -1
        self.text = self.thinking = None
        self.tools = {}
        out.append(
            {
                "type": "message_start",
                "message": {
                    "id": None,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage_json(None),
                },
            }
        )

    def _block(self, out: list[Any], block: dict[str, Any]) -> int:
        self.index += 1
        out.append({"type": "content_block_start", "index": self.index, "content_block": block})
        return self.index

    def _shape(self, out: list[Any], p: Any, model: str) -> None:
        kind = p.type
        if kind == "stream_start":
            self.open = False  # a new attempt always starts a new message
            self._begin(out, model)
            return
        self._begin(out, model)
        if kind == "text_start":
            if self.text is None:
                self.text = self._block(out, {"type": "text", "text": ""})
        elif kind == "reasoning_start":
            if self.thinking is None:
                self.thinking = self._block(out, {"type": "thinking", "thinking": ""})
        elif kind == "text_end":
            if self.text is not None:
                out.append({"type": "content_block_stop", "index": self.text})
                self.text = None
        elif kind == "reasoning_end":
            if self.thinking is not None:
                out.append({"type": "content_block_stop", "index": self.thinking})
                self.thinking = None
        elif kind == "tool_call_start":
            key = p.block_id or f"#{len(self.tools)}"
            block = {"type": "tool_use", "id": p.block_id, "name": p.tool_name, "input": {}}
            self.tools[key] = self._block(out, block)
        elif kind == "tool_call_delta":
            index = self._tool_index(out, p)
            if p.delta:
                out.append(_delta(index, {"type": "input_json_delta", "partial_json": p.delta}))
        elif kind == "tool_call_end":
            index = self._tool_index(out, p)
            out.append({"type": "content_block_stop", "index": index})
            self.tools = {k: v for k, v in self.tools.items() if v != index}
        elif kind == "finish":
            out.extend({"type": "content_block_stop", "index": i} for i in (self.text, self.thinking) if i is not None)
            self.text = self.thinking = None
            usage = p.usage
            out.append(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": _MODEL_STOP.get(p.finish_reason, p.finish_reason), "stop_sequence": None},
                    "usage": {"output_tokens": usage.output_tokens if usage is not None else 0},
                }
            )
            out.append({"type": "message_stop"})
            self.open = False

    def _tool_index(self, out: list[Any], p: Any) -> int:
        """The index of the tool call ``p`` belongs to (one is started if none was)."""
        if p.block_id is not None and p.block_id in self.tools:
            return self.tools[p.block_id]
        if p.block_id is None and self.tools:
            return list(self.tools.values())[-1]
        key = p.block_id or f"#{len(self.tools)}"
        self.tools[key] = self._block(out, {"type": "tool_use", "id": p.block_id, "name": p.tool_name, "input": {}})
        return self.tools[key]


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}
