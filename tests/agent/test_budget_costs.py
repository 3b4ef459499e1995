"""A budget against costs that are not numbers of dollars: a reply whose usage has negative
token counts (a proxy or a local server reporting garbage) and a host price that returns NaN,
infinity or a negative amount. Before, a negative cost lowered the spend (a $1 budget paid for
four calls of $2) and a NaN made every comparison with the budget false (it never stopped)."""

from __future__ import annotations

import math

import pytest

from ra.agent import SessionConfig, StopReason
from ra.agent.events import EventKind as E
from ra.llm.pricing import ModelPrice
from ra.llm.testing import Step, call, reply
from ra.llm.types import Usage

from .support import Recorder, make_session

TWO_DOLLARS = Usage(input_tokens=0, output_tokens=2_000_000)


async def test_a_reply_with_negative_usage_does_not_lower_the_spend() -> None:
    steps = [
        Step(tool_calls=call("read_file", file_path="a").tool_calls, usage=Usage(output_tokens=-5_000_000)),
        *[Step(tool_calls=call("read_file", file_path="a").tool_calls, usage=TWO_DOLLARS) for _ in range(5)],
        reply("done"),
    ]
    config = SessionConfig(max_budget_usd=1.0, prices={"test-model": ModelPrice(1.0, 1.0)})
    session, model = make_session(steps, config=config)
    rec = Recorder(session)
    result = await session.submit("go")
    assert len(model.requests) == 1  # the first reply's cost cannot be counted: nothing more runs
    assert result.stop_reason is StopReason.ERROR
    assert session.total_cost_usd >= 0
    (warning,) = [w for w in rec.of(E.WARNING) if w["code"] == "invalid_cost"]
    assert "-5000000" in warning["message"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -3.0])
async def test_a_price_that_is_not_a_number_of_dollars_stops_before_the_call(bad: float) -> None:
    class Odd:
        def cost(self, usage: Usage) -> float:
            return bad

    session, model = make_session([reply("never")], config=SessionConfig(max_budget_usd=1.0))
    session.config.prices["test-model"] = Odd()  # type: ignore[assignment]
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and model.requests == []
    assert "the budget could not be checked" in rec.of(E.ERROR)[0]["message"]


async def test_without_a_budget_a_bad_cost_is_not_added_to_the_total() -> None:
    steps = [Step(text="hi", usage=Usage(input_tokens=-1_000_000))]
    session, _ = make_session(steps, config=SessionConfig(prices={"test-model": ModelPrice(1.0, 1.0)}))
    rec = Recorder(session)
    await session.submit("go")
    assert session.total_cost_usd == 0.0
    assert [w["code"] for w in rec.of(E.WARNING)] == ["invalid_cost"]
