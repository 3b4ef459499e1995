"""MCP tools in a session's loop (scripted model): their effects and names as the policy sees them.

The session engineer plugs ``McpServers`` into ``Session`` itself; these tests register the tools
by hand, so they hold whatever the wiring: what the annotations make of a tool must take effect in
the loop's permission check and scheduling.
"""

from __future__ import annotations

import pytest

from ra.agent import SessionConfig
from ra.llm.testing import calls, reply
from ra.llm.types import Request
from ra.mcp import McpServers
from ra.tools.registry import ToolRegistry
from tests.agent.support import make_session
from tests.mcp.support import kit

#: The slow lane (``pytest -m slow``, which CI runs): real MCP servers over stdio, started per test.
pytestmark = pytest.mark.slow


def results(request: Request) -> list[str]:
    return [str(p.tool_result.content) for m in request.messages for p in m.content if p.tool_result is not None]


async def test_plan_mode_runs_a_read_only_mcp_tool_and_refuses_the_others() -> None:
    async with McpServers({"kit": kit()}) as servers:
        script = [
            calls(("mcp__kit__read_only", {}), ("mcp__kit__destructive", {}), ("mcp__kit__echo", {"text": "x"})),
            reply("done"),
        ]
        session, model = make_session(
            script, tools=ToolRegistry(servers.tools()), config=SessionConfig(permission_mode="plan")
        )
        try:
            await session.submit("go")
        finally:
            await session.close()
    read_only, destructive, echo = results(model.requests[-1])
    assert read_only == "ran read_only"
    assert destructive != "ran destructive" and "plan" in destructive
    assert echo != "x" and "plan" in echo  # no annotation: may change anything


async def test_rules_name_mcp_tools_by_server_and_by_tool() -> None:
    async with McpServers({"kit": kit(), "other": kit()}) as servers:
        config = SessionConfig(permission_mode="bypass", disallowed_tools=("mcp__kit", "mcp__other__fail"))
        script = [
            calls(
                ("mcp__kit__echo", {"text": "a"}),
                ("mcp__other__echo", {"text": "b"}),
                ("mcp__other__fail", {}),
            ),
            reply("done"),
        ]
        session, model = make_session(script, tools=ToolRegistry(servers.tools()), config=config)
        try:
            await session.submit("go")
        finally:
            await session.close()
    kit_echo, other_echo, other_fail = results(model.requests[-1])
    assert kit_echo != "a" and "mcp__kit" in kit_echo
    assert other_echo == "b"
    assert other_fail != "it broke" and "mcp__other__fail" in other_fail
