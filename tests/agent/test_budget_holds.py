"""Budgets that hold: unpriced models refused up front, subagent spend counted against every
budget above it before each call, concurrent sessions overshooting by one call at most, and the
edge values of ``max_budget_usd``."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from ra.agent import GenericProfile, Session, SessionConfig, StopReason
from ra.agent.controls.budget import DEFAULT_OUTPUT_RESERVE, UnknownPriceError, projected_cost
from ra.agent.events import EventKind as E
from ra.agent.subagents import SubAgentManager
from ra.agent.subagents.definitions import AgentDefinition
from ra.agent.subagents.manager import SubAgentError
from ra.llm.client import Client
from ra.llm.errors import ServerError
from ra.llm.pricing import ModelPrice
from ra.llm.retrying import RetryPolicy
from ra.llm.testing import ScriptedAdapter, Step, fail, reply
from ra.llm.types import ToolCall, Usage
from tests.support.replay import ReplayServer

from .support import FAST_RETRY, FakeEnv, Recorder, default_tools, make_session

PRICE = ModelPrice(1.0, 2.0)
USAGE = Usage(input_tokens=1_000, output_tokens=500)
PER_CALL = 0.002  # 1,000 in at $1/M + 500 out at $2/M


def working(delay: float = 0.0) -> Step:
    """A call that asks for one more tool call: an agent that would go on for ever."""
    return Step(tool_calls=[ToolCall(f"c{next(_n)}", "echo", {"text": "x"})], usage=USAGE, delay=delay)


_n = iter(range(1, 1_000_000))


def priced(script: list, **config: object) -> tuple:
    return make_session(script, config=SessionConfig(prices={"test-model": PRICE}, **config))  # type: ignore[arg-type]


# -- max_budget_usd values ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, -0.01, True, "1"])
def test_budgets_that_are_no_budget_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="max_budget_usd must be a finite number"):
        SessionConfig(max_budget_usd=bad)  # type: ignore[arg-type]


async def test_a_budget_of_zero_makes_no_call() -> None:
    session, model = priced([reply("never", usage=USAGE)], max_budget_usd=0)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.BUDGET_LIMIT and model.requests == []
    assert rec.of(E.BUDGET_LIMIT)[0]["limit_usd"] == 0


async def test_a_budget_of_zero_makes_no_call_even_on_a_free_model() -> None:
    session, model = make_session([reply("never")], config=SessionConfig(max_budget_usd=0.0))
    assert (await session.submit("go")).stop_reason is StopReason.BUDGET_LIMIT and model.requests == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
async def test_a_budget_changed_to_no_budget_is_refused_not_run_unbounded(bad: float) -> None:
    session, model = priced([reply("a", usage=USAGE), working(), reply("never")], max_budget_usd=1.0)
    await session.submit("one")
    session.config.max_budget_usd = bad
    with pytest.raises(ValueError, match="max_budget_usd"):  # between inputs: the session validates
        await session.submit("two")
    session.config.max_budget_usd = 1.0

    def change(event: object) -> None:  # during an input: the budget control refuses it
        if event.kind is E.USAGE:  # type: ignore[attr-defined]
            session.config.max_budget_usd = bad

    session.add_listener(change, replay=False)
    result = await session.submit("three")
    assert result.stop_reason is StopReason.ERROR and "max_budget_usd must be a finite number" in str(result.error)
    assert len(model.requests) == 2  # the response that saw the change ran none of its tools


# -- prices: refused up front ----------------------------------------------------------------------


async def test_an_unpriced_fallback_model_is_refused_before_the_first_call() -> None:
    session, model = priced(
        [fail(ServerError("down", provider="scripted")), reply("from the fallback")], max_budget_usd=1.0
    )
    session.config.fallback_models = ("mystery-model",)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and isinstance(result.error, UnknownPriceError)
    assert result.error.model == "mystery-model" and result.error.role == "fallback model"
    assert "fallback model 'mystery-model'" in str(result.error)
    assert model.requests == []
    session.config.prices["mystery-model"] = ModelPrice(3.0, 3.0)  # priced: it may run
    assert (await session.submit("again")).text == "from the fallback"


async def test_a_price_of_zero_is_a_price() -> None:
    session, model = make_session(
        [reply("ok", usage=USAGE)], config=SessionConfig(max_budget_usd=0.01, prices={"test-model": ModelPrice.free()})
    )
    rec = Recorder(session)
    assert (await session.submit("go")).stop_reason is StopReason.COMPLETED and len(model.requests) == 1
    assert [u["cost_usd"] for u in rec.of(E.USAGE)] == [0.0] and not rec.of(E.WARNING)


async def test_the_local_provider_is_free_without_a_price_or_a_warning() -> None:
    """A model running in this process costs nothing: no refusal under a budget, no warning,
    cost 0 from the source "local" (even for a model name no catalogue knows)."""
    model = ScriptedAdapter([working(), reply("done", usage=USAGE)], name="local")
    profile = GenericProfile("local", "gemma-3-270m-it", default_tools(), system_prompt="test")
    config = SessionConfig(max_budget_usd=0.01, retry_policy=FAST_RETRY)
    session = Session(profile, FakeEnv(), Client(providers={"local": model}), config)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.COMPLETED and len(model.requests) == 2
    usages = rec.of(E.USAGE)
    assert [u["cost_usd"] for u in usages] == [0.0, 0.0] and {u["price_source"] for u in usages} == {"local"}
    assert not [w for w in rec.of(E.WARNING) if w["code"] == "unknown_price"]


async def test_a_subagent_on_an_unpriced_model_is_refused_at_spawn() -> None:
    session, model = priced([reply("warm", usage=USAGE)], max_budget_usd=1.0)
    await session.submit("warm up")
    manager = SubAgentManager(session)
    with pytest.raises(SubAgentError, match="no price is known for the subagent model 'mystery-model'"):
        manager.spawn("task", model="mystery-model")
    session.config.agents = {"cheap": AgentDefinition(description="d", prompt="p", model="mystery-model")}
    with pytest.raises(SubAgentError, match="spawn the agent without a model"):
        manager.spawn("task", agent_type="cheap")
    assert len(model.requests) == 1 and manager.handles() == []
    # Priced, it runs, and its spend counts.
    session.config.prices["mystery-model"] = ModelPrice(1.0, 2.0)
    model.add(reply("child", usage=USAGE))
    handle = manager.spawn("task", model="mystery-model")
    await handle.wait()
    assert session.total_cost_usd == pytest.approx(2 * PER_CALL)
    await session.close()


async def test_without_a_budget_a_subagent_may_use_an_unpriced_model() -> None:
    session, model = make_session([reply("child", usage=USAGE)])
    handle = SubAgentManager(session).spawn("task", model="mystery-model")
    await handle.wait()
    assert model.requests[0].model == "mystery-model"
    await session.close()


# -- subagents: the walk-up ----------------------------------------------------------------------------


async def test_a_subagent_is_stopped_by_its_parents_budget_before_its_call() -> None:
    """The child's own budget (a copy of the parent's) is not reached by its own spend; the
    parent's, which counts the parent's calls too, is: the child makes no call."""
    session, model = priced([reply("a", usage=USAGE), reply("b", usage=USAGE)], max_budget_usd=2 * PER_CALL)
    await session.submit("one")
    await session.submit("two")  # the parent has spent its whole budget
    assert session.total_cost_usd == pytest.approx(2 * PER_CALL)
    model.add(reply("never", usage=USAGE))
    handle = SubAgentManager(session).spawn("task")
    result = await handle.wait()
    assert result is not None and result.stop_reason == "budget_limit"
    assert len(model.requests) == 2 and handle.session.total_cost_usd == 0.0
    await session.close()


async def test_a_grandchild_counts_against_the_grandparents_budget() -> None:
    session, model = priced([], max_budget_usd=3 * PER_CALL, max_subagent_depth=2)
    model.default = lambda request: working()
    child = SubAgentManager(session).spawn("child task", max_turns=1)  # one call, then stops
    await child.wait()
    child.session.config.max_budget_usd = 100.0  # the host loosens the child's budget only
    grandchild = SubAgentManager(child.session).spawn("grandchild task", max_turns=0)
    result = await grandchild.wait()
    assert result is not None and result.stop_reason == "budget_limit"
    # The grandparent's $0.006 held: 1 child call + 2 grandchild calls.
    assert session.total_cost_usd == pytest.approx(3 * PER_CALL) and len(model.requests) == 3
    await session.close()


# -- concurrency: reservations ---------------------------------------------------------------------------


@pytest.mark.parametrize("run", range(6))
async def test_concurrent_subagents_overshoot_a_shared_budget_by_one_call_at_most(run: int) -> None:
    """Three subagents working at once under the parent's budget: without holds each passed the
    check before the others' calls were recorded, so the budget was overshot by a call per agent."""
    budget = (10 + run) * PER_CALL + PER_CALL / 2
    session, model = priced([], max_budget_usd=budget)
    model.default = lambda request: working(delay=0.005 + 0.002 * (run % 3))
    manager = SubAgentManager(session)
    handles = [manager.spawn(f"task {i}", max_turns=0) for i in range(3)]
    results = await asyncio.wait_for(asyncio.gather(*(h.wait() for h in handles)), 10)
    assert all(r is not None and r.stop_reason == "budget_limit" for r in results)
    spent = session.total_cost_usd
    assert budget <= spent <= budget + PER_CALL + 1e-12, (spent, budget)
    assert spent == pytest.approx(len(model.requests) * PER_CALL)
    assert session.cost_meter.reserved_usd == 0.0  # every hold settled
    await session.close()


