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
PreCompact, SessionEnd,  observe only (``system_message`` is still reported)
SubagentStart
=======================  =====================================================================

A UserPromptSubmit, PreToolUse, PostToolUse or PostToolUseFailure result may set ``stop=True``
(Claude's ``"continue": false``): the input ends (stop reason ``interrupted``; after a tool, once
its round is answered) and ``stop_reason`` is reported in the ``HOOK`` event. Other events ignore
it. ``system_message`` is for the user: it is reported in a ``HOOK`` event, never sent to the
model.

Hooks of one event run in registration order, one after another (unlike the Claude SDK, which
runs matchers concurrently: with sequential hooks the order is part of the policy, and a
rewritten input or output passes from one hook to the next). The first ``deny`` wins. A hook
that raises or times out never crashes the session: in PreToolUse it denies the call (fail
closed), anywhere else it is reported as a WARNING and ignored.

``matcher`` is a regular expression (full match) on what the event is about: the tool name for
tool events (ra's name or Claude Code's, see :mod:`ra.agent.tool_names`), the source for
SessionStart, the trigger for PreCompact, the agent type for subagent events. ``None``, ``""``
and ``"*"`` match everything.

PreToolUse hooks run first in the permission check (:mod:`ra.agent.permissions`); the other
events are served by :class:`HooksControl`. Subagents inherit their parent's hooks.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ra.tools.pipeline import ToolCallOutcome

from .config import StopReason
from .controls import Continue, Control, Stop
from .events import HookRan, WarningEvent
from .history import ContextTurn
from .result import EXIT_REASONS
from .tool_names import claude_name, names_of

if TYPE_CHECKING:
    from ra.llm.types import Message
    from ra.tools.registry import RegisteredTool

    from .state import RunState

__all__ = [
    "Hook",
    "HookEvent",
    "HookInput",
    "HookResult",
    "Hooks",
    "HooksControl",
    "PostToolUseFailureInput",
    "PostToolUseInput",
    "PreCompactInput",
    "PreToolUseInput",
    "SessionEndInput",
    "SessionStartInput",
    "StopInput",
    "SubagentStartInput",
    "SubagentStopInput",
    "UserPromptSubmitInput",
]


class HookEvent(StrEnum):
    """The hook events, spelled as Claude Code's settings spell them."""

    SESSION_START = "SessionStart"
    USER_PROMPT_SUBMIT = "UserPromptSubmit"
    PRE_TOOL_USE = "PreToolUse"
    POST_TOOL_USE = "PostToolUse"
    POST_TOOL_USE_FAILURE = "PostToolUseFailure"
    STOP = "Stop"
    SUBAGENT_START = "SubagentStart"
    SUBAGENT_STOP = "SubagentStop"
    PRE_COMPACT = "PreCompact"
    SESSION_END = "SessionEnd"


# -- inputs ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HookInput:
    """What every hook input carries."""

    event: ClassVar[HookEvent]
    session_id: str
    cwd: str
    permission_mode: str = "default"
    #: Set when the event comes from a subagent's session (its agent id and type).
    agent_id: str | None = None
    agent_type: str | None = None
    #: The session's transcript file, when the session is persisted (None until then).
    transcript_path: str | None = None

    @property
    def matcher_subject(self) -> tuple[str, ...]:
        """What ``matcher`` is matched against."""
        return ()

    def to_json(self) -> dict[str, Any]:
        """The input as Claude Code's hook JSON (what a command hook reads on stdin)."""
        data: dict[str, Any] = {"hook_event_name": self.event.value}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name in ("agent_id", "agent_type"):
                continue
            data[f.name] = value
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStartInput(HookInput):
    event = HookEvent.SESSION_START
    #: "startup", "resume" or "fork".
    source: str = "startup"

    @property
    def matcher_subject(self) -> tuple[str, ...]:
        return (self.source,)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserPromptSubmitInput(HookInput):
    event = HookEvent.USER_PROMPT_SUBMIT
    prompt: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _ToolInput(HookInput):
    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str

    @property
    def matcher_subject(self) -> tuple[str, ...]:
        return names_of(self.tool_name)

    def to_json(self) -> dict[str, Any]:
        data = HookInput.to_json(self)
        data["tool_name"] = claude_name(self.tool_name)
        data["ra_tool_name"] = self.tool_name
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class PreToolUseInput(_ToolInput):
    event = HookEvent.PRE_TOOL_USE


