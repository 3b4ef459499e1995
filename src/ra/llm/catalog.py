"""The model catalog (unified-llm-spec 2.9): known model ids, limits, capabilities and prices.

The catalog is advisory. It exists so that code (and coding agents) can pick a valid model id by
capability instead of guessing one, and so that budgets can be kept in dollars; an id it does not
know is still sent to the provider unchanged. The data lives in ``data/models.json``, package data
that can be updated without touching code, and is read once, on first use.

Prices are list prices in USD per million tokens as known when the file was written, with the
prompt-length tiers some models have (``price_tiers``); providers change them and discount batch
traffic, so treat every figure from :func:`cost` as an estimate, never as a bill. How prices are
applied, overridden and reported lives in :mod:`ra.llm.pricing`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from .types import Usage

__all__ = [
    "CAPABILITIES",
    "ModelInfo",
    "ModelPrice",
    "PriceTier",
    "cost",
    "get_latest_model",
    "get_model_info",
    "list_models",
]

#: Capability names accepted by :func:`get_latest_model`.
CAPABILITIES = ("tools", "vision", "reasoning")

# Dated snapshots ("gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929") price like their base model.
_SNAPSHOT = re.compile(r"^(.+?)-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True, slots=True)
class PriceTier:
    """Rates that apply to the whole call once its prompt has more than ``above_input_tokens``."""

    above_input_tokens: int
    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens. ``cache_read`` / ``cache_write`` default to the input rate (a
    provider without separate cache prices); ``tiers`` are checked from the highest threshold."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    tiers: tuple[PriceTier, ...] = ()

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_read", "cache_write"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or value < 0):
                raise ValueError(f"ModelPrice.{name} must be a number >= 0, got {value!r}")

    @classmethod
    def free(cls) -> ModelPrice:
        """A price of zero (a local model, a subscription the host does not want counted)."""
        return cls(0.0, 0.0)

    def rates(self, prompt_tokens: int) -> tuple[float, float, float, float]:
        """(input, output, cache read, cache write) rates for a prompt of ``prompt_tokens``."""
        for tier in sorted(self.tiers, key=lambda t: t.above_input_tokens, reverse=True):
            if prompt_tokens > tier.above_input_tokens:
                return (
                    tier.input,
                    tier.output,
                    _or(tier.cache_read, tier.input),
                    _or(tier.cache_write, tier.input),
                )
        return self.input, self.output, _or(self.cache_read, self.input), _or(self.cache_write, self.input)

    def cost(self, usage: Usage) -> float:
        input_rate, output_rate, read_rate, write_rate = self.rates(usage.input_tokens)
        cache_read = usage.cache_read_tokens or 0
        cache_write = usage.cache_write_tokens or 0
        fresh = max(0, usage.input_tokens - cache_read - cache_write)
        output = usage.output_tokens + unbilled_gemini_thoughts(usage)
        total = fresh * input_rate + cache_read * read_rate + cache_write * write_rate + output * output_rate
        return total / 1_000_000


@dataclass(slots=True, frozen=True)
class ModelInfo:
    id: str
    provider: str
    display_name: str
    context_window: int
    max_output: int | None = None
    supports_tools: bool = True
    supports_vision: bool = False
    supports_reasoning: bool = False
    input_cost_per_million: float | None = None
    output_cost_per_million: float | None = None
    cache_read_cost_per_million: float | None = None
    #: None: the provider has no separate cache-write price (writes are billed as input).
    cache_write_cost_per_million: float | None = None
    #: ISO date of general availability, where known (informational; ordering is by preference).
    release_date: str | None = None
    #: Last month ("YYYY-MM") or day ("YYYY-MM-DD") the provider says the model's knowledge
    #: reliably covers, where it publishes one; told to the model in its system prompt.
    knowledge_cutoff: str | None = None
    aliases: tuple[str, ...] = ()
    notes: str | None = None
    #: Prompt-length tiers: ``{"above_input_tokens", "input", "output", "cache_read", "cache_write"}``
    #: rates that apply to the whole call once the prompt passes the threshold.
    price_tiers: tuple[dict[str, Any], ...] = ()

    @property
    def price(self) -> ModelPrice | None:
        """The catalogue's price for the model (with its tiers), or None when it has none."""
        if self.input_cost_per_million is None or self.output_cost_per_million is None:
            return None
        return ModelPrice(
            self.input_cost_per_million,
            self.output_cost_per_million,
            self.cache_read_cost_per_million,
            self.cache_write_cost_per_million,
            tuple(PriceTier(**tier) for tier in self.price_tiers),
        )

    def supports(self, capability: str) -> bool:
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}; expected one of {', '.join(CAPABILITIES)}")
        return bool(getattr(self, f"supports_{capability}"))


