"""When compaction runs: before the window is full, on overflow, never in a loop."""

from __future__ import annotations

import pytest

from ra.agent import SessionConfig, StopReason
from ra.agent.compaction import CompactionConfig
from ra.agent.errors import ContextOverflowError
from ra.agent.events import EventKind as E
from ra.agent.history import CompactionTurn
from ra.llm.errors import ContextLengthError
from ra.llm.testing import Step, call, reply
from ra.llm.types import Request, ToolCall

from ..support import Recorder, make_session
from .helpers import SUMMARY, agent, compact_session, is_summary_request, request_chars


def overflow() -> ContextLengthError:
    return ContextLengthError("prompt is too long", provider="scripted", status_code=400)


async def test_no_compaction_while_the_context_plus_the_reserve_fits() -> None:
    # window 4000 -> reserve 1000: compaction starts once the estimate passes 3000 tokens.
    session, model = compact_session(default=agent(6, size=400))
    rec = Recorder(session)
    assert (await session.submit("go")).text == "done"
    assert rec.of(E.COMPACTION_START) == []
    assert not any(is_summary_request(r) for r in model.requests)


async def test_compaction_starts_when_the_estimate_plus_the_reserve_passes_the_window() -> None:
    session, model = compact_session(default=agent(40, size=400))
    rec = Recorder(session)
    assert (await session.submit("go")).text == "done"
    starts = rec.of(E.COMPACTION_START)
    assert starts and all(e["trigger"] == "auto" for e in starts)
    budgets = session.config.compaction.budgets(4000)
    # Each started when the estimate plus the reserve had just passed the window, never much later.
    for event in starts:
        assert event["tokens_before"] + budgets.reserve > 4000
        assert event["tokens_before"] < 4000
    # No main request was ever larger than the window.
    assert max(request_chars(r) // 4 for r in model.requests) < 4000


async def test_a_streamed_session_compacts_the_same_way() -> None:
    session, _model = compact_session(default=agent(40, size=400), streaming=True)
    rec = Recorder(session)
    assert (await session.submit("go")).text == "done"
    assert [e for e in rec.of(E.COMPACTION_END) if e["strategy"] == "summary"]
    assert rec.of(E.ASSISTANT_TEXT_DELTA)  # the loop's calls were streamed


async def test_auto_false_compacts_only_on_overflow() -> None:
    session, _model = compact_session(default=agent(40, size=400), compaction=CompactionConfig(auto=False))
    rec = Recorder(session)
    assert (await session.submit("go")).text == "done"
    assert rec.of(E.COMPACTION_START) == []


@pytest.mark.parametrize("mode", ["warn", "prune"])
async def test_other_overflow_modes_never_compact(mode: str) -> None:
    config = SessionConfig(context_overflow=mode, max_tool_rounds_per_input=0, enable_loop_detection=False)  # type: ignore[arg-type]
    session, model = make_session(config=config, context_window=4000, default=agent(40, size=400))
    rec = Recorder(session)
    await session.submit("go")
    assert rec.of(E.COMPACTION_START) == [] and not any(is_summary_request(r) for r in model.requests)


async def test_overflow_is_recovered_by_compacting_then_retrying() -> None:
    """The provider refuses once (our estimate was wrong): compact, then the same call again."""
    refused = {"done": False}
    inner = agent(8, size=300)
    seen: list[Request] = []

    def answer(request: Request) -> Step | Exception:
        seen.append(request)
        if not is_summary_request(request) and len(seen) == 7 and not refused["done"]:
            refused["done"] = True
            return overflow()
        return inner(request)

    # A large window: the proactive trigger never fires, only the recovery.
    session, _model = compact_session(window=1_000_000, default=answer)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.text == "done" and result.stop_reason is StopReason.COMPLETED
    (start,) = rec.of(E.COMPACTION_START)
    assert start["trigger"] == "overflow"
    compaction = next(t for t in session.history if isinstance(t, CompactionTurn))
    assert compaction.trigger == "overflow"
    # The request after the summary is the refused one again, now compacted.
    after = seen[seen.index(next(r for r in seen if is_summary_request(r))) + 1]
    assert not is_summary_request(after) and after.messages[1].text.startswith("[Context compacted]")


async def test_overflow_with_nothing_left_to_compact_is_a_clear_error() -> None:
    session, model = compact_session(window=1_000_000, default=overflow())
    result = await session.submit("x" * 100)
    assert result.stop_reason is StopReason.ERROR
    assert isinstance(result.error, ContextOverflowError) and "nothing is left to compact" in str(result.error)
    assert session.state.value == "idle"  # the session stays usable
    assert len(model.requests) == 1  # no summary request: there was nothing to summarise


async def test_a_call_refused_again_and_again_stops_after_a_bounded_number_of_compactions() -> None:
    from ra.agent.compaction.compactor import MAX_OVERFLOW_RECOVERIES

    steps = [call("echo", text=f"{i} " + "y" * 400) for i in range(30)]

    def answer(request: Request) -> Step | Exception:
        return reply(SUMMARY) if is_summary_request(request) else overflow()

    session, model = compact_session(steps, window=1_000_000, default=answer)
    result = await session.submit("go")
    assert isinstance(result.error, ContextOverflowError)
    main_calls = [r for r in model.requests if not is_summary_request(r)]
    assert len(main_calls) <= 30 + MAX_OVERFLOW_RECOVERIES + 1


async def test_three_compactions_in_a_row_that_free_little_end_the_input() -> None:
    """Each step adds a result that alone nearly fills the window: compaction cannot make room,
    and after three tries it says so instead of compacting forever."""

    def answer(request: Request) -> Step:
        if is_summary_request(request):
            return reply(SUMMARY)
        return Step(tool_calls=[ToolCall(f"c{len(request.messages)}", "echo", {"text": "z" * 11_000})])

    compaction = CompactionConfig(clear_tool_outputs=False)  # no cheap pass: only summaries
    session, model = compact_session(window=4000, default=answer, compaction=compaction)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR
    assert isinstance(result.error, ContextOverflowError) and "3 compactions in a row" in str(result.error)
    ends = rec.of(E.COMPACTION_END)
    assert len(ends) == 3 and all(e["tokens_after"] + 1000 > 4000 for e in ends)
    assert len(model.requests) < 10


def test_a_compaction_that_frees_less_than_5_percent_counts_as_making_no_room() -> None:
    from types import SimpleNamespace

    from ra.agent.compaction.compactor import _count

    budgets = CompactionConfig().budgets(None)
    run = SimpleNamespace(compaction_stalls=0, profile=SimpleNamespace(context_window_size=None))
    _count(run, "auto", budgets, 10_000, 9_600)  # type: ignore[arg-type]
    _count(run, "overflow", budgets, 10_000, 9_900)  # type: ignore[arg-type]
    assert run.compaction_stalls == 2
    _count(run, "manual", budgets, 10_000, 10_000)  # type: ignore[arg-type]  # on demand: not counted
    _count(run, "auto", budgets, 10_000, 5_000)  # type: ignore[arg-type]  # made room: the count starts over
    assert run.compaction_stalls == 0
    for _ in range(2):
        _count(run, "auto", budgets, 10_000, 9_999)  # type: ignore[arg-type]
    with pytest.raises(ContextOverflowError, match="3 compactions in a row"):
        _count(run, "auto", budgets, 10_000, 9_999)  # type: ignore[arg-type]


async def test_a_failing_summary_call_ends_the_input_and_keeps_the_context() -> None:
    from ra.llm.errors import AuthenticationError

    def answer(request: Request) -> Step | Exception:
        if is_summary_request(request):
            return AuthenticationError("bad key", provider="scripted", status_code=401)
        return agent(100, size=400)(request)

    session, _model = compact_session(default=answer)
    rec = Recorder(session)
    result = await session.submit("go")
    assert isinstance(result.error, AuthenticationError)
    end = rec.of(E.COMPACTION_END)[-1]
    assert end["strategy"] == "none" and "AuthenticationError" in end["reason"]
    assert len(rec.of(E.COMPACTION_START)) == len(rec.of(E.COMPACTION_END))  # every start has its end
    assert not any(isinstance(t, CompactionTurn) for t in session.history)
