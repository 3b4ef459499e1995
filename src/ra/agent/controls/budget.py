"""The spending limit (``SessionConfig.max_budget_usd``), as a control on the seam.

A budget is only kept if every call it covers can be priced and every session that shares it
counts the others' calls. So, before each model call, for this session and every session above
it that has a budget (a subagent's spend counts against its parent's and grandparent's budgets):

1. **Spent?** When the spend - the session's own calls and its subagents' - has reached the
   budget, the input ends with stop reason ``budget_limit`` and a ``BUDGET_LIMIT`` event. A
   budget of 0 therefore makes no call at all.
2. **Priced?** The model of the call and each of ``fallback_models`` must have a known price
   (``SessionConfig.prices``, ra's catalogue, genai-prices; the ``local`` provider is free).
   Otherwise the input ends before the call with an :class:`UnknownPriceError` naming the model,
   unless the host chose ``unknown_price="zero"`` (count its calls as $0).
3. **Reserved.** The call holds its projected worst-case cost (:func:`projected_cost`: the
   request's size - system prompt, history and tool definitions - at one token per two
   characters, plus the model's whole output limit, at the
   dearest of the call's candidate models) on every meter up the tree until it is recorded. A call
   starts only while the spend plus the holds of the *other* calls in flight is under each budget;
   otherwise it waits for those calls to finish, then looks again.

The same check runs after each model response, before its tools: a response that reached the
budget ends the input there (its tool calls are answered as not run, so the conversation stays
valid).

**The bound.** The call that crosses the line has been paid for, as with every provider-side
budget, but only one: since a call is admitted only while spend plus the other calls' holds is
under the budget, the spend never exceeds the budget by more than one call's projection, however
many sessions of the tree run at once - provided the calls' usage stays within their projection
(a prompt of at most two characters per token, output within the model's limit).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from ra.llm.catalog import get_model_info
from ra.llm.types import Usage

from ..config import StopReason, is_budget
from ..errors import SessionError
from ..events import BudgetLimit
from .chain import Control
from .decisions import Stop

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ra.llm.pricing import Price
    from ra.llm.types import Response

    from ..cost import CostMeter
    from ..state import RunState

__all__ = [
    "DEFAULT_OUTPUT_RESERVE",
    "Budget",
    "UnknownPriceError",
    "budgeted_meters",
    "call_models",
    "price_refusal",
    "projected_cost",
]

#: Output tokens a call is assumed to be able to produce when the catalogue does not know the
#: model's output limit (a model priced through ``SessionConfig.prices``).
DEFAULT_OUTPUT_RESERVE = 32_000
#: Characters per prompt token assumed when projecting a call (real text runs at 3 to 4).
CHARS_PER_TOKEN = 2
#: How often a call waiting for other calls' holds looks again (it is also woken when one settles).
_WAIT_POLL_S = 0.25


class UnknownPriceError(SessionError):
    """A budget is set, ``unknown_price="error"``, and a model the session would call has no price."""

    def __init__(self, message: str, *, model: str = "", provider: str | None = None, role: str = "model") -> None:
        super().__init__(message)
        #: The unpriced model, its provider, and what it is to the session ("model",
        #: "fallback model", "subagent model").
        self.model = model
        self.provider = provider
        self.role = role


def call_models(run: RunState) -> list[tuple[str, str, str | None]]:
    """``(role, model, provider)`` of every model the next call may go to: the session's model,
    then its fallback models."""
    provider = run.profile.provider or run.profile.id
    models: list[tuple[str, str, str | None]] = [("model", run.model, provider)]
    for entry in run.config.fallback_models:
        if isinstance(entry, tuple):
            models.append(("fallback model", entry[1], entry[0]))
        else:
            models.append(("fallback model", entry, provider))
    return models


def projected_cost(price: Price, model: str, prompt_chars: int) -> float:
    """The most a call to ``model`` with a prompt of ``prompt_chars`` characters is expected to
    cost: a token for every two characters of the prompt, and the model's whole output limit."""
    info = get_model_info(model)
    output = info.max_output if info is not None and info.max_output else DEFAULT_OUTPUT_RESERVE
    return price.cost(Usage(input_tokens=-(-prompt_chars // CHARS_PER_TOKEN), output_tokens=output))


class Budget(Control):
    """Stops the input once the spend reaches ``config.max_budget_usd`` (here or above), refuses
    unpriced models under a budget, and reserves each call's projected cost before it starts."""

    def __init__(self) -> None:
        self._tools: tuple[object, int] = (None, 0)  # (the definitions list, its size in characters)

    def _tool_chars(self, run: RunState) -> int:
        """Characters the tool definitions add to every request (computed when they change)."""
        tools = run.tool_definitions()
        if self._tools[0] is not tools:
            size = sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools)
            self._tools = (tools, size)
        return self._tools[1]

    async def before_step(self, run: RunState) -> Stop | None:
        run.meter.release()  # a hold left by a call that never recorded
        try:
            if (stop := self._check(run)) is not None:
                return stop
            if (stop := self._refuse_unpriced(run)) is not None:
                return stop
            return await self._reserve(run)
        except Exception as exc:  # a price that fails to compute: no call, rather than an unbounded one
            return _cannot_check(exc)

    async def after_model(self, run: RunState, response: Response) -> Stop | None:
        try:
            return self._check(run)
        except Exception as exc:
            return _cannot_check(exc)

    async def input_end(self, run: RunState, reason: StopReason) -> None:
        run.meter.release()

    async def session_end(self, run: RunState, reason: str) -> None:
        run.meter.release()

    # -- the checks ---------------------------------------------------------------------------------
    def _check(self, run: RunState) -> Stop | None:
        for meter in budgeted_meters(run.meter):
            config = meter.config
            limit = config.max_budget_usd
            if not is_budget(limit):
                # Set between calls to something that is no budget: refuse rather than run unbounded.
                error = ValueError(f"max_budget_usd must be a finite number of USD >= 0, got {limit!r}")
                return Stop(StopReason.ERROR, str(error), error)
            if meter.unpriced_calls and config.unknown_price == "error":
                error = UnknownPriceError(
                    f"the session has a budget of ${limit:g} but {meter.unpriced_calls} model call(s) had no "
                    "known price (or a cost that could not be counted: see the invalid_cost warning); set "
                    "SessionConfig.prices for the model, or unknown_price='zero' to count them as $0"
                )
                return Stop(StopReason.ERROR, str(error), error)
            if (stop := _spent(run, meter)) is not None:
                return stop
        return None

    def _refuse_unpriced(self, run: RunState) -> Stop | None:
        for role, model, provider in call_models(run):
            if (error := price_refusal(run.meter, role, model, provider)) is not None:
                return Stop(StopReason.ERROR, str(error), error)
        return None

    async def _reserve(self, run: RunState) -> Stop | None:
        budgeted = list(budgeted_meters(run.meter))
        if not budgeted:
            return None
        amount = 0.0
        chars = run.context_chars + self._tool_chars(run)
        for _, model, provider in call_models(run):
            price, _ = run.meter.price(model, provider)
            if price is not None:
                projected = projected_cost(price, model, chars)
                if not math.isfinite(projected) or projected < 0:
                    # NaN would hold nothing (max() keeps the other side) and the spend it adds
                    # later would make every comparison with the budget false.
                    raise ValueError(f"the price of {model!r} gave {projected!r} for a projected call")
                amount = max(amount, projected)
        while True:
            for meter in budgeted:
                if (stop := _spent(run, meter)) is not None:
                    return stop
            busy = any(
                m.reserved_usd > 0 and m.total_cost_usd + m.reserved_usd >= m.config.max_budget_usd  # type: ignore[operator]
                for m in budgeted
            )
            if not busy:
                run.meter.hold(amount)
                return None
            if run.abort.aborted or run.stop_requested is not None:
                return None  # the loop stops the input right after this
            await run.meter.wait_for_change(_WAIT_POLL_S)


def price_refusal(meter: CostMeter, role: str, model: str, provider: str | None) -> UnknownPriceError | None:
    """The error for a call to ``model`` when a budget over ``meter`` (its own or one above it)
    cannot be kept because the model has no price and ``unknown_price`` is "error"; else None."""
    strict = [m.config.max_budget_usd for m in budgeted_meters(meter) if m.config.unknown_price == "error"]
    if not strict or meter.price(model, provider)[0] is not None:
        return None
    return UnknownPriceError(
        f"no price is known for the {role} {model!r} (provider {provider}), so a budget of ${min(strict):g} "
        f"cannot be kept; set one in SessionConfig.prices, e.g. prices={{{model!r}: ModelPrice(input=..., "
        "output=...)}} (USD per million tokens; ModelPrice.free() for a free model), or unknown_price='zero' "
        "to count its calls as $0",
        model=model,
        provider=provider,
        role=role,
    )


def _cannot_check(exc: Exception) -> Stop:
    # The chain treats a control's exception as "no opinion" (fail open); a budget fails closed.
    error = SessionError(f"the budget could not be checked: {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return Stop(StopReason.ERROR, str(error), error)


def budgeted_meters(meter: CostMeter | None) -> Iterator[CostMeter]:
    """The meters from ``meter`` up whose session has a budget."""
    while meter is not None:
        if meter.config.max_budget_usd is not None:
            yield meter
        meter = meter.parent


def _spent(run: RunState, meter: CostMeter) -> Stop | None:
    limit = meter.config.max_budget_usd
    spent = meter.total_cost_usd
    if limit is not None and spent >= limit:
        run.emit(BudgetLimit(limit, spent))
        return Stop(StopReason.BUDGET_LIMIT, f"spent ${spent:.4f} of a ${limit:g} budget")
    return None
