"""Steering and follow-up (spec 2.6, 9.6): both modes, idle delivery, other threads."""

from __future__ import annotations

import asyncio
import threading

from ra.agent import SessionConfig, SteeringTurn, ToolResultsTurn
from ra.agent.events import EventKind as E
from ra.llm.testing import calls, reply
from ra.tools.registry import ToolContext

from .support import Recorder, make_session, user_texts


def steering_tool(message: str):
    def run(args: dict, ctx: ToolContext) -> str:
        ctx.session.steer(message)
        return "steered"

    return run


async def test_after_round_steering_waits_for_the_whole_round() -> None:
    session, model = make_session(
        [calls(("steer", {}), ("echo", {"text": "still runs"})), reply("ok")],
    )
    session.profile.tool_registry.add("steer", "steer", None, steering_tool("change of plan"))
    rec = Recorder(session)
    await session.submit("task")
    results = next(t for t in session.history if isinstance(t, ToolResultsTurn))
    assert [r.content for r in results.results] == ["steered", "echo: still runs"]
    # The steering turn comes right after the tool results, and reaches the model as a user message.
    index = session.history.turns.index(results)
    assert isinstance(session.history[index + 1], SteeringTurn)
    assert session.history[index + 1].content == "change of plan"  # type: ignore[union-attr]
    second = model.requests[1]
    assert second.messages[-1].role == "user" and second.messages[-1].text == "change of plan"
    assert second.messages[-2].role == "tool"
    injected = rec.of(E.STEERING_INJECTED)
    assert [e["content"] for e in injected] == ["change of plan"]
    assert rec.kinds(E.TURN_END, E.STEERING_INJECTED)[:2] == [E.TURN_END, E.STEERING_INJECTED]


async def test_between_calls_steering_skips_the_rest() -> None:
    config = SessionConfig(steering_mode="between_calls")
    session, model = make_session(
        [calls(("echo", {"text": "1"}), ("steer", {}), ("echo", {"text": "3"}), ("echo", {"text": "4"})), reply("ok")],
        config=config,
        parallel=True,  # between_calls implies sequential execution
    )
    session.profile.tool_registry.add("steer", "steer", None, steering_tool("stop that"))
    rec = Recorder(session)
    await session.submit("task")
    results = next(t for t in session.history if isinstance(t, ToolResultsTurn))
    contents = [r.content for r in results.results]
    assert contents[:2] == ["echo: 1", "steered"]
    assert all(c.startswith("Skipped: the user sent a new message") for c in contents[2:])
    assert [r.is_error for r in results.results] == [False, False, True, True]
    ends = rec.of(E.TOOL_CALL_END)
    assert [e.get("skipped", False) for e in ends] == [False, False, True, True]
    assert len(rec.of(E.TOOL_CALL_START)) == 4  # every call still gets START/END
    assert model.requests[1].messages[-1].text == "stop that"


async def test_between_calls_without_steering_runs_everything() -> None:
    session, _ = make_session(
        [calls(("echo", {"text": "1"}), ("echo", {"text": "2"})), reply("ok")],
        config=SessionConfig(steering_mode="between_calls"),
    )
    await session.submit("task")
    results = next(t for t in session.history if isinstance(t, ToolResultsTurn))
    assert [r.content for r in results.results] == ["echo: 1", "echo: 2"]


async def test_steer_while_idle_is_delivered_on_next_submit() -> None:
    session, model = make_session([reply("ok")])
    session.steer("use tabs")
    assert session.pending_steering == 1
    await session.submit("format the file")
    assert user_texts(model.requests[0]) == ["format the file", "use tabs"]
    assert session.pending_steering == 0


async def test_steering_during_final_answer_continues_the_loop() -> None:
    session, model = make_session([reply("I am done", delay=0.1), reply("Adjusted.")])
    task = asyncio.create_task(session.submit("task"))
    await asyncio.sleep(0.03)
    session.steer("one more thing")
    result = await task
    assert result.text == "Adjusted." and result.steps == 2
    assert user_texts(model.requests[1]) == ["task", "one more thing"]


async def test_steer_and_follow_up_from_another_thread() -> None:
    session, model = make_session([reply("first", delay=0.15), reply("second"), reply("third")])
    started = threading.Event()

    def other_thread() -> None:
        started.wait(2)
        session.steer("from a thread")
        session.follow_up("follow-up from a thread")

    thread = threading.Thread(target=other_thread)
    thread.start()
    task = asyncio.create_task(session.submit("task"))
    await asyncio.sleep(0.02)  # the first model call is in flight
    started.set()
    thread.join()  # blocks the loop: both messages are queued before the call can finish
    result = await task
    assert result.inputs == 2
    assert "from a thread" in user_texts(model.requests[1])
    assert user_texts(model.requests[-1])[-1] == "follow-up from a thread"


async def test_many_steers_from_threads_none_lost() -> None:
    session, _model = make_session([reply("x", delay=0.05), reply("y")])
    task = asyncio.create_task(session.submit("task"))
    threads = [threading.Thread(target=lambda n=n: [session.steer(f"m{n}-{i}") for i in range(50)]) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    await task
    steered = [t.content for t in session.history if isinstance(t, SteeringTurn)]
    assert sorted(steered) == sorted(f"m{n}-{i}" for n in range(4) for i in range(50))
