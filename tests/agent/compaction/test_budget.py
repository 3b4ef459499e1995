"""The summary call is paid like any call: it keeps the session's budget rules."""

from __future__ import annotations

from ra.agent import StopReason
from ra.agent.compaction import CompactionConfig
from ra.agent.controls.budget import UnknownPriceError
from ra.agent.events import EventKind as E
from ra.agent.history import CompactionTurn
from ra.llm.catalog import ModelPrice
from ra.llm.testing import Step, reply
from ra.llm.types import Request, ToolCall, Usage

from ..support import Recorder
from .helpers import compact_session, is_summary_request


def worker(summary_usage: Usage | None = None):  # type: ignore[no-untyped-def]
    state = {"n": 0}

    def answer(request: Request) -> Step:
        if is_summary_request(request):
            return reply("## Goal\nsummary", usage=summary_usage)
        state["n"] += 1
        if state["n"] > 60:
            return reply("done")
        return Step(tool_calls=[ToolCall(f"c{state['n']}", "echo", {"text": "x" * 400})])

    return answer


async def test_a_summary_model_without_a_price_is_refused_under_a_budget() -> None:
    config = CompactionConfig(clear_tool_outputs=False, summary_model="mystery-model")
    session, model = compact_session(default=worker(), compaction=config, max_budget_usd=5.0)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and isinstance(result.error, UnknownPriceError)
    assert "summary model 'mystery-model'" in str(result.error)
    assert not any(is_summary_request(r) for r in model.requests)  # refused before the call


async def test_the_summary_spend_counts_and_a_spent_budget_stops_further_summary_calls() -> None:
    """Each summary costs $10 (at $1 per million tokens); the budget is $5. The first piece is
    paid; the next is not asked for; the budget control then ends the input."""
    config = CompactionConfig(clear_tool_outputs=False)
    expensive = Usage(input_tokens=10_000_000, output_tokens=0)
    session, model = compact_session(default=worker(expensive), compaction=config, window=3000, max_budget_usd=5.0)
    session.config.prices["test-model"] = ModelPrice(1.0, 1.0)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.BUDGET_LIMIT
    assert sum(is_summary_request(r) for r in model.requests) == 1
    assert session.total_cost_usd >= 10.0  # the summary was counted
    end = rec.of(E.COMPACTION_END)[-1]
    assert end["cancelled"] and "budget" in end["reason"]
    assert not any(isinstance(t, CompactionTurn) for t in session.history)
    usage_steps = [e for e in rec.of(E.USAGE) if e["usage"].input_tokens == 10_000_000]
    assert len(usage_steps) == 1
