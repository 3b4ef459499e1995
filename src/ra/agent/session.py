"""The Session (coding-agent-loop-spec 2.1, 2.3, 2.6, Appendix B): state, API and lifecycle.

The loop itself is in :mod:`ra.agent.loop`; this module holds what the loop works on and the
operations a host calls:

* ``await submit(text)`` - process one input (and queued follow-ups) to completion;
* ``steer(text)`` / ``follow_up(text)`` - queue messages, from any thread or task;
* ``abort()`` - from any thread or task: cancel the model call, kill running commands, close
  subagents, emit SESSION_END, state CLOSED; ``await close()`` does the same and waits;
* ``interrupt()`` - from any thread or task: stop the current input only (the model call is
  cancelled, running commands are stopped, tool calls left without a result are answered as
  interrupted); the session stays usable for the next ``submit()``;
* ``events()`` - an async iterator of SessionEvents (several consumers may iterate).

Threading: the session runs on the event loop of the task that calls ``submit()``. ``steer()``
and ``follow_up()`` append to deques (atomic under the GIL), so they are safe from any thread and
the message is queued before they return. ``abort()`` hops onto the session's loop with
``call_soon_threadsafe`` when called from another thread.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any

from ra.llm.types import Message, ToolCall, ToolResult, Usage
from ra.tools.pipeline import ToolCallOutcome, ToolPipeline
from ra.tools.registry import AbortState

from .config import SessionConfig, SessionState, StopReason
from .context import ContextMonitor
from .errors import SessionBusyError, SessionClosedError
from .events import EventHub, EventKind, EventSubscription, Listener, SessionEvent
from .history import AssistantTurn, History, ToolResultsTurn
from .loop import SubmitResult, _Tally, process_input, retry_policy_with_events
from .loop_detection import LoopDetector

if TYPE_CHECKING:
    from collections.abc import Callable

    from ra.env.base import ExecutionEnvironment
    from ra.llm.client import Client

    from .profile import ProviderProfile

__all__ = ["Session"]

_log = logging.getLogger("ra.agent")
E = EventKind

_INTERRUPTED_RESULT = "Interrupted: the user stopped this input before the tool call finished; it may not have run."

#: How long close/abort waits for the processing task to unwind after cancelling it.
_UNWIND_TIMEOUT_S = 5.0


class Session:
    def __init__(
        self,
        profile: ProviderProfile,
        execution_env: ExecutionEnvironment,
        llm_client: Client | None = None,
        config: SessionConfig | None = None,
        *,
        session_id: str | None = None,
        depth: int = 0,
    ) -> None:
        self.config = config if config is not None else SessionConfig(**getattr(profile, "session_defaults", {}))
        self.config.validate()
        self.id = session_id or str(uuid.uuid4())
        self.profile = profile
        self.execution_env = execution_env
        self._llm_client = llm_client
        #: Nesting level: 0 for a top-level session, 1 for its subagents, ...
        self.depth = depth
        self.history = History()
        self.state = SessionState.IDLE
        #: Active child agents by id. Anything with a ``close()`` (sync or async) may be registered;
        #: all are closed when this session closes.
        self.subagents: dict[str, Any] = {}
        #: Assistant turns so far (what ``max_turns`` counts), model steps, and token usage.
        self.turn_count = 0
        self.step_count = 0
        self.usage = Usage()

        self._hub = EventHub(self.id, self.config.event_backlog_limit)
        self._steering: deque[str] = deque()
        self._follow_ups: deque[str] = deque()
        self._abort = AbortState()
        self._pipeline = ToolPipeline(
            profile.tool_registry, execution_env, _ToolEvents(self), config=self.config, abort=self._abort, session=self
        )
        self._loop_detector = LoopDetector(self.config.loop_detection_window)
        self._context = ContextMonitor()
        self._system_prompt = ""
        self._system_message: Message | None = None
        self._system_chars = 0
        self._retry_source: Any = None
        self._retry_cached: Any = None
        #: Whether the current model attempt has streamed text yet (reported with RETRY).
        self._partial_output = False
        #: What the processing task is doing: "model", "tools" or None (decides how abort stops it).
        self._phase: str | None = None
        #: Counters of the submit in progress (kept here so an aborted submit can report them).
        self._tally = _Tally()
        #: interrupt() was called for the input in progress.
        self._interrupted = False

        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._task: asyncio.Task[SubmitResult] | None = None
        self._closing: asyncio.Task[None] | None = None

        self._emit(
            E.SESSION_START,
            {"profile": profile.id, "model": profile.model, "depth": depth, "state": self.state},
        )

    # -- properties ---------------------------------------------------------------------------------
    @property
    def llm_client(self) -> Client:
        """The client given at creation, else ``ra.llm``'s default client (from the environment)."""
        if self._llm_client is None:
            from ra.llm.client import get_default_client

            self._llm_client = get_default_client()
        return self._llm_client

    @property
    def system_prompt(self) -> str:
        """The system prompt of the current (or last) input."""
        return self._system_prompt

    @property
    def aborted(self) -> bool:
        return self._abort.aborted

    @property
    def pending_steering(self) -> int:
        return len(self._steering)

    @property
    def pending_follow_ups(self) -> int:
        return len(self._follow_ups)

    # -- input ----------------------------------------------------------------------------------------
    async def submit(self, text: str) -> SubmitResult:
        """Process ``text`` and any follow-ups queued meanwhile; return when done.

        Raises SessionBusyError while another input is processing and SessionClosedError once the
        session is closed. Model and tool failures do not raise: see ``SubmitResult.stop_reason``
        and ``.error`` (and the ERROR event). Cancelling the awaiting task aborts the session.
        """
        if not isinstance(text, str):
            raise TypeError(f"submit() takes a str, got {type(text).__name__}")
        self.config.validate()  # fields may have been changed since construction
        if self.state is SessionState.CLOSED or self._closing is not None:
            raise SessionClosedError(f"session {self.id} is closed")
        if self.state is SessionState.PROCESSING:
            raise SessionBusyError(
                f"session {self.id} is already processing an input; use steer() to redirect it, "
                "follow_up() to queue the next input, or wait for submit() to return"
            )
        self._bind_loop()
        self.state = SessionState.PROCESSING
        self._interrupted = False
        assert self._loop is not None
        task = self._task = self._loop.create_task(self._run(text))
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._begin_close("cancelled", cancel_processing=True)
            raise
        if self._closing is not None:
            await asyncio.shield(self._closing)
        result.state = self.state
        return result

    process_input = submit

    def steer(self, text: str) -> None:
        """Queue a message to inject after the current tool round (or at the next submit when idle)."""
        self._check_message(text, "steer")
        self._steering.append(text)

    def follow_up(self, text: str) -> None:
        """Queue an input to process after the current one completes (or after the next submit)."""
        self._check_message(text, "follow_up")
        self._follow_ups.append(text)

    def _check_message(self, text: str, what: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"{what}() takes a str, got {type(text).__name__}")
        if self.state is SessionState.CLOSED:
            raise SessionClosedError(f"session {self.id} is closed")

    # -- events -------------------------------------------------------------------------------------
    def events(self) -> EventSubscription:
        """An async iterator over events; ends after SESSION_END. The first consumer also gets
        every event emitted before it subscribed."""
        try:
            self._bind_loop()  # so that abort() from another thread reaches this loop
        except RuntimeError:
            pass  # no running loop (yet): iterating will need one
        return self._hub.subscribe()

    def add_listener(self, listener: Listener, *, replay: bool = True) -> Callable[[], None]:
        """Call ``listener(event)`` synchronously on every event; returns a function to remove it.
        As the first consumer it also receives the events so far (``replay=False`` skips them)."""
        return self._hub.add_listener(listener, replay=replay)

    def _emit(self, kind: EventKind, data: dict[str, Any]) -> SessionEvent:
        return self._hub.emit(kind, data)

    # -- abort and close ------------------------------------------------------------------------------
    def abort(self) -> None:
        """Stop now, from any thread: cancel the model call and tools, kill running commands, close
        subagents, emit SESSION_END; the state becomes CLOSED. Returns at once; ``await
        wait_closed()`` (or the pending ``submit()``) to know when it is done."""
        self._request_close("aborted")

    def interrupt(self) -> bool:
        """Stop the input being processed, from any thread, and keep the session.

        The model call in flight is cancelled (closing its stream); running commands get the
        environment's graceful stop (SIGTERM, then SIGKILL) before running tools are cancelled;
        tool calls left without a result are answered with an "interrupted" error result so the
        conversation stays valid. ``submit()`` then returns with stop_reason INTERRUPTED,
        PROCESSING_END is emitted and the state goes back to IDLE. Queued steering and follow-ups
        are kept. Returns False when nothing was processing.
        """
        if self.state is not SessionState.PROCESSING or self._closing is not None:
            return False
        self._interrupted = True
        loop = self._loop
        if loop is None or loop.is_closed():
            return True
        if threading.get_ident() == self._loop_thread:
            self._begin_interrupt()
        else:
            loop.call_soon_threadsafe(self._begin_interrupt)
        return True

    def _begin_interrupt(self) -> None:
        task = self._task
        if task is None or task.done() or self._closing is not None:
            return
        if self._phase == "tools":
            # Let commands stop gracefully first (as abort does), then cancel what still runs.
            assert self._loop is not None
            self._loop.create_task(self._interrupt_tools(task))
        else:
            task.cancel("interrupt")

    async def _interrupt_tools(self, task: asyncio.Task[Any]) -> None:
        terminate = getattr(self.execution_env, "terminate_all", None)
        if terminate is not None:
            try:
                await terminate()
            except Exception as exc:
                self._emit(E.WARNING, {"code": "terminate_failed", "message": f"terminate_all failed: {exc}"})
        if not task.done() and self._phase == "tools":
            task.cancel("interrupt")

    def _finish_interrupt(self) -> SubmitResult:
        """After the processing task was cancelled by interrupt(): repair the history, report."""
        turns = self.history.turns
        last = turns[-1] if turns else None
        if isinstance(last, AssistantTurn) and last.tool_calls:
            self.history.append(
                ToolResultsTurn(
                    [ToolResult(c.id, _INTERRUPTED_RESULT, True) for c in last.tool_calls],
                    names=[c.name for c in last.tool_calls],
                )
            )
        self._interrupted = False
        self.state = SessionState.IDLE
        tally = self._tally
        self._emit(
            E.PROCESSING_END,
            {"state": self.state, "stop_reason": StopReason.INTERRUPTED, "text": "", "inputs": 1},
        )
        return SubmitResult(
            "", StopReason.INTERRUPTED, SessionState.IDLE, tally.steps, tally.tool_calls, 1, tally.usage
        )

    async def close(self) -> None:
        """Close the session (aborting any processing) and wait until SESSION_END was emitted."""
        if self.state is SessionState.CLOSED and self._closing is None:
            return
        self._bind_loop()
        self._begin_close("closed", cancel_processing=True)
        await self.wait_closed()

    async def wait_closed(self) -> None:
        if self._closing is not None:
            await asyncio.shield(self._closing)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _request_close(self, reason: str) -> None:
        if self.state is SessionState.CLOSED or self._closing is not None:
            return
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            # No loop ever ran this session (or it is gone): nothing of ours can be running.
            self._abort.set(reason)
            self._finish_close(reason, None)
            return
        if threading.get_ident() == self._loop_thread:
            self._begin_close(reason, cancel_processing=True)
        else:
            loop.call_soon_threadsafe(self._begin_close, reason, True)

    def _begin_close(self, reason: str, cancel_processing: bool, error: BaseException | None = None) -> None:
        """Start the shutdown sequence once (on the session's loop)."""
        if self._closing is not None or self.state is SessionState.CLOSED:
            return
        assert self._loop is not None
        self._abort.set(reason)
        task = self._task
        if task is asyncio.current_task() or (task is not None and task.done()):
            task = None
        if cancel_processing and task is not None and self._phase != "tools":
            task.cancel()  # 1. cancel the in-flight model call (closes its stream)
        self._closing = self._loop.create_task(self._shutdown(reason, error, task if cancel_processing else None))

    async def _shutdown(self, reason: str, error: BaseException | None, task: asyncio.Task[Any] | None) -> None:
        """Appendix B: model call, processes, tools, subagents, flush, SESSION_END, CLOSED."""
        # 2-4. SIGTERM every process group, SIGKILL after 2 s (the environment's job). Running
        # tools are cancelled only after this, so their commands get the graceful stop.
        terminate = getattr(self.execution_env, "terminate_all", None)
        if terminate is not None:
            try:
                await terminate()
            except Exception as exc:
                self._emit(E.WARNING, {"code": "terminate_failed", "message": f"terminate_all failed: {exc}"})
        if task is not None and not task.done():
            task.cancel()
        task = self._task
        if task is not None and not task.done() and task is not asyncio.current_task():
            done, _ = await asyncio.wait([task], timeout=_UNWIND_TIMEOUT_S)
            if not done:
                self._emit(E.WARNING, {"code": "unwind_timeout", "message": "processing did not stop in time"})
        # 7. Subagents.
        await self._close_subagents()
        # 5. Flush: run callbacks already scheduled from other threads (e.g. output deltas).
        await asyncio.sleep(0)
        self._finish_close(reason, error)

    def _finish_close(self, reason: str, error: BaseException | None) -> None:
        self.state = SessionState.CLOSED
        self._emit(
            E.SESSION_END,
            {"state": self.state, "reason": reason, "error": error, "turns": self.turn_count, "usage": self.usage},
        )

    async def _close_subagents(self) -> None:
        agents = list(self.subagents.items())
        self.subagents.clear()
        for agent_id, agent in agents:
            close = getattr(agent, "close", None)
            if close is None:
                continue
            try:
                result = close()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self._emit(
                    E.WARNING, {"code": "subagent_close_failed", "message": f"closing subagent {agent_id}: {exc}"}
                )

    def register_subagent(self, agent_id: str, agent: Any) -> None:
        """Track a child agent so that closing this session closes it too."""
        if agent_id in self.subagents:
            raise ValueError(f"subagent {agent_id!r} is already registered")
        self.subagents[agent_id] = agent

    # -- internals used by the loop ----------------------------------------------------------------
    async def _run(self, text: str) -> SubmitResult:
        try:
            result = await process_input(self, text)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._interrupted and not self._abort.aborted and current is not None:
                current.uncancel()
                return self._finish_interrupt()
            if not self._abort.aborted:
                raise
            tally = self._tally
            return SubmitResult(
                "", StopReason.ABORTED, SessionState.CLOSED, tally.steps, tally.tool_calls, 1, tally.usage
            )
        except Exception as exc:  # a bug in ra, not in the model's output: still close cleanly
            _log.exception("agent loop failed")
            self._emit(E.ERROR, {"message": f"internal error: {exc}", "error": exc, "fatal": True})
            result = SubmitResult("", StopReason.ERROR, SessionState.CLOSED, error=exc)
        if result.state is SessionState.CLOSED and result.stop_reason is StopReason.ERROR:
            self._begin_close("error", cancel_processing=False, error=result.error)
        elif result.stop_reason is StopReason.ABORTED:
            result.state = SessionState.CLOSED
        return result

    def _bind_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._loop_thread = threading.get_ident()

    def _set_system_prompt(self, prompt: str) -> None:
        if prompt != self._system_prompt or self._system_message is None:
            self._system_prompt = prompt
            self._system_message = Message.system(prompt) if prompt else None
            self._system_chars = len(prompt)

    def _retry_policy(self) -> Any:
        source = self.config.retry_policy
        if self._retry_cached is None or source is not self._retry_source:
            if source is None:
                from ra.llm.retrying import RetryPolicy

                policy = RetryPolicy()
            else:
                policy = source
            self._retry_source = source
            self._retry_cached = retry_policy_with_events(self, policy)
        return self._retry_cached

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, state={self.state.value}, turns={len(self.history)})"


