"""Tool rounds in the loop (spec 9.3): dispatch, parallel order, per-step limit, bad model output."""

from __future__ import annotations

import asyncio

from ra.agent import SessionConfig, ToolResultsTurn
from ra.agent.events import EventKind as E
from ra.llm.testing import Step, calls, reply
from ra.llm.types import ToolCall, ToolCallData
from ra.tools.registry import ToolContext

from .support import Recorder, make_session


def results_of(session) -> list:
    turn = next(t for t in session.history if isinstance(t, ToolResultsTurn))
    return turn.results


def register_timed(session, log: list[str]) -> None:
    async def timed(args: dict, ctx: ToolContext) -> str:
        log.append(f"start {args['name']}")
        await asyncio.sleep(args["delay"])
        log.append(f"end {args['name']}")
        return args["name"]

    session.profile.tool_registry.add("timed", "", None, timed)


async def test_parallel_execution_keeps_call_order() -> None:
    session, model = make_session(
        [
            calls(
                ("timed", {"name": "slow", "delay": 0.06}),
                ("timed", {"name": "mid", "delay": 0.03}),
                ("timed", {"name": "fast", "delay": 0.0}),
            ),
            reply("ok"),
        ],
        parallel=True,
    )
    log: list[str] = []
    register_timed(session, log)
    rec = Recorder(session)
    await session.submit("go")
    # All three started before any finished: they ran concurrently.
    assert log[:3] == ["start slow", "start mid", "start fast"]
    assert log[3:] == ["end fast", "end mid", "end slow"]
    # Results (and the messages the model gets) are in call order, not completion order.
    assert [r.content for r in results_of(session)] == ["slow", "mid", "fast"]
    tool_msgs = [m for m in model.requests[1].messages if m.role == "tool"]
    assert [m.content[0].tool_result.content for m in tool_msgs] == ["slow", "mid", "fast"]  # type: ignore[union-attr]
    assert [e["output"] for e in rec.of(E.TOOL_CALL_END)] == ["fast", "mid", "slow"]


async def test_sequential_without_parallel_support() -> None:
    session, _ = make_session(
        [calls(("timed", {"name": "a", "delay": 0.02}), ("timed", {"name": "b", "delay": 0.0})), reply("ok")],
        parallel=False,
    )
    log: list[str] = []
    register_timed(session, log)
    await session.submit("go")
    assert log == ["start a", "end a", "start b", "end b"]


async def test_per_step_tool_call_limit() -> None:
    config = SessionConfig(max_tool_calls_per_step=1)
    session, model = make_session(
        [calls(("echo", {"text": "1"}), ("echo", {"text": "2"}), ("echo", {"text": "3"})), reply("ok")],
        config=config,
    )
    rec = Recorder(session)
    result = await session.submit("go")
    contents = [r.content for r in results_of(session)]
    assert contents[0] == "echo: 1"
    assert contents[1].startswith("Not executed: at most 1 tool call(s) run per step and this was call 2 of 3")
    assert "call 3 of 3" in contents[2]
    assert [r.is_error for r in results_of(session)] == [False, True, True]
    assert [e.get("skipped", False) for e in rec.of(E.TOOL_CALL_END)] == [False, True, True]
    assert result.tool_calls == 3
    # Every call id gets a result message, so the provider accepts the next request.
    assert len([m for m in model.requests[1].messages if m.role == "tool"]) == 3


async def test_malformed_json_arguments_become_an_error_result() -> None:
    broken = ToolCall.from_data(ToolCallData("bad1", "echo", '{"text": "unterminated'))
    assert broken.arguments_error is not None
    session, model = make_session([Step(tool_calls=[broken]), reply("fixed")])
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.text == "fixed"
    end = rec.of(E.TOOL_CALL_END)[0]
    assert end["is_error"] and end["output"].startswith("Invalid arguments for tool echo: arguments are not valid JSON")
    # The raw text goes back to the provider as sent.
    assistant = next(m for m in model.requests[1].messages if m.role == "assistant")
    assert assistant.content[0].tool_call.arguments == '{"text": "unterminated'  # type: ignore[union-attr]


async def test_non_object_arguments_become_an_error_result() -> None:
    arr = ToolCall.from_data(ToolCallData("bad2", "echo", "[1, 2]"))
    session, _ = make_session([Step(tool_calls=[arr]), reply("ok")])
    await session.submit("go")
    assert "must be a JSON object" in results_of(session)[0].content


async def test_schema_violation_names_the_field() -> None:
    session, _ = make_session([calls(("echo", {"text": 5}), ("echo", {})), reply("ok")])
    await session.submit("go")
    first, second = results_of(session)
    assert first.is_error and "field 'text'" in first.content and "not of type 'string'" in first.content
    assert second.is_error and "missing required field 'text'" in second.content


async def test_unknown_tool_becomes_an_error_result() -> None:
    session, _ = make_session([calls(("teleport", {"where": "mars"})), reply("ok")])
    rec = Recorder(session)
    await session.submit("go")
    result = results_of(session)[0]
    assert result.is_error and result.content.startswith("Unknown tool: teleport")
    assert "echo" in result.content  # lists what is available
    assert rec.kinds(E.TOOL_CALL_START, E.TOOL_CALL_END) == [E.TOOL_CALL_START, E.TOOL_CALL_END]


async def test_custom_tool_overrides_profile_tool() -> None:
    session, _ = make_session([calls(("echo", {"text": "x"})), reply("ok")])
    session.profile.tool_registry.add(
        "echo", "mine", {"type": "object", "properties": {"text": {"type": "string"}}}, lambda a, c: "custom"
    )
    await session.submit("go")
    assert results_of(session)[0].content == "custom"


async def test_tool_limits_from_session_config() -> None:
    config = SessionConfig(tool_output_limits={"echo": 20}, tool_line_limits={"echo": 2})
    session, _ = make_session([calls(("echo", {"text": "a\nb\nc\nd"})), reply("ok")], config=config)
    await session.submit("go")
    assert results_of(session)[0].content == "echo: a\n[... 2 lines omitted ...]\nd"


async def test_executor_gets_context() -> None:
    seen: dict = {}

    def inspect_ctx(args: dict, ctx: ToolContext) -> str:
        seen.update(
            env=ctx.env,
            call_id=ctx.call_id,
            name=ctx.tool_name,
            config=ctx.config,
            session=ctx.session,
            aborted=ctx.aborted,
        )
        return "ok"

    session, _ = make_session([calls(ToolCall("cid-7", "inspect", {})), reply("ok")])
    session.profile.tool_registry.add("inspect", "", None, inspect_ctx)
    await session.submit("go")
    assert seen == {
        "env": session.execution_env,
        "call_id": "cid-7",
        "name": "inspect",
        "config": session.config,
        "session": session,
        "aborted": False,
    }
