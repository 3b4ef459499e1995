"""What a replay found: the differences between the record and today's run, as text and as JSON."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_IGNORES",
    "MASK",
    "AgentStep",
    "Difference",
    "DifferenceKind",
    "ReplayReport",
    "compile_ignores",
    "mask",
    "result_text",
]

#: What an ignore pattern's matches become, in both texts, before they are compared.
MASK = "<ignored>"

#: Masked unless a replay is asked not to: what ra's own tools report that changes from run to run
#: by itself (the shell tools' ``Duration: 12 ms`` line).
DEFAULT_IGNORES: tuple[str, ...] = (r"(?m)^Duration: \d+ ms$",)


class DifferenceKind:
    """The kinds of :class:`Difference` (plain strings in the JSON)."""

    #: A tool result's content, error flag or image is not the recorded one.
    RESULT = "result"
    #: A call the record answered was denied now (a permission rule, mode, hook or control).
    DENIED = "denied"
    #: A call the record answered was not run now (skipped: steering, a stop, the per-step limit).
    SKIPPED = "skipped"
    #: The record has no result for a call (it ends inside that step): nothing to compare with.
    NO_RECORDED_RESULT = "no_recorded_result"
    #: The loop asked for a model call the record does not have (it would have gone on).
    EXTRA_CALL = "extra_call"
    #: The input ended before the record's replies for it were used up.
    UNUSED_REPLIES = "unused_replies"
    #: The input ended with an error (today's session failed where the record went on).
    INPUT_ERROR = "input_error"
    #: A subagent was spawned that no record answers (its record is missing, or the recorded
    #: session did not spawn one there): the spawn was refused, no model was called.
    NO_SUBAGENT_RECORD = "no_subagent_record"


@dataclass(frozen=True, slots=True)
class AgentStep:
    """Where in a subagent a difference is: the agent (its id, the session id of its record) and
    its own step (1-based over its record) - for an agent with agents of its own below it in
    :attr:`Difference.subagent`, the step whose call spawned the next one."""

    agent_id: str
    session_id: str | None
    step: int | None

    def to_json(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "session_id": self.session_id, "step": self.step}


@dataclass(slots=True)
class Difference:
    """One place where today's run does not match the record."""

    kind: str
    #: The step (model call, 1-based over the record) it happened at, or after; in a subagent, the
    #: replayed session's step whose call spawned it (the subagent's own step is in ``subagent``).
    step: int | None
    #: One line: what differs.
    message: str
    call_id: str | None = None
    tool: str | None = None
    #: A unified diff of the recorded result (---) and today's (+++), after masking.
    diff: str = ""
    recorded: str | None = None
    recorded_is_error: bool | None = None
    now: str | None = None
    now_is_error: bool | None = None
    #: Empty for the replayed session's own steps; in a subagent, the chain of agents from the one
    #: the replayed session spawned down to the one it happened in.
    subagent: tuple[AgentStep, ...] = ()

    @property
    def where(self) -> str:
        """``step 2`` or, in a subagent, ``step 2 > agent-1a2b3c4d step 1``."""
        out = f"step {self.step}" if self.step is not None else "record"
        for agent in self.subagent:
            out += f" > {agent.agent_id}" + (f" step {agent.step}" if agent.step is not None else "")
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "step": self.step, "message": self.message}
        if self.subagent:
            out["subagent"] = [a.to_json() for a in self.subagent]
        if self.call_id is not None:
            out.update(call_id=self.call_id, tool=self.tool)
        if self.recorded is not None or self.now is not None:
            out.update(
                recorded={"content": self.recorded, "is_error": self.recorded_is_error},
                now={"content": self.now, "is_error": self.now_is_error},
                diff=self.diff,
            )
        return out


@dataclass(slots=True)
class ReplayReport:
    """The outcome of :func:`ra.agent.replay.replay`. ``ok`` is True when nothing differs."""

    #: Model calls answered from the record.
    steps: int = 0
    #: Tool results compared with the record.
    tool_calls: int = 0
    #: Inputs submitted (UserTurns of the record).
    inputs: int = 0
    #: Model calls the record holds (``steps`` is less when the replay stopped early).
    recorded_steps: int = 0
    #: Subagents replayed from their own records, and their model calls answered.
    subagents: int = 0
    subagent_steps: int = 0
    differences: list[Difference] = field(default_factory=list)
    #: Why the replay stopped before the record's end (a step range, stop at first difference).
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "steps": self.steps,
            "recorded_steps": self.recorded_steps,
            "tool_calls": self.tool_calls,
            "inputs": self.inputs,
            "subagents": self.subagents,
            "subagent_steps": self.subagent_steps,
            "stopped": self.stopped,
            "differences": [d.to_json() for d in self.differences],
        }

    def to_text(self) -> str:
        count = len(self.differences)
        agents = f", {self.subagents} subagent(s) with {self.subagent_steps} step(s)" if self.subagents else ""
        outcome = "everything matches" if self.ok else f"{count} difference(s)"
        compared = f"{self.tool_calls} tool result(s) compared"
        head = f"replay: {self.steps} of {self.recorded_steps} step(s){agents}, {compared}: {outcome}"
        lines = [head]
        if self.stopped:
            lines.append(f"stopped early: {self.stopped}")
        for d in self.differences:
            call = f" {d.tool} {d.call_id}" if d.call_id is not None else ""
            lines.append(f"{d.where}{call}: {d.message}")
            if d.diff:
                lines.append(d.diff.rstrip("\n"))
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_text()


def compile_ignores(patterns: Iterable[str | re.Pattern[str]]) -> list[re.Pattern[str]]:
    """The ignore patterns, compiled; a bad one is a ValueError naming it."""
    out: list[re.Pattern[str]] = []
    for pattern in patterns:
        if isinstance(pattern, re.Pattern):
            out.append(pattern)
            continue
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"an ignore pattern is a non-empty regular expression, got {pattern!r}")
        try:
            out.append(re.compile(pattern))
        except re.error as exc:
            raise ValueError(f"ignore pattern {pattern!r} is not a valid regular expression: {exc}") from None
    return out


def mask(text: str, patterns: Sequence[re.Pattern[str]]) -> str:
    for pattern in patterns:
        text = pattern.sub(MASK, text)
    return text


def result_text(content: Any) -> str:
    """A result's content as text: a string as it is, structured content as stable JSON."""
    if isinstance(content, str):
        return content
    return json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False)


def unified(recorded: str, now: str, label: str) -> str:
    """A unified diff of two results. Results rarely end with a newline; only when exactly one of
    the two does is that said (``\\ No newline at end of text``), since then it is a difference."""
    if not recorded.endswith("\n") and not now.endswith("\n"):
        recorded, now = recorded + "\n", now + "\n"
    lines = difflib.unified_diff(
        recorded.splitlines(keepends=True),
        now.splitlines(keepends=True),
        fromfile=f"recorded {label}",
        tofile=f"now {label}",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of text\n" for line in lines)
