"""Restarting one MCP server and turning it off and on (McpServers.restart / set_enabled), as the
Claude SDK's mcp_reconnect and mcp_toggle reach them."""

from __future__ import annotations

import os
import sys

import pytest

from ra.mcp import McpServers, ServerProblem, StdioServer
from ra.tools.sources import ControllableSource, UnknownServer
from tests.mcp.support import KIT, kit

#: The slow lane (``pytest -m slow``, which CI runs): real MCP servers over stdio, started per test.
pytestmark = pytest.mark.slow


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_restart_replaces_the_process_and_old_tools_reach_the_new_one() -> None:
    async with McpServers({"kit": kit()}) as servers:
        assert isinstance(servers, ControllableSource)
        echo = {t.name: t for t in servers.tools()}["mcp__kit__echo"]
        first = servers.connections["kit"].process.pid
        await servers.restart("kit")
        second = servers.connections["kit"].process.pid
        assert first != second and not _alive(first) and _alive(second)
        assert servers.changed()  # the session reads the list again
        # A tool taken before the restart (a registry, a subagent's) calls the new process.
        assert (await echo.executor({"text": "still"}, None)).content == "still"
        with pytest.raises(UnknownServer, match=r"no MCP server named 'nope' \(configured: kit\)"):
            await servers.restart("nope")


async def test_a_disabled_server_is_closed_withdrawn_and_refuses_tools_taken_before() -> None:
    async with McpServers({"kit": kit(), "broken": ServerProblem("uses ${TOKEN}, which is not set")}) as servers:
        echo = {t.name: t for t in servers.tools()}["mcp__kit__echo"]
        pid = servers.connections["kit"].process.pid
        await servers.set_enabled("kit", False)
        assert [(s.name, s.state) for s in servers.statuses()] == [("kit", "disabled"), ("broken", "failed")]
        assert servers.changed() and servers.tools() == []
        assert not _alive(pid)
        refused = await echo.executor({"text": "sneak"}, None)  # taken before the toggle
        assert refused.is_error and refused.content == "MCP server kit is disabled; its tool echo cannot be called"
        with pytest.raises(ValueError, match="kit is disabled"):
            await servers.restart("kit")  # a restart does not turn it back on
        await servers.set_enabled("kit", True)
        assert servers.statuses()[0].state == "connected"
        assert (await echo.executor({"text": "back"}, None)).content == "back"
        assert "mcp__kit__echo" in {t.name for t in servers.tools()}
        with pytest.raises(ValueError, match="broken cannot be started: uses"):
            await servers.restart("broken")


async def test_a_server_that_does_not_come_back_is_an_error_naming_it(tmp_path) -> None:
    flag = tmp_path / "refuse"
    # The kit server refuses to start while the flag file exists (checked by a wrapper command).
    wrapper = (
        f"import os, sys, runpy; sys.exit(2) if os.path.exists({str(flag)!r}) else None; "
        f"sys.argv = [{KIT!r}]; runpy.run_path({KIT!r}, run_name='__main__')"
    )
    async with McpServers({"kit": StdioServer(sys.executable, ("-c", wrapper))}) as servers:
        assert servers.statuses()[0].state == "connected"
        flag.write_text("")
        with pytest.raises(ValueError, match=r"^MCP server kit did not start again: could not start: "):
            await servers.restart("kit")
        assert servers.statuses()[0].state == "failed" and servers.tools() == []
        await servers.set_enabled("kit", False)
        with pytest.raises(ValueError, match=r"^MCP server kit was enabled but did not start: "):
            await servers.set_enabled("kit", True)
        flag.unlink()
        await servers.restart("kit")  # a failed server can be brought back
        assert servers.statuses()[0].state == "connected"
