"""genai-prices look-ups: once per model per process, started with the session (off the first
call's path), and never a way around a budget while they are still loading.

The look-up itself (``_GenaiPrice.find``) is replaced by a fake that counts its calls and can be
held back, so the tests control when a price arrives; the per-process cache is emptied per test.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ra.agent import GenericProfile, Session, SessionConfig, StopReason
from ra.agent.controls.budget import UnknownPriceError
from ra.agent.events import EventKind as E
from ra.llm import pricing
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, Step, StepLike, call, reply
from ra.llm.types import Usage

from .support import FAST_RETRY, FakeEnv, Recorder, default_tools

#: $1 per million input tokens, $2 per million output: 1,000 in + 500 out = $0.002 a call.
PRICE = ModelPrice(1.0, 2.0)
USAGE = Usage(input_tokens=1_000, output_tokens=500)
PER_CALL = 0.002


class FakeLookup:
    """Stands in for genai-prices: answers ``price`` for every model, after ``release`` is set."""

    def __init__(self, price: ModelPrice | None) -> None:
        self.price = price
        self.calls: list[tuple[str, str | None]] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def __call__(self, model: str, provider: str | None) -> ModelPrice | None:
        self.calls.append((model, provider))
        self.started.set()
        self.release.wait(5)
        return self.price


@pytest.fixture
def lookup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeLookup]:
    fake = FakeLookup(PRICE)
    monkeypatch.setenv("RA_PRICE_CACHE", str(tmp_path / "misses.json"))
    monkeypatch.setattr(pricing, "_lookups", {}, raising=False)
    monkeypatch.setattr(pricing._GenaiPrice, "find", staticmethod(fake))
    yield fake
    fake.release.set()  # never leave a worker thread waiting


def make_session(script: list[StepLike], *, config: SessionConfig) -> tuple[Session, ScriptedAdapter]:
    """A session on the scripted model ``test-model``, which no catalogue prices (unlike
    ``support.make_session``, which prices it for every other test)."""
    model = ScriptedAdapter(script)
    profile = GenericProfile("scripted", "test-model", default_tools(), system_prompt="You are a test agent.")
    return Session(profile, FakeEnv(), Client(providers={"scripted": model}), config), model


def config(**values: object) -> SessionConfig:
    return SessionConfig(retry_policy=FAST_RETRY, **values)  # type: ignore[arg-type]


def step_with_call() -> Step:
    return Step(tool_calls=call("echo", text="x").tool_calls, usage=USAGE)


@pytest.mark.parametrize("price", [PRICE, None], ids=["found", "missing"])
async def test_genai_prices_is_looked_up_once_per_model_across_sessions(
    lookup: FakeLookup, price: ModelPrice | None
) -> None:
    """Each session used to look the model up again (and each process paid the import on its
    first call); now the answer, a miss included, is kept for the process."""
    lookup.price = price
    costs = []
    for _ in range(2):
        session, _model = make_session([reply("done", usage=USAGE)], config=config())
        rec = Recorder(session)
        assert (await session.submit("go")).stop_reason is StopReason.COMPLETED
        costs += [(u["cost_usd"], u["price_source"]) for u in rec.of(E.USAGE)]
    assert lookup.calls == [("test-model", "scripted")]
    expected = (pytest.approx(PER_CALL), "genai-prices") if price else (None, "unknown")
    assert costs == [expected, expected]


async def test_the_lookup_starts_with_the_session_and_overlaps_the_first_call(lookup: FakeLookup) -> None:
    """The first call goes out while the look-up is still running (it used to start only once the
    call had answered); the call's cost still comes from the look-up, not from a guess."""
    lookup.release.clear()
    seen: list[bool] = []

    def first(_request: object) -> Step:
        seen.append(lookup.started.wait(2))  # the look-up is under way before the call answers
        lookup.release.set()
        return reply("done", usage=USAGE)

    session, _model = make_session([first], config=config())
    rec = Recorder(session)
    assert (await session.submit("go")).stop_reason is StopReason.COMPLETED
    assert seen == [True]
    (usage,) = rec.of(E.USAGE)
    assert usage["cost_usd"] == pytest.approx(PER_CALL) and usage["price_source"] == "genai-prices"


async def test_a_host_price_needs_no_lookup(lookup: FakeLookup) -> None:
    session, _model = make_session([reply("done", usage=USAGE)], config=config(prices={"test-model": PRICE}))
    assert (await session.submit("go")).stop_reason is StopReason.COMPLETED
    assert lookup.calls == [] and session.total_cost_usd == pytest.approx(PER_CALL)


# -- attacks: a budget is never bypassed because the price was still loading ------------------------


async def test_a_budget_waits_for_a_slow_lookup_and_stops_at_its_price(lookup: FakeLookup) -> None:
    """The price arrives after the session starts; the budget check before the first call waits
    for it, and the spend is counted at that price, so the budget stops the run on time."""
    lookup.release.clear()
    threading.Timer(0.2, lookup.release.set).start()
    session, model = make_session(
        [step_with_call(), step_with_call(), step_with_call(), reply("never")],
        config=config(max_budget_usd=2 * PER_CALL),
    )
    result = await session.submit("go")
    assert result.stop_reason is StopReason.BUDGET_LIMIT
    assert len(model.requests) == 2 and session.total_cost_usd == pytest.approx(2 * PER_CALL)
    assert session.unpriced_calls == 0


async def test_a_slow_lookup_that_finds_nothing_is_refused_under_a_budget(lookup: FakeLookup) -> None:
    lookup.price = None
    lookup.release.clear()
    threading.Timer(0.2, lookup.release.set).start()
    session, model = make_session([reply("never", usage=USAGE)], config=config(max_budget_usd=1.0))
    result = await session.submit("go")
    assert isinstance(result.error, UnknownPriceError) and model.requests == []


async def test_a_lookup_that_never_finishes_is_no_price_and_a_budget_refuses(
    lookup: FakeLookup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung look-up is waited for only up to LOOKUP_TIMEOUT; then the model counts as unpriced,
    which a budget refuses (rather than a call priced at $0)."""
    monkeypatch.setattr(pricing, "LOOKUP_TIMEOUT", 0.1, raising=False)
    lookup.release.clear()
    session, model = make_session([reply("never", usage=USAGE)], config=config(max_budget_usd=1.0))
    assert lookup.started.wait(5)
    result = await session.submit("go")
    assert isinstance(result.error, UnknownPriceError) and model.requests == []
    # The look-up's answer, when it comes, is the one kept: a later session gets the price.
    lookup.release.set()
    session2, _model2 = make_session([reply("done", usage=USAGE)], config=config(max_budget_usd=1.0))
    assert (await session2.submit("go")).stop_reason is StopReason.COMPLETED
    assert session2.total_cost_usd == pytest.approx(PER_CALL) and lookup.calls == [("test-model", "scripted")]
