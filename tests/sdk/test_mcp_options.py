"""``QueryOptions(mcp_servers=..., tools=[...])``: tool sources and tool objects reach the session,
and the ``init`` message lists the servers as the Claude SDK does (``[{"name", "status"}]``, plus
ra's ``ra_transport`` / ``ra_tools``). Before, ``mcp_servers`` was not an option, ``tools`` took
names only, and ``init`` always said ``"mcp_servers": []``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ra.llm.testing import call, reply
from ra.llm.types import ToolDefinition
from ra.mcp.spec import HttpServer, McpConfigError, ServerProblem, StdioServer
from ra.sdk import QueryOptions, ResultMessage, SystemMessage
from ra.tools.registry import RegisteredTool

from ..agent.tool_source_support import ProcessToolSource, spec
from .test_spec_options import _options, _queries


def weather() -> RegisteredTool:
    return RegisteredTool(
        ToolDefinition("weather", "Today's weather.", {"type": "object", "properties": {}}),
        lambda args, ctx: "sunny",
        effect="read",
    )


def tool_results(request: Any) -> list[str]:
    return [str(p.tool_result.content) for m in request.messages for p in m.content if p.tool_result is not None]


async def test_a_tool_source_and_tool_objects_reach_the_model_and_the_init_message() -> None:
    source = ProcessToolSource("proc", [spec("echo", "read")])
    script = [call("mcp__proc__echo", text="hi"), call("weather"), reply("done")]
    options, model = _options(script, mcp_servers=source, tools=["echo", weather()])
    (messages,) = await _queries(options, "go")
    init = messages[0]
    assert isinstance(init, SystemMessage) and init.subtype == "init"
    assert init.data["mcp_servers"] == [{"name": "proc", "status": "connected", "ra_transport": "stdio", "ra_tools": 1}]
    assert init.data["tools"] == ["echo", "weather", "mcp__proc__echo"]
    assert [t.name for t in model.requests[0].tools or ()] == ["echo", "weather", "mcp__proc__echo"]
    echoed, sunny = tool_results(model.requests[-1])
    assert echoed.startswith('echo ran with {"text": "hi"}') and sunny == "sunny"
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "done"
    assert source.alive  # the host's source outlives the client
    await source.close()


async def test_tool_objects_alone_keep_every_tool_of_the_profile() -> None:
    options, model = _options([reply("ok")], tools=[weather()])
    await _queries(options, "go")
    assert [t.name for t in model.requests[0].tools or ()] == ["echo", "boom", "nap", "weather"]


async def test_a_failed_server_is_listed_as_failed_with_its_error() -> None:
    broken = ProcessToolSource("broken", command=["/nonexistent/server"])
    options, _ = _options([reply("ok")], mcp_servers=broken)
    (messages,) = await _queries(options, "go")
    (entry,) = messages[0].data["mcp_servers"]
    assert entry["name"] == "broken" and entry["status"] == "failed" and "nonexistent" in entry["error"]
    assert messages[-1].result == "ok"


def test_mcp_servers_in_the_claude_sdk_shape_a_file_or_json_text_become_server_specs(tmp_path: Path) -> None:
    table = {
        "files": {"type": "stdio", "command": "npx", "args": ["-y", "server-fs", "."], "env": {"TOKEN": "s3cret"}},
        "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer s3cret"}},
        "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
        "typo": {"comand": "x"},
    }
    parsed = QueryOptions(mcp_servers=table).build_mcp_servers()
    assert isinstance(parsed, dict)
    assert isinstance(parsed["files"], StdioServer) and parsed["files"].args == ("-y", "server-fs", ".")
    assert isinstance(parsed["web"], HttpServer) and parsed["web"].transport == "http"
    assert isinstance(parsed["old"], HttpServer) and parsed["old"].transport == "sse"
    assert isinstance(parsed["typo"], ServerProblem)
    assert "s3cret" not in repr(parsed)
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": table}))
    good = {name: parsed[name] for name in ("files", "web", "old")}
    for given in (path, str(path), json.dumps({"mcpServers": table})):
        read = QueryOptions(mcp_servers=given).build_mcp_servers()
        assert isinstance(read, dict) and {n: read[n] for n in good} == good
        assert "server 'typo': unknown key(s) comand" in read["typo"].message
    specs = {"files": parsed["files"]}  # ra.mcp specs pass as they are
    assert QueryOptions(mcp_servers=specs).build_mcp_servers() == specs


def test_mcp_servers_that_cannot_be_read_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match="cannot read MCP config"):
        QueryOptions(mcp_servers=tmp_path / "missing.json").build_mcp_servers()
    with pytest.raises(McpConfigError, match="not valid JSON"):
        QueryOptions(mcp_servers="{not json").build_mcp_servers()
    with pytest.raises(TypeError, match="mcp_servers takes"):
        QueryOptions(mcp_servers=42).build_mcp_servers()  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tool names and tools"):
        QueryOptions(tools=["echo", 42]).extra_tools()  # type: ignore[list-item]


async def test_a_client_on_a_given_session_refuses_mcp_servers_it_cannot_apply() -> None:
    from ra.sdk import AgentClient

    options, _ = _options([reply("ok")])
    async with AgentClient(options) as first:
        other = AgentClient(QueryOptions(mcp_servers={}), session=first.session)
        with pytest.raises(ValueError, match="give mcp_servers and tool objects to the Session"):
            await other.connect()
