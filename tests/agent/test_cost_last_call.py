"""The meter keeps the cost of the last call it priced (the session recorder writes that figure)."""

from __future__ import annotations

import pytest

from ra.agent import SessionConfig
from ra.agent.cost import CostMeter
from ra.llm.pricing import ModelPrice
from ra.llm.types import Usage


def test_the_meter_keeps_the_last_call_it_priced() -> None:
    meter = CostMeter(SessionConfig(prices={"m": ModelPrice(1.0, 2.0)}), lambda event: None)
    assert meter.last_call is None
    spent = meter.record("m", None, Usage(input_tokens=1_000_000, output_tokens=1_000_000, total_tokens=2_000_000))
    assert meter.last_call == spent and spent.cost_usd == pytest.approx(3.0)
    meter.record("other", None, Usage(input_tokens=1, output_tokens=1, total_tokens=2))
    assert meter.last_call is not None and meter.last_call.model == "other" and meter.last_call.cost_usd is None
