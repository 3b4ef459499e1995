"""Model catalog (spec 2.9): data integrity, lookups, "latest" selection and cost estimates."""

from __future__ import annotations

import importlib

import pytest

from ra.llm.catalog import CAPABILITIES, ModelInfo, cost, get_latest_model, get_model_info, list_models
from ra.llm.types import Usage

catalog_module = importlib.import_module("ra.llm.catalog")

REQUIRED = {
    "openai": [
        "gpt-5.2",
        "gpt-5.2-codex",
        "gpt-5.2-mini",
        "gpt-5.1",
        "gpt-5",
        "gpt-5-mini",
        "gpt-5-nano",
        "gpt-4.1",
        "gpt-4.1-mini",
        "gpt-4o",
        "gpt-4o-mini",
        "o3",
        "o4-mini",
    ],
    "anthropic": ["claude-opus-4-6", "claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1", "claude-sonnet-4-0"],
    "gemini": [
        "gemini-3.1-pro-preview",
        "gemini-3-pro-preview",
        "gemini-3-flash-preview",
        "gemini-2.5-pro",
        "gemini-2.5-flash",
        "gemini-2.5-flash-lite",
    ],
}


@pytest.mark.parametrize(("provider", "ids"), list(REQUIRED.items()))
def test_required_models_are_listed_under_their_provider(provider: str, ids: list[str]) -> None:
    listed = {m.id for m in list_models(provider)}
    assert set(ids) <= listed
    for model_id in ids:
        info = get_model_info(model_id)
        assert info is not None and info.provider == provider and info.id == model_id


def test_entries_are_sane() -> None:
    models = list_models()
    assert {m.provider for m in models} == {"openai", "anthropic", "gemini"}
    ids = [m.id for m in models]
    assert len(ids) == len(set(ids))
    names = ids + [a.lower() for m in models for a in m.aliases]
    assert len(names) == len(set(names)), "an alias collides with another id or alias"
    for m in models:
        assert isinstance(m, ModelInfo)
        assert m.display_name and m.context_window > 0
        assert m.max_output is None or 0 < m.max_output <= m.context_window
        for price in (
            m.input_cost_per_million,
            m.output_cost_per_million,
            m.cache_read_cost_per_million,
            m.cache_write_cost_per_million,
        ):
            assert price is None or price >= 0
        if m.cache_read_cost_per_million is not None and m.input_cost_per_million is not None:
            assert m.cache_read_cost_per_million < m.input_cost_per_million
        assert m.release_date is None or len(m.release_date) == 10


def test_list_models_filters_and_copies() -> None:
    assert all(m.provider == "gemini" for m in list_models("gemini"))
    assert list_models("nobody") == []
    listed = list_models()
    listed.clear()
    assert list_models()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sonnet", "claude-sonnet-4-5"),
        ("opus", "claude-opus-4-6"),
        ("haiku", "claude-haiku-4-5"),
        ("Claude-Sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4-0"),
        ("gpt-4o-2024-11-20", "gpt-4o"),  # any dated snapshot of a known model
        ("gpt-5.2-2025-12-11", "gpt-5.2"),
        ("models/gemini-2.5-flash", "gemini-2.5-flash"),
        ("anthropic/opus", "claude-opus-4-6"),
        (" gpt-5 ", "gpt-5"),
    ],
)
def test_lookup_by_alias_snapshot_and_prefix(name: str, expected: str) -> None:
    info = get_model_info(name)
    assert info is not None and info.id == expected


@pytest.mark.parametrize("name", ["nonexistent-model-xyz", "gpt-7", "openai/sonnet", "", "models/"])
def test_unknown_models(name: str) -> None:
    assert get_model_info(name) is None


def test_latest_models_are_the_spec_top_models() -> None:
    assert get_latest_model("anthropic").id == "claude-opus-4-6"  # type: ignore[union-attr]
    assert get_latest_model("openai").id == "gpt-5.2"  # type: ignore[union-attr]
    assert get_latest_model("gemini").id == "gemini-3.1-pro-preview"  # type: ignore[union-attr]
    assert get_latest_model("openai-compatible") is None


def test_latest_model_by_capability() -> None:
    for provider in ("openai", "anthropic", "gemini"):
        for capability in CAPABILITIES:
            info = get_latest_model(provider, capability)
            assert info is not None and info.supports(capability)
    with pytest.raises(ValueError, match="unknown capability"):
        get_latest_model("openai", "telepathy")
    with pytest.raises(ValueError):
        get_model_info("gpt-5").supports("telepathy")  # type: ignore[union-attr]


def test_older_non_reasoning_models_report_it() -> None:
    for model_id in ("gpt-4.1", "gpt-4o", "gpt-4o-mini"):
        info = get_model_info(model_id)
        assert info is not None and not info.supports_reasoning and info.supports_tools


def test_data_is_loaded_once() -> None:
    catalog_module._catalog.cache_clear()
    for _ in range(3):
        get_model_info("gpt-5")
        list_models()
    assert catalog_module._catalog.cache_info().misses == 1


def test_cost_plain_input_and_output() -> None:
    info = ModelInfo("m", "p", "M", 1000, input_cost_per_million=2.0, output_cost_per_million=8.0)
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000, total_tokens=1_500_000)
    assert cost(info, usage) == pytest.approx(2.0 + 4.0)


def test_cost_prices_cache_reads_and_writes_separately() -> None:
    info = get_model_info("claude-sonnet-4-5")
    assert info is not None
    # 100k prompt tokens of which 60k read from cache and 10k written to it; 2k output.
    usage = Usage(100_000, 2_000, 102_000, cache_read_tokens=60_000, cache_write_tokens=10_000)
    expected = (
        30_000 * info.input_cost_per_million  # type: ignore[operator]
        + 60_000 * info.cache_read_cost_per_million  # type: ignore[operator]
        + 10_000 * info.cache_write_cost_per_million  # type: ignore[operator]
        + 2_000 * info.output_cost_per_million  # type: ignore[operator]
    ) / 1e6
    assert cost("claude-sonnet-4-5", usage) == pytest.approx(expected)
    # Caching makes the same prompt cheaper than paying the input rate for all of it.
    uncached = cost("claude-sonnet-4-5", Usage(100_000, 2_000, 102_000))
    assert uncached is not None and expected < uncached


def test_cost_without_cache_write_price_bills_writes_as_input() -> None:
    info = ModelInfo("m", "p", "M", 1000, input_cost_per_million=1.0, output_cost_per_million=1.0)
    assert cost(info, Usage(1_000_000, 0, 0, cache_write_tokens=1_000_000)) == pytest.approx(1.0)


def test_cost_adds_gemini_thoughts_reported_apart() -> None:
    info = get_model_info("gemini-2.5-flash")
    assert info is not None and info.output_cost_per_million is not None
    raw = {"promptTokenCount": 10, "candidatesTokenCount": 100, "thoughtsTokenCount": 400}
    apart = Usage(10, 100, 510, reasoning_tokens=400, raw=raw)
    folded = Usage(10, 500, 510, reasoning_tokens=400, raw=raw)  # an adapter that added them already
    assert cost(info, apart) == pytest.approx(cost(info, folded))
    assert cost(info, folded) == pytest.approx(
        (10 * info.input_cost_per_million + 500 * info.output_cost_per_million) / 1e6
    )  # type: ignore[operator]


def test_cost_unknown() -> None:
    assert cost("nonexistent-model-xyz", Usage(10, 10, 20)) is None
    assert cost("gpt-5.2-mini", Usage(10, 10, 20)) is None  # listed, but without prices
    assert cost("gpt-5", Usage()) == 0.0