@dataclass(frozen=True, slots=True, kw_only=True)
class PostToolUseInput(_ToolInput):
    event = HookEvent.POST_TOOL_USE
    #: The tool's full output.
    tool_response: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PostToolUseFailureInput(_ToolInput):
    event = HookEvent.POST_TOOL_USE_FAILURE
    error: str
    is_interrupt: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StopInput(HookInput):
    event = HookEvent.STOP
    #: True when a Stop hook already made the model go on during this input.
    stop_hook_active: bool = False
    #: The answer the model wants to end with.
    last_assistant_message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentStartInput(HookInput):
    event = HookEvent.SUBAGENT_START
    prompt: str = ""

    @property
    def matcher_subject(self) -> tuple[str, ...]:
        return (self.agent_type or "",)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentStopInput(HookInput):
    event = HookEvent.SUBAGENT_STOP
    stop_hook_active: bool = False
    #: How the subagent's run ended ("completed", "turn_limit", ...) and its last answer.
    stop_reason: str = ""
    output: str = ""

    @property
    def matcher_subject(self) -> tuple[str, ...]:
        return (self.agent_type or "",)


@dataclass(frozen=True, slots=True, kw_only=True)
class PreCompactInput(HookInput):
    event = HookEvent.PRE_COMPACT
    #: "auto" (the context overflowed) or "manual".
    trigger: str = "auto"
    custom_instructions: str | None = None

    @property
    def matcher_subject(self) -> tuple[str, ...]:
        return (self.trigger,)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEndInput(HookInput):
    event = HookEvent.SESSION_END
    reason: str
    #: Why the last input stopped, as the Go-port spec's exit reason (``end_turn``, ``max_turns``,
    #: ``error_max_budget_usd``, ``max_tokens``, ``interrupted``, ``aborted``, ``error``).
    exit_reason: str | None = None


# -- results -----------------------------------------------------------------------------------------

Decision = Literal["allow", "deny", "ask"]


