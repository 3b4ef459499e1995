"""What a session has spent: every model call priced as it is recorded, subagents included.

The meter prices each call from its token usage (:func:`ra.llm.pricing.find_price`: the host's
``SessionConfig.prices`` first, then ra's catalogue, then the optional genai-prices package) and
keeps the running totals that ``USAGE`` events, ``Session.total_cost_usd`` and the budget read.
Per call it does a dictionary lookup and a few multiplications: nothing grows with the history.

A model without a known price costs ``None`` for that call and the session warns once per model
(``WARNING`` with ``code="unknown_price"``). What that means for a budget is the host's choice
(``SessionConfig.unknown_price``): ``"zero"`` (the default) counts the call as $0, ``"error"``
ends the input with an error when a budget is set, because a budget that cannot be kept is worse
than none.

A subagent's meter has its parent's as ``parent``: every call a child records is added to the
parent's totals too, so a budget on the parent covers the spend of everything it started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ra.llm.pricing import Price, PriceSource, find_price
from ra.llm.types import Usage

from .events import WarningEvent

if TYPE_CHECKING:
    from collections.abc import Callable

    from .config import SessionConfig
    from .events import EventData

__all__ = ["CallCost", "CostMeter"]


@dataclass(frozen=True, slots=True)
class CallCost:
    """One model call's price: ``cost_usd`` None when the model's price is unknown."""

    model: str
    cost_usd: float | None
    source: PriceSource


class CostMeter:
    """Running spend of one session (and, through ``parent``, of the sessions above it)."""

    __slots__ = ("_emit", "_prices", "_warned", "config", "parent", "total_cost_usd", "total_usage", "unpriced_calls")

    def __init__(
        self, config: SessionConfig, emit: Callable[[EventData], object], parent: CostMeter | None = None
    ) -> None:
        self.config = config
        self._emit = emit
        self.parent = parent
        #: USD spent by this session and its subagents (unknown prices count as $0).
        self.total_cost_usd = 0.0
        #: Tokens used by this session and its subagents.
        self.total_usage = Usage()
        #: Calls whose model had no price.
        self.unpriced_calls = 0
        self._prices: dict[tuple[str, str | None], tuple[Price | None, PriceSource]] = {}
        self._warned: set[str] = set()

    def record(self, model: str, provider: str | None, usage: Usage) -> CallCost:
        """Price one call and add it to the totals (here and in every parent)."""
        price, source = self._price(model, provider)
        cost = None if price is None else price.cost(usage)
        if price is None:
            self.unpriced_calls += 1
            if model not in self._warned:
                self._warned.add(model)
                self._emit(
                    WarningEvent(
                        "unknown_price",
                        f"No price is known for model {model!r}: its calls count as $0 against the budget"
                        if self.config.unknown_price == "zero"
                        else f"No price is known for model {model!r}: the budget cannot be kept",
                        {"model": model, "provider": provider},
                    )
                )
        meter: CostMeter | None = self
        while meter is not None:
            meter.total_usage = meter.total_usage + usage
            if cost is not None:
                meter.total_cost_usd += cost
            elif meter is not self:
                meter.unpriced_calls += 1
            meter = meter.parent
        return CallCost(model, cost, source)

    def _price(self, model: str, provider: str | None) -> tuple[Price | None, PriceSource]:
        # With overrides configured the lookup runs on every call, so a host may edit
        # config.prices between calls (the mapping is small); without them it is cached.
        overrides = self.config.prices
        key = (model, provider)
        cached = self._prices.get(key)
        if cached is None or overrides:
            cached = find_price(model, provider=provider, overrides=overrides)
            self._prices[key] = cached
        return cached
