"""The permission check: one control that decides every tool call, in the order
:mod:`ra.agent.permissions` documents (hooks, deny rules, ask rules, the mode, allow rules, ask)."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ra.env.base import local_paths
from ra.tools.pipeline import Allow, Deny
from ra.tools.registry import ToolEffect

from ..aio import maybe_await
from ..controls.chain import Control
from ..events import PermissionDenied, WarningEvent
from ..hooks.registry import HookFailed, Hooks
from ..hooks.types import HookEvent, HookResult, PreToolUseInput, common_fields
from .rules import CallFacts, PermissionMode, Rule, normalize_mode, parse_rules, rules_for, validate_rules
from .shell_words import runs_what_follows
from .tool_names import names_of

if TYPE_CHECKING:
    from ra.llm.types import ToolCall
    from ra.tools.registry import RegisteredTool

    from ..state import RunState

__all__ = [
    "CanUseTool",
    "DenialSource",
    "PermissionAllow",
    "PermissionContext",
    "PermissionDenial",
    "PermissionDeny",
    "PermissionMode",
    "Permissions",
    "Rule",
    "normalize_mode",
    "parse_rules",
    "suggested_rule",
]

_log = logging.getLogger("ra.agent.permissions")

#: What denied a call (``PermissionDenial.source``, the PERMISSION_DENIED event's ``source``).
DenialSource = Literal["hook", "rule", "mode", "callback", "no_prompt"]

# -- the host's callback -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PermissionAllow:
    """Run the call (with ``updated_input`` instead of the model's, when given). ``always``: allow
    calls like this one for the rest of the session without asking (``context.suggestion``)."""

    updated_input: dict[str, Any] | None = None
    always: bool = False


@dataclass(frozen=True, slots=True)
class PermissionDeny:
    """Do not run the call; the model reads ``message``. ``interrupt`` also ends the input."""

    message: str = "The user denied this tool call."
    interrupt: bool = False


@dataclass(frozen=True, slots=True)
class PermissionContext:
    """What the host's callback is told besides the tool name and input."""

    tool_use_id: str
    #: The tool's declared effect ("read", "edit", "execute", ...; undeclared counts as "execute").
    effect: str
    #: Why this call is asked about, in words.
    reason: str
    mode: str
    session_id: str
    agent_id: str | None = None
    _facts: Callable[[], CallFacts | None] | None = field(default=None, repr=False, compare=False)
    _tool_name: str = field(default="", repr=False, compare=False)

    @property
    def suggestion(self) -> str | None:
        """The rule that ``PermissionAllow(always=True)`` adds, e.g. ``shell(npm test:*)`` (worked
        out when asked for: reading a command line is the costly part of a check)."""
        facts = self._facts() if self._facts is not None else None
        return None if facts is None else suggested_rule(self._tool_name, facts)


CanUseTool = Callable[
    [str, dict[str, Any], PermissionContext],
    "PermissionAllow | PermissionDeny | Awaitable[PermissionAllow | PermissionDeny]",
]


@dataclass(frozen=True, slots=True)
class PermissionDenial:
    """One denied call (``Session.permission_denials``; ``permission_denials`` of a result message)."""

    tool_name: str
    tool_use_id: str
    tool_input: dict[str, Any]
    reason: str
    #: What denied it; "no_prompt": it was to be asked, with no callback to answer.
    source: DenialSource


# -- the control ------------------------------------------------------------------------------------

_SAFE = (ToolEffect.READ, ToolEffect.NETWORK, ToolEffect.NONE)


class Permissions(Control):
    """The permission check for every tool call (installed in every session)."""

    # Not inherited as such: a subagent's session builds its own from its parent's hooks and
    # callback (``ra.agent.session.builtin_controls``).

    __slots__ = ("can_use_tool", "hooks")

    def __init__(self, hooks: Hooks | None = None, can_use_tool: CanUseTool | None = None) -> None:
        self.hooks = hooks
        self.can_use_tool = can_use_tool

    async def session_start(self, run: RunState) -> None:
        # A rule that names no tool of the session would match nothing: said once, as a WARNING
        # event and in the log (the ``ra`` command refuses such a rule given as a flag). A
        # subagent's narrower tool list is not a reason to warn again.
        if run.depth > 0:
            return None
        config = run.config
        names = run.profile.tool_registry.names()
        problems: list[str] = []
        for key in ("allowed_tools", "disallowed_tools", "ask_tools"):
            problems.extend(validate_rules(getattr(config, key), names, source=key))
        for problem in problems:
            _log.warning("%s", problem)
            run.emit(WarningEvent("permission_rule", problem))
        return None

    async def before_step(self, run: RunState) -> None:
        # set_permission_mode() takes effect here: at the next model call, never mid-round.
        pending = run.pending_permission_mode
        if pending is not None:
            run.permission_mode = pending
            run.pending_permission_mode = None
        return None

    async def before_tool(self, run: RunState, call: ToolCall, tool: RegisteredTool) -> Allow | Deny | None:
        config = run.config
        hooks = self.hooks
        if not config.disallowed_tools and not config.ask_tools and run.permission_mode == "bypass" and not hooks:
            return None  # nothing to check: the common unattended case costs one comparison
        mode = run.permission_mode
        arguments = call.arguments

        # 1. PreToolUse hooks.
        verdict: HookResult | None = None
        if hooks and hooks.matching(HookEvent.PRE_TOOL_USE, names_of(call.name)):
            data = PreToolUseInput(
                tool_name=call.name,
                tool_input=dict(call.arguments),  # a copy: a hook rewrites with updated_input only
                tool_use_id=call.id,
                **common_fields(run),
            )
            try:
                verdict = await hooks.run(run, data)
            except HookFailed as exc:
                return self._deny(run, call, f"Denied: {exc}; the call was not run.", "hook")
            if verdict is not None:
                if verdict.decision == "deny" or verdict.stop:
                    reason = verdict.reason or verdict.stop_reason or "a PreToolUse hook denied this call"
                    return self._deny(run, call, reason, "hook", interrupt=verdict.stop)
                if verdict.updated_input is not None:
                    arguments = dict(verdict.updated_input)

        # Only the rules that name this tool are looked at (cached per tool name).
        name = call.name
        deny_rules = rules_for(config.disallowed_tools, name)
        ask_rules = rules_for(config.ask_tools, name)
        allow_rules = rules_for(config.allowed_tools, name)
        if run.session_rules:
            allow_rules = (*allow_rules, *(r for r in run.session_rules if r.names_tool(name)))
        facts = None
        if deny_rules or ask_rules or allow_rules:
            target = call if arguments is call.arguments else call.with_arguments(arguments)
            facts = CallFacts.of(target, run.env.working_directory(), local=local_paths(run.env))
        # 2. Deny rules.
        for rule in deny_rules:
            if rule.matches(facts, every_part=False):  # type: ignore[arg-type]
                where = (
                    " It names a file in what this call reads (a directory or pattern): read a narrower path."
                    if facts.scopes  # type: ignore[union-attr]
                    else ""
                )
                return self._deny(run, call, f"Denied by the rule {rule.text!r}.{where}", "rule")
        decision: str | None = None
        why = ""
        for rule in deny_rules:
            if rule.unsure(facts):  # type: ignore[arg-type]
                # ra cannot read what the command runs, so it cannot tell whether the deny rule
                # names it: asked (and denied when nobody can be asked), never just run.
                decision = "ask"
                why = f"the deny rule {rule.text!r} may match: what the command runs is only known when it runs"
                break
        # 3. Ask rules (and a hook's "ask").
        for rule in ask_rules if decision is None else ():
            if rule.matches(facts, every_part=False) or rule.unsure(facts):  # type: ignore[arg-type]
                decision, why = "ask", f"the rule {rule.text!r} asks for it"
                break
        if decision is None and verdict is not None and verdict.decision == "ask":
            decision, why = "ask", verdict.reason or "a PreToolUse hook asks for it"
        if decision is None and verdict is not None and verdict.decision == "allow":
            decision = "allow"
        effect = tool.effect or ToolEffect.EXECUTE
        # 4. The mode.
        if decision is None:
            if mode == "bypass" or effect in _SAFE or (mode == "accept_edits" and effect is ToolEffect.EDIT):
                decision = "allow"
            elif mode == "plan":
                return self._deny(run, call, _plan_denial(call.name, effect), "mode")
        # 5. Allow rules (and the session's "always" answers).
        if decision is None:
            for rule in allow_rules:
                if rule.matches(facts, every_part=True):  # type: ignore[arg-type]
                    decision = "allow"
                    break
        # 6. Ask.
        if decision is None:
            decision = "ask"
            why = f"{call.name} {'changes files' if effect is ToolEffect.EDIT else 'runs commands'} ({mode} mode)"
        if decision == "ask":
            return await self._ask(run, call, arguments, effect, why, facts)
        return Allow(arguments) if arguments is not call.arguments else None

    async def _ask(
        self,
        run: RunState,
        call: ToolCall,
        arguments: dict[str, Any],
        effect: ToolEffect,
        why: str,
        facts: CallFacts | None,
    ) -> Allow | Deny | None:
        mode = run.permission_mode
        if mode == "dont_ask":
            return self._deny(run, call, f"Not allowed: {why}, and nobody is asked in dont_ask mode.", "mode")
        callback = self.can_use_tool
        if callback is None:
            if mode == "plan" and effect.mutating:
                # Nobody to ask: plan mode stays read-only (an ask rule must not open it).
                return self._deny(run, call, _plan_denial(call.name, effect), "mode")
            # Nobody to ask: what would be asked is denied (fail closed), in every mode.
            return self._deny(
                run,
                call,
                f"Not allowed: {why}, and there is no one to ask (no can_use_tool callback). An allow rule, "
                "a PreToolUse hook or another permission mode can let calls like this run.",
                "no_prompt",
            )
        known: list[CallFacts] = [facts] if facts is not None else []

        def facts_of_call() -> CallFacts:
            if not known:
                target = call if arguments is call.arguments else call.with_arguments(arguments)
                known.append(CallFacts.of(target, run.env.working_directory(), local=local_paths(run.env)))
            return known[0]

        context = PermissionContext(
            tool_use_id=call.id,
            effect=effect.value,
            reason=why,
            mode=mode,
            session_id=run.session_id,
            agent_id=run.agent_id,
            _facts=facts_of_call,
            _tool_name=call.name,
        )
        try:
            answer = await maybe_await(callback(call.name, dict(arguments), context))
            if not isinstance(answer, PermissionAllow | PermissionDeny):
                raise TypeError(
                    f"can_use_tool returned {type(answer).__name__}; expected PermissionAllow or PermissionDeny"
                )
        except Exception as exc:  # fail closed, and recorded like every other denial
            why = f"{type(exc).__name__}: {exc}"
            return self._deny(
                run, call, f"Denied: the permission callback failed ({why}); the call was not run.", "callback"
            )
        if isinstance(answer, PermissionDeny):
            return self._deny(run, call, answer.message, "callback", interrupt=answer.interrupt)
        if answer.always:
            suggestion = context.suggestion
            if suggestion:
                # The one place a rule is added at run time: live at once, and recorded (the
                # Recorder writes ``granted_rules``) so that a resume gives it back.
                run.session_rules.append(Rule.parse(suggestion))
                run.granted_rules.append((suggestion, call.id))
        if answer.updated_input is not None:
            updated = dict(answer.updated_input)
            refused = self._deny_rewrite(run, call, updated)
            return refused if refused is not None else Allow(updated)
        return Allow(arguments) if arguments is not call.arguments else None

    def _deny_rewrite(self, run: RunState, call: ToolCall, updated: dict[str, Any]) -> Deny | None:
        """The deny rules again, on the input an "allow" answer rewrote the call to: the answer
        allows *this* call, it cannot lift a deny rule (nor a rule ra cannot read the command for:
        nobody is left to ask, so that is a denial too)."""
        deny_rules = rules_for(run.config.disallowed_tools, call.name)
        if not deny_rules:
            return None
        facts = CallFacts.of(call.with_arguments(updated), run.env.working_directory(), local=local_paths(run.env))
        for rule in deny_rules:
            if rule.matches(facts, every_part=False) or rule.unsure(facts):
                reason = f"Denied by the rule {rule.text!r}: the permission answer rewrote the call into one it denies."
                return self._deny(run, call, reason, "rule")
        return None

    @staticmethod
    def _deny(run: RunState, call: ToolCall, reason: str, source: DenialSource, *, interrupt: bool = False) -> Deny:
        denial = PermissionDenial(call.name, call.id, dict(call.arguments), reason, source)
        run.permission_denials.append(denial)
        run.emit(PermissionDenied(call.name, call.id, call.arguments, reason, source))
        return Deny(reason, interrupt=interrupt)


def _plan_denial(tool_name: str, effect: ToolEffect) -> str:
    what = "changes files" if effect is ToolEffect.EDIT else "runs commands or agents"
    return (
        f"Not allowed in plan mode: {tool_name} {what}, and plan mode is read-only. Read and search "
        "to build the plan; changes can be made once the plan is approved."
    )


def suggested_rule(tool_name: str, facts: CallFacts) -> str | None:
    """The rule an "always allow" answer adds: the command's first two words (``npm test:*``), or
    the tool (None: no rule would match this call again). A resume checks a recorded rule against
    it.

    Where the two words run whatever comes after them (:func:`runs_what_follows`: ``bash -c``,
    ``sudo rm``, ``uv run``, ``git -c``), a prefix would allow anything (``bash -c:*``), so the
    rule is the whole command instead, quoted, and only when it matches this call again - none
    where a word holds a ``*``, which a rule reads as "any text"."""
    if facts.commands is not None:
        if facts.opaque_command or len(facts.commands) != 1:
            return None
        command = facts.commands[0]
        if command.unreadable or command.assignments or command.writes:
            return None  # no rule without them would match this call again
        words = command.words
        if not words:
            return None
        if not runs_what_follows(words):
            return f"{tool_name}({' '.join(words[:2])}:*)"
        if any("*" in word for word in words):
            return None
        # Quoted as the shell reads it, and offered only if it matches this very call again.
        exact = f"{tool_name}({shlex.join(words)})"
        try:
            return exact if Rule.parse(exact).matches(facts, every_part=True) else None
        except ValueError:
            return None
    return tool_name
