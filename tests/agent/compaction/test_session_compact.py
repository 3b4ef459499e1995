"""Session.compact(): on demand, between inputs; events and the SDK's compact_boundary."""

from __future__ import annotations

import asyncio

import pytest

from ra.agent import SessionConfig
from ra.agent.compaction import CompactionConfig, context_from_turns
from ra.agent.errors import SessionBusyError, SessionClosedError
from ra.agent.events import EventKind as E
from ra.agent.history import CompactionTurn
from ra.llm.testing import Step, reply
from ra.llm.types import Request, ToolCall

from ..support import Recorder, make_session
from .helpers import SUMMARY, is_summary_request, pairing_problems, user_texts


def worker(steps: int, *, delay: float = 0.0):  # type: ignore[no-untyped-def]
    state = {"n": 0}

    def answer(request: Request) -> Step:
        if is_summary_request(request):
            return reply(SUMMARY)
        state["n"] += 1
        if state["n"] % (steps + 1) == 0:
            return reply("done")
        return Step(tool_calls=[ToolCall(f"c{state['n']}", "echo", {"text": f"{state['n']}"})], delay=delay)

    return answer


async def test_compact_summarises_on_demand_in_any_mode() -> None:
    """The default mode is "warn": compact() still works, with the instructions in the prompt."""
    session, model = make_session(default=worker(6), context_window=1_000_000)
    rec = Recorder(session)
    await session.submit("THE TASK")
    before = len(session.history)
    turn = await session.compact("focus on the failing test")
    assert isinstance(turn, CompactionTurn) and turn.trigger == "manual"
    assert session.history[-1] is turn and len(session.history) == before + 1
    (summary_request,) = [r for r in model.requests if is_summary_request(r)]
    assert "focus on the failing test" in summary_request.messages[-1].text
    assert session.history.messages == context_from_turns(session.history.turns)
    (start,) = rec.of(E.COMPACTION_START)
    (end,) = rec.of(E.COMPACTION_END)
    assert start["trigger"] == end["trigger"] == "manual" and end["strategy"] == "summary"
    assert end["tokens_before"] == turn.tokens_before and end["tokens_after"] == turn.tokens_after
    assert turn.user_messages == ["THE TASK"]
    # The next input goes on from the compacted context.
    await session.submit("NEXT")
    last = model.requests[-1]
    assert last.messages[1].text.startswith("[Context compacted]") and user_texts(last)[1] == "THE TASK"
    assert pairing_problems(last) == []
    # What a resumed session rebuilds from the turns is what the live one sends.
    assert session.history.messages == context_from_turns(session.history.turns)
    assert last.messages[1:] == session.history.messages[: len(last.messages) - 1]


async def test_compact_with_nothing_to_summarise_returns_none_and_emits_nothing() -> None:
    session, model = make_session([reply("hi")])
    rec = Recorder(session)
    assert await session.compact() is None  # nothing yet
    await session.submit("one")
    assert await session.compact() is None  # one exchange: always kept
    assert rec.of(E.COMPACTION_START) == [] and len(model.requests) == 1


async def test_compact_while_processing_is_refused_and_submit_while_compacting_too() -> None:
    session, model = make_session(default=worker(3, delay=0.2), context_window=1_000_000)
    task = asyncio.create_task(session.submit("go"))
    await asyncio.sleep(0.05)
    with pytest.raises(SessionBusyError, match="compact\\(\\) runs between inputs"):
        await session.compact()
    await task

    slow_summary = {"go": asyncio.Event()}

    async def summary_then_release() -> None:
        await asyncio.sleep(0.05)
        with pytest.raises(SessionBusyError, match="compacting"):
            await session.submit("too early")
        with pytest.raises(SessionBusyError):
            await session.compact()
        slow_summary["go"].set()

    model.script.insert(0, Step(text=SUMMARY, delay=0.2))
    checker = asyncio.create_task(summary_then_release())
    turn = await session.compact()
    await checker
    assert turn is not None and slow_summary["go"].is_set()


async def test_compact_on_a_closed_session_is_refused() -> None:
    session, _ = make_session([reply("hi")])
    await session.submit("x")
    await session.close()
    with pytest.raises(SessionClosedError):
        await session.compact()
    with pytest.raises(TypeError):
        await session.compact(42)  # type: ignore[arg-type]


async def test_abort_during_compact_closes_the_session() -> None:
    session, model = make_session(default=worker(4), context_window=1_000_000)
    await session.submit("go")
    model.script.insert(0, Step(text=SUMMARY, delay=5))
    task = asyncio.create_task(session.compact())
    await asyncio.sleep(0.05)
    session.abort()
    with pytest.raises(SessionClosedError, match="closed while compacting"):
        await asyncio.wait_for(task, 3)
    await session.wait_closed()
    assert not any(isinstance(t, CompactionTurn) for t in session.history)


async def test_the_sdk_stream_marks_a_compaction_with_a_compact_boundary() -> None:
    from ra.sdk.messages import MessageStream, SystemMessage

    config = SessionConfig(context_overflow="compact", max_tool_rounds_per_input=0, enable_loop_detection=False)
    config.compaction = CompactionConfig(clear_tool_outputs=False)
    state = {"n": 0}

    def answer(request: Request) -> Step:
        if is_summary_request(request):
            return reply(SUMMARY)
        state["n"] += 1
        if state["n"] > 30:
            return reply("done")
        return Step(tool_calls=[ToolCall(f"c{state['n']}", "echo", {"text": "x" * 400})])

    session, _ = make_session(config=config, context_window=4000, default=answer)
    out: list[object] = []
    stream = MessageStream(session, out.append)
    session.add_listener(stream, replay=False)
    stream.start()
    await session.submit("go")
    boundaries = [m for m in out if isinstance(m, SystemMessage) and m.subtype == "compact_boundary"]
    turns = [t for t in session.history if isinstance(t, CompactionTurn)]
    assert boundaries and len(boundaries) == len(turns)
    meta = boundaries[0].to_json()["compact_metadata"]
    assert meta == {
        "trigger": "auto",
        "pre_tokens": turns[0].tokens_before,
        "post_tokens": turns[0].tokens_after,
        "strategy": "summary",
    }
    await session.compact()
    manual = [m for m in out if isinstance(m, SystemMessage) and m.subtype == "compact_boundary"][-1]
    assert manual.to_json()["compact_metadata"]["trigger"] == "manual"
