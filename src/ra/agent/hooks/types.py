"""The hook events, their inputs and a hook's result: the data that Python and command hooks share.

Inputs serialise to Claude Code's hook JSON (what a command hook reads on stdin); a result parses
from it (what a command hook prints, or a Python hook returns as a dict). The behaviour - which
hooks run and what their results do - is in :mod:`ra.agent.hooks`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..permissions.rules import claude_mode
from ..permissions.tool_names import claude_name, names_of

if TYPE_CHECKING:
    from ..state import RunState

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
    "common_fields",
]


class HookEvent(StrEnum):
    """Every hook event Claude Code's settings name, spelled as they spell them.

    ra fires the events in :data:`FIRED_EVENTS`; hooks for the others are accepted (a Claude
    Code settings file that has them is not refused) and a session warns once that they never
    run (:data:`UNFIRED_EVENTS`)."""

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
    # Claude Code's events that ra has no moment for.
    NOTIFICATION = "Notification"
    PERMISSION_REQUEST = "PermissionRequest"
    PERMISSION_DENIED = "PermissionDenied"
    POST_COMPACT = "PostCompact"
    STOP_FAILURE = "StopFailure"
    SETUP = "Setup"
    INSTRUCTIONS_LOADED = "InstructionsLoaded"
    CONFIG_CHANGE = "ConfigChange"
    CWD_CHANGED = "CwdChanged"
    FILE_CHANGED = "FileChanged"
    TASK_CREATED = "TaskCreated"
    TASK_COMPLETED = "TaskCompleted"
    TEAMMATE_IDLE = "TeammateIdle"
    WORKTREE_CREATE = "WorktreeCreate"
    WORKTREE_REMOVE = "WorktreeRemove"
    ELICITATION = "Elicitation"
    ELICITATION_RESULT = "ElicitationResult"


#: The events ra fires.
FIRED_EVENTS: frozenset[HookEvent] = frozenset(
    {
        HookEvent.SESSION_START,
        HookEvent.USER_PROMPT_SUBMIT,
        HookEvent.PRE_TOOL_USE,
        HookEvent.POST_TOOL_USE,
        HookEvent.POST_TOOL_USE_FAILURE,
        HookEvent.STOP,
        HookEvent.SUBAGENT_START,
        HookEvent.SUBAGENT_STOP,
        HookEvent.PRE_COMPACT,
        HookEvent.SESSION_END,
    }
)
#: Claude Code's events that ra accepts in a configuration but never fires.
UNFIRED_EVENTS: frozenset[HookEvent] = frozenset(HookEvent) - FIRED_EVENTS


# -- inputs ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HookInput:
    """What every hook input carries."""

    event: ClassVar[HookEvent]
    #: Fields a command hook does not get (ra's conveniences, not in Claude Code's JSON).
    _not_sent: ClassVar[frozenset[str]] = frozenset()
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
            if f.name in self._not_sent:
                continue
            value = getattr(self, f.name)
            if value is None and f.name in ("agent_id", "agent_type"):
                continue
            data[f.name] = value
        data["permission_mode"] = claude_mode(self.permission_mode)
        return data


def common_fields(run: RunState) -> dict[str, Any]:
    """The :class:`HookInput` fields every event's input fills from the session's run."""
    return {
        "session_id": run.session_id,
        "cwd": run.env.working_directory(),
        "permission_mode": run.permission_mode,
        "agent_id": run.agent_id,
        "agent_type": run.agent_type,
        "transcript_path": run.transcript_path,
    }


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
    _not_sent = frozenset({"output"})
    #: What the tool answered, in Claude Code's shape: for a shell tool an object (``stdout``,
    #: ``stderr``, ``interrupted``, ``isImage``, and ra's ``exit_code``), for other tools the
    #: output text.
    tool_response: str | dict[str, Any]
    #: The tool's full output text, whatever the tool (what ``updated_output`` replaces).
    output: str = ""


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
    #: Claude's ``suppressOutput``: the hook's stdout is not shown to the user (not in the HOOK event).
    suppress_output: bool = False
    #: What the hook printed on stdout (a command hook), shown to the user in verbose mode.
    output: str | None = None
    #: A non-blocking error (a command hook's exit status other than 0 and 2): reported to the
    #: user as a WARNING; the result has no other effect.
    error: str | None = None
    #: Fields of the answer that could not be read (reported as a WARNING; in PreToolUse the
    #: call is denied, since the hook's decision is unknown).
    problems: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A Python hook builds its result itself: a decision ra cannot act on is refused here,
        # so the hook fails (PreToolUse denies) instead of being taken as no opinion.
        if self.decision not in (None, "allow", "deny", "ask"):
            raise ValueError(f"a hook decision is 'allow', 'deny', 'ask' or None, got {self.decision!r}")
        if not isinstance(self.stop, bool):
            raise ValueError(f"HookResult.stop must be True or False, got {self.stop!r}")

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

        Read: ``continue``/``stopReason``, ``suppressOutput``, ``systemMessage``, ``decision``
        (``"block"``/``"approve"``, and ra's ``"deny"``/``"allow"``/``"ask"``) with ``reason``,
        and ``hookSpecificOutput`` (``hookEventName``, ``permissionDecision``
        ``allow|deny|ask|defer``, ``permissionDecisionReason``, ``updatedInput``,
        ``additionalContext``, ``updatedToolOutput``/``updatedMCPToolOutput``). Other keys are
        ignored.

        A field that decides something but cannot be read - a word that is not one of the
        above (``"reject"``, ``" deny"``, ``"Deny"``), a wrong type (``"continue": "false"``,
        ``"hookSpecificOutput": "deny"``), ``null`` where a value is expected, an answer marked
        for another event - is listed in ``problems``; in PreToolUse the result then denies the
        call (what the hook wanted is unknown), elsewhere the field is ignored.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"hook output must be a JSON object, got {type(data).__name__}")
        problems: list[str] = []
        specific: Mapping[str, Any] = {}
        if "hookSpecificOutput" in data:
            raw_specific = data["hookSpecificOutput"]
            if isinstance(raw_specific, Mapping):
                specific = raw_specific
                named = specific.get("hookEventName", event.value)
                if named != event.value:
                    problems.append(f"hookSpecificOutput.hookEventName is {named!r}, not {event.value!r}")
                    specific = {}
            else:
                problems.append(f"hookSpecificOutput must be an object, got {_shown(raw_specific)}")
        decision: Decision | None = None
        raw = data.get("decision")
        if raw is not None:
            decision = _TOP_DECISIONS.get(raw) if isinstance(raw, str) else None
            if decision is None:
                problems.append(f"decision {_shown(raw)} is not one of {', '.join(_TOP_DECISIONS)}")
        if "permissionDecision" in specific:
            raw = specific["permissionDecision"]
            word = _PERMISSION_DECISIONS.get(raw, "?") if isinstance(raw, str) else "?"
            if word == "?":
                words = ", ".join(_PERMISSION_DECISIONS)
                problems.append(f"hookSpecificOutput.permissionDecision {_shown(raw)} is not one of {words}")
            elif word is not None:
                if decision is not None and decision != word:
                    # Two answers that disagree: which one the hook meant is unknown.
                    problems.append(
                        f"decision {_shown(data.get('decision'))} and hookSpecificOutput.permissionDecision "
                        f"{_shown(raw)} disagree"
                    )
                decision = word  # type: ignore[assignment]
        reason = _text(data.get("reason"))
        if specific.get("permissionDecisionReason") is not None:
            reason = _text(specific.get("permissionDecisionReason"))
        stop = False
        if "continue" in data:
            if isinstance(data["continue"], bool):
                stop = data["continue"] is False
            else:
                problems.append(f"continue must be true or false, got {_shown(data['continue'])}")
        suppress = False
        if "suppressOutput" in data:
            if isinstance(data["suppressOutput"], bool):
                suppress = data["suppressOutput"]
            else:
                problems.append(f"suppressOutput must be true or false, got {_shown(data['suppressOutput'])}")
        updated_input = specific.get("updatedInput")
        if "updatedInput" in specific and not isinstance(updated_input, Mapping):
            problems.append(f"hookSpecificOutput.updatedInput must be an object, got {_shown(updated_input)}")
            updated_input = None
        output = specific.get("updatedToolOutput", specific.get("updatedMCPToolOutput"))
        if problems and event is HookEvent.PRE_TOOL_USE:
            decision = "deny"
            reason = (
                f"Denied: the PreToolUse hook's answer could not be read ({'; '.join(problems)}); the call was not run."
            )
            updated_input = None
        return cls(
            decision=decision,
            reason=reason,
            updated_input=dict(updated_input) if isinstance(updated_input, Mapping) else None,
            updated_output=None if output is None else (output if isinstance(output, str) else _json(output)),
            additional_context=_text(specific.get("additionalContext")),
            stop=stop,
            stop_reason=_text(data.get("stopReason")),
            system_message=_text(data.get("systemMessage")),
            suppress_output=suppress,
            problems=tuple(problems),
        )


#: Claude Code's top-level ``decision`` words (``approve``/``block``), and ra's own.
_TOP_DECISIONS: dict[str, Decision] = {
    "approve": "allow",
    "block": "deny",
    "allow": "allow",
    "deny": "deny",
    "ask": "ask",
}
#: ``hookSpecificOutput.permissionDecision``: ``defer`` is no decision (the normal check goes on).
_PERMISSION_DECISIONS: dict[str, Decision | None] = {"allow": "allow", "deny": "deny", "ask": "ask", "defer": None}


def _shown(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


#: ``fn(input)``, sync or async, returning None, a HookResult or a dict in Claude Code's hook JSON shape.
HookCallable = Callable[[Any], Any]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
