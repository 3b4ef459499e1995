"""The tool execution pipeline (coding-agent-loop-spec 3.8, 2.5 ``execute_single_tool``).

    LOOKUP -> VALIDATE -> CHECK -> EXECUTE -> TRUNCATE -> AFTER -> EMIT -> RETURN

Every way a call can fail - an unknown tool name, arguments that are not a JSON object, arguments
that do not match the schema, a check that denies it, an executor that raises - ends as an error
*result* the model reads and can recover from; nothing the model sends can crash the loop. The
host gets the full output in TOOL_CALL_END; the model gets the truncated one.

CHECK and AFTER are the decision seam for tools: a :class:`ToolGate` may allow a call (possibly
with rewritten arguments), deny it with a reason the model reads, and rewrite the outcome. The
agent's controls (permissions, hooks) implement it; the pipeline only applies the decisions.
:meth:`ToolPipeline.prepare` runs the steps up to CHECK, :meth:`ToolPipeline.execute` the rest,
so a parallel round can check its calls one at a time and then run the allowed ones together.

The pipeline knows nothing about sessions: it reports through a :class:`ToolEventSink`, which the
agent loop implements by emitting its events. That keeps ``ra.tools`` below ``ra.agent``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from ra.llm.schema import describe_exception
from ra.llm.types import Message, ToolCall, ToolResult

from .registry import AbortState, RegisteredTool, ToolContext, ToolOutput, ToolRegistry
from .truncation import truncate_tool_output

if TYPE_CHECKING:
    from ra.env.base import ExecutionEnvironment

__all__ = ["Allow", "Deny", "PreparedCall", "ToolCallOutcome", "ToolEventSink", "ToolGate", "ToolPipeline"]


@dataclass(frozen=True, slots=True)
class Allow:
    """Run the call; with ``arguments``, run it with these instead of the model's (re-validated)."""

    arguments: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the call. ``reason`` is the error result the model reads; ``interrupt`` also
    ends the input after this round (the host said stop, not just "not this")."""

    reason: str
    interrupt: bool = False


ToolDecision = Allow | Deny


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
    #: A check denied the call (it was not run); ``interrupt`` also ends the input.
    denied: bool = False
    interrupt: bool = False

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


class ToolGate(Protocol):
    """Decisions about a call: before it runs, and about its outcome once it ran (or failed).

    ``before_tool`` returns None (no opinion: run it), :class:`Allow` or :class:`Deny`; an
    exception there denies the call (fail closed). ``after_tool`` returns the outcome to keep - the
    one it was given or a rewritten one.
    """

    async def before_tool(self, call: ToolCall, tool: RegisteredTool) -> ToolDecision | None: ...

    async def after_tool(self, outcome: ToolCallOutcome, tool: RegisteredTool | None) -> ToolCallOutcome: ...


@dataclass(slots=True)
class PreparedCall:
    """A call that passed LOOKUP, VALIDATE and CHECK: ready to run."""

    call: ToolCall
    tool: RegisteredTool
    started: float


class ToolPipeline:
    """Runs tool calls against a registry, an environment and a set of output limits."""

    __slots__ = (
        "abort",
        "config",
        "env",
        "execution_scope",
        "gate",
        "registry",
        "run_state",
        "session",
        "sink",
        "stopping",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        env: ExecutionEnvironment,
        sink: ToolEventSink,
        *,
        config: Any = None,
        abort: AbortState | None = None,
        session: Any = None,
        gate: ToolGate | None = None,
        stopping: Callable[[], str | None] | None = None,
    ) -> None:
        self.registry = registry
        self.env = env
        self.sink = sink
        self.config = config
        self.abort = abort or AbortState()
        self.session = session
        self.gate = gate
        self.stopping = stopping
        #: The run state of the session using this pipeline (set by ``RunState`` itself, which is
        #: built after the pipeline): tools get it as ``ToolContext.run_state``.
        self.run_state: Any = None
        #: Wraps each call's EXECUTE step, given the call: tracing (``ra.agent.tracing``) makes the
        #: call's span current there, so what the tool does nests under it. None: nothing wraps it.
        self.execution_scope: Callable[[ToolCall], AbstractContextManager[Any]] | None = None

    async def run(self, call: ToolCall) -> ToolCallOutcome:
        """Run one call through the whole pipeline; never raises except on cancellation."""
        prepared = await self.prepare(call)
        if isinstance(prepared, ToolCallOutcome):
            return prepared
        return await self.execute(prepared)

    async def prepare(self, call: ToolCall) -> PreparedCall | ToolCallOutcome:
        """START, LOOKUP, VALIDATE, CHECK. A call that fails one of them is answered here (its
        outcome returned, END emitted); otherwise it is returned ready for :meth:`execute`."""
        if self.abort.aborted:
            return self.skip(call, f"Not executed: the session was aborted before {call.name} ran.")
        self.sink.tool_start(call)
        started = time.perf_counter()
        try:
            checked = await self._check(call)
        except asyncio.CancelledError:
            self._cancelled(call, started)
            raise
        if isinstance(checked, ToolCallOutcome):
            return await self._finish(checked, self.registry.get(call.name), started)
        return PreparedCall(checked[0], checked[1], started)

    async def execute(self, prepared: PreparedCall) -> ToolCallOutcome:
        """EXECUTE, TRUNCATE, AFTER, EMIT for a call :meth:`prepare` let through."""
        scope = self.execution_scope
        try:
            if scope is None:
                outcome = await self._execute(prepared.call, prepared.tool)
            else:
                with scope(prepared.call):
                    outcome = await self._execute(prepared.call, prepared.tool)
        except asyncio.CancelledError:
            self._cancelled(prepared.call, prepared.started)
            raise
        return await self._finish(outcome, prepared.tool, prepared.started)

    def skip(self, call: ToolCall, reason: str) -> ToolCallOutcome:
        """Answer ``call`` without running it (steering arrived, per-step limit): START, END, result."""
        self.sink.tool_start(call)
        outcome = ToolCallOutcome(call, reason, reason, is_error=True, skipped=True)
        self.sink.tool_end(outcome)
        return outcome

    def _cancelled(self, call: ToolCall, started: float) -> None:
        # Abort: still close the START with an END so every UI row gets a final state.
        message = f"Tool call {call.name} was cancelled: the session was aborted."
        self.sink.tool_end(ToolCallOutcome(call, message, message, is_error=True, duration_ms=_ms(started)))

    async def _finish(self, outcome: ToolCallOutcome, tool: RegisteredTool | None, started: float) -> ToolCallOutcome:
        gate = self.gate
        if gate is not None:
            try:
                outcome = await gate.after_tool(outcome, tool)
            except asyncio.CancelledError:
                self._cancelled(outcome.call, started)
                raise
        outcome.duration_ms = _ms(started)
        self.sink.tool_end(outcome)  # EMIT (full output)
        return outcome  # RETURN (the model's view is outcome.content)

    async def _check(self, call: ToolCall) -> tuple[ToolCall, RegisteredTool] | ToolCallOutcome:
        # 1. LOOKUP
        tool = self.registry.get(call.name)
        if tool is None:
            why = self.registry.withdrawn(call.name)
            if why:
                return self._error(call, f"Tool {call.name} is not available: {why}.", None)
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

        # 3. CHECK: the gate may deny the call or rewrite its arguments.
        gate = self.gate
        if gate is None:
            return call, tool
        try:
            decision = await gate.before_tool(call, tool)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failing check denies: fail closed
            why = describe_exception(exc)
            decision = Deny(f"Denied: the check before {call.name} failed ({why}), so it was not run.")
        if isinstance(decision, Deny):
            reason = decision.reason
            return ToolCallOutcome(call, reason, reason, is_error=True, denied=True, interrupt=decision.interrupt)
        if isinstance(decision, Allow) and decision.arguments is not None:
            arguments = dict(decision.arguments)
            call = replace(call, arguments=arguments, raw_arguments=None)
            problem = tool.validate(arguments)
            if problem is not None:
                return self._error(call, f"The rewritten arguments are not valid: {problem}", tool)
        return call, tool

    async def _execute(self, call: ToolCall, tool: RegisteredTool) -> ToolCallOutcome:
        # 4. EXECUTE
        ctx = ToolContext(
            env=self.env,
            call_id=call.id,
            tool_name=call.name,
            config=self.config,
            on_output=lambda stream, chunk: self.sink.tool_output(call, stream, chunk),
            abort=self.abort,
            session=self.session,
            stopping=self.stopping,
            run_state=self.run_state,
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
            return self._error(call, f"Tool error ({call.name}): {describe_exception(exc)}", tool)

        # 5. TRUNCATE
        if isinstance(value, ToolOutput):
            full = value.content if isinstance(value.content, str) else _to_text(value.content)
            shown = full if value.for_model is None else value.for_model
            return ToolCallOutcome(
                call,
                self._truncate(shown, call.name, tool),
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
