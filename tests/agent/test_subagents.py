"""Subagents (coding-agent-loop-spec 7, 9.9): spawn_agent, send_input, wait, close_agent.

One ScriptedAdapter serves the parent and every child. Its ``default`` is a :class:`Router`
that answers each request from the script of the agent that sent it, recognised by the first
user message of the request (the parent's input, or the child's task). Concurrency and ordering
are checked with rendezvous tools (barriers, events), never with timings.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ra.agent import GenericProfile, Session, SessionConfig, SessionState, StopReason
from ra.agent.events import EventKind as E
from ra.agent.history import UserTurn
from ra.agent.subagents import (
    ChildExecutionEnvironment,
    SubAgentDepthError,
    SubAgentError,
    SubAgentHandle,
    SubAgentManager,
    SubAgentStatus,
    clone_profile,
    is_subagent_tool,
)
from ra.agent.subagents.tools import subagent_tools
from ra.env.local import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.errors import AuthenticationError
from ra.llm.testing import ScriptedAdapter, Step, StepLike, call, calls, reply
from ra.llm.types import Request
from ra.tools.registry import RegisteredTool, ToolContext, ToolRegistry

from .support import FAST_RETRY, FakeEnv, Recorder, default_tools

PARENT = "parent input"
SUBAGENT_TOOL_NAMES = {"spawn_agent", "send_input", "wait", "close_agent"}


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def first_user_text(request: Request) -> str:
    for message in request.messages:
        if message.role == "user":
            return message.text
    raise AssertionError("request without a user message")


def tool_results(request: Request) -> list[str]:
    return [str(p.tool_result.content) for m in request.messages for p in m.content if p.tool_result is not None]


def last_result(request: Request, back: int = 1) -> dict[str, Any]:
    return json.loads(tool_results(request)[-back])


class Router:
    """Routes each model request to the script of the agent that sent it."""

    def __init__(self, scripts: dict[str, list[StepLike]]) -> None:
        self.scripts = scripts
        self.requests: dict[str, list[Request]] = {key: [] for key in scripts}

    def __call__(self, request: Request) -> Any:
        key = first_user_text(request)
        if key not in self.scripts:
            raise AssertionError(f"no script for an agent whose first input is {key!r}")
        self.requests[key].append(request)
        steps = self.scripts[key]
        if not steps:
            raise AssertionError(f"script for {key!r} exhausted")
        item = steps[0] if isinstance(steps[0], Forever) else steps.pop(0)
        if callable(item) and not isinstance(item, Step):
            item = item(request)
        return item


class Forever:
    """Answers every remaining request of an agent with a fresh step from ``make``."""

    def __init__(self, make: Callable[[], StepLike]) -> None:
        self.make = make

    def __call__(self, request: Request) -> StepLike:
        return self.make()


def with_result(build: Callable[[dict[str, Any]], StepLike], back: int = 1) -> Callable[[Request], StepLike]:
    """A step built from the JSON result of an earlier tool call (``back`` = 1 for the last)."""
    return lambda request: build(last_result(request, back))


def wait_for(agent_result_back: int = 1, **extra: Any) -> Callable[[Request], StepLike]:
    return with_result(lambda r: call("wait", agent_id=r["agent_id"], **extra), agent_result_back)


def make_parent(
    scripts: dict[str, list[StepLike]],
    *,
    config: SessionConfig | None = None,
    env: Any = None,
    extra_tools: list[RegisteredTool] | None = None,
    with_subagent_tools: bool = True,
) -> tuple[Session, Router, ScriptedAdapter]:
    router = Router(scripts)
    model = ScriptedAdapter(default=router)
    client = Client(providers={"scripted": model})
    registry = default_tools()
    if with_subagent_tools:
        for tool in subagent_tools():
            registry.register(tool)
    for tool in extra_tools or ():
        registry.register(tool)
    profile = GenericProfile("scripted", "test-model", registry, system_prompt="You are a test agent.")
    if config is None:
        config = SessionConfig()
    config.retry_policy = FAST_RETRY
    session = Session(profile, env if env is not None else FakeEnv(), client, config)
    return session, router, model


def tool(name: str, executor: Any, properties: dict[str, Any] | None = None) -> RegisteredTool:
    registry = ToolRegistry()
    return registry.add(name, f"test tool {name}", {"type": "object", "properties": properties or {}}, executor)


def file_tools() -> list[RegisteredTool]:
    async def write(args: dict[str, Any], ctx: ToolContext) -> str:
        await ctx.env.write_file(args["path"], args["content"])
        return f"wrote {args['path']}"

    async def read(args: dict[str, Any], ctx: ToolContext) -> str:
        return (await ctx.env.read_bytes(args["path"])).decode()

    async def sh(args: dict[str, Any], ctx: ToolContext) -> str:
        result = await ctx.env.exec_command(args["command"], on_output=lambda s, c: ctx.emit_output(c, s))
        return f"exit={result.exit_code} aborted={result.aborted}\n{result.output}"

    props = {"path": {"type": "string"}, "content": {"type": "string"}}
    return [
        tool("write", write, props),
        tool("read", read, props),
        tool("sh", sh, {"command": {"type": "string"}}),
    ]


def gate_tool(name: str, entered: asyncio.Event, release: asyncio.Event) -> RegisteredTool:
    """A tool that signals it is running, then waits to be released."""

    async def gate(args: dict[str, Any], ctx: ToolContext) -> str:
        entered.set()
        await release.wait()
        return f"{name} released"

    return tool(name, gate)


def sync_tool(name: str, *events: asyncio.Event) -> RegisteredTool:
    """A parent tool that returns once every event is set (so the next step sees a known state)."""

    async def sync(args: dict[str, Any], ctx: ToolContext) -> str:
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), 5)
        return "synced"

    return tool(name, sync)


def wrapped(rec: Recorder, agent_id: str | None = None) -> list[Any]:
    """The child events forwarded to the parent (optionally of one agent), unwrapped."""
    return [e["event"] for e in rec.of(E.SUBAGENT_EVENT) if agent_id is None or e["agent_id"] == agent_id]


def child_tool_end(rec: Recorder, name: str) -> list[Any]:
    """The TOOL_CALL_END events of ``name`` that children emitted."""
    return [e for e in wrapped(rec) if e.kind is E.TOOL_CALL_END and e["tool_name"] == name]


def tool_end(rec: Recorder, name: str) -> list[Any]:
    return [e for e in rec.of(E.TOOL_CALL_END) if e["tool_name"] == name]


def handles(session: Session) -> list[SubAgentHandle]:
    return list(session.subagents.values())


def only_handle(session: Session) -> SubAgentHandle:
    (handle,) = handles(session)
    return handle


# ------------------------------------------------------------------------------------------------
# spawn and wait
# ------------------------------------------------------------------------------------------------


async def test_spawn_then_wait_returns_output_success_and_turns() -> None:
    task = "summarise the notes"
    session, router, _ = make_parent(
        {
            PARENT: [call("spawn_agent", task=task), wait_for(), reply("parent done")],
            task: [call("echo", text="reading"), reply("the notes say hi")],
        }
    )
    rec = Recorder(session)
    result = await session.submit(PARENT)
    assert result.text == "parent done" and result.stop_reason is StopReason.COMPLETED

    spawned = json.loads(tool_end(rec, "spawn_agent")[0]["output"])
    assert spawned["status"] == "running" and spawned["agent_id"].startswith("agent-")
    assert spawned["max_turns"] == 50 and spawned["model"] == "test-model"

    waited = tool_end(rec, "wait")[0]
    assert not waited["is_error"]
    data = json.loads(waited["output"])
    assert data == {
        "agent_id": spawned["agent_id"],
        "status": "completed",
        "output": "the notes say hi",
        "success": True,
        "turns_used": 2,
        "stop_reason": "completed",
        "timed_out": False,
    }
    assert waited["metadata"] == data  # hosts get the same fields without parsing
    # The model got the result as a tool result.
    assert last_result(router.requests[PARENT][-1]) == data

    handle = only_handle(session)
    assert handle.id == spawned["agent_id"] and handle.depth == 1
    assert handle.status is SubAgentStatus.COMPLETED and not handle.running
    assert handle.session.state is SessionState.IDLE


async def test_children_run_concurrently() -> None:
    barrier = asyncio.Barrier(2)

    async def meet(args: dict[str, Any], ctx: ToolContext) -> str:
        # Sequential children would never both arrive: the first one would time out here.
        await asyncio.wait_for(barrier.wait(), 5)
        return "met"

    session, _, _ = make_parent(
        {
            PARENT: [
                calls(("spawn_agent", {"task": "task A"}), ("spawn_agent", {"task": "task B"})),
                lambda r: call(
                    "wait", agent_id=last_result(r, 2)["agent_id"], agent_ids=[last_result(r, 1)["agent_id"]]
                ),
                reply("both done"),
            ],
            "task A": [call("meet"), reply("A finished")],
            "task B": [call("meet"), reply("B finished")],
        },
        extra_tools=[tool("meet", meet)],
    )
    rec = Recorder(session)
    await session.submit(PARENT)

    meets = child_tool_end(rec, "meet")
    assert [m["output"] for m in meets] == ["met", "met"]
    data = json.loads(tool_end(rec, "wait")[0]["output"])
    assert data["timed_out"] is False
    assert sorted(a["output"] for a in data["agents"]) == ["A finished", "B finished"]
    assert all(a["success"] and a["status"] == "completed" for a in data["agents"])
    # Both children were at work before either finished.
    order = [(e["agent_id"], e["event"].kind) for e in rec.of(E.SUBAGENT_EVENT)]
    first_end = min(i for i, (_, k) in enumerate(order) if k is E.PROCESSING_END)
    started = {a for a, k in order[:first_end] if k is E.TOOL_CALL_START}
    assert len(started) == 2


async def test_wait_with_timeout_reports_running_agents() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    session, _, _ = make_parent(
        {
            PARENT: [call("spawn_agent", task="slow"), call("sync"), wait_for(2, timeout_ms=0), reply("ok")],
            "slow": [call("gate"), reply("slow done")],
        },
        extra_tools=[gate_tool("gate", entered, release), sync_tool("sync", entered)],
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    data = json.loads(tool_end(rec, "wait")[0]["output"])
    assert data["timed_out"] is True and data["status"] == "running" and data["success"] is False
    handle = only_handle(session)
    assert handle.running
    release.set()
    result = await handle.wait(timeout=5)
    assert result is not None and result.output == "slow done" and result.success
    await session.close()


# ------------------------------------------------------------------------------------------------
# environment: shared files, scoping, isolation of shutdown
# ------------------------------------------------------------------------------------------------


async def test_child_shares_the_parents_filesystem(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    session, _, _ = make_parent(
        {
            PARENT: [
                call("spawn_agent", task="write notes"),
                wait_for(),
                call("read", path="notes.txt"),
                reply("read it"),
            ],
            "write notes": [call("write", path="notes.txt", content="written by the child"), reply("done")],
        },
        env=env,
        extra_tools=file_tools(),
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    assert (tmp_path / "notes.txt").read_text() == "written by the child"
    read = tool_end(rec, "read")[0]
    assert not read["is_error"] and read["output"] == "written by the child"
    child_env = only_handle(session).session.execution_env
    assert isinstance(child_env, ChildExecutionEnvironment) and child_env.inner is env
    assert child_env.working_directory() == env.working_directory()


async def test_working_dir_confines_the_child(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    env = LocalExecutionEnvironment(tmp_path)
    session, _, _ = make_parent(
        {
            PARENT: [call("spawn_agent", task="scoped", working_dir="sub"), wait_for(), reply("ok")],
            "scoped": [
                calls(
                    ("write", {"path": "inside.txt", "content": "in"}),
                    ("write", {"path": "../outside.txt", "content": "out"}),
                    ("write", {"path": str(tmp_path / "abs.txt"), "content": "out"}),
                    ("sh", {"command": "pwd"}),
                ),
                reply("tried"),
            ],
        },
        env=env,
        extra_tools=file_tools(),
    )
    rec = Recorder(session)
    await session.submit(PARENT)

    assert (tmp_path / "sub" / "inside.txt").read_text() == "in"
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "abs.txt").exists()
    ends = [e for e in wrapped(rec) if e.kind is E.TOOL_CALL_END]
    inside, outside, absolute, pwd = ends
    assert not inside["is_error"]
    assert outside["is_error"] and "outside the allowed directory" in outside["output"]
    assert absolute["is_error"] and "outside the allowed directory" in absolute["output"]
    sub = str((tmp_path / "sub").resolve())
    assert pwd["output"].splitlines()[1] == sub
    spawned = json.loads(tool_end(rec, "spawn_agent")[0]["output"])
    assert spawned["working_dir"] == sub


async def test_missing_working_dir_is_an_error_result(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    session, _, _ = make_parent({PARENT: [call("spawn_agent", task="x", working_dir="nope"), reply("ok")]}, env=env)
    rec = Recorder(session)
    await session.submit(PARENT)
    end = tool_end(rec, "spawn_agent")[0]
    assert end["is_error"] and "nope" in end["output"] and "Could not spawn" in end["output"]
    assert session.subagents == {}


async def test_closing_a_child_leaves_sibling_commands_running(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    a_started, b_entered, never = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def slow_sh(args: dict[str, Any], ctx: ToolContext) -> str:
        def on_output(stream: str, chunk: str) -> None:
            if "started" in chunk:
                a_started.set()

        result = await ctx.env.exec_command("echo started; sleep 0.4; echo survived", on_output=on_output)
        return f"exit={result.exit_code} aborted={result.aborted}\n{result.output}"

    session, _, _ = make_parent(
        {
            PARENT: [
                calls(("spawn_agent", {"task": "A"}), ("spawn_agent", {"task": "B"})),
                call("sync"),
                with_result(lambda r: call("close_agent", agent_id=r["agent_id"]), back=2),
                with_result(lambda r: call("wait", agent_id=r["agent_id"]), back=4),
                reply("ok"),
            ],
            "A": [call("slow_sh"), reply("A done")],
            "B": [call("gate"), reply("never")],
        },
        env=env,
        extra_tools=[
            tool("slow_sh", slow_sh),
            gate_tool("gate", b_entered, never),
            sync_tool("sync", a_started, b_entered),
        ],
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    closed = json.loads(tool_end(rec, "close_agent")[0]["output"])
    assert closed["status"] == "closed"
    a_sh = child_tool_end(rec, "slow_sh")[0]
    assert a_sh["output"].startswith("exit=0 aborted=False") and "survived" in a_sh["output"]
    waited = json.loads(tool_end(rec, "wait")[0]["output"])
    assert waited["output"] == "A done" and waited["success"]
    await session.close()


async def test_closing_a_child_stops_its_own_commands(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    started = asyncio.Event()

    async def long_sh(args: dict[str, Any], ctx: ToolContext) -> str:
        result = await ctx.env.exec_command(
            "echo started; sleep 30", on_output=lambda s, c: started.set() if "started" in c else None
        )
        return f"exit={result.exit_code} aborted={result.aborted}"

    session, _, _ = make_parent(
        {
            PARENT: [
                call("spawn_agent", task="long"),
                call("sync"),
                with_result(lambda r: call("close_agent", agent_id=r["agent_id"]), 2),
                reply("ok"),
            ],
            "long": [call("long_sh"), reply("never")],
        },
        env=env,
        extra_tools=[tool("long_sh", long_sh), sync_tool("sync", started)],
    )
    rec = Recorder(session)
    await asyncio.wait_for(session.submit(PARENT), 10)
    end = child_tool_end(rec, "long_sh")[0]
    # Either the command reported being stopped, or the tool was cancelled with the child's run.
    assert "aborted=True" in end["output"] or "cancelled" in end["output"]
    handle = only_handle(session)
    assert handle.status is SubAgentStatus.CLOSED and handle.session.state is SessionState.CLOSED
    await session.close()


# ------------------------------------------------------------------------------------------------
# profile: model override, turn limits, depth
# ------------------------------------------------------------------------------------------------


async def test_model_override_reaches_the_childs_requests() -> None:
    session, router, _ = make_parent(
        {
            PARENT: [call("spawn_agent", task="small job", model="small-model"), wait_for(), reply("ok")],
            "small job": [reply("done small")],
        }
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    assert [r.model for r in router.requests["small job"]] == ["small-model"]
    assert {r.model for r in router.requests[PARENT]} == {"test-model"}
    assert session.profile.model == "test-model"  # the parent's profile is untouched
    child = only_handle(session).session
    assert child.profile is not session.profile and child.profile.model == "small-model"
    assert json.loads(tool_end(rec, "spawn_agent")[0]["output"])["model"] == "small-model"
    # The child's system prompt is built from its own profile, so it names its own model.
    assert "small-model" in child.system_prompt


async def test_max_turns_defaults_to_50() -> None:
    session, _, _ = make_parent({PARENT: [call("spawn_agent", task="t"), wait_for(), reply("ok")], "t": [reply("x")]})
    await session.submit(PARENT)
    child = only_handle(session).session
    assert child.config.max_turns == 50 and session.config.max_turns == 0
    assert child.config is not session.config


async def test_max_turns_override_stops_the_child() -> None:
    session, _, _ = make_parent(
        {
            PARENT: [call("spawn_agent", task="busy", max_turns=2), wait_for(), reply("ok")],
            "busy": [Forever(lambda: call("echo", text="again"))],
        },
        config=SessionConfig(enable_loop_detection=False),
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    data = json.loads(tool_end(rec, "wait")[0]["output"])
    assert data["status"] == "failed" and data["success"] is False
    assert data["turns_used"] == 2 and data["stop_reason"] == "turn_limit"
    assert "max_turns=2" in data["error"]


async def test_default_depth_child_gets_no_subagent_tools() -> None:
    session, router, _ = make_parent(
        {
            PARENT: [call("spawn_agent", task="child"), wait_for(), reply("ok")],
            "child": [call("spawn_agent", task="grandchild"), reply("could not")],
        }
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    parent_tools = {t.name for t in router.requests[PARENT][0].tools or []}
    child_tools = {t.name for t in router.requests["child"][0].tools or []}
    assert parent_tools >= SUBAGENT_TOOL_NAMES
    assert not (SUBAGENT_TOOL_NAMES & child_tools) and "echo" in child_tools
    # The call the child makes anyway is refused as an unknown tool; nothing is spawned.
    refused = child_tool_end(rec, "spawn_agent")[0]
    assert refused["is_error"] and "Unknown tool" in refused["output"]
    child = only_handle(session).session
    assert child.subagents == {} and set(session.profile.tool_registry.names()) >= SUBAGENT_TOOL_NAMES


async def test_depth_zero_forbids_spawning() -> None:
    session, _, _ = make_parent(
        {PARENT: [call("spawn_agent", task="x"), reply("ok")]}, config=SessionConfig(max_subagent_depth=0)
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    end = tool_end(rec, "spawn_agent")[0]
    assert end["is_error"] and "depth limit" in end["output"] and "max_subagent_depth is 0" in end["output"]
    assert session.subagents == {}
    with pytest.raises(SubAgentDepthError):
        SubAgentManager(session).spawn("x")


async def test_depth_two_allows_grandchildren() -> None:
    session, router, _ = make_parent(
        {
            PARENT: [call("spawn_agent", task="child"), wait_for(), reply("ok")],
            "child": [call("spawn_agent", task="grandchild"), wait_for(), reply("child got it")],
            "grandchild": [reply("from below")],
        },
        config=SessionConfig(max_subagent_depth=2),
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    assert {t.name for t in router.requests["child"][0].tools or []} >= SUBAGENT_TOOL_NAMES
    assert not SUBAGENT_TOOL_NAMES & {t.name for t in router.requests["grandchild"][0].tools or []}
    child_handle = only_handle(session)
    grand = only_handle(child_handle.session)
    assert grand.depth == 2 and grand.result is not None and grand.result.output == "from below"
    assert json.loads(tool_end(rec, "wait")[0]["output"])["output"] == "child got it"
    # Grandchild events arrive doubly wrapped, each layer tagged with its agent id.
    nested = [e for e in wrapped(rec, child_handle.id) if e.kind is E.SUBAGENT_EVENT]
    assert nested and all(e["agent_id"] == grand.id for e in nested)
    assert any(e["event"].kind is E.ASSISTANT_TEXT_END and e["event"]["text"] == "from below" for e in nested)
    await session.close()
    assert grand.session.state is SessionState.CLOSED and grand.status is SubAgentStatus.CLOSED


# ------------------------------------------------------------------------------------------------
# send_input
# ------------------------------------------------------------------------------------------------


async def test_send_input_steers_a_working_child() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    session, router, _ = make_parent(
        {
            PARENT: [
                call("spawn_agent", task="work"),
                call("sync"),
                with_result(lambda r: call("send_input", agent_id=r["agent_id"], message="also check B"), 2),
                with_result(lambda r: call("wait", agent_id=r["agent_id"])),
                reply("ok"),
            ],
            "work": [call("gate"), reply("checked A and B")],
        },
        extra_tools=[gate_tool("gate", entered, release), sync_tool("sync", entered)],
    )
    rec = Recorder(session)
    # Release the child's tool once send_input has answered, so the message arrives mid-round.
    session.add_listener(
        lambda e: release.set() if e.kind is E.TOOL_CALL_END and e["tool_name"] == "send_input" else None
    )
    await session.submit(PARENT)
    sent = json.loads(tool_end(rec, "send_input")[0]["output"])
    assert sent["delivery"] == "steered" and sent["status"] == "running"
    # The child's next request carries the message as user input after the tool result.
    second = router.requests["work"][1]
    assert [m.text for m in second.messages if m.role == "user"] == ["work", "also check B"]
    assert any(e.kind is E.STEERING_INJECTED for e in wrapped(rec))
    data = json.loads(tool_end(rec, "wait")[0]["output"])
    assert data["output"] == "checked A and B" and data["turns_used"] == 2


async def test_send_input_resumes_an_idle_child() -> None:
    session, router, _ = make_parent(
        {
            PARENT: [
                call("spawn_agent", task="first"),
                wait_for(),
                with_result(lambda r: call("send_input", agent_id=r["agent_id"], message="and then?")),
                with_result(lambda r: call("wait", agent_id=r["agent_id"])),
                reply("ok"),
            ],
            "first": [reply("first answer"), reply("second answer")],
        }
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    assert json.loads(tool_end(rec, "send_input")[0]["output"])["delivery"] == "resumed"
    first, second = (json.loads(e["output"]) for e in tool_end(rec, "wait"))
    assert first["output"] == "first answer" and first["turns_used"] == 1
    assert second["output"] == "second answer" and second["turns_used"] == 2 and second["success"]
    # The child kept its history: the second request has both inputs and the first answer.
    texts = [(m.role, m.text) for m in router.requests["first"][1].messages if m.role != "system"]
    assert texts == [("user", "first"), ("assistant", "first answer"), ("user", "and then?")]


async def test_input_sent_while_a_run_ends_becomes_the_next_input() -> None:
    session, router, _ = make_parent({"job": [reply("one"), reply("two")]})
    handle = SubAgentManager(session).spawn("job")
    # Before the child's runner has started: steering, injected right after the task.
    assert handle.send_input("before start") == "steered"
    deliveries: list[str] = []

    def on_child_event(event: Any) -> None:
        # PROCESSING_END fires inside submit(), after the state left PROCESSING and before
        # submit() returns to the runner: the moment steering could no longer be delivered.
        if event.kind is E.PROCESSING_END and not deliveries:
            deliveries.append(handle.send_input("one more thing"))

    handle.session.add_listener(on_child_event, replay=False)
    result = await handle.wait(5)
    assert deliveries == ["queued"]
    assert result is not None and result.output == "two" and result.turns_used == 2
    first, second = router.requests["job"]
    assert [m.text for m in first.messages if m.role == "user"] == ["job", "before start"]
    assert [m.text for m in second.messages if m.role == "user"] == ["job", "before start", "one more thing"]
    assert handle.status is SubAgentStatus.COMPLETED
    await session.close()


async def test_send_input_errors() -> None:
    session, _, _ = make_parent(
        {
            PARENT: [
                call("spawn_agent", task="t"),
                with_result(lambda r: call("close_agent", agent_id=r["agent_id"])),
                with_result(lambda r: call("send_input", agent_id=r["agent_id"], message="hello?")),
                call("send_input", agent_id="agent-nope", message="hi"),
                call("wait", agent_id="agent-nope"),
                reply("ok"),
            ],
            "t": [Forever(lambda: reply("late", delay=30))],
        }
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    closed_send, unknown_send = tool_end(rec, "send_input")
    assert closed_send["is_error"] and "is closed" in closed_send["output"]
    assert unknown_send["is_error"] and "unknown agent id 'agent-nope'" in unknown_send["output"]
    assert only_handle(session).id in unknown_send["output"]  # the known ids are listed
    unknown_wait = tool_end(rec, "wait")[0]
    assert unknown_wait["is_error"] and "agent-nope" in unknown_wait["output"]


async def test_failed_child_reports_the_error_and_refuses_input() -> None:
    error = AuthenticationError("bad key", provider="scripted", status_code=401)
    session, _, _ = make_parent(
        {
            PARENT: [
                call("spawn_agent", task="doomed"),
                wait_for(),
                with_result(lambda r: call("send_input", agent_id=r["agent_id"], message="retry")),
                reply("ok"),
            ],
            "doomed": [Step(error=error)],
        }
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    data = json.loads(tool_end(rec, "wait")[0]["output"])
    assert data["status"] == "failed" and data["success"] is False and data["stop_reason"] == "error"
    assert "AuthenticationError" in data["error"]
    refused = tool_end(rec, "send_input")[0]
    assert refused["is_error"] and "session is closed" in refused["output"]
    assert session.state is SessionState.IDLE  # the parent is unaffected


# ------------------------------------------------------------------------------------------------
# close_agent, and the parent's close / abort
# ------------------------------------------------------------------------------------------------


async def test_close_agent_aborts_a_working_child() -> None:
    entered, never = asyncio.Event(), asyncio.Event()
    session, _, _ = make_parent(
        {
            PARENT: [
                call("spawn_agent", task="stuck"),
                call("sync"),
                with_result(lambda r: call("close_agent", agent_id=r["agent_id"]), 2),
                with_result(lambda r: call("wait", agent_id=r["agent_id"])),
                reply("ok"),
            ],
            "stuck": [call("gate"), reply("never")],
        },
        extra_tools=[gate_tool("gate", entered, never), sync_tool("sync", entered)],
    )
    rec = Recorder(session)
    await asyncio.wait_for(session.submit(PARENT), 10)
    closed = json.loads(tool_end(rec, "close_agent")[0]["output"])
    assert closed["status"] == "closed" and closed["previous_status"] == "running"
    assert closed["success"] is False and closed["stop_reason"] == "aborted"
    waited = json.loads(tool_end(rec, "wait")[0]["output"])
    assert waited["status"] == "closed" and waited["timed_out"] is False
    handle = only_handle(session)
    assert not handle.running and handle.session.state is SessionState.CLOSED
    child_end = [e for e in wrapped(rec) if e.kind is E.SESSION_END]
    assert len(child_end) == 1 and child_end[0]["reason"] == "closed"


async def test_close_agent_after_completion_keeps_the_result() -> None:
    session, _, _ = make_parent(
        {
            PARENT: [
                call("spawn_agent", task="quick"),
                wait_for(),
                with_result(lambda r: call("close_agent", agent_id=r["agent_id"])),
                reply("ok"),
            ],
            "quick": [reply("quick answer")],
        }
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    closed = json.loads(tool_end(rec, "close_agent")[0]["output"])
    assert closed["status"] == "closed" and closed["previous_status"] == "completed"
    assert closed["output"] == "quick answer" and closed["success"] is True


async def test_parent_abort_closes_running_children() -> None:
    entered_a, entered_b, never = asyncio.Event(), asyncio.Event(), asyncio.Event()
    session, _, _ = make_parent(
        {
            PARENT: [
                calls(("spawn_agent", {"task": "A"}), ("spawn_agent", {"task": "B"})),
                lambda r: call(
                    "wait", agent_id=last_result(r, 2)["agent_id"], agent_ids=[last_result(r, 1)["agent_id"]]
                ),
                reply("never"),
            ],
            "A": [call("gate_a"), reply("never")],
            "B": [call("gate_b"), reply("never")],
        },
        extra_tools=[gate_tool("gate_a", entered_a, never), gate_tool("gate_b", entered_b, never)],
    )
    rec = Recorder(session)
    waiting = asyncio.Event()
    session.add_listener(lambda e: waiting.set() if e.kind is E.TOOL_CALL_START and e["tool_name"] == "wait" else None)
    submit = asyncio.create_task(session.submit(PARENT))
    await asyncio.wait_for(asyncio.gather(entered_a.wait(), entered_b.wait(), waiting.wait()), 5)
    session.abort()
    result = await asyncio.wait_for(submit, 10)
    assert result.stop_reason is StopReason.ABORTED and session.state is SessionState.CLOSED

    children = [e["event"] for e in rec.of(E.SUBAGENT_EVENT)]
    assert sum(1 for e in children if e.kind is E.SESSION_END) == 2
    assert rec.events[-1].kind is E.SESSION_END and rec.events[-1].session_id == session.id
    assert session.subagents == {}
    leftover = [t for t in asyncio.all_tasks() if (t.get_name() or "").startswith("ra-subagent-") and not t.done()]
    assert leftover == []


async def test_parent_close_closes_idle_children() -> None:
    session, _, _ = make_parent(
        {PARENT: [call("spawn_agent", task="t"), wait_for(), reply("ok")], "t": [reply("done")]}
    )
    await session.submit(PARENT)
    handle = only_handle(session)
    assert handle.session.state is SessionState.IDLE
    await session.close()
    assert handle.session.state is SessionState.CLOSED and handle.status is SubAgentStatus.CLOSED
    assert handle.result is not None and handle.result.output == "done"  # the result survives
    with pytest.raises(SubAgentError, match="closed"):
        handle.send_input("more")


# ------------------------------------------------------------------------------------------------
# events and histories
# ------------------------------------------------------------------------------------------------


async def test_child_events_reach_the_parent_tagged_with_the_agent_id() -> None:
    session, _, _ = make_parent(
        {
            PARENT: [call("spawn_agent", task="evented"), wait_for(), reply("ok")],
            "evented": [call("echo", text="x"), reply("child text")],
        }
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    handle = only_handle(session)
    await session.close()
    agent_id, child_id = handle.id, handle.session.id
    forwarded = rec.of(E.SUBAGENT_EVENT)
    assert forwarded and all(e["agent_id"] == agent_id for e in forwarded)
    assert all(e["kind"] is e["event"].kind and e["event"].session_id == child_id for e in forwarded)
    kinds = [e["kind"] for e in forwarded]
    assert kinds[0] is E.SESSION_START and kinds[-1] is E.SESSION_END
    for kind in (E.USER_INPUT, E.TOOL_CALL_START, E.TOOL_CALL_END, E.ASSISTANT_TEXT_END, E.PROCESSING_END):
        assert kind in kinds
    assert forwarded[0]["event"]["depth"] == 1
    # Every event outside the wrapper is the parent's own; the parent's SESSION_END is last.
    assert all(e.session_id == session.id for e in rec.events)
    assert [e.kind for e in rec.events].count(E.SESSION_END) == 1 and rec.events[-1].kind is E.SESSION_END


async def test_histories_are_independent() -> None:
    session, router, _ = make_parent(
        {
            PARENT: [call("spawn_agent", task="child task"), wait_for(), reply("parent answer")],
            "child task": [call("echo", text="child only"), reply("child answer")],
        }
    )
    await session.submit(PARENT)
    child = only_handle(session).session
    parent_inputs = [t.content for t in session.history if isinstance(t, UserTurn)]
    child_inputs = [t.content for t in child.history if isinstance(t, UserTurn)]
    assert parent_inputs == [PARENT] and child_inputs == ["child task"]
    child_request_texts = [m.text for r in router.requests["child task"] for m in r.messages]
    assert PARENT not in child_request_texts and "parent answer" not in child_request_texts
    parent_request_texts = [m.text for r in router.requests[PARENT] for m in r.messages]
    assert "child task" not in parent_request_texts  # only the tool call's arguments mention it
    assert all(not isinstance(t, UserTurn) or t.content != "child task" for t in session.history)


# ------------------------------------------------------------------------------------------------
# API details
# ------------------------------------------------------------------------------------------------


def test_clone_profile_uses_the_hook_or_a_shallow_copy() -> None:
    registry = ToolRegistry(subagent_tools())
    profile = GenericProfile("p", "m1", registry, system_prompt="hi")
    copy_ = clone_profile(profile, model="m2")
    assert copy_ is not profile and copy_.model == "m2" and profile.model == "m1"
    assert copy_.tool_registry is registry and copy_.system_prompt == "hi"
    assert all(is_subagent_tool(t) for t in registry)
    assert not is_subagent_tool(default_tools().get("echo"))  # type: ignore[arg-type]

    class Custom(GenericProfile):
        def clone(self, *, model: str | None = None, tool_registry: ToolRegistry | None = None) -> Custom:
            registry = self.tool_registry if tool_registry is None else tool_registry
            return Custom("custom", model or self.model, registry, system_prompt="cloned")

    cloned = clone_profile(Custom("custom", "m1"), model="m3")
    assert isinstance(cloned, Custom) and cloned.model == "m3" and cloned.system_prompt == "cloned"


async def test_manager_validates_arguments_and_closed_parents() -> None:
    session, _, _ = make_parent({PARENT: []})
    manager = SubAgentManager(session)
    with pytest.raises(SubAgentError, match="task"):
        manager.spawn("  ")
    with pytest.raises(SubAgentError, match="max_turns"):
        manager.spawn("x", max_turns=-1)
    with pytest.raises(SubAgentError, match="unknown agent id"):
        manager.get("agent-x")
    with pytest.raises(SubAgentError, match="no agent id"):
        await manager.wait([])
    await session.close()
    from ra.agent.errors import SessionClosedError

    with pytest.raises(SessionClosedError):
        manager.spawn("x")


async def test_a_spawn_hook_chooses_the_id_client_and_controls_or_refuses() -> None:
    """``Session.spawn_hook`` (what a replay uses): the agent's id, client and extra controls; a
    clash with a taken id or a refusal from the hook creates nothing; children inherit the hook."""
    from ra.agent import Control
    from ra.agent.subagents import SpawnSetup

    session, router, _ = make_parent({PARENT: []})
    own = ScriptedAdapter([reply("from the hook's client")])
    client = Client(providers={"scripted": own})
    seen: list[tuple[str | None, str]] = []

    class Inputs(Control):
        def __init__(self) -> None:
            self.texts: list[str] = []

        async def input_start(self, run: Any, text: str) -> None:
            self.texts.append(text)

    inputs = Inputs()

    def hook(parent: Session, call_id: str | None, task: str) -> SpawnSetup:
        seen.append((call_id, task))
        if task == "refuse me":
            raise SubAgentError("not this one")
        return SpawnSetup(agent_id="agent-chosen", llm_client=client, controls=(inputs,))

    session.spawn_hook = hook
    manager = SubAgentManager(session)
    handle = manager.spawn("job", call_id="call-7")
    result = await handle.wait(5)
    assert handle.id == "agent-chosen" and result is not None and result.output == "from the hook's client"
    assert len(own.requests) == 1 and router.requests[PARENT] == []  # the parent's client was not called
    assert inputs.texts == ["job"] and seen == [("call-7", "job")]
    assert handle.session.spawn_hook is hook  # a grandchild would be made the same way
    with pytest.raises(SubAgentError, match="already taken"):
        manager.spawn("again")
    with pytest.raises(SubAgentError, match="not this one"):
        manager.spawn("refuse me")
    with pytest.raises(SubAgentError, match="working_dir"):
        manager.spawn("elsewhere", working_dir="no/such/dir")
    assert [task for _, task in seen] == ["job", "again", "refuse me"]  # a spawn that fails first never asks
    assert list(session.subagents) == ["agent-chosen"]
    await session.close()
    await client.close()


async def test_tools_outside_a_session_return_an_error() -> None:
    for registered in subagent_tools():
        ctx = ToolContext(env=FakeEnv(), call_id="c1", tool_name=registered.name)
        output = await registered.executor({"task": "x", "agent_id": "a", "message": "m"}, ctx)
        assert output.is_error and "running session" in output.content
