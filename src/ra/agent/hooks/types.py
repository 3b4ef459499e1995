"""The hook events, their inputs and a hook's result: the data that Python and command hooks share.

Inputs serialise to Claude Code's hook JSON (what a command hook reads on stdin); a result parses
from it (what a command hook prints, or a Python hook returns as a dict). The behaviour - which
hooks run and what their results do - is in :mod:`ra.agent.hooks`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar, Literal

from ..permissions.tool_names import claude_name, names_of

__all__ = [
    "Decision",
    "HookCallable",
    "HookEvent",
    "HookInput",
    "HookResult",
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


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
