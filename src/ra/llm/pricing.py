"""Prices of model calls: what a call cost in USD, and where the price came from.

Budgets are only as good as their prices, so three rules hold here:

* **Never invent a price.** A model nobody has a price for costs ``None`` (with the source
  ``"unknown"``), never a guess from a similar name.
* **Say where a price came from** (:data:`PriceSource`): the host's own figure (``"configured"``),
  ra's catalogue (``"catalog"``, ``ra/llm/data/models.json``), or the optional ``genai-prices``
  package (``"genai-prices"``, extra ``ra-agent[prices]``, imported only when the catalogue has no
  entry). A model served through a proxy or at a custom base URL is priced by its name, because
  proxies do charge; a host that knows better sets the price, or zero.
* **Tiers are real.** Some models cost more per token once the prompt passes a size (Claude
  Sonnet 4.5 and the Gemini Pro models double past 200k prompt tokens; the whole call is then
  billed at the higher rate). A price carries its tiers; :meth:`ModelPrice.cost` picks the tier
  from the call's prompt size, so long-context calls are not under-priced.

Prices are USD per million tokens. ``Usage.input_tokens`` is the whole prompt, cache reads and
writes included (how the adapters report it): cached tokens are priced at their own rates, the
rest at the input rate; output includes reasoning tokens, which providers bill as output.

**genai-prices is looked up once per model per process, off the first call.** Importing it takes
0.2-0.9 s, which used to land on every process's first call to a model outside the catalogue.
Its answers (a miss included) are kept for the process (:func:`_external`), and a session starts
the look-up in a worker thread as soon as it knows its models (:func:`prefetch_price`), so it
overlaps the first call instead of following it. Whoever needs the price first (the budget check
before a call, or pricing the call's usage) waits for that look-up, bounded by
:data:`LOOKUP_TIMEOUT`: a price is never guessed because it was still loading, and a look-up that
does not finish in time counts as no price (which a budget refuses). A model genai-prices does
not know is also remembered on disk (:mod:`ra.llm.price_misses`), so later processes do not
import it only to learn that again.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .catalog import ModelPrice, PriceTier, get_model_info, unbilled_gemini_thoughts

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .types import Usage

__all__ = ["LOOKUP_TIMEOUT", "ModelPrice", "Price", "PriceSource", "PriceTier", "find_price", "prefetch_price"]

#: Seconds a caller waits for another thread's genai-prices look-up of the same model before it
#: counts the model as unpriced (the import takes under a second; this bounds a broken install).
LOOKUP_TIMEOUT = 30.0

#: Where a price came from: the host's configuration, ra's catalogue, the genai-prices package,
#: a model running in this process (``provider="local"``: free), or nowhere.
PriceSource = Literal["configured", "catalog", "genai-prices", "local", "unknown"]


class Price(Protocol):
    """Anything that can price a call's usage."""

    def cost(self, usage: Usage) -> float: ...


def find_price(
    model: str, *, provider: str | None = None, overrides: Mapping[str, Price] | None = None, fallback: bool = True
) -> tuple[Price | None, PriceSource]:
    """The price of ``model`` and where it came from.

    ``overrides`` (model name -> price, matched without regard to case or to Gemini's ``models/``
    prefix, so a price set for ``gemini-2.5-pro`` applies to ``models/gemini-2.5-pro``) win; a
    model of the in-process ``local`` provider is free; then the catalogue (ids, aliases, dated
    snapshots); then, with ``fallback``, the ``genai-prices`` package when it is installed.
    Otherwise ``(None, "unknown")``.
    """
    if overrides:
        key = _override_key(model)
        for name, price in overrides.items():
            if _override_key(name) == key:
                return price, "configured"
    if provider == "local":
        return _FREE, "local"
    info = get_model_info(model)
    if info is not None:
        price = info.price
        if price is not None:
            return price, "catalog"
    if fallback:
        external = _external(model, provider)
        if external is not None:
            return external, "genai-prices"
    return None, "unknown"


