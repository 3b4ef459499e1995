"""Per-query limits: the SDK's ``max_turns`` and ``max_budget_usd`` count from each query's start.

A :class:`~ra.agent.config.SessionConfig` counts model calls and spend over the session's whole
life, which is right for a host that owns the session. The Claude Agent SDK's options count per
query: a client that spent its turns on the first prompt may still ask a second one. So the
client marks where each query starts (:meth:`QueryLimits.begin`) and this control stops the
input once the calls or the spend since then reach the limit - with the same stop reasons, events
and checkpoints as the session's own limits (before each model call; the budget also after each
response, before its tools run). A follow-up queued while a query runs belongs to that query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra.agent.config import StopReason, is_budget
from ra.agent.controls import Control, Stop
from ra.agent.events import BudgetLimit, TurnLimit

if TYPE_CHECKING:
    from ra.agent.state import RunState
    from ra.llm.types import Response

__all__ = ["QueryLimits"]


class QueryLimits(Control):
    """Stops a query after ``max_turns`` model calls or ``max_budget_usd`` of spend (subagents
    included) counted from :meth:`begin`; None is no limit."""

    def __init__(self, max_turns: int | None = None, max_budget_usd: float | None = None) -> None:
        if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1):
            raise ValueError(f"max_turns must be an integer >= 1 or None, got {max_turns!r}")
        if max_budget_usd is not None and not is_budget(max_budget_usd):
            raise ValueError(f"max_budget_usd must be a finite number of USD >= 0 or None, got {max_budget_usd!r}")
        self.max_turns = max_turns
        self.max_budget_usd = max_budget_usd
        self._turns_at_start = 0
        self._spent_at_start = 0.0
        self._unpriced_at_start = 0

    def begin(self, turn_count: int, total_cost_usd: float, unpriced_calls: int = 0) -> None:
        """A query starts now: the session has made ``turn_count`` calls and spent ``total_cost_usd``."""
        self._turns_at_start = turn_count
        self._spent_at_start = total_cost_usd
        self._unpriced_at_start = unpriced_calls

    async def before_step(self, run: RunState) -> Stop | None:
        limit = self.max_turns
        if limit is not None:
            made = run.turn_count - self._turns_at_start
            if made >= limit:
                run.emit(TurnLimit(limit, "query", total_turns=made))
                return Stop(StopReason.TURN_LIMIT, f"{limit} model calls in this query")
        return self._budget(run)

    async def after_model(self, run: RunState, response: Response) -> Stop | None:
        return self._budget(run)

    def _budget(self, run: RunState) -> Stop | None:
        limit = self.max_budget_usd
        if limit is None:
            return None
        meter = run.meter
        if meter.unpriced_calls > self._unpriced_at_start and run.config.unknown_price == "error":
            # A call of unknown price cannot be counted against the budget: the same refusal as
            # the session's own budget gives (an unpriced model is no way around a limit).
            from ra.agent.controls.budget import UnknownPriceError

            error = UnknownPriceError(
                f"the query has a budget of ${limit:g} but a model call had no known price; set "
                "SessionConfig.prices for the model, or unknown_price='zero' to count it as $0"
            )
            return Stop(StopReason.ERROR, str(error), error)
        spent = meter.total_cost_usd - self._spent_at_start
        if spent >= limit:
            run.emit(BudgetLimit(limit, spent))
            return Stop(StopReason.BUDGET_LIMIT, f"spent ${spent:.4f} of a ${limit:g} budget for this query")
        return None
