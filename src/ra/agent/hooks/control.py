"""The hooks as a control: every hook event but PreToolUse, at its point of the seam.

PreToolUse hooks run first in the permission check (:mod:`ra.agent.permissions`), so that one
ordered decision covers hooks, rules, the mode and the host's callback.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ra.tools.pipeline import ToolCallOutcome

from ..config import StopReason
from ..controls.chain import Control
from ..controls.decisions import Admit, CancelCompaction, Continue, Stop
from ..events import WarningEvent
from ..history import ContextTurn
from ..permissions.tool_names import CLAUDE_TOOL_NAMES, names_of, rule_names_of
from ..result import EXIT_REASONS
from .registry import Hooks
from .types import (
    UNFIRED_EVENTS,
    HookEvent,
    HookInput,
    PostToolUseFailureInput,
    PostToolUseInput,
    PreCompactInput,
    SessionEndInput,
    SessionStartInput,
    StopInput,
    SubagentStartInput,
    SubagentStopInput,
    UserPromptSubmitInput,
    common_fields,
)

if TYPE_CHECKING:
    from ra.llm.types import Message
    from ra.tools.registry import RegisteredTool

    from ..compaction.plan import CompactionPlan
    from ..state import RunState

__all__ = ["HooksControl"]


class HooksControl(Control):
    """Serves every hook event except PreToolUse (which the permission check runs first)."""

    # Not inherited as such: a subagent's session builds its own from its parent's hooks
    # (``ra.agent.session.builtin_controls``).

    __slots__ = ("hooks",)

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks

    async def session_start(self, run: RunState) -> None:
        if run.agent_id is None:
            unfired = sorted(e.value for e in UNFIRED_EVENTS if self.hooks.for_event(e))
            if unfired:
                run.emit(
                    WarningEvent(
                        "hook_never_fires",
                        f"hooks for {', '.join(unfired)} are configured, but ra has no such moment: they never run",
                        {"events": unfired},
                    )
                )
            for problem in uncovered_tools(self.hooks, run.profile.tool_registry.names()):
                run.emit(WarningEvent("hook_misses_tool", problem, {}))
        result = await self.hooks.run(run, SessionStartInput(source=run.start_source, **common_fields(run)))
        if result is not None and result.additional_context:
            _add_context(run, result.additional_context, HookEvent.SESSION_START)

    async def input_start(self, run: RunState, text: str) -> Stop | Admit | None:
        result = await self.hooks.run(run, UserPromptSubmitInput(prompt=text, **common_fields(run)))
        if result is None:
            return None
        if result.decision == "deny" or result.stop:
            why = result.stop_reason or result.reason or "a UserPromptSubmit hook refused the input"
            return Stop(StopReason.INTERRUPTED, why)
        if result.additional_context:
            # Recorded by the loop after the prompt, once every control admitted it.
            return Admit(result.additional_context, source=HookEvent.USER_PROMPT_SUBMIT.value)
        return None

    async def after_tool(
        self, run: RunState, outcome: ToolCallOutcome, tool: RegisteredTool | None
    ) -> ToolCallOutcome | None:
        if outcome.skipped or outcome.denied:
            return None  # it never ran
        call = outcome.call
        event = HookEvent.POST_TOOL_USE_FAILURE if outcome.is_error else HookEvent.POST_TOOL_USE
        if not self.hooks.matching(event, names_of(call.name)):
            return None  # nothing to ask: no input is built
        common = common_fields(run)
        data: HookInput
        if outcome.is_error:
            data = PostToolUseFailureInput(
                tool_name=call.name,
                tool_input=dict(call.arguments),
                tool_use_id=call.id,
                error=outcome.full_output,
                **common,
            )
        else:
            data = PostToolUseInput(
                tool_name=call.name,
                tool_input=dict(call.arguments),
                tool_use_id=call.id,
                tool_response=_tool_response(outcome),
                output=outcome.full_output,
                **common,
            )
        result = await self.hooks.run(run, data)
        if result is None:
            return None
        content, full = outcome.content, outcome.full_output
        if result.updated_output is not None:
            content = full = result.updated_output
        note = result.additional_context
        if result.decision == "deny" and result.reason:
            note = "\n\n".join(n for n in (result.reason, note) if n)
        if note:
            content = f"{content}\n\n{note}" if content else note
        interrupt = outcome.interrupt or result.stop
        if content is outcome.content and full is outcome.full_output and interrupt == outcome.interrupt:
            return None
        return replace(outcome, content=content, full_output=full, interrupt=interrupt)

    async def on_stop(self, run: RunState, answer: str) -> Continue | None:
        """Stop hooks - SubagentStop ones when this session is a subagent - may send it on."""
        common = common_fields(run)
        data: HookInput
        if run.agent_id is not None:
            data = SubagentStopInput(
                stop_hook_active=run.stop_hook_active, stop_reason="completed", output=answer, **common
            )
        else:
            data = StopInput(stop_hook_active=run.stop_hook_active, last_assistant_message=answer, **common)
        result = await self.hooks.run(run, data)
        if result is None or result.decision != "deny" or not result.reason:
            return None
        run.stop_hook_active = True
        return Continue(f"You are not done yet: {result.reason}")

    async def before_prune(self, run: RunState, messages: list[Message]) -> None:
        # Pruning cannot be refused (the provider already refused the context): observe only.
        await self.hooks.run(run, PreCompactInput(trigger="auto", **common_fields(run)))

    async def before_compact(self, run: RunState, plan: CompactionPlan) -> CancelCompaction | None:
        """PreCompact hooks, as Claude Code runs them: ``trigger`` is "manual" for
        ``Session.compact()`` and "auto" otherwise (the matcher sees the same), with the caller's
        ``custom_instructions``. A hook blocks the compaction with exit status 2 (stderr says why),
        ``"decision": "block"`` or ``"continue": false``."""
        trigger = "manual" if plan.trigger == "manual" else "auto"
        data = PreCompactInput(trigger=trigger, custom_instructions=plan.instructions, **common_fields(run))
        result = await self.hooks.run(run, data)
        if result is None or (result.decision != "deny" and not result.stop):
            return None
        why = result.reason or result.stop_reason or result.system_message or "a PreCompact hook blocked the compaction"
        return CancelCompaction(why)

    async def session_end(self, run: RunState, reason: str) -> None:
        last = run.last_stop_reason
        exit_reason = None if last is None else EXIT_REASONS[last]
        await self.hooks.run(run, SessionEndInput(reason=reason, exit_reason=exit_reason, **common_fields(run)))

    async def subagent_start(self, run: RunState, agent_id: str, agent_type: str | None, task: str) -> None:
        common = {**common_fields(run), "agent_id": agent_id, "agent_type": agent_type}
        await self.hooks.run(run, SubagentStartInput(prompt=task, **common))


def _tool_response(outcome: ToolCallOutcome) -> str | dict[str, Any]:
    """``tool_response`` as Claude Code sends it: a shell tool's is an object with its stdout and
    stderr apart (and ra's ``exit_code``); other tools' is their output text."""
    meta = outcome.metadata
    if meta and isinstance(meta.get("stdout"), str) and isinstance(meta.get("stderr"), str):
        return {
            "stdout": meta["stdout"],
            "stderr": meta["stderr"],
            "interrupted": bool(meta.get("timed_out") or meta.get("aborted")),
            "isImage": False,
            "exit_code": meta.get("exit_code"),
        }
    return outcome.full_output


def _add_context(run: RunState, text: str, event: HookEvent) -> None:
    run.history.append(ContextTurn(text, source=event.value))


#: Events whose matcher is a tool name.
_TOOL_EVENTS = (HookEvent.PRE_TOOL_USE, HookEvent.POST_TOOL_USE, HookEvent.POST_TOOL_USE_FAILURE)


def uncovered_tools(hooks: Hooks, tool_names: Iterable[str]) -> list[str]:
    """A sentence for each tool hook whose matcher names what a tool of the session does but not
    the tool: ``Edit|Write`` (a Claude Code guard for file edits) does not match ``apply_patch``,
    ``Read`` does not match ``read_many_files`` - a hook is told a tool's own name and Claude
    Code's one name for it, and these have no Claude Code counterpart. The hook would never see
    those calls, so the session says so once instead."""
    problems: list[str] = []
    names = sorted(tool_names)
    for event in _TOOL_EVENTS:
        for hook in hooks.for_event(event):
            pattern = hook._pattern
            if pattern is None:
                continue
            missed = [
                name
                for name in names
                if name not in CLAUDE_TOOL_NAMES  # a tool with a Claude Code name of its own is matched by it
                and not hook.matches(names_of(name))
                and any(pattern.fullmatch(alias) for alias in rule_names_of(name)[1:])
            ]
            if missed:
                problems.append(
                    f"the {event.value} hook {hook.name!r} with matcher {hook.matcher!r} does not run for "
                    f"{', '.join(missed)}, which do what the matcher names (their input has other fields); "
                    f"add {'|'.join(missed)} to the matcher if it should"
                )
    return problems