def prefetch_price(model: str, provider: str | None = None) -> None:
    """Start looking ``model`` up in genai-prices in a worker thread, unless it was looked up (or
    is being looked up) already in this process, or needs no look-up (the ``local`` provider, a
    model in ra's catalogue). Returns at once; :func:`find_price` waits for the result."""
    if provider == "local":
        return
    key = (model, provider)
    with _lookups_lock:
        if key in _lookups:
            return
    info = get_model_info(model)
    if info is not None and info.price is not None:
        return
    threading.Thread(target=_external, args=(model, provider), name=f"ra-price:{model}", daemon=True).start()


class _Lookup:
    """One genai-prices look-up: done once its thread has the answer (``price`` None for a miss)."""

    __slots__ = ("done", "price")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.price: _GenaiPrice | None = None


_lookups: dict[tuple[str, str | None], _Lookup] = {}
_lookups_lock = threading.Lock()


def _external(model: str, provider: str | None) -> _GenaiPrice | None:
    """genai-prices' price for ``model``, looked up once per process: the first caller (a
    prefetch thread or a pricing call) does the look-up, later ones wait for it (bounded)."""
    key = (model, provider)
    with _lookups_lock:
        lookup = _lookups.get(key)
        owner = lookup is None
        if lookup is None:
            lookup = _lookups[key] = _Lookup()
    if owner:
        try:
            lookup.price = _look_up(model, provider)
        except Exception:  # a broken install: no price (which a budget refuses), not a worker's traceback
            lookup.price = None
        finally:
            lookup.done.set()
    elif not lookup.done.wait(LOOKUP_TIMEOUT):
        return None
    return lookup.price


def _look_up(model: str, provider: str | None) -> _GenaiPrice | None:
    """Ask genai-prices, unless it is not installed or said before (on disk) it has no price."""
    from . import price_misses

    key = price_misses.package_key()
    if key is None:
        return None
    if price_misses.is_known_miss(model, provider, key):
        return None
    price = _GenaiPrice.find(model, provider)
    if price is None:
        price_misses.remember_miss(model, provider, key)
    return price


def _override_key(name: str) -> str:
    key = name.strip().lower()
    return key.removeprefix("models/") or key


class _GenaiPrice:
    """A price looked up in the ``genai-prices`` package (tiers and cache rates included)."""

    __slots__ = ("model", "provider")

    _PROVIDERS = {"gemini": "google", "openai-compatible": None, "local": None}

    def __init__(self, model: str, provider: str | None) -> None:
        self.model = model
        self.provider = provider

    @classmethod
    def find(cls, model: str, provider: str | None) -> _GenaiPrice | None:
        try:
            import genai_prices  # noqa: F401
        except ImportError:
            return None
        mapped = cls._PROVIDERS.get(provider, provider) if provider else None
        candidate = cls(model, mapped)
        try:
            candidate._calc(_usage(1, 1, 0, 0))
        except Exception:  # LookupError for unknown models, anything else for a broken install
            return None
        return candidate

    def _calc(self, usage: Any) -> float:
        from genai_prices import calc_price

        kwargs: dict[str, Any] = {"model_ref": self.model}
        if self.provider:
            kwargs["provider_id"] = self.provider
        return float(calc_price(usage, **kwargs).total_price)

    def cost(self, usage: Usage) -> float:
        return self._calc(
            _usage(
                usage.input_tokens,
                usage.output_tokens + unbilled_gemini_thoughts(usage),
                usage.cache_read_tokens or 0,
                usage.cache_write_tokens or 0,
            )
        )

    def __repr__(self) -> str:
        return f"genai-prices({self.provider or '?'}/{self.model})"


_FREE = ModelPrice.free()


def _usage(input_tokens: int, output_tokens: int, cache_read: int, cache_write: int) -> Any:
    from genai_prices import Usage as GenaiUsage

    return GenaiUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )
