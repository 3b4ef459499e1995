"""What a session has spent: every model call priced as it is recorded, subagents included.

The meter prices each call from its token usage (:func:`ra.llm.pricing.find_price`: the host's
``SessionConfig.prices`` first, then ra's catalogue, then the optional genai-prices package) and
keeps the running totals that ``USAGE`` events, ``Session.total_cost_usd`` and the budget read.
Per call it does a dictionary lookup and a few multiplications: nothing grows with the history.

A model without a known price costs ``None`` for that call and the session warns once per model
(``WARNING`` with ``code="unknown_price"``). Under a budget the default
(``SessionConfig.unknown_price="error"``) never lets it get that far: the budget control refuses
an unpriced model before its first call (:mod:`ra.agent.controls.budget`); ``"zero"``, the host's
explicit choice, counts such calls as $0.

A subagent's meter has its parent's as ``parent``: every call a child records is added to the
parent's totals too, so a budget on the parent covers the spend of everything it started.

**Reservations.** Sessions of one tree (a parent and its subagents, running concurrently) share
their ancestors' budgets. So that they do not each overshoot by a call, a session *holds* the
projected cost of a call (:meth:`CostMeter.hold`) from just before the call until it is recorded
(:meth:`record` settles it with the real cost) or the input ends (:meth:`release`). The budget
control admits a call only while spend plus the other calls' holds is under the limit, and
otherwise waits for them to settle (:meth:`wait_for_change`). Holds are kept on every meter up
the tree, like the totals.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ra.llm.pricing import Price, PriceSource, find_price, prefetch_price
from ra.llm.types import Usage

from .events import WarningEvent

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

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

    __slots__ = (
        "_changed",
        "_emit",
        "_held",
        "_prices",
        "_warned",
        "config",
        "last_call",
        "parent",
        "reserved_usd",
        "total_cost_usd",
        "total_usage",
        "unpriced_calls",
    )

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
        #: The cost of the last call recorded here (the session recorder writes it on the call's entry).
        self.last_call: CallCost | None = None
        #: USD held for calls in flight, by this session and its subagents (see the module doc).
        self.reserved_usd = 0.0
        self._held = 0.0  # this session's own hold (one call in flight at a time)
        self._changed: asyncio.Event | None = None  # on the root meter only, made on first wait
        self._prices: dict[tuple[str, str | None], tuple[Price | None, PriceSource]] = {}
        self._warned: set[str] = set()

    def prefetch(self, models: Iterable[tuple[str, str | None]]) -> None:
        """Start the genai-prices look-ups the session's ``(model, provider)`` pairs will need, in
        worker threads, so the first call does not wait for them (a model the host priced in
        ``SessionConfig.prices`` needs none)."""
        overrides = self.config.prices
        for model, provider in models:
            if overrides and find_price(model, overrides=overrides, fallback=False)[1] == "configured":
                continue
            prefetch_price(model, provider)

    def price(self, model: str, provider: str | None) -> tuple[Price | None, PriceSource]:
        """The price calls to ``model`` (of ``provider``) are charged at, and its source."""
        return self._price(model, provider)

    # -- reservations -------------------------------------------------------------------------------
    @property
    def held_usd(self) -> float:
        """What this session holds for its call in flight (0 when none)."""
        return self._held

    def hold(self, amount: float) -> None:
        """Hold ``amount`` USD for this session's next call, here and in every meter above
        (replacing a hold left over from a call that never recorded)."""
        self.release()
        if amount <= 0:
            return
        self._held = amount
        meter: CostMeter | None = self
        while meter is not None:
            meter.reserved_usd += amount
            meter = meter.parent

    def release(self) -> None:
        """Drop this session's hold (its call was recorded, failed, or the input ended)."""
        amount, self._held = self._held, 0.0
        if not amount:
            return
        meter: CostMeter | None = self
        while meter is not None:
            # max(): float sums and differences need not cancel exactly.
            meter.reserved_usd = max(0.0, meter.reserved_usd - amount)
            meter = meter.parent
        self._notify()

    async def wait_for_change(self, timeout: float) -> None:
        """Wait until a call anywhere in the tree settles or drops its hold, or ``timeout`` s."""
        root = self._root()
        if root._changed is None:
            root._changed = asyncio.Event()
        try:
            await asyncio.wait_for(root._changed.wait(), timeout)
        except TimeoutError:
            pass

    def _root(self) -> CostMeter:
        meter = self
        while meter.parent is not None:
            meter = meter.parent
        return meter

    def _notify(self) -> None:
        # Wake every waiter of the tree; the next wait gets a fresh event.
        root = self._root()
        changed, root._changed = root._changed, None
        if changed is not None:
            changed.set()

    def record(self, model: str, provider: str | None, usage: Usage) -> CallCost:
        """Price one call and add it to the totals (here and in every parent)."""
        price, source = self._price(model, provider)
        cost = None if price is None else price.cost(usage)
        if cost is not None and not _valid(cost, usage):
            # A reply whose usage has negative counts, or a price that returns NaN, infinity or a
            # negative amount: adding it would lower the spend (or make every comparison with
            # the budget false). The call counts as unpriced, which a budget refuses.
            self._emit(
                WarningEvent(
                    "invalid_cost",
                    f"The cost of a call to {model!r} could not be counted (usage {usage.input_tokens} in, "
                    f"{usage.output_tokens} out; cost {cost!r}); it counts as a call without a price",
                    {"model": model, "provider": provider, "cost": repr(cost)},
                )
            )
            cost = None
            self.unpriced_calls += 1
        elif price is None:
            self.unpriced_calls += 1
            if model not in self._warned:
                self._warned.add(model)
                self._emit(
                    WarningEvent("unknown_price", self._unpriced_message(model), {"model": model, "provider": provider})
                )
        meter: CostMeter | None = self
        while meter is not None:
            meter.total_usage = meter.total_usage + usage
            if cost is not None:
                meter.total_cost_usd += cost
            elif meter is not self:
                meter.unpriced_calls += 1
            meter = meter.parent
        self.release()  # the call is paid for: its hold gives way to the real cost
        self._notify()
        self.last_call = CallCost(model, cost, source)
        return self.last_call

    def _unpriced_message(self, model: str) -> str:
        head = f"No price is known for model {model!r}: "
        budgets = []
        meter: CostMeter | None = self
        while meter is not None:
            if meter.config.max_budget_usd is not None:
                budgets.append(meter.config)
            meter = meter.parent
        if not budgets:
            return head + "its calls are not counted in the cost (set SessionConfig.prices to count them)"
        if all(config.unknown_price == "zero" for config in budgets):
            return head + "its calls count as $0 against the budget (unknown_price='zero')"
        return head + "the budget cannot be kept"

    def _price(self, model: str, provider: str | None) -> tuple[Price | None, PriceSource]:
        # With overrides configured the lookup runs on every call, so a host may edit
        # config.prices between calls (the mapping is small); the cache holds only what the
        # catalogue and genai-prices say, so a price the host removed is not kept either.
        overrides = self.config.prices
        if overrides:
            return find_price(model, provider=provider, overrides=overrides)
        key = (model, provider)
        cached = self._prices.get(key)
        if cached is None:
            cached = find_price(model, provider=provider)
            if cached[0] is not None:  # "unknown" may be a look-up that timed out: ask again next time
                self._prices[key] = cached
        return cached


def _valid(cost: float, usage: Usage) -> bool:
    counts = (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens or 0, usage.cache_write_tokens or 0)
    return isinstance(cost, int | float) and math.isfinite(cost) and cost >= 0 and all(c >= 0 for c in counts)
