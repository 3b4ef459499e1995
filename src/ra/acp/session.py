"""One ACP session: a ra Session, the updates it streams, and the questions it asks the editor.

Events arrive synchronously (a session listener) and go through one queue to one sender task, so
the editor sees them in the order they happened, and a prompt's response is sent only after its
last update (:meth:`AcpSession.flush`). Permission questions go to ``session/request_permission``;
every answer that is not a clear "allow" denies, and so does an answer that arrives after the
turn was cancelled.

An ``update_plan`` call is held back until it ends: a successful one is sent as the editor's
``plan`` and not as a tool call; one that failed, was denied, or is asked about is shown as the
tool call it is.

A subagent's tool calls (its events reach the parent session as ``subagent_event``) are sent as
tool calls of their own while they run: ``tool_call`` / ``tool_call_update`` with the id
``AGENT:CALL`` (the agent id and the child's call id, so they never clash with the parent's),
a title that starts with the agent (``[explore agent-1a2b3c4d] grep TODO``), and ``_meta.ra``
naming the agent and the ``spawn_agent`` call that started it. A subagent's permission question
names the same id, so the editor asks about the call it shows. Its text and plan stay its own:
the parent reads its answer with ``wait``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acp.schema import PermissionOption, SessionMode, SessionModeState, ToolCallUpdate

from acp import helpers
from ra.agent.config import StopReason
from ra.agent.permissions.check import PermissionAllow, PermissionDeny
from ra.agent.permissions.rules import claude_mode, normalize_mode
from ra.tools.builtin.plan import PLAN_TOOL_NAME, plan_from_metadata

from .diffs import EditSnapshots
from .tools import tool_kind, tool_locations, tool_title
from .updates import (
    MAX_OUTPUT_CHARS,
    plan_update,
    tool_call_end,
    tool_call_output,
    tool_call_running,
    tool_call_start,
    tool_call_terminal,
    usage_update,
)

if TYPE_CHECKING:
    from ra.agent.events import SessionEvent
    from ra.agent.permissions.check import PermissionContext
    from ra.agent.session import Session

__all__ = ["MODES", "AcpSession", "mode_state"]

_log = logging.getLogger("ra.acp")

#: ACP mode ids (Claude Code's spellings, which ACP clients already show) -> name, description.
MODES: dict[str, tuple[str, str]] = {
    "default": ("Ask", "Reads run; edits and commands are asked about"),
    "acceptEdits": ("Accept edits", "Reads and edits run; commands are asked about"),
    "plan": ("Plan", "Read-only: edits and commands are refused; the answer is a plan"),
    "dontAsk": ("Don't ask", "Reads run; what would be asked is refused"),
    "bypassPermissions": ("Bypass permissions", "Everything runs without asking (deny rules still apply)"),
}

#: How often a running command's output is sent to the editor, at most.
OUTPUT_EVERY_S = 0.25

#: WARNING codes of opening a session from its record that the editor's user is told about (as
#: agent text after ``session/load``, ``session/resume`` or ``session/fork`` answers): which
#: "always allow" rules came back, and which recorded ones were refused.
NOTICE_CODES = frozenset({"permission_rules_restored", "permission_rule_refused"})

#: Option ids of a permission question.
ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE = "allow_once", "allow_always", "reject_once"


def mode_state(session: Session) -> SessionModeState:
    return SessionModeState(
        current_mode_id=claude_mode(session.permission_mode),
        available_modes=[SessionMode(id=k, name=n, description=d) for k, (n, d) in MODES.items()],
    )


def mode_of(mode_id: str) -> str:
    """ra's permission mode for an ACP mode id; ValueError for an id not offered."""
    if mode_id not in MODES:
        raise ValueError(f"unknown mode {mode_id!r}; the modes are {', '.join(MODES)}")
    return normalize_mode(mode_id)


@dataclass
class _Turn:
    """One ``session/prompt`` in progress."""

    cancelled: bool = False
    questions: set[asyncio.Future[Any]] = field(default_factory=set)
    finish_reason: str | None = None


class _Running:
    """Queue item: a call passed its checks and runs now."""

    __slots__ = ("call_id",)

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id


class _Terminal:
    """Queue item: a call's command runs in this editor terminal."""

    __slots__ = ("call_id", "terminal_id")

    def __init__(self, call_id: str, terminal_id: str) -> None:
        self.call_id = call_id
        self.terminal_id = terminal_id


class _Reveal:
    """Queue item: the editor is about to be asked about this call; show it if it was held back.
    (A queue item, not a direct change: the call's start may still be waiting in the queue.)"""

    __slots__ = ("call_id",)

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id


