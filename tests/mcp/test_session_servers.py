"""MCP servers through a Session and through ``ra.sdk``, end to end: the kit server (written with
the ``mcp`` package) and ``mcp-server-time`` from PyPI over stdio, a scripted model. The session
starts them before SESSION_START, registers their tools, takes a ``tools/list_changed`` between
model calls, and leaves no server process behind (checked by tests/mcp/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from ra.agent import GenericProfile, Session, SessionConfig
from ra.agent.events import EventKind
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, StepLike, call, reply
from ra.llm.types import Request
from ra.mcp import StdioServer
from ra.sdk import AgentClient, QueryOptions, SystemMessage
from tests.agent.support import FAST_RETRY, FakeEnv, Recorder, default_tools
from tests.mcp.support import KIT, kit

pytest.importorskip("mcp")


#: The slow lane (``pytest -m slow``, which CI runs): real MCP servers over stdio, started per test.
pytestmark = pytest.mark.slow


def offered(request: Request) -> list[str]:
    return [t.name for t in request.tools or ()]


def results(request: Request) -> list[str]:
    return [str(p.tool_result.content) for m in request.messages for p in m.content if p.tool_result is not None]


class HereEnv(FakeEnv):
    """FakeEnv in a directory that exists (servers start in the session's working directory)."""

    def __init__(self, where: Path) -> None:
        super().__init__()
        self.where = str(where)

    def working_directory(self) -> str:
        return self.where


def session_with(script: list[StepLike], servers: Any, where: Path, **config: Any) -> tuple[Session, ScriptedAdapter]:
    model = ScriptedAdapter(script)
    profile = GenericProfile("scripted", "test-model", default_tools(), system_prompt="test")
    settings = SessionConfig(retry_policy=FAST_RETRY, **config)
    settings.prices["test-model"] = ModelPrice.free()
    client = Client(providers={"scripted": model})
    return Session(profile, HereEnv(where), client, settings, mcp_servers=servers), model


async def test_servers_by_name_start_with_the_session_serve_its_model_and_close_with_it(tmp_path: Path) -> None:
    time_server = StdioServer(sys.executable, ("-m", "mcp_server_time", "--local-timezone", "UTC"))
    waiting = call("mcp__kit__echo", text="wait")
    waiting.delay = 1.0  # the server's tools/list_changed arrives during this model call
    script: list[StepLike] = [
        call("mcp__kit__echo", text="hello"),
        call("mcp__time__get_current_time", timezone="UTC"),
        call("mcp__kit__add_tool"),
        waiting,
        call("mcp__kit__extra"),
        reply("done"),
    ]
    session, model = session_with(script, {"kit": kit(), "time": time_server}, tmp_path)
    events = Recorder(session)
    result = await session.submit("go")
    assert result.text == "done"
    (start,) = events.of(EventKind.SESSION_START)
    states = {s.name: (s.state, s.transport) for s in start.data["mcp_servers"]}
    assert states == {"kit": ("connected", "stdio"), "time": ("connected", "stdio")}
    first = offered(model.requests[0])
    assert "mcp__kit__echo" in first and "mcp__time__get_current_time" in first and "mcp__kit__extra" not in first
    assert results(model.requests[1]) == ["hello"]
    assert '"timezone": "UTC"' in results(model.requests[2])[-1]  # the reference server's JSON answer
    assert "mcp__kit__extra" in offered(model.requests[4])  # taken between model calls
    assert results(model.requests[5])[-1] == "ran extra"
    await session.close()
    assert all(s.state == "closed" for s in session.mcp_servers)


async def test_a_server_that_cannot_start_is_a_warning_and_the_others_serve(tmp_path: Path) -> None:
    servers = {"kit": kit(), "gone": StdioServer("/nonexistent/mcp-server")}
    session, model = session_with([call("mcp__kit__echo", text="x"), reply("ok")], servers, tmp_path)
    events = Recorder(session)
    assert (await session.submit("go")).text == "ok"
    (start,) = events.of(EventKind.SESSION_START)
    assert {s.name: s.state for s in start.data["mcp_servers"]} == {"kit": "connected", "gone": "failed"}
    warnings = [e for e in events.of(EventKind.WARNING) if e.data["code"] == "tool_source_failed"]
    assert len(warnings) == 1 and "'gone'" in warnings[0].data["message"]
    assert results(model.requests[1]) == ["x"]
    await session.close()


async def test_the_sdk_takes_servers_in_the_claude_sdk_shape_and_lists_them_in_init(tmp_path: Path) -> None:
    model = ScriptedAdapter([call("mcp__kit__echo", text="sdk"), reply("ok")])
    profile = GenericProfile("scripted", "test-model", default_tools(), system_prompt="test")
    config = SessionConfig(retry_policy=FAST_RETRY, permission_mode="bypass")
    config.prices["test-model"] = ModelPrice.free()
    options = QueryOptions(
        profile=profile,
        client=Client(providers={"scripted": model}),
        env=HereEnv(tmp_path),
        config=config,
        persist_session=False,
        mcp_servers={"kit": {"type": "stdio", "command": sys.executable, "args": [KIT]}, "bad": {"comand": "x"}},
    )
    async with AgentClient(options) as client:
        await client.query("go")
        messages = [m async for m in client.receive_response()]
    init = messages[0]
    assert isinstance(init, SystemMessage) and init.subtype == "init"
    kit_entry, bad_entry = init.data["mcp_servers"]
    assert kit_entry["name"] == "kit" and kit_entry["status"] == "connected" and kit_entry["ra_tools"] > 10
    assert bad_entry["name"] == "bad" and bad_entry["status"] == "failed" and "comand" in bad_entry["error"]
    assert "mcp__kit__echo" in init.data["tools"]
    assert results(model.requests[1]) == ["sdk"]


async def test_a_session_turns_a_server_off_and_on_and_restarts_it(tmp_path: Path) -> None:
    from ra.tools.sources import UnknownServer

    script: list[StepLike] = [
        call("mcp__kit__echo", text="a"),
        reply("one"),
        call("mcp__kit__echo", text="b"),  # the server is off: the model tries anyway
        reply("two"),
        call("mcp__kit__echo", text="c"),
        reply("three"),
    ]
    session, model = session_with(script, {"kit": kit()}, tmp_path)
    assert (await session.submit("go")).text == "one"
    await session.toggle_mcp_server("kit", False)
    assert [(s.name, s.state) for s in session.mcp_servers] == [("kit", "disabled")]
    assert (await session.submit("again")).text == "two"
    assert not any(n.startswith("mcp__kit__") for n in offered(model.requests[2]))
    assert results(model.requests[3])[-1] == "Tool mcp__kit__echo is not available: MCP server kit is disabled."
    with pytest.raises(ValueError, match="kit is disabled"):
        await session.reconnect_mcp_server("kit")
    await session.toggle_mcp_server("kit", True)
    await session.reconnect_mcp_server("kit")
    assert (await session.submit("once more")).text == "three"
    assert results(model.requests[5])[-1] == "c"
    with pytest.raises(UnknownServer):
        await session.toggle_mcp_server("nope", True)
    await session.close()
