"""Cost and budget: every call priced, USAGE carries cost, budgets stop the input, subagents roll up."""

from __future__ import annotations

import pytest

from ra.agent import SessionConfig, SessionState, StopReason, ToolResultsTurn
from ra.agent.controls.budget import UnknownPriceError
from ra.agent.events import EventKind as E
from ra.llm.pricing import ModelPrice
from ra.llm.testing import Step, call, calls, reply
from ra.llm.types import Usage

from .support import Recorder, make_session

#: $1 per million input tokens, $2 per million output: 1,000 in + 500 out = $0.002 a call.
PRICE = ModelPrice(1.0, 2.0)
USAGE = Usage(input_tokens=1_000, output_tokens=500)
PER_CALL = 0.002


def priced(script: list, **config: object) -> tuple:
    cfg = SessionConfig(prices={"test-model": PRICE}, **config)  # type: ignore[arg-type]
    return make_session(script, config=cfg)


def step_with_call(text: str = "x") -> Step:
    return Step(tool_calls=call("echo", text=text).tool_calls, usage=USAGE)


async def test_usage_events_carry_the_call_cost_and_the_running_total() -> None:
    session, _ = priced([step_with_call(), step_with_call(), reply("done", usage=USAGE)])
    rec = Recorder(session)
    await session.submit("go")
    usages = rec.of(E.USAGE)
    assert [u["cost_usd"] for u in usages] == pytest.approx([PER_CALL] * 3)
    assert [u["total_cost_usd"] for u in usages] == pytest.approx([PER_CALL, 2 * PER_CALL, 3 * PER_CALL])
    assert {u["price_source"] for u in usages} == {"configured"}
    assert {u["model"] for u in usages} == {"test-model"}
    assert session.total_cost_usd == pytest.approx(3 * PER_CALL)
    assert session.total_usage.input_tokens == 3_000 and session.total_usage.output_tokens == 1_500


async def test_budget_stops_after_the_response_and_before_its_tools() -> None:
    """Budget exact: the call that reaches the budget is the last; its tool calls do not run."""
    session, model = priced(
        [step_with_call("one"), step_with_call("two"), step_with_call("three"), reply("never")],
        max_budget_usd=2 * PER_CALL,
    )
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.BUDGET_LIMIT
    assert len(model.requests) == 2  # stopped once the second call had spent the budget
    ends = rec.of(E.TOOL_CALL_END)
    assert [e["skipped"] if "skipped" in e.data else False for e in ends] == [False, True]
    assert ends[1]["output"].startswith("Not executed: the run was stopped before this tool call ran")
    limit = rec.of(E.BUDGET_LIMIT)[0]
    assert limit["limit_usd"] == 2 * PER_CALL and limit["spent_usd"] == pytest.approx(2 * PER_CALL)
    # The conversation stays valid and usable: every call has a result.
    assert isinstance(session.history[-1], ToolResultsTurn)
    assert session.state is SessionState.IDLE


async def test_budget_is_checked_before_the_next_call_of_a_new_input() -> None:
    session, model = priced([reply("a", usage=USAGE), reply("b", usage=USAGE)], max_budget_usd=PER_CALL)
    first = await session.submit("one")
    assert first.stop_reason is StopReason.BUDGET_LIMIT  # the answer arrived, and the budget is spent
    second = await session.submit("two")
    assert second.stop_reason is StopReason.BUDGET_LIMIT and len(model.requests) == 1
    session.config.max_budget_usd = 10 * PER_CALL  # the host raises it: work goes on
    assert (await session.submit("three")).text == "b"


