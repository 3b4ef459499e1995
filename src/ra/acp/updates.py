"""ra's session events and recorded history as ACP ``session/update`` payloads.

One function per direction: :func:`tool_call_start` / :func:`tool_call_end` for a live call,
:func:`history_updates` for ``session/load``, which replays a recorded conversation as the
same messages a live turn sends (user chunks, agent chunks, thoughts, tool calls and results).

A successful ``update_plan`` call is shown as ACP's ``plan`` update (:func:`plan_update`) instead
of a tool call: the editor's plan view is what the call is for. ra's plan has no priorities, so
every entry is ``medium``; the statuses are ACP's own three.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from acp.schema import (
    AgentPlanUpdate,
    Cost,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UsageUpdate,
)

from acp import helpers

from .tools import tool_kind, tool_locations, tool_title

if TYPE_CHECKING:
    from ra.agent.history import History
    from ra.llm.types import ToolCall
    from ra.tools.builtin.plan import Plan

    from .diffs import FileDiff

__all__ = ["history_updates", "plan_update", "tool_call_end", "tool_call_start", "usage_update"]

#: The most of a tool's output sent as its content (the model saw at most its own truncated view).
MAX_OUTPUT_CHARS = 64_000


def _locations(name: str, arguments: dict[str, Any], cwd: str) -> list[ToolCallLocation] | None:
    found = [ToolCallLocation(**entry) for entry in tool_locations(name, arguments, cwd)]
    return found or None


def tool_call_start(call_id: str, name: str, arguments: Any, cwd: str, status: str = "pending") -> ToolCallStart:
    args = arguments if isinstance(arguments, dict) else {}
    return ToolCallStart(
        session_update="tool_call",
        tool_call_id=call_id,
        title=tool_title(name, args),
        kind=tool_kind(name, args),  # type: ignore[arg-type]
        status=status,  # type: ignore[arg-type]
        locations=_locations(name, args, cwd),
        raw_input=arguments,
    )


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        text = output
    else:
        try:
            text = json.dumps(output, ensure_ascii=False)
        except (TypeError, ValueError):
            text = str(output)
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + f"\n[... {len(text) - MAX_OUTPUT_CHARS:,} more characters]"
    return text


def tool_call_end(call_id: str, output: Any, failed: bool, diffs: list[FileDiff] | None = None) -> ToolCallProgress:
    """The final update: ``completed`` or ``failed``; an edit's content is its diffs, anything
    else's (and a failed edit's) its output as text."""
    content: list[Any] = []
    if diffs and not failed:
        content = [helpers.tool_diff_content(d.path, d.new_text, d.old_text) for d in diffs]
    else:
        text = _output_text(output)
        if text:
            content = [helpers.tool_content(helpers.text_block(text))]
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=call_id,
        status="failed" if failed else "completed",
        content=content or None,
        raw_output=_output_text(output) if output else None,
    )


def tool_call_output(call_id: str, text: str) -> ToolCallProgress:
    """A running call's output so far (its final update replaces it)."""
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=call_id,
        content=[helpers.tool_content(helpers.text_block(_output_text(text)))],
    )


def tool_call_terminal(call_id: str, terminal_id: str) -> ToolCallProgress:
    """The call's command runs in this editor terminal: the editor shows it live in the call."""
    return ToolCallProgress(
        session_update="tool_call_update", tool_call_id=call_id, content=[helpers.tool_terminal_ref(terminal_id)]
    )


def tool_call_running(call_id: str) -> ToolCallProgress:
    return ToolCallProgress(session_update="tool_call_update", tool_call_id=call_id, status="in_progress")


def usage_update(used: int, size: int, cost_usd: float | None) -> UsageUpdate:
    cost = Cost(amount=cost_usd, currency="USD") if cost_usd is not None else None
    return UsageUpdate(session_update="usage_update", used=max(0, used), size=max(0, size), cost=cost)


def plan_update(plan: Plan) -> AgentPlanUpdate:
    """The whole plan as one ``plan`` update (each one replaces the editor's plan)."""
    entries = [helpers.plan_entry(s.step, priority="medium", status=s.status) for s in plan.steps]  # type: ignore[arg-type]
    return helpers.update_plan(entries)


def history_updates(history: History, cwd: str) -> Iterator[Any]:
    """The recorded conversation as the updates a live session sent (for ``session/load``).

    A plan call waits for its result, as it does live: a successful one becomes its ``plan``
    update, so the last plan the editor receives is the session's latest; any other becomes an
    ordinary (failed) tool call."""
    from ra.agent.history import AssistantTurn, CompactionTurn, SteeringTurn, ToolResultsTurn, UserTurn
    from ra.tools.builtin.plan import PLAN_TOOL_NAME, recorded_plan

    held: dict[str, ToolCall] = {}
    for turn in history:
        if isinstance(turn, UserTurn | SteeringTurn):
            if turn.content:
                yield helpers.update_user_message_text(turn.content)
        elif isinstance(turn, AssistantTurn):
            if turn.reasoning:
                yield helpers.update_agent_thought_text(turn.reasoning)
            if turn.content:
                yield helpers.update_agent_message_text(turn.content)
            for call in turn.tool_calls:
                if call.name == PLAN_TOOL_NAME:
                    held[call.id] = call
                else:
                    yield tool_call_start(call.id, call.name, call.arguments, cwd)
        elif isinstance(turn, ToolResultsTurn):
            for result in turn.results:
                call = held.pop(result.tool_call_id, None)
                plan = recorded_plan(call, result) if call is not None else None
                if plan is not None:
                    yield plan_update(plan)
                    continue
                if call is not None:
                    yield tool_call_start(call.id, call.name, call.arguments, cwd)
                yield tool_call_end(result.tool_call_id, result.content, result.is_error)
        elif isinstance(turn, CompactionTurn):
            yield helpers.update_agent_thought_text(f"(earlier conversation summarised)\n{turn.summary}")
    for call in held.values():  # calls the record has no result for (the session stopped in between)
        yield tool_call_start(call.id, call.name, call.arguments, cwd)
