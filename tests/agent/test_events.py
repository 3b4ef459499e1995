"""Events (spec 2.9, 9.10): kinds, order, delivery, full output in TOOL_CALL_END, streaming."""

from __future__ import annotations

import asyncio
import threading
import time

from ra.agent import SessionConfig
from ra.agent.config import SessionState
from ra.agent.event_hub import EventHub
from ra.agent.events import EventKind as E
from ra.agent.events import SessionEnd, SessionStart, TurnStart, UserInput
from ra.llm.testing import Step, call, reply
from ra.llm.types import Usage
from ra.tools.registry import ToolContext

from .support import Recorder, make_session


async def test_event_order_for_a_tool_round() -> None:
    session, _ = make_session([call("echo", text="hi"), reply("done")])
    stream = session.events()
    await session.submit("go")
    await session.close()
    kinds = [e.kind async for e in stream]
    assert kinds == [
        E.SESSION_START,
        E.USER_INPUT,
        E.TURN_START,
        E.ASSISTANT_TEXT_END,
        E.USAGE,
        E.TOOL_CALL_START,
        E.TOOL_CALL_END,
        E.TURN_END,
        E.TURN_START,
        E.ASSISTANT_TEXT_END,
        E.USAGE,
        E.TURN_END,
        E.PROCESSING_END,
        E.SESSION_END,
    ]


async def test_event_fields() -> None:
    session, _ = make_session([call("echo", _id="c9", text="hi"), reply("done")])
    stream = session.events()
    await session.submit("go")
    await session.close()
    events = [e async for e in stream]
    assert all(e.session_id == session.id for e in events)
    assert all(isinstance(e.timestamp, float) for e in events)
    assert [e.timestamp for e in events] == sorted(e.timestamp for e in events)
    start = next(e for e in events if e.kind is E.TOOL_CALL_START)
    assert start["tool_name"] == "echo" and start["call_id"] == "c9" and start["arguments"] == {"text": "hi"}
    end = next(e for e in events if e.kind is E.TOOL_CALL_END)
    assert end["output"] == "echo: hi" and end["is_error"] is False and end["call_id"] == "c9"
    text_end = [e for e in events if e.kind is E.ASSISTANT_TEXT_END][-1]
    assert text_end["text"] == "done" and text_end["tool_calls"] == []
    assert events[0]["model"] == "test-model"
    assert events[-1]["state"] == "closed" and events[-1]["reason"] == "closed"
    usage = [e for e in events if e.kind is E.USAGE]
    assert usage[-1]["total"].input_tokens == sum(u["usage"].input_tokens for u in usage)


async def test_backlog_reaches_the_first_consumer() -> None:
    session, _ = make_session([reply("early")])
    await session.submit("before anyone listens")
    stream = session.events()  # subscribes now; gets everything so far
    late = session.events()  # a second consumer: only what comes next
    await session.close()
    first = [e.kind async for e in stream]
    second = [e.kind async for e in late]
    assert first[0] is E.SESSION_START and E.USER_INPUT in first and first[-1] is E.SESSION_END
    assert second == [E.SESSION_END]


async def test_several_consumers_iterate_concurrently() -> None:
    session, _ = make_session([call("echo", text="x"), reply("done")])
    a, b = session.events(), session.events()

    async def drain(sub) -> list[E]:
        return [e.kind async for e in sub]

    ta, tb = asyncio.create_task(drain(a)), asyncio.create_task(drain(b))
    await session.submit("go")
    await session.close()
    ka, kb = await asyncio.wait_for(asyncio.gather(ta, tb), 5)
    assert ka[-1] is E.SESSION_END and kb[-1] is E.SESSION_END
    assert ka[1:] == kb  # the first consumer also got SESSION_START from the backlog
    assert ka[0] is E.SESSION_START


async def test_consumer_can_stop_early() -> None:
    session, _ = make_session([reply("x")])
    stream = session.events()
    async for event in stream:
        assert event.kind is E.SESSION_START
        break
    stream.close()
    await session.submit("go")  # nothing is queued for the closed consumer
    assert stream.pending() == 0
    await session.close()


async def test_backlog_limit_keeps_the_newest() -> None:
    hub = EventHub("s", backlog_limit=2)
    for payload in (SessionStart("p", "m", 0, SessionState.IDLE), UserInput("hi", "submit"), TurnStart(1, 0)):
        hub.emit(payload)
    sub = hub.subscribe()
    hub.emit(SessionEnd(SessionState.CLOSED, "closed", None, 0, Usage()))
    assert [e.kind async for e in sub] == [E.USER_INPUT, E.TURN_START, E.SESSION_END]


async def test_broken_listener_does_not_break_the_loop() -> None:
    session, _ = make_session([reply("fine")])

    def bad(event) -> None:
        raise ValueError("ui bug")

    session.add_listener(bad)
    assert (await session.submit("go")).text == "fine"


async def test_listener_can_be_removed() -> None:
    session, _ = make_session([reply("a"), reply("b")])
    seen: list[E] = []
    remove = session.add_listener(lambda e: seen.append(e.kind))
    await session.submit("1")
    count = len(seen)
    remove()
    await session.submit("2")
    assert len(seen) == count > 0


