"""The Go-port spec's verification checklist (section 12), a test per line, named after it.

Persistence and compaction lines belong to the durable-sessions work and are not here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ra.agent import SessionConfig, StopReason
from ra.agent.events import EventKind as E
from ra.agent.hooks import HookEvent
from ra.llm.pricing import ModelPrice
from ra.llm.testing import Step, call, calls, reply
from ra.llm.types import Usage
from ra.sdk import AgentClient, AssistantMessage, QueryOptions, ResultMessage, SystemMessage, UserMessage

from ..agent.support import Recorder, make_session


async def test_turn_counting() -> None:
    """TurnCount increments exactly once per LLM round-trip (tool rounds and the final answer)."""
    session, model = make_session(
        [call("echo", text="a"), calls(("echo", {"text": "b"}), ("echo", {"text": "c"})), reply("ok")]
    )
    rec = Recorder(session)
    result = await session.submit("go")
    assert len(model.requests) == 3 and session.turn_count == 3 and result.steps == 3
    assert len(rec.of(E.USAGE)) == 3
    model.script.append(reply("second input"))
    await session.submit("again")
    assert session.turn_count == 4 == len(model.requests)


async def test_stop_reason_mapping() -> None:
    """end_turn ends the input, tool_use runs the tools, max_tokens is continued (spec 7) and,
    cut again and again, stops without running the (possibly incomplete) calls, stop_sequence
    ends the input like end_turn."""
    from ra.agent.output_limit import MAX_CUT_RESPONSES

    cut = [Step(text="cut", finish_reason="length")] * (MAX_CUT_RESPONSES + 1)
    cases: list[tuple[list[Step], StopReason]] = [
        ([Step(text="done", finish_reason="stop")], StopReason.COMPLETED),
        (
            [Step(text="cut", finish_reason="length"), Step(text=" and done", finish_reason="stop")],
            StopReason.COMPLETED,
        ),
        (cut, StopReason.MAX_TOKENS),
        ([Step(text="at the sequence", finish_reason="stop_sequence")], StopReason.COMPLETED),
    ]
    for steps, expected in cases:
        session, _ = make_session(list(steps))
        assert (await session.submit("go")).stop_reason is expected, steps
    session, model = make_session([call("echo", text="x"), reply("after tools")])
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.COMPLETED and len(rec.of(E.TOOL_CALL_END)) == 1
    assert model.requests[0].tools  # tool_use: the tools ran and the model was called again


def test_one_tool_message_per_result() -> None:
    """Each tool result is its own role:tool message on the Chat Completions wire."""
    from ra.agent.history import AssistantTurn, History, ToolResultsTurn, UserTurn
    from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
    from ra.llm.types import Request, ToolCall, ToolResult

    history = History()
    history.append(UserTurn("go"))
    calls_ = [ToolCall("c1", "echo", {"text": "1"}), ToolCall("c2", "echo", {"text": "2"})]
    history.append(AssistantTurn("", calls_))
    history.append(ToolResultsTurn([ToolResult("c1", "one"), ToolResult("c2", "two", True)], names=["echo", "echo"]))
    body = OpenAICompatibleAdapter(base_url="http://127.0.0.1:1/v1").build_body(
        Request(model="m", messages=list(history.messages)), stream=False
    )
    tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [("c1", "one"), ("c2", "two")]


async def test_max_turns_exact() -> None:
    """The loop makes exactly max_turns model calls, then stops with turn_limit."""
    session, model = make_session(
        default=call("echo", text="again"), config=SessionConfig(max_turns=4, enable_loop_detection=False)
    )
    result = await session.submit("go")
    assert result.stop_reason is StopReason.TURN_LIMIT and len(model.requests) == 4 and session.turn_count == 4


async def test_budget_exact() -> None:
    """The loop stops once total cost >= max_budget_usd: after the call that reached it, before its tools."""
    usage = Usage(input_tokens=1_000_000)  # $1 a call at $1/M input
    config = SessionConfig(prices={"test-model": ModelPrice(1.0, 0.0)}, max_budget_usd=3.0)
    session, model = make_session(
        default=Step(tool_calls=call("echo", text="x").tool_calls, usage=usage), config=config
    )
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.BUDGET_LIMIT
    assert len(model.requests) == 3 and session.total_cost_usd == 3.0
    ran = [e for e in rec.of(E.TOOL_CALL_END) if not e.get("skipped")]
    assert len(ran) == 2  # the third response's call did not run


async def test_interrupt_cancels_stream_and_stops_before_next_tool() -> None:
    """interrupt() during a streamed call cancels it; during a tool round, the next call never runs."""
    session, _ = make_session([Step(text="slow answer", delay=5.0)], streaming=True)
    task = asyncio.create_task(session.submit("go"))
    await asyncio.sleep(0.05)
    assert session.interrupt()
    result = await asyncio.wait_for(task, 2)
    assert result.stop_reason is StopReason.INTERRUPTED
    started: list[str] = []
    running = asyncio.Event()

    async def slow(args: dict[str, Any], ctx: Any) -> str:
        started.append(args["n"])
        running.set()
        await asyncio.sleep(5)
        return "never"

    session2, _ = make_session([calls(("slow", {"n": "1"}), ("slow", {"n": "2"})), reply("x")])
    session2.profile.tool_registry.add("slow", "", None, slow)
    task = asyncio.create_task(session2.submit("go"))
    await asyncio.wait_for(running.wait(), 5)
    session2.interrupt()
    result = await asyncio.wait_for(task, 5)
    assert result.stop_reason is StopReason.INTERRUPTED and started == ["1"]


async def test_message_ordering() -> None:
    """Tool results reach the model in the order of the tool_use blocks, whatever finishes first."""

    async def timed(args: dict[str, Any], ctx: Any) -> str:
        await asyncio.sleep(args["delay"])
        return args["name"]

    session, model = make_session(
        [calls(("timed", {"name": "slow", "delay": 0.05}), ("timed", {"name": "fast", "delay": 0.0})), reply("ok")],
        parallel=True,
    )
    session.profile.tool_registry.add("timed", "", None, timed)
    client = AgentClient(session=session)
    await client.connect()
    await client.query("go")
    stream = [message async for message in client.receive_response()]
    tool_messages = [m for m in model.requests[1].messages if m.role == "tool"]
    assert [m.content[0].tool_result.content for m in tool_messages] == ["slow", "fast"]  # type: ignore[union-attr]
    user = next(m for m in stream if isinstance(m, UserMessage))
    assert [b.content for b in user.content] == ["slow", "fast"]  # type: ignore[union-attr]
    await client.disconnect()


async def test_emission_order_init_assistant_result() -> None:
    """system.init, then assistant (and user) messages, then exactly one result, last."""
    session, _ = make_session([call("echo", text="a"), reply("done")])
    client = AgentClient(session=session)
    await client.connect()
    await client.query("go")
    kinds = [type(m).__name__ async for m in client.receive_response()]
    assert kinds == [
        "SystemMessage",
        "AssistantMessage",
        "ToolProgressMessage",  # started
        "ToolProgressMessage",  # finished
        "UserMessage",
        "AssistantMessage",
        "ResultMessage",
    ]
    await client.disconnect()


async def test_hook_firing_order() -> None:
    """PreToolUse -> execute -> PostToolUse for a call that works, PostToolUseFailure for one that
    fails. "execute" is recorded by the tools themselves, in the same list as the hooks, so a hook
    that ran after the tool (or a tool that ran before its PreToolUse) shows in the order."""
    order: list[str] = []

    def works(args: dict[str, Any], ctx: Any) -> str:
        order.append("execute works")
        return "fine"

    def fails(args: dict[str, Any], ctx: Any) -> str:
        order.append("execute fails")
        raise RuntimeError("broken")

    session, _ = make_session([calls(("works", {}), ("fails", {})), reply("ok")])
    session.profile.tool_registry.add("works", "", None, works)
    session.profile.tool_registry.add("fails", "", None, fails)
    session.hooks.on(HookEvent.PRE_TOOL_USE, lambda e: order.append(f"pre {e.tool_name}"))
    session.hooks.on(HookEvent.POST_TOOL_USE, lambda e: order.append(f"post {e.tool_name}"))
    session.hooks.on(HookEvent.POST_TOOL_USE_FAILURE, lambda e: order.append(f"failure {e.tool_name}"))
    await session.submit("go")
    assert order == ["pre works", "execute works", "post works", "pre fails", "execute fails", "failure fails"]


async def test_empty_tool_use_is_end_turn() -> None:
    """A response that says tool_use but has no tool calls ends the input like end_turn."""
    session, model = make_session([Step(text="nothing to run", finish_reason="tool_calls")])
    result = await session.submit("go")
    assert result.stop_reason is StopReason.COMPLETED and result.text == "nothing to run" and len(model.requests) == 1


async def test_several_tool_uses_per_turn() -> None:
    """Every tool_use block of one response runs and gets its result."""
    session, model = make_session(
        [calls(("echo", {"text": "1"}), ("echo", {"text": "2"}), ("echo", {"text": "3"})), reply("ok")]
    )
    result = await session.submit("go")
    assert result.tool_calls == 3
    results = [m.content[0].tool_result.content for m in model.requests[1].messages if m.role == "tool"]  # type: ignore[union-attr]
    assert results == ["echo: 1", "echo: 2", "echo: 3"]


async def test_query_result_message_fields() -> None:
    """The result carries subtype, num_turns, duration, cost, usage, session id, stop reason, denials."""
    config = SessionConfig(prices={"test-model": ModelPrice(1.0, 2.0)}, disallowed_tools=("boom(*)",))
    usage = Usage(input_tokens=1000, output_tokens=100)
    session, _ = make_session(
        [Step(tool_calls=call("boom").tool_calls, usage=usage), reply("fine", usage=usage)], config=config
    )
    client = AgentClient(session=session)
    await client.connect()
    await client.query("go")
    messages = [m async for m in client.receive_response()]
    init, result = messages[0], messages[-1]
    assert isinstance(init, SystemMessage) and init.subtype == "init" and init.session_id == session.id
    assert (
        init.data["tools"] and init.data["permissionMode"] == "bypassPermissions" and init.data["model"] == "test-model"
    )
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error, result.stop_reason, result.ra_stop_reason) == (
        "success",
        False,
        "end_turn",
        "completed",
    )
    assert result.num_turns == 2 and result.result == "fine" and result.session_id == session.id
    assert result.total_cost_usd == 2 * (1000 * 1.0 + 100 * 2.0) / 1e6
    assert result.usage is not None and result.usage.input_tokens == 2000
    assert result.permission_denials == [
        {"tool_name": "boom", "tool_use_id": messages[1].content[0].id, "tool_input": {}}
    ]  # type: ignore[union-attr]
    assert isinstance(messages[1], AssistantMessage) and messages[1].cost_usd == (1000 * 1.0 + 100 * 2.0) / 1e6
    data = result.to_json()
    assert (
        data["type"] == "result"
        and data["usage"]["input_tokens"] == 2000
        and data["total_cost_usd"] == result.total_cost_usd
    )
    await client.disconnect()


async def test_result_subtypes_for_limits() -> None:
    session, _ = make_session(
        default=call("echo", text="x"), config=SessionConfig(max_turns=2, enable_loop_detection=False)
    )
    client = AgentClient(session=session)
    await client.connect()
    await client.query("go")
    result = [m async for m in client.receive_response()][-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error, result.stop_reason) == ("error_max_turns", True, "max_turns")
    await client.disconnect()


async def test_ra_query_end_to_end_with_options() -> None:
    """ra.query() builds its own session from options and closes it."""
    import ra
    from ra.llm.client import Client
    from ra.llm.testing import ScriptedAdapter

    model = ScriptedAdapter([reply("hello from the model")])
    options = QueryOptions(
        model="m",
        provider="anthropic",
        client=Client(providers={"anthropic": model}),
        cwd=".",
        max_turns=3,
        config=SessionConfig(prices={"m": ModelPrice.free()}),
    )
    messages = [m async for m in ra.query("hi", options=options)]
    assert isinstance(messages[0], SystemMessage) and isinstance(messages[-1], ResultMessage)
    assert messages[-1].result == "hello from the model"
    assert messages[0].data["profile"] == "anthropic"