async def test_an_unpriced_model_under_a_budget_is_refused_before_any_call() -> None:
    """The default fails closed: a budget that cannot be priced makes no call at all (it used to
    count $0 and run to the end), and the error names the model and how to price it."""
    session, model = make_session([step_with_call(), reply("done", usage=USAGE)])
    session.config.prices.clear()  # test-model is in no catalogue
    session.config.max_budget_usd = 0.5
    assert session.config.unknown_price == "error"
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and isinstance(result.error, UnknownPriceError)
    assert model.requests == []
    assert result.error.model == "test-model" and result.error.role == "model"
    assert "'test-model'" in str(result.error) and "SessionConfig.prices" in str(result.error)
    assert "unknown_price='zero'" in str(result.error)
    assert rec.of(E.ERROR)[0]["error_type"] == "UnknownPriceError"
    assert session.state is SessionState.IDLE  # the host can set a price and go on
    session.config.prices["test-model"] = PRICE
    assert (await session.submit("again")).stop_reason is StopReason.COMPLETED
    assert session.total_cost_usd == pytest.approx(2 * PER_CALL)


async def test_unknown_price_zero_is_the_hosts_explicit_opt_out() -> None:
    session, model = make_session([step_with_call(), reply("done", usage=USAGE)])
    session.config.prices.clear()
    session.config.max_budget_usd = 0.0001
    session.config.unknown_price = "zero"
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.COMPLETED and len(model.requests) == 2  # $0 never reaches it
    warnings = [w for w in rec.of(E.WARNING) if w["code"] == "unknown_price"]
    assert len(warnings) == 1 and warnings[0]["model"] == "test-model"
    assert "count as $0 against the budget" in warnings[0]["message"]
    assert [u["cost_usd"] for u in rec.of(E.USAGE)] == [None, None]
    assert {u["price_source"] for u in rec.of(E.USAGE)} == {"unknown"}
    assert session.total_cost_usd == 0.0 and session.unpriced_calls == 2


async def test_without_a_budget_an_unknown_price_only_warns() -> None:
    session, _model = make_session([reply("done", usage=USAGE)])
    session.config.prices.clear()
    rec = Recorder(session)
    assert (await session.submit("go")).stop_reason is StopReason.COMPLETED
    (warning,) = rec.of(E.WARNING)
    assert warning["code"] == "unknown_price" and "budget" not in warning["message"]
    assert "not counted in the cost" in warning["message"]


async def test_subagent_spend_rolls_up_to_the_parent() -> None:
    from ra.agent.subagents import SubAgentManager

    session, model = priced([reply("parent done", usage=USAGE)])
    await session.submit("warm up")
    # A child on the same client: its calls come from the parent's script too.
    model.script.extend([reply("child answer", usage=USAGE)])
    handle = SubAgentManager(session).spawn("child task")
    await handle.wait()
    assert handle.session.total_cost_usd == pytest.approx(PER_CALL)
    assert session.total_cost_usd == pytest.approx(2 * PER_CALL)
    assert session.total_usage.input_tokens == 2_000
    assert session.usage.input_tokens == 1_000  # the session's own calls only
    await session.close()


async def test_a_response_cut_at_max_tokens_never_runs_its_tool_calls() -> None:
    cut = calls(("echo", {"text": "complete"}), ("echo", {"text": "trunc"}), finish_reason="length")
    session, model = make_session([cut, reply("unused")])
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.MAX_TOKENS
    assert len(model.requests) == 1
    ends = rec.of(E.TOOL_CALL_END)
    assert all(e.get("skipped") for e in ends) and len(ends) == 2
    assert "output token limit" in ends[0]["output"]


async def test_a_text_answer_cut_at_max_tokens_says_so() -> None:
    session, _ = make_session([Step(text="half an ans", finish_reason="length")])
    result = await session.submit("go")
    assert result.stop_reason is StopReason.MAX_TOKENS and result.text == "half an ans"


async def test_set_model_applies_to_the_next_call() -> None:
    session, model = make_session([call("echo", text="a"), reply("done")])
    session.set_model("other-model")
    await session.submit("go")
    assert [r.model for r in model.requests] == ["other-model", "other-model"]
    session.set_model("test-model")
    assert session.model == "test-model"
