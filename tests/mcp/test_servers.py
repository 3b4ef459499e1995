"""Many MCP servers as one ToolSource (ra.mcp.servers.McpServers)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from ra.mcp import McpServers, ServerProblem
from ra.tools.registry import ToolContext, ToolEffect, ToolRegistry
from ra.tools.sources import ToolSource
from tests.mcp.support import kit

#: The slow lane (``pytest -m slow``, which CI runs): real MCP servers over stdio, started per test.
pytestmark = pytest.mark.slow


def test_import_ra_and_ra_mcp_do_not_import_the_mcp_package() -> None:
    code = (
        "import sys, ra, ra.mcp, ra.mcp.names, ra.mcp.results; from ra.mcp import McpServers, mcp_tool_name; "
        "print([m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


async def test_statuses_tools_tags_and_effects() -> None:
    servers = McpServers({"kit": kit(), "broken": ServerProblem("uses ${TOKEN}, which is not set")})
    assert isinstance(servers, ToolSource)
    assert [s.state for s in servers.statuses()] == ["pending", "failed"]
    await servers.start()
    try:
        kit_status, broken = servers.statuses()
        assert (kit_status.name, kit_status.transport, kit_status.state) == ("kit", "stdio", "connected")
        assert kit_status.tools == 18 and kit_status.server == "kit 1.2.3"
        assert (broken.state, broken.error) == ("failed", "uses ${TOKEN}, which is not set")
        tools = {t.name: t for t in servers.tools()}
        echo = tools["mcp__kit__echo"]
        assert echo.tags == {"mcp", "mcp:kit"}
        assert echo.definition.description == "Echo the text back."
        assert echo.definition.parameters["required"] == ["text"]  # the schema passes through
        assert tools["mcp__kit__read_only"].effect is ToolEffect.READ
        assert tools["mcp__kit__destructive"].effect is None  # may change anything
        assert echo.effect is None
        assert "mcp__kit__dotted_name" in tools  # sanitised for the model ...
        result = await tools["mcp__kit__dotted_name"].executor({}, None)  # ... called by its own name
        assert result.content == "ran dotted.name"
        ToolRegistry(list(tools.values()))  # every tool registers
    finally:
        await servers.close()
    assert [s.state for s in servers.statuses()] == ["closed", "failed"]


async def test_an_executor_goes_through_the_session_tool_context() -> None:
    async with McpServers({"kit": kit()}) as servers:
        tools = {t.name: t for t in servers.tools()}
        echo = tools["mcp__kit__echo"]
        deltas: list[tuple[str, str]] = []
        ctx = ToolContext(env=None, call_id="c1", tool_name=echo.name, on_output=lambda s, c: deltas.append((s, c)))  # type: ignore[arg-type]
        result = await echo.executor({"text": "via ctx"}, ctx)
        assert result.content == "via ctx" and result.metadata["mcp_server"] == "kit"
        # Progress notifications become output deltas while the call runs.
        assert (await tools["mcp__kit__progress"].executor({}, ctx)).content == "progressed"
        assert deltas == [("stderr", "[progress 1/2: step 1]\n"), ("stderr", "[progress 2/2: step 2]\n")]


async def test_tool_names_across_servers_never_shadow_each_other() -> None:
    async with McpServers({"a.b": kit(), "a_b": kit()}) as servers:
        names = [t.name for t in servers.tools()]
    assert len(names) == len(set(names)) == 36
    assert "mcp__a_b__echo" in names  # the server whose name needed no change keeps the plain names
    assert sum(n.startswith("mcp__a_b__echo_") for n in names) == 1


async def test_changed_after_list_changed_and_after_a_server_fails() -> None:
    async with McpServers({"kit": kit()}) as servers:
        tools = {t.name: t for t in servers.tools()}
        assert not servers.changed()
        await tools["mcp__kit__add_tool"].executor({}, None)
        for _ in range(100):
            if servers.changed():
                break
            await asyncio.sleep(0.02)
        assert servers.changed()
        names = [t.name for t in servers.tools()]
        assert "mcp__kit__extra" in names and not servers.changed()
        # Two crashes: the server fails, its tools go away, and the change is announced.
        await tools["mcp__kit__crash"].executor({}, None)
        await tools["mcp__kit__pid"].executor({}, None)  # waits out the restart
        await tools["mcp__kit__crash"].executor({}, None)
        for _ in range(100):
            if servers.statuses()[0].state == "failed":
                break
            await asyncio.sleep(0.05)
        assert servers.changed() and servers.tools() == []
        stale = await tools["mcp__kit__echo"].executor({"text": "x"}, None)
        assert stale.is_error and "failed" in stale.content


async def test_close_is_idempotent_and_a_closed_set_does_not_start_again() -> None:
    servers = McpServers({"kit": kit()})
    await servers.close()  # before start: nothing to do
    with pytest.raises(RuntimeError, match="closed"):
        await servers.start()
    other = McpServers({"kit": kit()})
    await other.start()
    await other.start()  # a second start does nothing more
    await other.close()
    await other.close()


def test_bad_timeouts_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        McpServers({}, tool_timeout=0)


async def test_a_tool_with_a_broken_schema_is_left_out_and_the_others_register(caplog) -> None:
    async with McpServers({"kit": kit("--bad-schema")}) as servers:
        names = [t.name for t in servers.tools()]
        assert "mcp__kit__bad_schema" not in names and "mcp__kit__echo" in names
        ToolRegistry(servers.tools())
    assert any("bad_schema" in r.getMessage() and "left out" in r.getMessage() for r in caplog.records)
