"""A recorded session's turns, read as what the replay needs: the inputs, and per input the model's
replies in order, each with the tool results recorded for it and the steering that followed it.

Only what the user (or the record) supplied is an input: a UserTurn is one ``submit()``; a
SteeringTurn is a message queued while the session ran. What the session made by itself is not
replayed from the record but made again by today's code: ContextTurns (hooks and controls add them
again, or not), SystemTurns, and CompactionTurns (no model is called in a replay, so the context's
size does not matter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ra.llm.types import ImageData, ToolResult

from ..history import (
    AssistantTurn,
    CompactionTurn,
    ContextTurn,
    SteeringTurn,
    SystemTurn,
    ToolResultsTurn,
    Turn,
    UserTurn,
)

__all__ = ["InputPlan", "ReplayError", "ReplayPlan", "StepPlan", "plan_replay"]


class ReplayError(ValueError):
    """Turns that cannot be replayed (the message says which turn and why)."""


@dataclass(slots=True)
class StepPlan:
    """One recorded model call: its reply, the results recorded for its tool calls, the steering
    that was injected after it (before the next call)."""

    #: 1-based, counted over the whole record (the step numbers of the report).
    number: int
    reply: AssistantTurn
    #: The recorded results by call id; None when the record has none (it ends inside this step).
    results: dict[str, ToolResult] | None = None
    steering: list[str] = field(default_factory=list)
    #: In ``between_calls`` steering mode the steering arrived after this call ran (the later
    #: calls of the round were skipped for it); None: after the whole round.
    steer_after_call: str | None = None


@dataclass(slots=True)
class InputPlan:
    """One ``submit()``: the user's text and images, steering queued before it, its steps."""

    text: str
    images: tuple[ImageData, ...] = ()
    #: Steering that was queued while the session was idle: injected right after the input.
    steering: list[str] = field(default_factory=list)
    steps: list[StepPlan] = field(default_factory=list)
    #: How the recorded input ended: "answer" (a text-only reply), "results" (after a tool round:
    #: a limit, an interrupt, an error or a crash stopped it), "input" (no model call at all).
    ended: str = "input"


@dataclass(slots=True)
class ReplayPlan:
    inputs: list[InputPlan]

    @property
    def steps(self) -> int:
        return sum(len(i.steps) for i in self.inputs)


def plan_replay(turns: Sequence[Turn], skipped_for_steering: str = "") -> ReplayPlan:
    """Group ``turns`` into inputs and steps. ``skipped_for_steering`` is the result text of a call
    the loop skipped because steering arrived (to place that steering after the last call that ran).

    Raises :class:`ReplayError` for turns that no session could have produced: a reply before any
    user input, tool results with no call to answer, results for calls the reply did not make.
    """
    inputs: list[InputPlan] = []
    number = 0
    for index, turn in enumerate(turns):
        where = f"turn {index}"
        if isinstance(turn, UserTurn):
            inputs.append(InputPlan(turn.content, tuple(turn.images)))
        elif isinstance(turn, AssistantTurn):
            if not inputs:
                raise ReplayError(f"{where}: a model reply before any user input (nothing to submit)")
            number += 1
            current = inputs[-1]
            current.steps.append(StepPlan(number, turn))
            current.ended = "results" if turn.tool_calls else "answer"
        elif isinstance(turn, ToolResultsTurn):
            step = inputs[-1].steps[-1] if inputs and inputs[-1].steps else None
            if step is None or not step.reply.tool_calls or step.results is not None:
                raise ReplayError(f"{where}: tool results that answer no recorded tool call")
            called = {c.id for c in step.reply.tool_calls}
            results = {r.tool_call_id: r for r in turn.results}
            stray = sorted(set(results) - called)
            if stray:
                raise ReplayError(f"{where}: results for calls step {step.number} did not make: {', '.join(stray)}")
            step.results = results
            if skipped_for_steering:
                step.steer_after_call = _last_run_before_steering(step, skipped_for_steering)
        elif isinstance(turn, SteeringTurn):
            if not inputs:
                raise ReplayError(f"{where}: a steering message before any user input")
            current = inputs[-1]
            if current.steps:
                current.steps[-1].steering.append(turn.content)
            else:
                current.steering.append(turn.content)
        elif isinstance(turn, ContextTurn | SystemTurn | CompactionTurn):
            continue  # made again by today's code, or irrelevant without a model (module docstring)
        else:
            raise ReplayError(f"{where}: not a turn: {type(turn).__name__}")
    if not inputs:
        raise ReplayError("the record has no user input: nothing to replay")
    return ReplayPlan(inputs)


def _last_run_before_steering(step: StepPlan, skipped_text: str) -> str | None:
    """The id of the last call that ran before calls were skipped for steering, or None when none was."""
    calls = step.reply.tool_calls
    results = step.results or {}
    for position, call in enumerate(calls):
        result = results.get(call.id)
        if result is not None and result.content == skipped_text:
            return None if position == 0 else calls[position - 1].id
    return None