@dataclass(slots=True, frozen=True)
class _Catalog:
    models: tuple[ModelInfo, ...]
    by_name: dict[str, ModelInfo]  # ids and aliases, lower-cased


def _model(entry: dict[str, Any]) -> ModelInfo:
    data = dict(entry)
    data["aliases"] = tuple(data.get("aliases") or ())
    data["price_tiers"] = tuple(dict(t) for t in data.get("price_tiers") or ())
    return ModelInfo(**data)


@cache
def _catalog() -> _Catalog:
    text = resources.files("ra.llm").joinpath("data", "models.json").read_text("utf-8")
    models = tuple(_model(entry) for entry in json.loads(text)["models"])
    by_name: dict[str, ModelInfo] = {}
    for info in models:
        by_name.setdefault(info.id.lower(), info)
    for info in models:  # ids win over aliases when a string is both
        for alias in info.aliases:
            by_name.setdefault(alias.lower(), info)
    return _Catalog(models, by_name)


def get_model_info(model_id: str) -> ModelInfo | None:
    """The entry for a model id or alias, or None when the catalog does not know it.

    Also accepted: dated snapshots of a known model (``gpt-4o-2024-11-20``), a ``models/`` prefix
    (as Gemini names models) and a ``provider/`` prefix (``anthropic/sonnet``).
    """
    catalog = _catalog()
    name = model_id.strip().lower()
    provider: str | None = None
    if "/" in name:
        head, _, tail = name.partition("/")
        if head == "models":
            name = tail
        elif any(m.provider == head for m in catalog.models):
            provider, name = head, tail
    info = catalog.by_name.get(name)
    if info is None:
        match = _SNAPSHOT.match(name)
        if match is not None:
            info = catalog.by_name.get(match.group(1))
    if info is not None and provider is not None and info.provider != provider:
        return None
    return info


def list_models(provider: str | None = None) -> list[ModelInfo]:
    """All known models (optionally of one provider), each provider's best first."""
    models = _catalog().models
    if provider is None:
        return list(models)
    return [m for m in models if m.provider == provider]


def get_latest_model(provider: str, capability: str | None = None) -> ModelInfo | None:
    """The preferred model of ``provider`` (optionally one with ``capability``: "tools",
    "vision" or "reasoning"), or None when the catalog has no such model."""
    if capability is not None and capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}; expected one of {', '.join(CAPABILITIES)}")
    for info in _catalog().models:
        if info.provider == provider and (capability is None or info.supports(capability)):
            return info
    return None


def cost(model: str | ModelInfo, usage: Usage) -> float | None:
    """Estimated USD cost of ``usage`` on ``model`` from the catalogue, or None when the model or
    its prices are unknown. Tiers apply (see :class:`ModelPrice`); for overrides and the price's
    source use :func:`ra.llm.pricing.find_price`."""
    info = get_model_info(model) if isinstance(model, str) else model
    price = None if info is None else info.price
    return None if price is None else price.cost(usage)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def unbilled_gemini_thoughts(usage: Usage) -> int:
    """Gemini reports thinking tokens apart from ``candidatesTokenCount`` and bills them as
    output; add them back when the adapter passed ``candidatesTokenCount`` through unchanged."""
    raw = usage.raw
    if not raw or "thoughtsTokenCount" not in raw or "candidatesTokenCount" not in raw:
        return 0
    try:
        thoughts = int(raw["thoughtsTokenCount"] or 0)
        candidates = int(raw["candidatesTokenCount"] or 0)
    except (TypeError, ValueError):
        return 0
    return thoughts if usage.output_tokens == candidates else 0
