"""Prices (ra.llm.pricing): tiers, overrides, sources, and agreement with genai-prices."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from ra.llm.catalog import cost, get_model_info
from ra.llm.pricing import ModelPrice, PriceTier, find_price
from ra.llm.types import Usage


def test_long_prompts_are_billed_at_the_tier_rate() -> None:
    price, source = find_price("claude-sonnet-4-5")
    assert source == "catalog" and price is not None
    short = Usage(input_tokens=200_000, output_tokens=1_000)
    long = Usage(input_tokens=200_001, output_tokens=1_000)
    assert price.cost(short) == pytest.approx((200_000 * 3.0 + 1_000 * 15.0) / 1e6)
    # Past 200k the whole call doubles (input) and goes to 22.5 (output): not only the excess.
    assert price.cost(long) == pytest.approx((200_001 * 6.0 + 1_000 * 22.5) / 1e6)
    for model in ("gemini-2.5-pro", "gemini-3-pro-preview", "gemini-3.1-pro-preview"):
        p, _ = find_price(model)
        assert p is not None
        assert p.cost(Usage(input_tokens=300_000)) > 1.9 * p.cost(Usage(input_tokens=150_000))
    # The catalogue's own cost() applies tiers too.
    assert cost("claude-sonnet-4-5", long) == pytest.approx(price.cost(long))


def test_cache_tokens_use_their_tier_rates() -> None:
    price = ModelPrice(1.0, 2.0, 0.1, 1.5, (PriceTier(100, 2.0, 4.0, 0.2, 3.0),))
    usage = Usage(input_tokens=1_000, output_tokens=10, cache_read_tokens=500, cache_write_tokens=100)
    assert price.cost(usage) == pytest.approx((400 * 2.0 + 500 * 0.2 + 100 * 3.0 + 10 * 4.0) / 1e6)
    small = Usage(input_tokens=50, output_tokens=10, cache_read_tokens=20)
    assert price.cost(small) == pytest.approx((30 * 1.0 + 20 * 0.1 + 10 * 2.0) / 1e6)


def test_overrides_win_and_are_reported_as_configured() -> None:
    mine = ModelPrice(0.5, 1.0)
    price, source = find_price("GPT-5.2", overrides={"gpt-5.2": mine})
    assert price is mine and source == "configured"
    free, source = find_price("my-proxy-model", overrides={"my-proxy-model": ModelPrice.free()})
    assert source == "configured" and free is not None and free.cost(Usage(1_000_000, 1_000_000)) == 0.0


def test_unknown_models_have_no_price() -> None:
    assert find_price("totally-made-up-model-7b", fallback=False) == (None, "unknown")
    assert find_price("totally-made-up-model-7b") == (None, "unknown")  # genai-prices does not know it either


def test_negative_prices_are_refused() -> None:
    with pytest.raises(ValueError, match="input"):
        ModelPrice(-1.0, 1.0)


def _catalog_models() -> list[dict]:
    text = resources.files("ra.llm").joinpath("data", "models.json").read_text("utf-8")
    return [m for m in json.loads(text)["models"] if m.get("input_cost_per_million") is not None]


@pytest.mark.parametrize("entry", _catalog_models(), ids=lambda m: m["id"])
def test_catalog_prices_match_genai_prices_including_tiers(entry: dict) -> None:
    genai = pytest.importorskip("genai_prices")
    provider = {"anthropic": "anthropic", "gemini": "google", "openai": "openai"}[entry["provider"]]
    price, _ = find_price(entry["id"], fallback=False)
    assert price is not None and get_model_info(entry["id"]) is not None
    cases = [(1_000, 0, 0, 500), (150_000, 50_000, 0, 1_000), (300_000, 100_000, 20_000, 5_000)]
    for prompt, read, write, out in cases:
        if entry["provider"] != "anthropic":
            write = 0  # only Anthropic bills cache writes apart
        ours = price.cost(
            Usage(input_tokens=prompt, output_tokens=out, cache_read_tokens=read, cache_write_tokens=write)
        )
        theirs = genai.calc_price(
            genai.Usage(input_tokens=prompt, output_tokens=out, cache_read_tokens=read, cache_write_tokens=write),
            model_ref=entry["id"],
            provider_id=provider,
        )
        assert ours == pytest.approx(float(theirs.total_price), rel=1e-9), (prompt, read, write, out)


def test_genai_prices_fills_in_for_models_the_catalog_lacks() -> None:
    pytest.importorskip("genai_prices")
    assert get_model_info("claude-3-5-haiku-latest") is None
    price, source = find_price("claude-3-5-haiku-latest", provider="anthropic")
    assert source == "genai-prices" and price is not None
    assert price.cost(Usage(input_tokens=1_000_000)) > 0


# -- Gemini: the names it uses, and thoughts billed as output ----------------------------------------------


@pytest.mark.parametrize(
    "name",
    # Gemini's resource names (``models/...``, the form its own URLs and model listing use) and the
    # ``modelVersion`` names its replies carry in tests/fixtures/provider-cassettes/gemini.
    ["models/gemini-2.5-flash", "models/gemini-2.5-pro", "gemini-2.5-pro", "gemini-3-pro-preview", "gemini-2.5-flash"],
)
def test_gemini_names_are_priced_from_the_catalogue(name: str) -> None:
    price, source = find_price(name, provider="gemini", fallback=False)
    info = get_model_info(name.removeprefix("models/"))
    assert source == "catalog" and price is not None and info is not None
    assert price.cost(Usage(input_tokens=100_000)) == pytest.approx(0.1 * info.input_cost_per_million)  # type: ignore[operator]


def test_a_configured_price_applies_to_the_models_prefixed_name_too() -> None:
    mine = ModelPrice(0.5, 1.0)
    for model, key in [("models/gemini-2.5-pro", "gemini-2.5-pro"), ("gemini-2.5-pro", "models/gemini-2.5-pro")]:
        price, source = find_price(model, provider="gemini", overrides={key: mine})
        assert price is mine and source == "configured", (model, key)
    # Only the prefix: another model's price is not taken.
    assert find_price("models/gemini-2.5-flash", overrides={"gemini-2.5-pro": mine})[1] == "catalog"


def test_genai_prices_bills_gemini_thoughts_reported_apart_as_output() -> None:
    """A Gemini model only genai-prices knows: thinking tokens that an adapter left out of the
    output count (``thoughtsTokenCount`` apart from ``candidatesTokenCount``) are billed as output,
    the same as when they were folded in."""
    pytest.importorskip("genai_prices")
    model = "gemini-2.5-flash-preview-09-2025"
    price, source = find_price(model, provider="gemini")
    assert source == "genai-prices" and price is not None
    raw = {"promptTokenCount": 10, "candidatesTokenCount": 100, "thoughtsTokenCount": 400_000}
    apart = Usage(10, 100, reasoning_tokens=400_000, raw=raw)
    folded = Usage(10, 400_100, reasoning_tokens=400_000, raw=raw)
    assert price.cost(apart) == pytest.approx(price.cost(folded))
    assert price.cost(apart) > 100 * price.cost(Usage(10, 100))
