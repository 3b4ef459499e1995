"""Abort and close (spec 2.8, 9.1 abort, 9.11 graceful shutdown, Appendix B)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from ra.agent import SessionState, StopReason
from ra.agent.events import EventKind as E
from ra.env.local import LocalExecutionEnvironment
from ra.llm.testing import call, reply
from ra.tools.registry import ToolContext

from .support import FakeEnv, Recorder, make_session


class FakeSubagent:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def close(self) -> None:
        self.log.append("subagent closed")


async def wait_for_event(rec: Recorder, kind: E, timeout: float = 5.0) -> None:
    seen = asyncio.Event()
    if rec.of(kind):
        return
    rec.session.add_listener(lambda e: seen.set() if e.kind is kind else None)
    await asyncio.wait_for(seen.wait(), timeout)


async def test_abort_during_model_call() -> None:
    env = FakeEnv()
    session, _model = make_session([reply("never", delay=30)], env=env, streaming=True)
    session.register_subagent("child", FakeSubagent(env.log))
    rec = Recorder(session)
    task = asyncio.create_task(session.submit("go"))
    await wait_for_event(rec, E.TURN_START)
    session.abort()
    result = await asyncio.wait_for(task, 5)
    assert result.stop_reason is StopReason.ABORTED
    assert result.state is SessionState.CLOSED and session.state is SessionState.CLOSED
    assert env.log == ["terminate_all", "subagent closed"]
    assert session.subagents == {}
    kinds = rec.kinds()
    assert kinds[-1] is E.SESSION_END and rec.of(E.SESSION_END)[0]["reason"] == "aborted"
    assert E.PROCESSING_END not in kinds
    assert rec.of(E.TURN_END)[0]["status"] == "aborted"


async def test_abort_from_a_listener_inside_the_processing_task_stops_the_model_call() -> None:
    """A listener runs in the processing task itself: an abort() there used to leave the model
    call running to its end (30 s here) while the shutdown waited for it, so submit() hung."""
    session, _model = make_session([reply("never", delay=30)], streaming=True)
    session.add_listener(lambda e: session.abort() if e.kind is E.TURN_START else None)
    result = await asyncio.wait_for(session.submit("go"), 5)
    assert result.stop_reason is StopReason.ABORTED
    assert session.state is SessionState.CLOSED


async def test_abort_from_another_thread_during_a_tool() -> None:
    session, _ = make_session([call("nap", seconds=30), reply("never")])
    rec = Recorder(session)
    task = asyncio.create_task(session.submit("go"))
    await wait_for_event(rec, E.TOOL_CALL_START)
    thread = threading.Thread(target=session.abort)
    thread.start()
    thread.join()
    result = await asyncio.wait_for(task, 5)
    assert result.stop_reason is StopReason.ABORTED and session.state is SessionState.CLOSED
    end = rec.of(E.TOOL_CALL_END)[0]
    assert end["is_error"] and "aborted" in end["output"]
    assert rec.kinds()[-1] is E.SESSION_END


async def test_abort_skips_the_remaining_sequential_calls() -> None:
    ran: list[str] = []

    def first(args: dict, ctx: ToolContext) -> str:
        ran.append("first")
        ctx.session.abort()  # abort from inside a tool (on the loop thread)
        return "ok"

    def second(args: dict, ctx: ToolContext) -> str:
        ran.append("second")
        return "ok"

    from ra.llm.testing import calls

    session, model = make_session([calls(("first", {}), ("second", {})), reply("never")])
    session.profile.tool_registry.add("first", "", None, first)
    session.profile.tool_registry.add("second", "", None, second)
    result = await asyncio.wait_for(session.submit("go"), 5)
    assert ran == ["first"]
    assert result.stop_reason is StopReason.ABORTED
    assert len(model.requests) == 1


async def test_abort_kills_a_real_running_command(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    pid_file = tmp_path / "pid"

    async def shell(args: dict, ctx: ToolContext) -> str:
        result = await ctx.env.exec_command(args["command"], timeout_ms=60_000, on_output=ctx.on_output)
        return result.output

    session, _ = make_session(
        [call("shell", command=f"echo $$ > {pid_file}; echo started; exec sleep 30"), reply("never")], env=env
    )
    session.profile.tool_registry.add(
        "shell", "run", {"type": "object", "properties": {"command": {"type": "string"}}}, shell
    )
    rec = Recorder(session)
    task = asyncio.create_task(session.submit("go"))
    await wait_for_event(rec, E.TOOL_CALL_OUTPUT_DELTA)  # the command is running
    pid = int(pid_file.read_text())
    os.kill(pid, 0)  # alive
    session.abort()
    result = await asyncio.wait_for(task, 10)
    assert result.stop_reason is StopReason.ABORTED
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert rec.kinds()[-1] is E.SESSION_END


async def test_close_when_idle() -> None:
    env = FakeEnv()
    session, _ = make_session([reply("x")], env=env)
    await session.submit("go")
    rec = Recorder(session)
    await session.close()
    assert session.state is SessionState.CLOSED
    assert rec.kinds() == [E.SESSION_END] and env.terminated == 1
    await session.close()
    session.abort()
    assert rec.kinds() == [E.SESSION_END]


async def test_close_while_processing_aborts_and_waits() -> None:
    session, _ = make_session([reply("slow", delay=30)])
    task = asyncio.create_task(session.submit("go"))
    await asyncio.sleep(0.02)
    await asyncio.wait_for(session.close(), 5)
    assert session.state is SessionState.CLOSED
    assert (await task).stop_reason is StopReason.ABORTED


def test_abort_before_any_loop_closes_synchronously() -> None:
    session, _ = make_session()
    session.abort()
    assert session.state is SessionState.CLOSED


async def test_cancelling_submit_aborts_the_session() -> None:
    env = FakeEnv()
    session, _ = make_session([reply("slow", delay=30)], env=env)
    task = asyncio.create_task(session.submit("go"))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(session.wait_closed(), 5)
    assert session.state is SessionState.CLOSED and env.terminated == 1


async def test_failing_cleanup_is_reported_not_raised() -> None:
    class BadEnv(FakeEnv):
        async def terminate_all(self) -> None:
            raise OSError("no permission")

    class BadChild:
        def close(self) -> None:
            raise RuntimeError("child stuck")

    session, _ = make_session(env=BadEnv())
    session.register_subagent("c", BadChild())
    rec = Recorder(session)
    await session.close()
    codes = [e["code"] for e in rec.of(E.WARNING)]
    assert codes == ["terminate_failed", "subagent_close_failed"]
    assert session.state is SessionState.CLOSED
    with pytest.raises(ValueError):
        session.register_subagent("x", BadChild()) or session.register_subagent("x", BadChild())


async def test_abort_sends_sigterm_before_anything_harsher(tmp_path: Path) -> None:
    """Running commands get the graceful stop (SIGTERM first), not an immediate SIGKILL."""
    env = LocalExecutionEnvironment(tmp_path)
    marker = tmp_path / "got_term"

    async def shell(args: dict, ctx: ToolContext) -> str:
        return (await ctx.env.exec_command(args["command"], timeout_ms=60_000, on_output=ctx.on_output)).output

    script = f"trap 'echo term > {marker}; exit 0' TERM; echo ready; sleep 30 & wait"
    session, _ = make_session([call("shell", command=script), reply("never")], env=env)
    session.profile.tool_registry.add(
        "shell", "run", {"type": "object", "properties": {"command": {"type": "string"}}}, shell
    )
    rec = Recorder(session)
    task = asyncio.create_task(session.submit("go"))
    await wait_for_event(rec, E.TOOL_CALL_OUTPUT_DELTA)
    session.abort()
    assert (await asyncio.wait_for(task, 10)).stop_reason is StopReason.ABORTED
    assert marker.read_text().strip() == "term"


async def test_abort_from_a_thread_before_any_submit_wakes_consumers() -> None:
    session, _ = make_session()
    stream = session.events()
    assert (await stream.__anext__()).kind is E.SESSION_START
    waiter = asyncio.create_task(stream.__anext__())
    await asyncio.sleep(0)
    thread = threading.Thread(target=session.abort)
    thread.start()
    thread.join()
    event = await asyncio.wait_for(waiter, 5)
    assert event.kind is E.SESSION_END and event["reason"] == "aborted"
    assert session.state is SessionState.CLOSED
