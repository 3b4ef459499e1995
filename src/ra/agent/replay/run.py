"""Re-run a recorded session against today's code and tree: :func:`replay`.

The record's model replies are fed back through a real :class:`~ra.agent.session.Session`, so
that everything else is today's: the system prompt, the tools and their truncation, permissions,
hooks and the host's controls. Two pieces do it:

* :class:`RecordedModel`, a provider adapter on an ``ra.llm`` Client: each model call of the
  session is answered with the next recorded reply of the current input (its provider message
  when the record has one, usage from the record); a call the record does not have ends the input
  with an error, reported as a difference. Calls of subagents are refused (their turns are in
  records of their own, not in the parent's);
* :class:`ReplayCheck`, a control added last: after each step it compares every tool result with
  the recorded one and queues the steering that followed the step in the record; before each step
  it stops the replay when asked to (first difference, end of a step range).

The tree is not reset: tools write to it as they did when the session was recorded, so a replay
starts from the tree the session started from (a clean checkout of the same commit, say).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ra.llm.client import Client
from ra.llm.types import (
    ContentKind,
    ContentPart,
    FinishReason,
    Message,
    Request,
    Response,
    Role,
    StreamEvent,
    StreamEventType,
    ThinkingData,
)

from ..config import SessionConfig, StopReason
from ..controls.chain import Control
from ..controls.decisions import Stop
from ..errors import SessionError
from ..loop import _SKIPPED_FOR_STEERING
from .plan import InputPlan, ReplayError, StepPlan, plan_replay
from .report import (
    DEFAULT_IGNORES,
    Difference,
    DifferenceKind,
    ReplayReport,
    compile_ignores,
    mask,
    result_text,
    unified,
)

if TYPE_CHECKING:
    from ra.env.base import ExecutionEnvironment
    from ra.tools.pipeline import ToolCallOutcome
    from ra.tools.registry import RegisteredTool

    from ..controls.chain import Control as ControlType
    from ..history import Turn
    from ..hooks.registry import Hooks
    from ..permissions.check import CanUseTool
    from ..profile import ProviderProfile
    from ..session import Session
    from ..state import RunState

__all__ = ["RecordedModel", "ReplayCheck", "ReplayError", "replay"]


class ReplayDiverged(Exception):
    """Raised by :class:`RecordedModel` for a model call the record cannot answer. Not an
    ``ra.llm`` error: it is not retried, moves to no fallback model, and does not close the session
    (the input ends with stop reason ``error``)."""


async def replay(
    turns: Sequence[Turn],
    *,
    profile: ProviderProfile,
    execution_env: ExecutionEnvironment,
    config: SessionConfig | None = None,
    controls: Iterable[ControlType] = (),
    hooks: Hooks | None = None,
    can_use_tool: CanUseTool | None = None,
    ignore: Iterable[str | re.Pattern[str]] = (),
    default_ignores: bool = True,
    stop_at_first: bool = False,
    steps: tuple[int | None, int | None] | None = None,
) -> ReplayReport:
    """Re-run the tool calls of ``turns`` (a recorded session's path, oldest first) and report
    every step whose tool result differs from the recorded one.

    ``profile``, ``execution_env``, ``config``, ``controls``, ``hooks`` and ``can_use_tool`` are
    the Session's (today's prompt, tools, permissions and hooks). The config is copied and changed
    where a replay needs it: no model is called, so ``context_overflow="warn"``, no retries and no
    fallback models; the model costs nothing; loop detection is off (the warnings it injected are in
    the record as steering and are replayed from there).

    ``ignore``: regular expressions whose matches are masked in both texts before they are compared
    (timings, temporary paths); ``default_ignores`` adds :data:`DEFAULT_IGNORES` (the shell tools'
    duration line), False compares those too. ``stop_at_first``: stop after the first difference. ``steps``:
    ``(first, last)``, 1-based and inclusive (either may be None): compare only those steps; the
    steps before ``first`` still run (they build the state), and the replay stops after ``last``.

    Raises :class:`ReplayError` for turns that cannot be replayed, ValueError for a bad option.
    """
    patterns = compile_ignores([*(DEFAULT_IGNORES if default_ignores else ()), *ignore])
    first, last = _step_range(steps)
    plan = plan_replay(turns, _SKIPPED_FOR_STEERING)
    if first > plan.steps:
        raise ValueError(f"the record has {plan.steps} step(s): a range from step {first} compares nothing")
    report = ReplayReport(recorded_steps=plan.steps)
    model = RecordedModel(profile.provider or profile.id)
    check = ReplayCheck(model, report, patterns, stop_at_first=stop_at_first, first=first, last=last)
    client = Client(providers={model.name: model})
    session_config = replay_config(config if config is not None else SessionConfig(**profile.session_defaults), profile)
    from ..session import Session

    session = Session(
        profile,
        execution_env,
        client,
        session_config,
        controls=[*controls, check],
        hooks=hooks,
        can_use_tool=can_use_tool,
    )
    model.session = session
    try:
        for number, planned in enumerate(plan.inputs, start=1):
            if check.done is not None:
                break
            if session.closing:
                check.add(
                    Difference(
                        DifferenceKind.INPUT_ERROR,
                        model.last_step,
                        f"the session closed before input {number}: the record's inputs from there were not replayed",
                    )
                )
                break
            await _replay_input(session, model, check, planned, number)
    finally:
        await session.close()
        await client.close()
    report.stopped = report.stopped or check.done
    return report


async def _replay_input(
    session: Session, model: RecordedModel, check: ReplayCheck, planned: InputPlan, number: int
) -> None:
    for text in planned.steering:
        session.steer(text)
    model.begin(planned)
    try:
        result = await session.submit(planned.text, images=planned.images)
    except SessionError as exc:  # the session can take no more input (a control or hook closed it)
        check.add(
            Difference(
                DifferenceKind.INPUT_ERROR,
                model.last_step,
                f"input {number} could not be submitted ({exc}): the record's inputs from there were not replayed",
            )
        )
        check.done = check.done or "the session took no more input"
        return
    check.report.inputs = number
    if check.done is not None:
        return
    error = result.error
    if error is not None and not isinstance(error, ReplayDiverged):
        check.add(
            Difference(
                DifferenceKind.INPUT_ERROR,
                model.last_step,
                f"input {number} ended with an error: {type(error).__name__}: {error}",
            )
        )
    if isinstance(error, ReplayDiverged):
        return
    unused = planned.steps[model.used :]
    if unused and check.in_range(unused[0].number):
        check.add(
            Difference(
                DifferenceKind.UNUSED_REPLIES,
                model.last_step,
                f"input {number} ended ({result.stop_reason.value}) before the record's step(s) "
                f"{_numbers(unused)}: the recorded session went on",
            )
        )


def _numbers(steps: list[StepPlan]) -> str:
    if len(steps) == 1:
        return str(steps[0].number)
    return f"{steps[0].number}-{steps[-1].number}"


def _step_range(steps: tuple[int | None, int | None] | None) -> tuple[int, int | None]:
    if steps is None:
        return 1, None
    try:
        first, last = steps
    except (TypeError, ValueError):
        raise ValueError(f"steps is a (first, last) pair, got {steps!r}") from None
    for value in (first, last):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"step numbers start at 1, got {value!r}")
    if first is not None and last is not None and first > last:
        raise ValueError(f"the step range {first}-{last} is empty")
    return first or 1, last


def replay_config(config: SessionConfig, profile: ProviderProfile) -> SessionConfig:
    """A copy of ``config`` for a replay (see :func:`replay` for what changes and why)."""
    from ra.llm.pricing import ModelPrice
    from ra.llm.retrying import RetryPolicy

    return dataclasses.replace(
        config,
        context_overflow="warn",
        retry_policy=RetryPolicy(max_retries=0),
        fallback_models=(),
        enable_loop_detection=False,
        prices={**config.prices, profile.model: ModelPrice.free()},
    )


class RecordedModel:
    """A provider adapter that answers with recorded replies, one input at a time."""

    def __init__(self, name: str) -> None:
        self.name = name
        #: The session it answers (calls from any other, a subagent's, are refused).
        self.session: Session | None = None
        self._input: InputPlan | None = None
        #: Replies of the current input used so far.
        self.used = 0
        #: The step answered last (the one whose tools run now).
        self.current: StepPlan | None = None
        #: Set when a call could not be answered (the divergence is reported once).
        self.on_divergence: Any = None

    @property
    def last_step(self) -> int | None:
        return self.current.number if self.current is not None else None

    def begin(self, planned: InputPlan) -> None:
        self._input = planned
        self.used = 0

    def peek(self) -> StepPlan | None:
        """The step the next call of this input would be answered with."""
        planned = self._input
        if planned is None or self.used >= len(planned.steps):
            return None
        return planned.steps[self.used]

    def answer(self, request: Request) -> Response:
        session = self.session
        context = session.history.messages if session is not None else []
        if not (context and request.messages and request.messages[-1] is context[-1]):
            raise ReplayDiverged(
                "a replay answers the recorded session's own model calls only; a subagent's calls are not replayed"
            )
        step = self.peek()
        if step is None:
            if self.on_divergence is not None:
                self.on_divergence(self._input, self.current)
            raise ReplayDiverged("the record has no reply for this model call")
        self.used += 1
        self.current = step
        return _response(step, request, self.name)

    async def complete(self, request: Request) -> Response:
        return self.answer(request)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """The recorded reply as a stream: its text, then FINISH carrying the whole response (so
        the provider message, with its tool calls and reasoning, is kept as recorded)."""
        response = self.answer(request)
        T = StreamEventType
        yield StreamEvent(T.STREAM_START)
        if response.text:
            yield StreamEvent(T.TEXT_START, text_id="0")
            yield StreamEvent(T.TEXT_DELTA, delta=response.text, text_id="0")
            yield StreamEvent(T.TEXT_END, text_id="0")
        yield StreamEvent(T.FINISH, finish_reason=response.finish_reason, usage=response.usage, response=response)


def _response(step: StepPlan, request: Request, provider: str) -> Response:
    turn = step.reply
    message = turn.message
    if message is None:
        parts: list[ContentPart] = []
        if turn.reasoning:
            parts.append(ContentPart.of_thinking(ThinkingData(turn.reasoning, None)))
        if turn.content:
            parts.append(ContentPart(ContentKind.TEXT, text=turn.content))
        parts.extend(ContentPart(ContentKind.TOOL_CALL, tool_call=c.to_data()) for c in turn.tool_calls)
        message = Message(Role.ASSISTANT, parts)
    else:
        message = Message(message.role, list(message.content), message.name, message.tool_call_id)
    reason = "tool_calls" if turn.tool_calls else "stop"
    return Response(
        id=turn.response_id or f"replay-{step.number}",
        model=request.model,
        provider=provider,
        message=message,
        finish_reason=FinishReason(reason, reason),
        usage=turn.usage,
    )


class ReplayCheck(Control):
    """The replay's control: compares results, queues recorded steering, stops when asked to."""

    def __init__(
        self,
        model: RecordedModel,
        report: ReplayReport,
        patterns: Sequence[re.Pattern[str]],
        *,
        stop_at_first: bool = False,
        first: int = 1,
        last: int | None = None,
    ) -> None:
        self.model = model
        self.report = report
        self.patterns = patterns
        self.stop_at_first = stop_at_first
        self.first = first
        self.last = last
        #: Why the replay stops before the record's end, once it does.
        self.done: str | None = None
        self._steered: set[int] = set()
        model.on_divergence = self._extra_call

    def in_range(self, number: int | None) -> bool:
        if number is None:
            return True
        return number >= self.first and (self.last is None or number <= self.last)

    def add(self, difference: Difference) -> None:
        self.report.differences.append(difference)
        if self.stop_at_first and self.done is None:
            self.done = f"the first difference (step {difference.step})"

    def _extra_call(self, planned: InputPlan | None, previous: StepPlan | None) -> None:
        after = previous.number if previous is not None else None
        if not self.in_range(after):
            return
        ended = {
            "answer": "it ended with a text answer",
            "results": "it stopped after a tool round (an interrupt, a limit, an error or a crash)",
        }.get(planned.ended if planned is not None else "", "it made no model call")
        self.add(
            Difference(
                DifferenceKind.EXTRA_CALL,
                after,
                f"the loop asked for a model call the record does not have: {ended}",
            )
        )

    async def before_step(self, run: RunState) -> Stop | None:
        if self.done is None and self.last is not None:
            upcoming = self.model.peek()
            if upcoming is not None and upcoming.number > self.last:
                self.done = f"the end of the step range (step {self.last})"
        if self.done is not None:
            return Stop(StopReason.INTERRUPTED, f"replay stopped: {self.done}")
        return None

    async def after_tool(
        self, run: RunState, outcome: ToolCallOutcome, tool: RegisteredTool | None
    ) -> ToolCallOutcome | None:
        step = self.model.current
        if step is not None and step.steer_after_call == outcome.call.id:
            self._steer(run, step)
        return None

    async def after_step(self, run: RunState, response: Response, outcomes: list[ToolCallOutcome]) -> None:
        step = self.model.current
        if step is None:
            return
        self.report.steps += 1
        self._steer(run, step)
        if self.in_range(step.number):
            for outcome in outcomes:
                self._compare(step, outcome)

    def _steer(self, run: RunState, step: StepPlan) -> None:
        """Queue the steering the record injected after ``step`` (the loop drains it where it did)."""
        if step.steering and step.number not in self._steered:
            self._steered.add(step.number)
            run.steering.extend(step.steering)

    def _compare(self, step: StepPlan, outcome: ToolCallOutcome) -> None:
        call = outcome.call
        self.report.tool_calls += 1
        recorded = (step.results or {}).get(call.id)
        if recorded is None:
            self.add(
                Difference(
                    DifferenceKind.NO_RECORDED_RESULT,
                    step.number,
                    "the record has no result for this call (it ends inside this step)",
                    call.id,
                    call.name,
                    now=outcome.content,
                    now_is_error=outcome.is_error,
                )
            )
            return
        before = mask(result_text(recorded.content), self.patterns)
        now = mask(result_text(outcome.content), self.patterns)
        image_before, image_now = recorded.image_data or b"", outcome.image_data or b""
        if before == now and recorded.is_error == outcome.is_error and image_before == image_now:
            return
        if outcome.denied:
            kind, message = DifferenceKind.DENIED, "denied now; the record has a different result"
        elif outcome.skipped:
            kind, message = DifferenceKind.SKIPPED, "not run now (skipped); the record has a different result"
        else:
            kind, message = DifferenceKind.RESULT, "the result differs"
        if recorded.is_error != outcome.is_error:
            state = {True: "an error", False: "a success"}
            message += f" (recorded as {state[recorded.is_error]}, now {state[outcome.is_error]})"
        if image_before != image_now:
            message += f" (the image: {len(image_before)} bytes recorded, {len(image_now)} bytes now)"
        self.add(
            Difference(
                kind,
                step.number,
                message,
                call.id,
                call.name,
                unified(before, now, f"step {step.number} {call.name}"),
                before,
                recorded.is_error,
                now,
                outcome.is_error,
            )
        )
