"""The tool execution pipeline (coding-agent-loop-spec 3.8, 2.5 ``execute_single_tool``).

    LOOKUP -> VALIDATE -> EXECUTE -> TRUNCATE -> EMIT -> RETURN

Every way a call can fail - an unknown tool name, arguments that are not a JSON object, arguments
that do not match the schema, an executor that raises - ends as an error *result* the model reads
and can recover from; nothing the model sends can crash the loop. The host gets the full output in
TOOL_CALL_END; the model gets the truncated one.

The pipeline knows nothing about sessions: it reports through a :class:`ToolEventSink`, which the
agent loop implements by emitting its events. That keeps ``ra.tools`` below ``ra.agent``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ra.llm.types import Message, ToolCall, ToolResult

from .registry import AbortState, RegisteredTool, ToolContext, ToolOutput, ToolRegistry
from .truncation import truncate_tool_output

if TYPE_CHECKING:
    from ra.env.base import ExecutionEnvironment

__all__ = ["ToolCallOutcome", "ToolEventSink", "ToolPipeline"]


@dataclass(slots=True)
class ToolCallOutcome:
    """The result of one tool call: what the model gets (``content``) and what the host gets."""

    call: ToolCall
    #: What the model reads (truncated).
    content: str
    #: The untruncated output (or the error message), for TOOL_CALL_END.
    full_output: str
    is_error: bool = False
    #: True when the call was not run at all (skipped for steering, over the per-step limit).
    skipped: bool = False
    image_data: bytes | None = None
    image_media_type: str | None = None
    metadata: dict[str, Any] | None = None
    duration_ms: int = 0
    #: The tool asked to end the input with its output as the answer (``ToolOutput.end_input``).
    end_input: bool = False

    @property
    def truncated(self) -> bool:
        return self.content is not self.full_output and self.content != self.full_output

    def to_result(self) -> ToolResult:
        return ToolResult(self.call.id, self.content, self.is_error, self.image_data, self.image_media_type)

    def to_message(self) -> Message:
        return Message.tool_result(
            self.call.id,
            self.content,
            self.is_error,
            name=self.call.name,
            image_data=self.image_data,
            image_media_type=self.image_media_type,
        )


class ToolEventSink(Protocol):
    """Where the pipeline reports progress (the session turns these into events)."""

    def tool_start(self, call: ToolCall) -> None: ...

    def tool_output(self, call: ToolCall, stream: str, chunk: str) -> None: ...

    def tool_end(self, outcome: ToolCallOutcome) -> None: ...


class ToolPipeline:
    """Runs tool calls against a registry, an environment and a set of output limits."""

    __slots__ = ("abort", "config", "env", "registry", "session", "sink")

    def __init__(
        self,
        registry: ToolRegistry,
        env: ExecutionEnvironment,
        sink: ToolEventSink,
        *,
        config: Any = None,
        abort: AbortState | None = None,
        session: Any = None,
    ) -> None:
        self.registry = registry
        self.env = env
        self.sink = sink
        self.config = config
        self.abort = abort or AbortState()
        self.session = session

    async def run(self, call: ToolCall) -> ToolCallOutcome:
        """Run one call through the whole pipeline; never raises except on cancellation."""
        if self.abort.aborted:
            return self.skip(call, f"Not executed: the session was aborted before {call.name} ran.")
        sink = self.sink
        sink.tool_start(call)
        started = time.perf_counter()
        try:
            outcome = await self._run(call)
        except asyncio.CancelledError:
            # Abort: still close the START with an END so every UI row gets a final state.
            message = f"Tool call {call.name} was cancelled: the session was aborted."
            sink.tool_end(ToolCallOutcome(call, message, message, is_error=True, duration_ms=_ms(started)))
            raise
        outcome.duration_ms = _ms(started)
        sink.tool_end(outcome)  # EMIT (full output)
        return outcome  # RETURN (the model's view is outcome.content)

    def skip(self, call: ToolCall, reason: str) -> ToolCallOutcome:
        """Answer ``call`` without running it (steering arrived, per-step limit): START, END, result."""
        self.sink.tool_start(call)
        outcome = ToolCallOutcome(call, reason, reason, is_error=True, skipped=True)
        self.sink.tool_end(outcome)
        return outcome

    async def _run(self, call: ToolCall) -> ToolCallOutcome:
        # 1. LOOKUP
        tool = self.registry.get(call.name)
        if tool is None:
            names = ", ".join(self.registry.names()) or "none"
            return self._error(call, f"Unknown tool: {call.name}. Available tools: {names}.", None)

        # 2. VALIDATE: the JSON was parsed by the adapter; report what it could not parse.
        if call.arguments_error is not None:
            return self._error(
                call,
                f"Invalid arguments for tool {call.name}: {call.arguments_error}. "
                "Send the arguments as one JSON object that matches the tool's parameter schema.",
                tool,
            )
        problem = tool.validate(call.arguments)
        if problem is not None:
            return self._error(call, problem, tool)

        # 3. EXECUTE
        ctx = ToolContext(
            env=self.env,
            call_id=call.id,
            tool_name=call.name,
            config=self.config,
            on_output=lambda stream, chunk: self.sink.tool_output(call, stream, chunk),
            abort=self.abort,
            session=self.session,
        )
        try:
            if tool.blocking:
                value = await asyncio.to_thread(tool.executor, call.arguments, ctx)
            else:
                value = tool.executor(call.arguments, ctx)
            if inspect.isawaitable(value):
                value = await value
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._error(call, f"Tool error ({call.name}): {_describe(exc)}", tool)

        # 4. TRUNCATE
        if isinstance(value, ToolOutput):
            full = value.content if isinstance(value.content, str) else _to_text(value.content)
            return ToolCallOutcome(
                call,
                self._truncate(full, call.name, tool),
                full,
                is_error=value.is_error,
                image_data=value.image_data,
                image_media_type=value.image_media_type,
                metadata=value.metadata,
                end_input=value.end_input,
            )
        full = value if isinstance(value, str) else _to_text(value)
        return ToolCallOutcome(call, self._truncate(full, call.name, tool), full)

    def _error(self, call: ToolCall, message: str, tool: RegisteredTool | None) -> ToolCallOutcome:
        return ToolCallOutcome(call, self._truncate(message, call.name, tool), message, is_error=True)

    def _truncate(self, text: str, name: str, tool: RegisteredTool | None) -> str:
        # The override maps are read through the config on every call, so a host can change
        # them mid-session; any object with these two attributes works as a config.
        config = self.config
        return truncate_tool_output(
            text,
            name,
            char_limits=getattr(config, "tool_output_limits", None),
            line_limits=getattr(config, "tool_line_limits", None),
            tool_char_limit=tool.output_limit if tool else None,
            tool_mode=tool.truncation_mode if tool else None,
            tool_line_limit=tool.line_limit if tool else None,
        )


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, KeyError) and exc.args:
        text = f"missing key {exc.args[0]!r}"
    return text or type(exc).__name__


def _to_text(value: Any) -> str:
    """Executors may return structured data; the model reads it as JSON."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
