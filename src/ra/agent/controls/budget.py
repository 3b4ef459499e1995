"""The spending limit (``SessionConfig.max_budget_usd``), as a control on the seam.

Checked where the Go-port spec puts it (section 9): after each model response and before its
tools run, and again before the next model call. When the session's spend - its own calls and
its subagents' - has reached the budget, the input ends with stop reason ``budget_limit`` (the
response's tool calls are answered as not run, so the conversation stays valid) and a
``BUDGET_LIMIT`` event says how much was spent. The call that crossed the line has already been
paid for: like every provider-side budget, the last call can overshoot the cap.

With ``unknown_price="error"``, a call whose model has no known price ends the input with an
error (:class:`UnknownPriceError`) instead of being counted as $0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import StopReason
from ..errors import SessionError
from ..events import BudgetLimit
from .chain import Control
from .decisions import Stop

if TYPE_CHECKING:
    from ra.llm.types import Response

    from ..cost import CostMeter
    from ..state import RunState

__all__ = ["Budget", "UnknownPriceError"]


class UnknownPriceError(SessionError):
    """A budget is set, ``unknown_price="error"``, and a model's price is unknown."""


class Budget(Control):
    """Stops the input once ``run.meter.total_cost_usd`` reaches ``config.max_budget_usd``."""

    async def before_step(self, run: RunState) -> Stop | None:
        return self._check(run)

    async def after_model(self, run: RunState, response: Response) -> Stop | None:
        return self._check(run)

    def _check(self, run: RunState) -> Stop | None:
        # A subagent's spend counts against every budget above it: walk up the meters.
        meter: CostMeter | None = run.meter
        while meter is not None:
            config = meter.config
            limit = config.max_budget_usd
            if limit is not None:
                if meter.unpriced_calls and config.unknown_price == "error":
                    error = UnknownPriceError(
                        f"the session has a budget of ${limit:g} but {meter.unpriced_calls} model call(s) had no "
                        "known price; set SessionConfig.prices for the model, or unknown_price='zero' to count "
                        "them as $0"
                    )
                    return Stop(StopReason.ERROR, str(error), error)
                spent = meter.total_cost_usd
                if spent >= limit:
                    run.emit(BudgetLimit(limit, spent))
                    return Stop(StopReason.BUDGET_LIMIT, f"spent ${spent:.4f} of a ${limit:g} budget")
            meter = meter.parent
        return None
