"""Tool sources in a Session (``tools=``, ``mcp_servers=``, ``start()``, list changes between model
calls, subagents), driven with a real source whose tools run in a child process and a scripted
model. Before, a Session took neither argument: its tools were the profile's, full stop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import ra.agent.tool_sources as tool_sources
from ra.agent import GenericProfile, Session, SessionConfig
from ra.agent.errors import SessionClosedError
from ra.agent.events import EventKind
from ra.agent.hooks import Hooks
from ra.agent.store.memory import MemorySessionStore
from ra.agent.subagents.definitions import AgentDefinition
from ra.agent.subagents.manager import SubAgentManager
from ra.agent.tool_sources import SourceTools
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, Step, StepLike, call, calls, reply
from ra.llm.types import Request, ToolDefinition
from ra.tools.registry import RegisteredTool, ToolRegistry

from .support import FAST_RETRY, FakeEnv, Recorder, default_tools
from .tool_source_support import ProcessToolSource, process_exists, spec


def offered(request: Request) -> list[str]:
    return [t.name for t in request.tools or ()]


def results(request: Request) -> list[str]:
    """The tool results a request carries, in order."""
    return [str(p.tool_result.content) for m in request.messages for p in m.content if p.tool_result is not None]


def profile_of(tools: ToolRegistry | None = None, *, parallel: bool = False) -> GenericProfile:
    return GenericProfile(
        "scripted",
        "test-model",
        tools if tools is not None else default_tools(),
        system_prompt="test",
        supports_parallel_tool_calls=parallel,
    )


def build(
    script: list[StepLike],
    *,
    profile: GenericProfile | None = None,
    config: SessionConfig | None = None,
    **kwargs: Any,
) -> tuple[Session, ScriptedAdapter]:
    model = ScriptedAdapter(script)
    config = config or SessionConfig()
    config.retry_policy = FAST_RETRY
    config.prices.setdefault("test-model", ModelPrice.free())
    session = Session(profile or profile_of(), FakeEnv(), Client(providers={"scripted": model}), config, **kwargs)
    return session, model


def extra_tool(name: str = "weather", effect: str | None = "read") -> RegisteredTool:
    return RegisteredTool(
        ToolDefinition(name, "Today's weather.", {"type": "object", "properties": {}}),
        lambda args, ctx: f"{name}: sunny",
        effect=effect,
    )


# -- start and SESSION_START ----------------------------------------------------------------------------


async def test_start_registers_the_tools_then_session_start_carries_the_statuses() -> None:
    source = ProcessToolSource("proc", [spec("echo", "read"), spec("stamp")])
    profile = profile_of()
    session, _ = build([], profile=profile, mcp_servers=source)
    so_far: list[Any] = []
    session.add_listener(so_far.append)  # the backlog too
    events = Recorder(session)
    assert so_far == []  # SESSION_START waits for the sources
    assert "mcp__proc__echo" not in session.profile.tool_registry  # nothing before start()
    await session.start()
    (start,) = events.of(EventKind.SESSION_START)
    (status,) = start.data["mcp_servers"]
    assert (status.name, status.transport, status.state, status.tools) == ("proc", "stdio", "connected", 2)
    assert session.mcp_servers == (status,)
    names = session.profile.tool_registry.names()
    assert names[:3] == ["echo", "boom", "nap"] and names[3:] == ["mcp__proc__echo", "mcp__proc__stamp"]
    assert profile.tool_registry.names() == ["echo", "boom", "nap"]  # the profile is not changed
    assert source.alive and source.starts == 1
    await session.start()  # idempotent: one SESSION_START, one start of the source
    assert len(events.of(EventKind.SESSION_START)) == 1 and source.starts == 1
    await session.close()
    assert source.closes == 0 and source.alive  # the host's source: the host closes it
    await source.close()


async def test_submit_starts_the_sources_and_the_model_calls_a_tool_served_by_the_process() -> None:
    source = ProcessToolSource("proc", [spec("echo", "read")])
    session, model = build([call("mcp__proc__echo", text="hi"), reply("done")], mcp_servers=source)
    events = Recorder(session)
    result = await session.submit("go")
    assert result.text == "done"
    assert "mcp__proc__echo" in offered(model.requests[0])
    (out,) = results(model.requests[1])
    assert out == f'echo ran with {{"text": "hi"}} in {source.pid}'
    kinds = events.kinds(EventKind.SESSION_START, EventKind.USER_INPUT)
    assert kinds == [EventKind.SESSION_START, EventKind.USER_INPUT]
    await session.close()
    await source.close()
    assert source.pid is not None and not process_exists(source.pid)


async def test_two_sessions_on_one_profile_never_see_each_others_tools() -> None:
    profile = profile_of()
    one, two = ProcessToolSource("one"), ProcessToolSource("two")
    first, _ = build([], profile=profile, mcp_servers=one)
    second, _ = build([], profile=profile, mcp_servers=two, tools=[extra_tool()])
    await first.start()
    await second.start()
    assert "mcp__one__echo" in first.profile.tool_registry and "mcp__two__echo" not in first.profile.tool_registry
    assert "mcp__two__echo" in second.profile.tool_registry and "mcp__one__echo" not in second.profile.tool_registry
    assert "weather" in second.profile.tool_registry and "weather" not in first.profile.tool_registry
    assert profile.tool_registry.names() == ["echo", "boom", "nap"]
    for session in (first, second):
        await session.close()
    for source in (one, two):
        await source.close()


async def test_tools_adds_tools_and_refuses_a_name_the_profile_has() -> None:
    session, model = build([call("weather"), reply("ok")], tools=[extra_tool()])
    await session.submit("weather?")
    assert "weather" in offered(model.requests[0]) and results(model.requests[1]) == ["weather: sunny"]
    with pytest.raises(ValueError, match="the profile has a tool named 'echo'"):
        build([], tools=[extra_tool("echo")])
    with pytest.raises(ValueError, match="two tools named 'weather'"):
        build([], tools=[extra_tool(), extra_tool()])
    with pytest.raises(TypeError, match="RegisteredTool"):
        build([], tools=[lambda: None])
    with pytest.raises(TypeError, match="not a single value"):
        build([], tools=extra_tool())
    with pytest.raises(TypeError, match="mcp_servers takes"):
        build([], mcp_servers=["not", "servers"])


async def test_a_server_that_fails_is_one_warning_and_the_session_goes_on() -> None:
    broken = ProcessToolSource("broken", command=["/nonexistent/mcp-server"])
    session, model = build([reply("still here")], mcp_servers=broken)
    events = Recorder(session)
    result = await session.submit("go")
    assert result.text == "still here" and offered(model.requests[0]) == ["echo", "boom", "nap"]
    (start,) = events.of(EventKind.SESSION_START)
    (status,) = start.data["mcp_servers"]
    assert status.state == "failed" and "nonexistent" in (status.error or "")
    warnings = [e for e in events.of(EventKind.WARNING) if e.data["code"] == "tool_source_failed"]
    assert len(warnings) == 1 and "'broken'" in warnings[0].data["message"]
    await session.close()


async def test_a_source_that_never_starts_is_cut_off_and_the_session_starts_without_it(monkeypatch: Any) -> None:
    monkeypatch.setattr(tool_sources, "SOURCE_START_TIMEOUT_S", 0.3)
    slow = ProcessToolSource("slow", start_delay=30)
    session, _ = build([reply("ok")], mcp_servers=slow)
    events = Recorder(session)
    loop = asyncio.get_running_loop()
    began = loop.time()
    result = await session.submit("go")
    assert loop.time() - began < 5 and result.text == "ok"
    assert any("did not start within 0.3s" in e.data["message"] for e in events.of(EventKind.WARNING))
    assert "mcp__slow__echo" not in session.profile.tool_registry
    await session.close()


async def test_closing_while_the_sources_start_is_bounded_and_the_stream_still_opens() -> None:
    slow = ProcessToolSource("slow", start_delay=30)
    session, _ = build([], mcp_servers=slow)
    events = Recorder(session)
    starting = asyncio.ensure_future(session.start())
    await asyncio.sleep(0.05)
    await asyncio.wait_for(session.close(), 10)
    with pytest.raises(SessionClosedError):
        await starting
    kinds = events.kinds(EventKind.SESSION_START, EventKind.SESSION_END)
    assert kinds == [EventKind.SESSION_START, EventKind.SESSION_END]
    with pytest.raises(SessionClosedError):
        await session.submit("too late")


async def test_session_open_and_async_with_start_the_sources() -> None:
    source = ProcessToolSource("proc")
    model = ScriptedAdapter([])
    config = SessionConfig(retry_policy=FAST_RETRY)
    client = Client(providers={"scripted": model})
    session = await Session.open(profile_of(), FakeEnv(), client, config, mcp_servers=source)
    assert "mcp__proc__echo" in session.profile.tool_registry
    await session.close()
    other, _ = build([], mcp_servers=source)
    async with other:
        assert "mcp__proc__echo" in other.profile.tool_registry
    await source.close()


async def test_session_start_hooks_and_the_record_see_the_started_session() -> None:
    source = ProcessToolSource("proc")
    hooks = Hooks()
    seen: list[list[str]] = []
    hooks.on("SessionStart", lambda data: seen.append(sorted(holder[0].profile.tool_registry.names())))
    store = MemorySessionStore()
    session, _ = build([reply("ok")], mcp_servers=source, hooks=hooks, store=store)
    holder = [session]
    events = Recorder(session)
    await session.submit("go")
    assert seen == [["boom", "echo", "mcp__proc__echo", "nap"]]  # once, with the source's tools
    assert events.kinds(EventKind.SESSION_START) == [EventKind.SESSION_START]
    entries = await store.load(session.id)
    assert entries is not None and entries[0]["type"] == "session" and entries[0]["id"] == session.id
    await session.close()
    await source.close()


# -- changes between model calls ---------------------------------------------------------------------------


async def test_a_list_change_lands_between_model_calls_never_during_a_call_or_a_round() -> None:
    source = ProcessToolSource("proc", [spec("echo", "read"), spec("gone", "read")])

    def during_the_call(request: Request) -> Step:
        # The server drops "gone" while the model is answering: the answer's call still runs.
        source._tools = [t for t in source._tools if t.name != "mcp__proc__gone"]
        source._changed = True
        return call("mcp__proc__gone")

    late = spec("late", "read")
    steps: list[StepLike] = [
        during_the_call,
        # The first call makes the server offer "late"; the second, in the same round, is not
        # run against a list that changed under it.
        calls(("mcp__proc__echo", {"offer": late}), ("mcp__proc__late", {})),
        call("mcp__proc__late"),
        reply("done"),
    ]
    session, model = build(steps, mcp_servers=source)
    await session.submit("go")
    first, second, third, fourth = model.requests
    assert "mcp__proc__gone" in offered(first)
    assert results(second)[0].startswith("gone ran")  # offered when called: it ran
    assert "mcp__proc__gone" not in offered(second)  # removed at the next model call
    assert "mcp__proc__late" not in offered(second)
    offered_late, unknown = results(third)[-2:]
    assert offered_late == "offered late" and "unknown tool" in unknown.lower()
    assert "mcp__proc__late" in offered(third)
    assert results(fourth)[-1].startswith("late ran")
    await session.close()
    await source.close()


async def test_a_changed_tool_replaces_the_old_one_and_the_request_cache_sees_it() -> None:
    source = ProcessToolSource("proc", [spec("echo", "read", "old words")])

    session, model = build([reply("one"), reply("two")], mcp_servers=source)
    await session.submit("first")
    await source.offer(spec("echo", "read", "new words"))
    await session.submit("second")
    descriptions = [next(t.description for t in r.tools or () if t.name == "mcp__proc__echo") for r in model.requests]
    assert descriptions == ["old words", "new words"]
    await session.close()
    await source.close()


# -- the control itself -----------------------------------------------------------------------------------


async def test_the_control_closes_only_what_it_owns_and_leaves_no_process() -> None:
    owned, hosted = ProcessToolSource("owned"), ProcessToolSource("hosted")
    registry = ToolRegistry()
    control = SourceTools(registry, [(owned, True), (hosted, False)])
    emitted: list[Any] = []
    statuses = await control.start(emitted.append)
    assert [s.state for s in statuses] == ["connected", "connected"] and emitted == []
    assert registry.names() == ["mcp__owned__echo", "mcp__hosted__echo"]
    pid = owned.pid
    await control.close(emitted.append)
    await control.close(emitted.append)  # idempotent
    assert owned.closes == 1 and hosted.closes == 0 and hosted.alive
    assert pid is not None and not process_exists(pid)
    await hosted.close()


async def test_a_source_that_hangs_in_close_is_given_up_on_with_a_warning() -> None:
    stuck = ProcessToolSource("stuck", close_delay=30)
    control = SourceTools(ToolRegistry(), [(stuck, True)], close_timeout=0.2)
    emitted: list[Any] = []
    await control.start(emitted.append)
    await asyncio.wait_for(control.close(emitted.append), 5)
    assert [e.code for e in emitted] == ["tool_source_close_failed"]
    stuck.close_delay = 0
    await stuck.close()


async def test_a_source_shared_by_two_sessions_reaches_both_after_a_change() -> None:
    shared = ProcessToolSource("shared")
    one, model_one = build([reply("a"), reply("b")], mcp_servers=shared)
    two, model_two = build([reply("a"), reply("b")], mcp_servers=shared)
    await one.submit("x")
    await two.submit("x")
    assert shared.starts == 1  # started once for both
    await shared.offer(spec("late", "read"))
    await one.submit("y")  # this session reads the list (and clears the source's flag)...
    await two.submit("y")  # ...and the other one still sees the change
    assert "mcp__shared__late" in offered(model_one.requests[-1])
    assert "mcp__shared__late" in offered(model_two.requests[-1])
    for session in (one, two):
        await session.close()
    await shared.close()


# -- subagents ------------------------------------------------------------------------------------------------


def agents_config(**agents: AgentDefinition) -> SessionConfig:
    return SessionConfig(agents=dict(agents))


async def run_child(session: Session, agent_type: str | None = None) -> None:
    handle = SubAgentManager(session).spawn("look around", agent_type=agent_type)
    await asyncio.wait_for(handle.wait(), 10)


async def test_subagents_get_the_parents_source_tools_unless_their_definition_leaves_them_out() -> None:
    source = ProcessToolSource("proc")
    late = spec("late", "read")
    config = agents_config(
        narrow=AgentDefinition("only echo", "Echo things.", tools=("echo",)),
        no_proc=AgentDefinition("no proc", "Work.", disallowed_tools=("mcp__proc",)),
        picks=AgentDefinition("picks late", "Work.", tools=("echo", "mcp__proc__late")),
    )
    script: list[StepLike] = []
    session, model = build(script, mcp_servers=source, config=config)
    await session.start()

    async def child_requests(agent_type: str | None, steps: list[StepLike]) -> list[Request]:
        before = len(model.requests)
        model.add(*steps)
        await run_child(session, agent_type)
        return model.requests[before:]

    (plain,) = await child_requests(None, [reply("done")])
    assert "mcp__proc__echo" in offered(plain)
    (narrow,) = await child_requests("narrow", [reply("done")])
    assert offered(narrow) == ["echo"]
    (no_proc,) = await child_requests("no_proc", [reply("done")])
    assert not [n for n in offered(no_proc) if n.startswith("mcp__")]

    # A tool that appears while the child works: the child takes it at its next model call, if
    # its definition lets it.
    first, second = await child_requests(None, [call("mcp__proc__echo", offer=late), reply("done")])
    assert "mcp__proc__late" not in offered(first) and "mcp__proc__late" in offered(second)
    (narrow_later,) = await child_requests("narrow", [reply("done")])
    assert offered(narrow_later) == ["echo"]
    (picks,) = await child_requests("picks", [reply("done")])
    assert offered(picks) == ["echo", "mcp__proc__late"]
    assert "mcp__proc__late" not in session.profile.tool_registry  # the parent takes it at its own next call
    await session.close()
    assert source.closes == 0 and source.alive
    await source.close()


async def test_a_source_that_breaks_its_contract_is_a_warning_not_a_broken_session() -> None:
    class Broken(ProcessToolSource):
        failing = False

        def changed(self) -> bool:
            if self.failing:
                raise RuntimeError("list went away")
            return super().changed()

    class Raising(ProcessToolSource):
        async def start(self) -> None:
            raise OSError("cannot start")

    broken = Broken("broken")
    session, model = build([reply("one"), reply("two")], mcp_servers=broken)
    events = Recorder(session)
    await session.submit("first")
    broken.failing = True
    await session.submit("second")  # the last list stays
    assert "mcp__broken__echo" in offered(model.requests[1])
    failed = [e.data["message"] for e in events.of(EventKind.WARNING) if e.data["code"] == "tool_source_failed"]
    assert len(failed) == 1 and "list went away" in failed[0]
    await session.close()
    await broken.close()

    other, model = build([reply("ok")], mcp_servers=Raising("raising"))
    events = Recorder(other)
    assert (await other.submit("go")).text == "ok"
    (warning,) = [e for e in events.of(EventKind.WARNING) if e.data["code"] == "tool_source_failed"]
    assert "OSError: cannot start" in warning.data["message"]
    await other.close()


async def test_a_closed_session_keeps_no_hold_on_the_hosts_source() -> None:
    import gc
    import weakref

    source = ProcessToolSource("proc")
    session, _ = build([reply("ok")], mcp_servers=source)
    await session.submit("go")
    await session.close()
    await source.close()
    gone = weakref.ref(source)
    del session, source
    gc.collect()
    assert gone() is None


async def test_a_resumed_session_gets_its_sources_again_and_appends_to_its_record() -> None:
    store = MemorySessionStore()
    source = ProcessToolSource("proc")
    first, model = build([call("mcp__proc__echo", text="a"), reply("one")], mcp_servers=source, store=store)
    await first.submit("go")
    await first.close()
    model.add(call("mcp__proc__echo", text="b"), reply("two"))
    config = SessionConfig(retry_policy=FAST_RETRY)
    config.prices["test-model"] = ModelPrice.free()
    client = Client(providers={"scripted": model})
    again = await Session.open(
        profile_of(), FakeEnv(), client, config, store=store, resume=first.id, mcp_servers=source
    )
    assert "mcp__proc__echo" in again.profile.tool_registry  # started by open()
    assert (await again.submit("more")).text == "two"
    assert results(model.requests[-1])[-1].startswith('echo ran with {"text": "b"}')
    entries = await store.load(first.id)
    assert entries is not None and [e["type"] for e in entries].count("session") == 1
    await again.close()
    await source.close()


async def test_a_function_made_a_tool_with_ra_tool_is_a_session_tool() -> None:
    import ra

    @ra.tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: The first.
            b: The second.
        """
        return a + b

    session, model = build([call("add", a=2, b=3), reply("five")], tools=[add])
    await session.submit("2+3?")
    assert "add" in offered(model.requests[0]) and results(model.requests[1]) == ["5"]
    assert add(1, 1) == 2  # still the function
    await session.close()