async def test_tool_call_end_has_full_output_model_gets_truncated() -> None:
    session, model = make_session([call("dump", _id="d1"), reply("ok")])
    big = "".join(f"line {i}\n" for i in range(20_000))  # ~190k chars, 20k lines
    session.profile.tool_registry.add("dump", "big output", None, lambda a, c: big, output_limit=1000)
    rec = Recorder(session)
    await session.submit("go")
    end = rec.of(E.TOOL_CALL_END)[0]
    assert end["output"] == big and end["truncated"] is True
    tool_msg = next(m for m in model.requests[1].messages if m.role == "tool")
    sent = tool_msg.content[0].tool_result.content  # type: ignore[union-attr]
    assert len(sent) < 1400 and "characters were removed from the middle" in sent


async def test_streaming_text_events() -> None:
    session, _ = make_session([reply("Hello streaming world", chunk_size=5, reasoning="hmm")], streaming=True)
    rec = Recorder(session)
    result = await session.submit("go")
    kinds = rec.kinds(E.ASSISTANT_TEXT_START, E.ASSISTANT_TEXT_DELTA, E.ASSISTANT_TEXT_END, E.ASSISTANT_REASONING_DELTA)
    assert kinds[0] is E.ASSISTANT_REASONING_DELTA
    assert kinds[1] is E.ASSISTANT_TEXT_START and kinds[-1] is E.ASSISTANT_TEXT_END
    deltas = [e["delta"] for e in rec.of(E.ASSISTANT_TEXT_DELTA)]
    assert len(deltas) == 5 and "".join(deltas) == "Hello streaming world" == result.text
    assert rec.of(E.ASSISTANT_TEXT_END)[0]["reasoning"] == "hmm"


async def test_streaming_can_be_switched_off() -> None:
    session, _model = make_session([reply("plain")], streaming=True, config=SessionConfig(stream=False))
    rec = Recorder(session)
    await session.submit("go")
    assert rec.kinds(E.ASSISTANT_TEXT_START, E.ASSISTANT_TEXT_DELTA) == []
    assert rec.of(E.ASSISTANT_TEXT_END)[0]["text"] == "plain"


async def test_streamed_tool_calls_are_rebuilt() -> None:
    session, _ = make_session([call("echo", text="from a stream"), reply("ok")], streaming=True)
    rec = Recorder(session)
    await session.submit("go")
    assert rec.of(E.TOOL_CALL_END)[0]["output"] == "echo: from a stream"


async def test_tool_output_deltas_from_the_loop_and_from_a_thread() -> None:
    session, _ = make_session([call("chatty"), call("threaded"), reply("ok")])

    async def chatty(args: dict, ctx: ToolContext) -> str:
        ctx.emit_output("part 1\n")
        ctx.on_output("stderr", "warn\n")  # type: ignore[misc]
        return "part 1\n"

    def threaded(args: dict, ctx: ToolContext) -> str:
        assert threading.current_thread() is not threading.main_thread()
        ctx.emit_output("from a worker thread")
        time.sleep(0.05)  # let the loop deliver the delta before the END
        return "done"

    session.profile.tool_registry.add("chatty", "streams", None, chatty)
    session.profile.tool_registry.add("threaded", "blocking", None, threaded, blocking=True)
    rec = Recorder(session)
    await session.submit("go")
    deltas = [(e["tool_name"], e["stream"], e["delta"]) for e in rec.of(E.TOOL_CALL_OUTPUT_DELTA)]
    assert deltas == [
        ("chatty", "stdout", "part 1\n"),
        ("chatty", "stderr", "warn\n"),
        ("threaded", "stdout", "from a worker thread"),
    ]
    order = rec.kinds(E.TOOL_CALL_START, E.TOOL_CALL_OUTPUT_DELTA, E.TOOL_CALL_END)
    assert order == [E.TOOL_CALL_START, E.TOOL_CALL_OUTPUT_DELTA, E.TOOL_CALL_OUTPUT_DELTA, E.TOOL_CALL_END] * 1 + [
        E.TOOL_CALL_START,
        E.TOOL_CALL_OUTPUT_DELTA,
        E.TOOL_CALL_END,
    ]


async def test_session_start_and_end_bracket_everything() -> None:
    session, _ = make_session([Step(text="x")])
    stream = session.events()
    await session.submit("a")
    await session.close()
    await session.close()  # idempotent: one SESSION_END
    events = [e async for e in stream]
    assert events[0].kind is E.SESSION_START and events[-1].kind is E.SESSION_END
    assert sum(e.kind is E.SESSION_END for e in events) == 1
    assert sum(e.kind is E.SESSION_START for e in events) == 1


async def test_iterator_ends_for_a_consumer_waiting_at_close() -> None:
    session, _ = make_session()
    stream = session.events()
    assert (await stream.__anext__()).kind is E.SESSION_START
    waiter = asyncio.create_task(stream.__anext__())
    await asyncio.sleep(0)
    await session.close()
    assert (await asyncio.wait_for(waiter, 2)).kind is E.SESSION_END
    assert [e async for e in stream] == []


async def test_first_listener_gets_the_backlog_and_releases_it() -> None:
    session, _ = make_session([reply("x")])
    seen: list[E] = []
    session.add_listener(lambda e: seen.append(e.kind))
    assert seen == [E.SESSION_START]
    late = session.events()  # the backlog went to the listener
    await session.submit("go")
    await session.close()
    kinds = [e.kind async for e in late]
    assert kinds[0] is E.USER_INPUT and kinds[-1] is E.SESSION_END
    assert seen[1:] == kinds