class AcpSession:
    """Owns the ra Session for one ACP session id (built by :mod:`ra.acp.agent`)."""

    def __init__(self, conn: Any, session_id: str, cwd: str, context_window: int) -> None:
        self.conn = conn
        self.id = session_id
        self.cwd = cwd
        self.context_window = context_window
        self.session: Session | None = None
        #: The editor's MCP servers for this session (kept to reopen it after a fatal error).
        self.mcp_servers: list[Any] | None = None
        self.turn: _Turn | None = None
        self.snapshots = EditSnapshots(self._running)
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._sender: asyncio.Task[None] | None = None
        self._remove_listener: Any = None
        #: Output of running calls so far (kept up to MAX_OUTPUT_CHARS), and when it was last sent.
        self._output: dict[str, list[str]] = {}
        self._output_sent: dict[str, float] = {}
        #: Calls whose command runs in an editor terminal (embedded: no text progress for them).
        self._in_terminal: set[str] = set()
        #: ``update_plan`` calls not shown to the editor yet: call id -> (tool name, arguments).
        self._held_plans: dict[str, tuple[str, Any]] = {}
        #: Subagents this session spawned: agent id -> the id of the ``spawn_agent`` call.
        self._spawned_by: dict[str, str] = {}
        #: What opening the session had to tell the user (NOTICE_CODES), until :meth:`send_notices`.
        self.notices: list[str] = []
        self._attaching = False

    # -- wiring ---------------------------------------------------------------------------------
    def attach(self, session: Session) -> None:
        self.session = session
        env = session.execution_env
        if hasattr(env, "on_terminal"):
            env.on_terminal = lambda call_id, terminal_id: self._queue.put_nowait(_Terminal(call_id, terminal_id))
        # The events of opening the session (before any prompt) are looked at once, for notices;
        # every later one goes to the editor through the queue.
        self._attaching = True
        try:
            self._remove_listener = session.add_listener(self._on_event, replay=True)
        finally:
            self._attaching = False
        self._sender = asyncio.get_running_loop().create_task(self._send_loop(), name=f"acp-updates-{self.id}")

    def _on_event(self, event: SessionEvent) -> None:
        if not self._attaching:
            self._queue.put_nowait(event)
        elif event.kind.value == "warning" and event.payload.code in NOTICE_CODES:
            self.notices.append(event.payload.message)

    async def send_notices(self) -> None:
        """Tell the user what opening the session from its record had to say (once)."""
        notices, self.notices = self.notices, []
        for notice in notices:
            await self.send(helpers.update_agent_message_text(f"ra: {notice}\n"))

    def _running(self, call_id: str) -> None:
        self._queue.put_nowait(_Running(call_id))

    async def send(self, update: Any) -> None:
        try:
            await self.conn.session_update(session_id=self.id, update=update)
        except Exception as exc:  # the editor went away: nothing to tell it
            _log.debug("session/update failed: %s", exc)

    async def flush(self, timeout: float = 30.0) -> None:
        """Wait until every update queued so far was sent."""
        marker: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(marker)
        try:
            await asyncio.wait_for(asyncio.shield(marker), timeout)
        except TimeoutError:
            _log.warning("session %s: updates not sent within %ss", self.id, timeout)

    async def _send_loop(self) -> None:
        while True:
            item = await self._queue.get()
            if isinstance(item, asyncio.Future):
                if not item.done():
                    item.set_result(None)
                continue
            try:
                update = self._update_for(item)
            except Exception:
                _log.exception("cannot describe an event for the editor")
                continue
            for one in update if isinstance(update, list) else (update,):
                if one is not None:
                    await self.send(one)

    def _update_for(self, item: Any) -> Any:
        """The update (or list of updates) to send for a queue item, or None."""
        if isinstance(item, _Reveal):
            held = self._held_plans.pop(item.call_id, None)
            return None if held is None else tool_call_start(item.call_id, held[0], held[1], self.cwd)
        if isinstance(item, _Running):
            return None if item.call_id in self._held_plans else tool_call_running(item.call_id)
        if isinstance(item, _Terminal):
            self._in_terminal.add(item.call_id)
            return tool_call_terminal(item.call_id, item.terminal_id)
        event: SessionEvent = item
        kind = event.kind.value
        p: Any = event.payload
        if kind == "assistant_text_delta":
            return helpers.update_agent_message_text(p.delta) if p.delta else None
        if kind == "assistant_reasoning_delta":
            return helpers.update_agent_thought_text(p.delta) if p.delta else None
        if kind == "assistant_text_end":
            if self.turn is not None:
                self.turn.finish_reason = p.finish_reason
            return None
        if kind == "tool_call_start":
            if p.tool_name == PLAN_TOOL_NAME:
                self._held_plans[p.call_id] = (p.tool_name, p.arguments)
                return None
            return tool_call_start(p.call_id, p.tool_name, p.arguments, self.cwd)
        if kind == "tool_call_output_delta":
            return None if p.call_id in self._in_terminal else self._output_update(p.call_id, p.delta)
        if kind == "subagent_event":
            return self._subagent_update(p)
        if kind == "tool_call_end":
            if isinstance(p.metadata, dict) and isinstance(p.metadata.get("agent_id"), str):
                self._spawned_by.setdefault(p.metadata["agent_id"], p.call_id)  # spawn_agent's answer
            self._in_terminal.discard(p.call_id)
            self._output.pop(p.call_id, None)
            self._output_sent.pop(p.call_id, None)
            end = getattr(self.session.execution_env if self.session is not None else None, "end_tool", None)
            if end is not None:
                end(p.call_id)  # a call cancelled before after_tool ran
            diffs = self.snapshots.diffs.pop(p.call_id, None)
            return self._end_updates(p, diffs)
        if kind == "usage":
            session = self.session
            cost = None if session is None or session.unpriced_calls else session.total_cost_usd
            used = p.usage.input_tokens + p.usage.output_tokens
            return usage_update(used, self.context_window, cost)
        return None

    def _subagent_update(self, p: Any) -> Any:
        """A subagent's tool call start, output or end as its own tool call (module doc); None
        for its other events. A grandchild's events arrive wrapped twice: the innermost agent
        names the call and the title (agent ids are unique); ``_meta`` has the whole path."""
        path = [p.agent_id]
        event = p.event
        while event.kind.value == "subagent_event":
            path.append(event.payload.agent_id)
            event = event.payload.event
        kind = event.kind.value
        if kind not in ("tool_call_start", "tool_call_output_delta", "tool_call_end"):
            return None
        c: Any = event.payload
        call_id = child_call_id(path[-1], c.call_id)
        if kind == "tool_call_output_delta":
            return self._output_update(call_id, c.delta)
        if kind == "tool_call_end":
            self._output.pop(call_id, None)
            self._output_sent.pop(call_id, None)
            return tool_call_end(call_id, c.output, c.is_error)
        start = tool_call_start(call_id, c.tool_name, c.arguments, self.cwd)
        meta: dict[str, Any] = {"agentId": path[-1], "agentPath": path}
        spawned_by = self._spawned_by.get(path[0])
        if spawned_by is not None:
            meta["parentToolCallId"] = spawned_by
        return start.model_copy(
            update={"title": f"[{self._agent_label(path[-1])}] {start.title}", "field_meta": {"ra": meta}}
        )

    def _agent_label(self, agent_id: str) -> str:
        """The agent as a title shows it: its type when it has one (a child of this session's), and its id."""
        handle = self.session.subagents.get(agent_id) if self.session is not None else None
        agent_type = getattr(handle, "agent_type", None)
        return f"{agent_type} {agent_id}" if isinstance(agent_type, str) and agent_type else agent_id

    def _end_updates(self, p: Any, diffs: Any) -> list[Any]:
        """A call's final update; for a plan call, the plan (and the call only when it failed or
        the editor was already shown it)."""
        held = self._held_plans.pop(p.call_id, None)
        plan = plan_from_metadata(p.metadata) if p.tool_name == PLAN_TOOL_NAME and not p.is_error else None
        if plan is not None and held is not None:
            return [plan_update(plan)]
        updates = [tool_call_end(p.call_id, p.output, p.is_error, diffs)]
        if held is not None:
            updates.insert(0, tool_call_start(p.call_id, held[0], held[1], self.cwd))
        if plan is not None:
            updates.append(plan_update(plan))
        return updates

    def _output_update(self, call_id: str, delta: str) -> Any:
        """A running command's output so far, at most every OUTPUT_EVERY_S seconds (the whole
        text each time: ACP's content replaces the call's content)."""
        chunks = self._output.setdefault(call_id, [])
        if sum(len(c) for c in chunks) < MAX_OUTPUT_CHARS:
            chunks.append(delta)
        now = time.monotonic()
        if now - self._output_sent.get(call_id, 0.0) < OUTPUT_EVERY_S:
            return None
        self._output_sent[call_id] = now
        return tool_call_output(call_id, "".join(chunks))

    # -- a turn ---------------------------------------------------------------------------------
    async def prompt(self, text: str, images: tuple[Any, ...]) -> tuple[str, Any, str | None]:
        """Run one input; ``(stop_reason, SubmitResult, note)``. ``note`` is a line for the
        editor when the input stopped at a limit ACP has no reason for."""
        session = self.session
        assert session is not None
        turn = self.turn = _Turn()
        await self.send_notices()  # a fork's, or a reopened session's, not sent yet
        try:
            result = await session.submit(text, images=images)
        finally:
            await self.flush()
            self.turn = None
        return _stop_reason(turn, result)

    def cancel(self) -> None:
        """``session/cancel``: questions in flight are withdrawn (denied) and the input stops."""
        turn = self.turn
        if turn is None:
            return
        turn.cancelled = True
        for question in list(turn.questions):
            question.cancel()
        if self.session is not None:
            self.session.interrupt()

    # -- permissions ----------------------------------------------------------------------------
    async def can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionAllow | PermissionDeny:
        turn = self.turn
        if turn is None or turn.cancelled:
            return PermissionDeny("The user cancelled this turn; the call was not run.")
        suggestion = context.suggestion
        options = [PermissionOption(option_id=ALLOW_ONCE, name="Allow", kind="allow_once")]
        if suggestion:
            options.append(
                PermissionOption(option_id=ALLOW_ALWAYS, name=f"Always allow {suggestion}", kind="allow_always")
            )
        options.append(PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once"))
        locations = tool_locations(tool_name, tool_input, self.cwd)
        # A subagent's call is shown under its own id (see _subagent_update): the question names it.
        call_id = (
            context.tool_use_id if context.agent_id is None else child_call_id(context.agent_id, context.tool_use_id)
        )
        title = tool_title(tool_name, tool_input)
        tool_call = ToolCallUpdate(
            tool_call_id=call_id,
            title=title if context.agent_id is None else f"[{self._agent_label(context.agent_id)}] {title}",
            kind=tool_kind(tool_name, tool_input),  # type: ignore[arg-type]
            status="pending",
            raw_input=tool_input,
            locations=locations or None,  # type: ignore[arg-type]
        )
        self._queue.put_nowait(_Reveal(call_id))
        await self.flush()  # the tool_call update first, then the question about it
        question = asyncio.ensure_future(
            self.conn.request_permission(session_id=self.id, tool_call=tool_call, options=options)
        )
        turn.questions.add(question)
        try:
            response = await question
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if question.cancelled() and (current is None or not current.cancelling()):
                return PermissionDeny("The user cancelled this turn; the call was not run.")
            raise
        except Exception as exc:
            return PermissionDeny(f"Denied: the editor did not answer the permission request ({exc}).")
        finally:
            turn.questions.discard(question)
        if turn.cancelled:
            return PermissionDeny("The user cancelled this turn; the call was not run.")
        outcome = response.outcome
        if outcome.outcome != "selected":
            return PermissionDeny("The user dismissed the permission request; the call was not run.")
        option = outcome.option_id
        if option == ALLOW_ONCE:
            return PermissionAllow()
        if option == ALLOW_ALWAYS and suggestion:
            return PermissionAllow(always=True)
        if option == REJECT_ONCE:
            return PermissionDeny("The user rejected this tool call in the editor; it was not run.")
        return PermissionDeny(f"Denied: the editor answered with an option that was not offered ({option!r}).")

    # -- end ------------------------------------------------------------------------------------
    async def close(self) -> None:
        session = self.session
        if session is not None:
            await session.close()
        await self.flush(timeout=5.0)
        if self._remove_listener is not None:
            self._remove_listener()
        if self._sender is not None:
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)


def child_call_id(agent_id: str, call_id: str) -> str:
    """The id a subagent's tool call has in the editor: its agent's id and its own."""
    return f"{agent_id}:{call_id}"


def _stop_reason(turn: _Turn, result: Any) -> tuple[str, Any, str | None]:
    reason = result.stop_reason
    if turn.cancelled or reason is StopReason.INTERRUPTED:
        return "cancelled", result, None
    if reason is StopReason.COMPLETED:
        return ("refusal" if turn.finish_reason == "content_filter" else "end_turn"), result, None
    if reason is StopReason.MAX_TOKENS:
        return "max_tokens", result, None
    if reason in (StopReason.TURN_LIMIT, StopReason.ROUND_LIMIT):
        return "max_turn_requests", result, None
    if reason is StopReason.TIME_LIMIT:
        return "end_turn", result, "ra: the time limit for one prompt was reached; the turn was stopped."
    if reason is StopReason.BUDGET_LIMIT:
        return "end_turn", result, "ra: the spending limit (max_budget_usd) was reached; the turn was stopped."
    if reason is StopReason.CONTEXT_OVERFLOW:
        return "end_turn", result, "ra: the conversation no longer fits the model's context window."
    return "error", result, None