class _ToolEvents:
    """The pipeline's sink: tool progress becomes session events."""

    __slots__ = ("s",)

    def __init__(self, session: Session) -> None:
        self.s = session

    def tool_start(self, call: ToolCall) -> None:
        self.s._emit(E.TOOL_CALL_START, {"tool_name": call.name, "call_id": call.id, "arguments": call.arguments})

    def tool_output(self, call: ToolCall, stream: str, chunk: str) -> None:
        s = self.s
        data = {"tool_name": call.name, "call_id": call.id, "stream": stream, "delta": chunk}
        loop = s._loop
        if loop is not None and threading.get_ident() != s._loop_thread and not loop.is_closed():
            loop.call_soon_threadsafe(s._emit, E.TOOL_CALL_OUTPUT_DELTA, data)
        else:
            s._emit(E.TOOL_CALL_OUTPUT_DELTA, data)

    def tool_end(self, outcome: ToolCallOutcome) -> None:
        call = outcome.call
        data: dict[str, Any] = {
            "tool_name": call.name,
            "call_id": call.id,
            "output": outcome.full_output,
            "is_error": outcome.is_error,
            "truncated": outcome.truncated,
            "duration_ms": outcome.duration_ms,
        }
        if outcome.is_error:
            data["error"] = outcome.full_output
        if outcome.skipped:
            data["skipped"] = True
        if outcome.metadata:
            data["metadata"] = outcome.metadata
        self.s._emit(E.TOOL_CALL_END, data)
