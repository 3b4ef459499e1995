"""The replay's control: compares each step's tool results with the record, queues the recorded
steering where it arrived, and stops the replay when asked to (first difference, end of a range).

Both sides are redacted (:mod:`ra.llm.redaction`) before they are compared: a record never holds
a secret (the recorder wrote ``[REDACTED]``), so today's result must not show it in the report
either, and a key that is still in the output is no difference."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ra.llm.redaction import redact, redact_value

from ..config import StopReason
from ..controls.chain import Control
from ..controls.decisions import Stop
from .model import RecordedModel
from .plan import InputPlan, StepPlan
from .report import Difference, DifferenceKind, ReplayReport, mask, result_text, unified

if TYPE_CHECKING:
    from ra.llm.types import Response
    from ra.tools.pipeline import ToolCallOutcome
    from ra.tools.registry import RegisteredTool

    from ..state import RunState

__all__ = ["ReplayCheck"]


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
        #: With ``stop_at_first``: the step of the first difference (later ones are not reported).
        self._first: int | None = None
        model.on_divergence = self._extra_call

    def in_range(self, number: int | None) -> bool:
        if number is None:
            return True
        return number >= self.first and (self.last is None or number <= self.last)

    def add(self, difference: Difference) -> None:
        if self.stop_at_first and self._first is not None and (difference.step or 0) > self._first:
            return  # a consequence of stopping (a subagent stopped mid-way shows in a later wait)
        self.report.differences.append(difference)
        if self.stop_at_first and self.done is None:
            self.done = f"the first difference (step {difference.step})"
            self._first = difference.step or 0

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
        self._count_step()
        self._steer(run, step)
        if self.in_range(step.number):
            for outcome in outcomes:
                self._compare(step, outcome)

    def _count_step(self) -> None:
        self.report.steps += 1

    def _label(self, step: StepPlan) -> str:
        """How a diff names the step (a subagent's check adds the agent)."""
        return f"step {step.number}"

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
                    now=redact_value(outcome.content),
                    now_is_error=outcome.is_error,
                )
            )
            return
        before = mask(redact(result_text(recorded.content)), self.patterns)
        now = mask(redact(result_text(outcome.content)), self.patterns)
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
                unified(before, now, f"{self._label(step)} {call.name}"),
                before,
                recorded.is_error,
                now,
                outcome.is_error,
            )
        )