@dataclass(frozen=True, slots=True)
class HookResult:
    """A hook's answer; every field is optional (see the table in the module docstring)."""

    decision: Decision | None = None
    #: Why: the model reads it for a PreToolUse deny and a Stop deny.
    reason: str | None = None
    updated_input: dict[str, Any] | None = None
    updated_output: str | None = None
    additional_context: str | None = None
    #: End the input (Claude's ``"continue": false``); ``stop_reason`` says why.
    stop: bool = False
    stop_reason: str | None = None
    #: For the user, never the model (reported in the HOOK event).
    system_message: str | None = None

    @classmethod
    def deny(cls, reason: str) -> HookResult:
        return cls("deny", reason)

    @classmethod
    def allow(cls, reason: str | None = None, *, updated_input: dict[str, Any] | None = None) -> HookResult:
        return cls("allow", reason, updated_input=updated_input)

    @classmethod
    def ask(cls, reason: str | None = None) -> HookResult:
        return cls("ask", reason)

    @classmethod
    def from_json(cls, event: HookEvent, data: Mapping[str, Any]) -> HookResult:
        """Parse Claude Code's hook output JSON (also what a Python hook may return as a dict).

        Understood: ``continue``/``stopReason``, ``systemMessage``, ``decision``
        (``"block"``/``"approve"``, and ``allow``/``deny``/``ask``) with ``reason``, and
        ``hookSpecificOutput`` with ``permissionDecision``, ``permissionDecisionReason``,
        ``updatedInput``, ``additionalContext``, ``updatedToolOutput``/``updatedMCPToolOutput``.
        Anything else is ignored.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"hook output must be a JSON object, got {type(data).__name__}")
        specific = data.get("hookSpecificOutput")
        specific = specific if isinstance(specific, Mapping) else {}
        decision: Decision | None = None
        reason = _text(data.get("reason"))
        raw = specific.get("permissionDecision") or data.get("decision")
        if isinstance(raw, str):
            decision = {"block": "deny", "approve": "allow", "allow": "allow", "deny": "deny", "ask": "ask"}.get(
                raw.lower()
            )  # type: ignore[assignment]
        if specific.get("permissionDecisionReason") is not None:
            reason = _text(specific.get("permissionDecisionReason"))
        updated_input = specific.get("updatedInput")
        output = specific.get("updatedToolOutput", specific.get("updatedMCPToolOutput"))
        return cls(
            decision=decision,
            reason=reason,
            updated_input=dict(updated_input) if isinstance(updated_input, Mapping) else None,
            updated_output=None if output is None else (output if isinstance(output, str) else _json(output)),
            additional_context=_text(specific.get("additionalContext")),
            stop=data.get("continue") is False,
            stop_reason=_text(data.get("stopReason")),
            system_message=_text(data.get("systemMessage")),
        )


#: ``fn(input)``, sync or async, returning None, a HookResult or a dict in Claude Code's hook JSON shape.
HookCallable = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Hook:
    """One registered hook: the callable, its matcher and its timeout in seconds."""

    event: HookEvent
    callback: HookCallable
    matcher: str | None = None
    timeout: float = 60.0
    _pattern: re.Pattern[str] | None = field(default=None, repr=False, compare=False)

    def matches(self, subject: tuple[str, ...]) -> bool:
        if self._pattern is None or not subject:
            return True
        return any(self._pattern.fullmatch(s) is not None for s in subject)

    @property
    def name(self) -> str:
        return getattr(self.callback, "__name__", None) or type(self.callback).__name__


class Hooks:
    """The registered hooks, by event, in registration order."""

    __slots__ = ("_by_event", "_matching")

    def __init__(self) -> None:
        self._by_event: dict[HookEvent, list[Hook]] = {}
        #: (event, subject) -> the hooks whose matcher accepts it: matching is paid once per tool.
        self._matching: dict[tuple[HookEvent, tuple[str, ...]], list[Hook]] = {}

    def on(
        self,
        event: HookEvent | str,
        callback: HookCallable | None = None,
        *,
        matcher: str | None = None,
        timeout: float = 60.0,
    ) -> Any:
        """Register ``callback`` for ``event``; without ``callback``, a decorator."""
        kind = HookEvent(event)
        if timeout <= 0:
            raise ValueError(f"hook timeout must be > 0 seconds, got {timeout}")
        pattern = None
        if matcher not in (None, "", "*"):
            try:
                pattern = re.compile(matcher)  # type: ignore[arg-type]
            except re.error as exc:
                raise ValueError(f"hook matcher {matcher!r} is not a valid regular expression: {exc}") from None

        def register(fn: HookCallable) -> HookCallable:
            if not callable(fn):
                raise TypeError(f"a hook must be callable, got {type(fn).__name__}")
            self._by_event.setdefault(kind, []).append(Hook(kind, fn, matcher, float(timeout), pattern))
            self._matching.clear()
            return fn

        return register if callback is None else register(callback)

    def for_event(self, event: HookEvent) -> list[Hook]:
        return self._by_event.get(event, [])

    def matching(self, event: HookEvent, subject: tuple[str, ...]) -> list[Hook]:
        """The hooks of ``event`` whose matcher accepts ``subject``, in order (cached)."""
        key = (event, subject)
        found = self._matching.get(key)
        if found is None:
            found = self._matching[key] = [h for h in self._by_event.get(event, ()) if h.matches(subject)]
        return found

    def __bool__(self) -> bool:
        return any(self._by_event.values())

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_event.values())

    async def run(self, run: RunState, data: HookInput) -> HookResult | None:
        """Run the hooks of ``data.event`` that match, in order; combine their results.

        The first ``deny`` (or ``stop``) ends the chain. ``updated_input`` / ``updated_output``
        pass on to the next hook; ``additional_context`` strings are joined. A hook that fails
        raises :class:`HookFailed` for PreToolUse (the caller denies) and is reported as a
        WARNING otherwise.
        """
        hooks = self.matching(data.event, data.matcher_subject)
        if not hooks:
            return None
        combined: HookResult | None = None
        for hook in hooks:
            started = time.perf_counter()
            try:
                result = await _call(hook, data)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                message = _failure(hook, exc)
                run.emit(HookRan(data.event.value, hook.name, None, None, None, _ms(started), message))
                if data.event is HookEvent.PRE_TOOL_USE:
                    raise HookFailed(message) from exc
                run.emit(WarningEvent("hook_failed", message, {"hook": hook.name, "event": data.event.value}))
                continue
            if result is None:
                continue
            run.emit(
                HookRan(
                    data.event.value,
                    hook.name,
                    result.decision,
                    result.reason if result.reason is not None else result.stop_reason,
                    result.system_message,
                    _ms(started),
                    None,
                )
            )
            combined = result if combined is None else _merge(combined, result)
            if result.decision == "deny" or result.stop:
                break
            if result.updated_input is not None and isinstance(data, _ToolInput):
                data = replace(data, tool_input=result.updated_input)
            if result.updated_output is not None and isinstance(data, PostToolUseInput):
                data = replace(data, tool_response=result.updated_output)
        return combined


class HookFailed(Exception):
    """A PreToolUse hook raised or timed out: the call is denied (fail closed)."""


async def _call(hook: Hook, data: HookInput) -> HookResult | None:
    async with asyncio.timeout(hook.timeout):
        value = hook.callback(data)
        if inspect.isawaitable(value):
            value = await value
    if value is None or isinstance(value, HookResult):
        return value
    if isinstance(value, Mapping):
        return HookResult.from_json(data.event, value)
    raise TypeError(f"a hook returns None, a HookResult or a dict, got {type(value).__name__}")


def _failure(hook: Hook, exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"hook {hook.name} ({hook.event.value}) {str(exc) or f'timed out after {hook.timeout:g}s'}"
    return f"hook {hook.name} ({hook.event.value}) failed: {type(exc).__name__}: {exc}"


#: When hooks disagree, the stricter decision stands: a later "allow" never undoes an "ask".
_STRICTNESS = {None: 0, "allow": 1, "ask": 2, "deny": 3}


def _merge(a: HookResult, b: HookResult) -> HookResult:
    context = "\n\n".join(c for c in (a.additional_context, b.additional_context) if c) or None
    stricter = b if _STRICTNESS[b.decision] >= _STRICTNESS[a.decision] else a
    return HookResult(
        decision=stricter.decision,
        reason=stricter.reason if stricter.decision else (b.reason or a.reason),
        updated_input=b.updated_input if b.updated_input is not None else a.updated_input,
        updated_output=b.updated_output if b.updated_output is not None else a.updated_output,
        additional_context=context,
        stop=a.stop or b.stop,
        stop_reason=b.stop_reason or a.stop_reason,
        system_message="\n".join(m for m in (a.system_message, b.system_message) if m) or None,
    )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


# -- the control -----------------------------------------------------------------------------------


class HooksControl(Control):
    """Serves every hook event except PreToolUse (which the permission check runs first)."""

    #: Subagents get their parent's hooks.
    inherit = True

    __slots__ = ("hooks",)

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks

    def _common(self, run: RunState) -> dict[str, Any]:
        return {
            "session_id": run.session_id,
            "cwd": run.env.working_directory(),
            "permission_mode": run.permission_mode,
            "agent_id": run.agent_id,
            "agent_type": run.agent_type,
        }

    async def session_start(self, run: RunState) -> None:
        result = await self.hooks.run(run, SessionStartInput(source=run.start_source, **self._common(run)))
        if result is not None and result.additional_context:
            _add_context(run, result.additional_context, HookEvent.SESSION_START)

    async def input_start(self, run: RunState, text: str) -> Stop | None:
        result = await self.hooks.run(run, UserPromptSubmitInput(prompt=text, **self._common(run)))
        if result is None:
            return None
        if result.decision == "deny" or result.stop:
            why = result.stop_reason or result.reason or "a UserPromptSubmit hook refused the input"
            return Stop(StopReason.INTERRUPTED, why)
        if result.additional_context:
            # Held until the prompt is recorded (after every control admitted it).
            run.admitted_context.append(
                ContextTurn(result.additional_context, source=HookEvent.USER_PROMPT_SUBMIT.value)
            )
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
        common = self._common(run)
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
                tool_response=outcome.full_output,
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
        common = self._common(run)
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
        await self.hooks.run(run, PreCompactInput(trigger="auto", **self._common(run)))

    async def session_end(self, run: RunState, reason: str) -> None:
        last = run.last_stop_reason
        exit_reason = None if last is None else EXIT_REASONS[last]
        await self.hooks.run(run, SessionEndInput(reason=reason, exit_reason=exit_reason, **self._common(run)))

    async def subagent_start(self, run: RunState, agent_id: str, agent_type: str | None, task: str) -> None:
        common = {**self._common(run), "agent_id": agent_id, "agent_type": agent_type}
        await self.hooks.run(run, SubagentStartInput(prompt=task, **common))


def _add_context(run: RunState, text: str, event: HookEvent) -> None:
    run.history.append(ContextTurn(text, source=event.value))