async def test_a_failed_call_releases_its_hold() -> None:
    session, model = priced([fail(ServerError("down", provider="scripted"))], max_budget_usd=1.0)
    session.config.retry_policy = RetryPolicy(max_retries=0)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and len(model.requests) == 1
    assert session.cost_meter.reserved_usd == 0.0 and session.cost_meter.held_usd == 0.0


async def test_a_call_holds_its_projected_cost_while_in_flight() -> None:
    session, _model = priced([working(delay=0.05), reply("done", usage=USAGE)], max_budget_usd=1.0)
    task = asyncio.ensure_future(session.submit("go"))
    for _ in range(200):
        await asyncio.sleep(0.001)
        if session.cost_meter.held_usd:
            break
    held = session.cost_meter.held_usd
    tools = session._run.tool_definitions()
    chars = session._run.context_chars + sum(
        len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools
    )
    assert len(tools) > 0
    assert held == pytest.approx(projected_cost(PRICE, "test-model", chars))
    assert held == pytest.approx((-(-chars // 2) * 1.0 + DEFAULT_OUTPUT_RESERVE * 2.0) / 1e6)
    await task
    assert session.cost_meter.held_usd == 0.0


# -- Gemini through the session: its names, and thoughts billed as output ------------------------------


async def test_a_gemini_reply_is_priced_with_its_thoughts_under_its_models_name(replay_server: ReplayServer) -> None:
    """The real Gemini adapter against a recorded reply (9 prompt tokens, 9 candidates, 34
    thoughts), the model named as Gemini names it (``models/...``): the call is priced from the
    catalogue, thoughts as output, and a configured price for the plain name applies to it."""
    from ra.llm.catalog import get_model_info
    from ra.llm.providers.gemini import GeminiAdapter
    from tests.support.replay import cassette_path, load_cassette

    inter = load_cassette(cassette_path("gemini", "test_google_model.yaml"))
    replay_server.enqueue_cassette(inter)
    replay_server.enqueue_cassette(inter)
    adapter = GeminiAdapter(api_key="test-key", base_url=replay_server.base_url)
    profile = GenericProfile("gemini", "models/gemini-2.5-flash", default_tools(), system_prompt="test")
    session = Session(
        profile,
        FakeEnv(),
        Client(providers={"gemini": adapter}),
        SessionConfig(max_budget_usd=1.0, retry_policy=FAST_RETRY),
    )
    rec = Recorder(session)
    assert (await session.submit("Hello!")).stop_reason is StopReason.COMPLETED
    info = get_model_info("gemini-2.5-flash")
    assert info is not None
    (usage,) = rec.of(E.USAGE)
    assert usage["price_source"] == "catalog"
    expected = (9 * info.input_cost_per_million + (9 + 34) * info.output_cost_per_million) / 1e6  # type: ignore[operator]
    assert usage["cost_usd"] == pytest.approx(expected)
    session.config.prices = {"gemini-2.5-flash": ModelPrice(1.0, 1_000.0)}
    await session.submit("Hello again!")
    second = rec.of(E.USAGE)[1]
    assert second["price_source"] == "configured"
    assert second["cost_usd"] == pytest.approx((9 * 1.0 + 43 * 1_000.0) / 1e6)
    await session.close()


async def test_a_subagent_closed_mid_call_drops_its_hold() -> None:
    """A hold left behind would stall every other call of the tree near the budget."""
    session, model = priced([], max_budget_usd=1.0)
    model.default = lambda request: working(delay=5.0)
    handle = SubAgentManager(session).spawn("slow task")
    for _ in range(500):
        await asyncio.sleep(0.002)
        if session.cost_meter.reserved_usd:
            break
    assert session.cost_meter.reserved_usd > 0 and handle.session.cost_meter.held_usd > 0
    await asyncio.wait_for(handle.close(), 5)
    assert session.cost_meter.reserved_usd == 0.0 and handle.session.cost_meter.held_usd == 0.0
    await session.close()


async def test_a_call_that_turns_out_unpriced_stops_before_its_tools() -> None:
    """The check after the call: a price the host removed while the call was in flight leaves the
    call uncounted, so the input ends there (its tool calls not run) instead of going on at $0."""
    session, model = priced([working(), reply("never")], max_budget_usd=1.0)

    def drop_prices(event: object) -> None:
        if event.kind is E.TURN_START:  # type: ignore[attr-defined]
            session.config.prices.clear()

    session.add_listener(drop_prices, replay=False)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and isinstance(result.error, UnknownPriceError)
    assert "1 model call(s) had no known price" in str(result.error)
    assert len(model.requests) == 1
    assert [e["skipped"] for e in rec.of(E.TOOL_CALL_END)] == [True]


async def test_holds_let_calls_run_together_while_the_budget_has_room() -> None:
    """Holds serialize only near the limit: with a budget of many projections, the three agents'
    calls overlap (the tree holds several at once), and the spend still ends within one
    projection of the budget. Usage stays within each call's projection here (200 prompt tokens
    for a prompt of well over 400 characters), the documented condition of the bound."""
    price = ModelPrice(100.0, 0.0)  # output free: a projection is its prompt only
    usage = Usage(input_tokens=200, output_tokens=5)  # $0.02 a call
    budget = 0.3
    session, model = make_session([], config=SessionConfig(prices={"test-model": price}, max_budget_usd=budget))
    model.default = lambda request: Step(
        tool_calls=[ToolCall(f"c{next(_n)}", "echo", {"text": "x"})], usage=usage, delay=0.01
    )
    manager = SubAgentManager(session)
    most_held = 0.0

    async def watch() -> None:
        nonlocal most_held
        while True:
            most_held = max(most_held, session.cost_meter.reserved_usd)
            await asyncio.sleep(0.001)

    watcher = asyncio.ensure_future(watch())
    handles = [manager.spawn("work on this: " + "x" * 500 + f" ({i})", max_turns=0) for i in range(3)]
    try:
        await asyncio.wait_for(asyncio.gather(*(h.wait() for h in handles)), 20)
    finally:
        watcher.cancel()
    tools = handles[0].session._run.tool_definitions()
    tool_chars = sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools)
    largest = max(projected_cost(price, "test-model", h.session._run.context_chars + tool_chars) for h in handles)
    smallest_first = projected_cost(price, "test-model", 500 + tool_chars)
    assert most_held >= 2 * smallest_first  # at least two calls were in flight together
    spent = session.total_cost_usd
    assert budget <= spent <= budget + largest, (spent, budget, largest)
    await session.close()


async def test_a_price_that_fails_to_compute_stops_the_input_instead_of_running_unchecked() -> None:
    class Broken:
        def cost(self, usage: Usage) -> float:
            raise ArithmeticError("no rate for this tier")

    session, model = make_session([reply("never")], config=SessionConfig(max_budget_usd=1.0))
    session.config.prices["test-model"] = Broken()  # type: ignore[assignment]
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and isinstance(result.error.__cause__, ArithmeticError)
    assert "the budget could not be checked: ArithmeticError: no rate for this tier" in rec.of(E.ERROR)[0]["message"]
    assert model.requests == []
