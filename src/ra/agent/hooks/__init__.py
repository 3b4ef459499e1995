"""Hooks: the host's callables at the moments the Claude Agent SDK names, as one control.

A hook is a sync or async callable that receives a typed input (:class:`PreToolUseInput`, ...)
and returns ``None`` (no opinion) or a :class:`HookResult` - or a dict in Claude Code's hook JSON
shape, which is parsed the same way as a command hook's stdout (:meth:`HookResult.from_json`)::

    hooks = Hooks()

    @hooks.on(HookEvent.PRE_TOOL_USE, matcher="shell|Bash")
    def no_force_push(event: PreToolUseInput) -> HookResult | None:
        if "push --force" in event.tool_input.get("command", ""):
            return HookResult.deny("Force-pushing is not allowed here; push a new branch instead.")
        return None

    session = Session(profile, env, client, config, hooks=hooks)

What a result can do, by event:

=======================  =====================================================================
event                    effect of the result
=======================  =====================================================================
SessionStart             ``additional_context`` goes into the conversation before the first input
UserPromptSubmit         ``deny`` refuses the input (the reason is reported, the model never
                         sees it); ``additional_context`` is added after the prompt
PreToolUse               ``deny`` (the reason is the tool result the model reads), ``allow``
                         (skips the permission prompt, never a deny rule), ``ask`` (always asks),
                         ``updated_input`` (the arguments the tool runs with)
PostToolUse              ``updated_output`` replaces the output; ``additional_context`` (or a
PostToolUseFailure       ``deny`` with a reason) is appended to what the model reads
Stop / SubagentStop      ``deny`` with a reason: the model is told it is not done and goes on
                         (SubagentStop fires instead of Stop in a subagent's session)
PreCompact               ``deny`` (``"decision": "block"``, exit 2) or ``stop`` cancels a
                         compaction (``context_overflow="compact"``, ``Session.compact()``);
                         before pruning (``"prune"``) it only observes
SessionEnd,              observe only (``system_message`` is still reported)
SubagentStart
=======================  =====================================================================

Every other event name Claude Code has (``Notification``, ``PermissionRequest``, ...) is accepted
but never fires; a session with such hooks says so once in a WARNING.

A UserPromptSubmit, PreToolUse, PostToolUse or PostToolUseFailure result may set ``stop=True``
(Claude's ``"continue": false``): the input ends (stop reason ``interrupted``; after a tool, once
its round is answered) and ``stop_reason`` is reported in the ``HOOK`` event. Other events ignore
it. ``system_message`` is for the user: it is reported in a ``HOOK`` event, never sent to the
model.

Hooks of one event run in registration order, one after another (unlike the Claude SDK, which
runs matchers concurrently: with sequential hooks the order is part of the policy, and a
rewritten input or output passes from one hook to the next). The first ``deny`` wins. A hook
that raises or times out never crashes the session: in PreToolUse it denies the call (fail
closed), anywhere else it is reported as a WARNING and ignored. An answer with a field ra cannot
read (an unknown decision word, a wrong type) is a WARNING too, and denies a PreToolUse call; a
command hook's exit status other than 0 and 2 is Claude Code's non-blocking error (a WARNING,
no say).

``matcher`` is a regular expression (full match) on what the event is about: the tool name for
tool events (ra's name or Claude Code's, see :mod:`ra.agent.permissions.tool_names`), the source for
SessionStart, the trigger for PreCompact, the agent type for subagent events. ``None``, ``""``
and ``"*"`` match everything.

PreToolUse hooks run first in the permission check (:mod:`ra.agent.permissions`); the other
events are served by :class:`HooksControl`. Subagents inherit their parent's hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Hook": ".registry",
    "HookFailed": ".registry",
    "Hooks": ".registry",
    "HooksControl": ".control",
    "CommandHook": ".command",
    "CommandHookError": ".command",
    "hooks_from_config": ".command",
    "Decision": ".types",
    "HookCallable": ".types",
    "HookEvent": ".types",
    "HookInput": ".types",
    "HookResult": ".types",
    "PostToolUseFailureInput": ".types",
    "PostToolUseInput": ".types",
    "PreCompactInput": ".types",
    "PreToolUseInput": ".types",
    "SessionEndInput": ".types",
    "SessionStartInput": ".types",
    "StopInput": ".types",
    "SubagentStartInput": ".types",
    "SubagentStopInput": ".types",
    "UserPromptSubmitInput": ".types",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from .command import CommandHook, CommandHookError, hooks_from_config
    from .control import HooksControl
    from .registry import Hook, HookFailed, Hooks
    from .types import (
        Decision,
        HookCallable,
        HookEvent,
        HookInput,
        HookResult,
        PostToolUseFailureInput,
        PostToolUseInput,
        PreCompactInput,
        PreToolUseInput,
        SessionEndInput,
        SessionStartInput,
        StopInput,
        SubagentStartInput,
        SubagentStopInput,
        UserPromptSubmitInput,
    )
