"""interrupt(): stop the current input, keep the session (the CLI's Ctrl-C); end_input tools."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from ra.agent import SessionState, StopReason
from ra.agent.events import EventKind as E
from ra.env.local import LocalExecutionEnvironment
from ra.llm.testing import call, reply
from ra.llm.types import Role
from ra.tools.registry import ToolContext, ToolOutput

from .support import Recorder, default_tools, make_session
from .test_abort import wait_for_event


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return "zombie" not in fh.read().lower()
    except FileNotFoundError:
        return False


async def test_interrupt_during_model_call_keeps_session() -> None:
    session, model = make_session([reply("never", delay=30), reply("second answer")], streaming=True)
    rec = Recorder(session)
    task = asyncio.create_task(session.submit("first"))
    await wait_for_event(rec, E.TURN_START)
    assert session.interrupt() is True
    result = await asyncio.wait_for(task, 5)
    assert result.stop_reason is StopReason.INTERRUPTED
    assert result.state is SessionState.IDLE and session.state is SessionState.IDLE
    end = rec.of(E.PROCESSING_END)[-1]
    assert end["stop_reason"] is StopReason.INTERRUPTED
    assert E.SESSION_END not in rec.kinds()
    # The session goes on: the next submit gets the next scripted answer with the first input kept.
    again = await session.submit("second")
    assert again.stop_reason is StopReason.COMPLETED and again.text == "second answer"
    sent = [m.text for m in model.requests[-1].messages if m.role is Role.USER]
    assert sent == ["first", "second"]


async def test_interrupt_when_idle_is_a_no_op() -> None:
    session, _ = make_session([reply("x")])
    assert session.interrupt() is False
    assert (await session.submit("go")).stop_reason is StopReason.COMPLETED


async def test_interrupt_during_tool_answers_dangling_calls(tmp_path) -> None:
    """A real command is stopped, the dangling call gets an error result, history stays valid."""
    env = LocalExecutionEnvironment(str(tmp_path))
    tools = default_tools()
    started = threading.Event()

    async def run(args: dict[str, Any], ctx: ToolContext) -> str:
        started.set()
        result = await ctx.env.exec_command(f"echo $$ > pid; {args['cmd']}", timeout_ms=60_000)
        return result.output

    tools.add("run", "Run a command.", {"type": "object", "properties": {"cmd": {"type": "string"}}}, run)
    session, model = make_session([call("run", cmd="sleep 30"), reply("after")], env=env, tools=tools)
    rec = Recorder(session)
    task = asyncio.create_task(session.submit("go"))
    await wait_for_event(rec, E.TOOL_CALL_START)
    await asyncio.to_thread(started.wait, 5)
    await asyncio.sleep(0.2)
    # From another thread, as a signal handler in a host would.
    await asyncio.to_thread(session.interrupt)
    result = await asyncio.wait_for(task, 10)
    assert result.stop_reason is StopReason.INTERRUPTED
    pid = int((tmp_path / "pid").read_text())
    await asyncio.sleep(0.1)
    assert not _alive(pid)
    # Every tool call has a result: the next request is a valid conversation.
    again = await session.submit("continue")
    assert again.text == "after"
    messages = model.requests[-1].messages
    call_ids = [p.tool_call.id for m in messages for p in m.content if p.tool_call is not None]
    result_ids = [m.tool_call_id for m in messages if m.role is Role.TOOL]
    assert call_ids == result_ids and len(call_ids) == 1


async def test_end_input_tool_finishes_with_its_answer() -> None:
    tools = default_tools()
    tools.add(
        "submit",
        "Finish with an answer.",
        {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
        lambda args, ctx: ToolOutput(args["answer"], end_input=True),
    )
    session, model = make_session([call("submit", answer="42"), reply("unused")], tools=tools)
    result = await session.submit("what is it?")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.text == "42"
    assert model.remaining == 1  # no further model call after submit


async def test_a_command_the_user_interrupted_is_reported_as_interrupted_by_the_user(tmp_path) -> None:
    """The model reads that the user stopped the command, not that the session was aborted (the
    session goes on, so "aborted" would be false and the model might give up)."""
    from ra.tools.builtin.shell import shell_command_tool
    from ra.tools.registry import ToolRegistry

    marker = tmp_path / "started"
    registry = ToolRegistry()
    registry.register(shell_command_tool())
    env = LocalExecutionEnvironment(str(tmp_path))
    script = [call("shell_command", command=f"touch {marker}; sleep 30"), reply("after")]
    session, model = make_session(script, env=env, tools=registry)
    task = asyncio.create_task(session.submit("run it"))
    for _ in range(200):
        if marker.exists():
            break
        await asyncio.sleep(0.02)
    assert session.interrupt() is True
    assert (await asyncio.wait_for(task, 10)).stop_reason is StopReason.INTERRUPTED
    assert (await session.submit("go on")).text == "after"
    (result,) = [p.tool_result for m in model.requests[-1].messages for p in m.content if p.tool_result is not None]
    text = str(result.content)
    assert "the user" in text and "aborted" not in text
