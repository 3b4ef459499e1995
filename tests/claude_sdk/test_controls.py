"""``ClaudeSDKClient``'s control requests on ``ra``: context usage, MCP reconnect and toggle, and the
requests ra answers with an error (``rewind_files``, ``stop_task``) - with a real stdio MCP server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import AgentDefinition, ClaudeSDKClient
from claude_agent_sdk.types import ContextUsageResponse

from tests.claude_sdk.support import BOUND_S, options
from tests.cli.support import MCP_NOTES, chat_requests, enqueue_text, enqueue_tools, tool_messages
from tests.support.replay import ReplayServer

#: The slow lane (``pytest -m slow``, which CI runs): the real `ra` command per test, driven by the SDK.
pytestmark = pytest.mark.slow


def _notes(pidfile: Path) -> dict[str, Any]:
    return {"type": "stdio", "command": sys.executable, "args": [MCP_NOTES, "--pidfile", str(pidfile)]}


def _pid(pidfile: Path, other_than: int | None = None) -> int:
    """The notes server's pid from its pidfile (waiting, bounded, for a new one when asked)."""
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        text = pidfile.read_text() if pidfile.exists() else ""
        if text.strip() and int(text) != other_than:
            return int(text)
        time.sleep(0.05)
    raise AssertionError(f"no (new) pid in {pidfile}")


def _gone(pid: int) -> bool:
    """Whether the process ended (waiting, bounded)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _offered(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or ()]


async def _ask(client: ClaudeSDKClient, prompt: str) -> list[Any]:
    await client.query(prompt)
    return [m async for m in client.receive_response()]


def test_get_context_usage_reports_the_window_and_grows_after_a_turn(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_text(replay_server, "A reply. " * 40, prompt_tokens=6000, completion_tokens=120)
    opts = options(replay_server, tmp_path, mcp_servers={"notes": _notes(tmp_path / "pid")})

    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=opts) as client:
            before = await client.get_context_usage()
            await _ask(client, "Tell me something. " * 30)
            return before, await client.get_context_usage()

    before, after = asyncio.run(run())
    for usage in (before, after):
        assert set(ContextUsageResponse.__required_keys__) <= set(usage)
        assert usage["model"] == "test-model"
        assert (usage["memoryFiles"], usage["gridRows"]) == ([], [])
        parts = {c["name"]: c["tokens"] for c in usage["categories"]}
        assert list(parts) == [
            "System prompt",
            "System tools",
            "MCP tools",
            "Messages",
            "Autocompact buffer",
            "Free space",
        ]
        # The ra command compacts before the window is full: the room kept for the answer is the buffer.
        assert usage["isAutoCompactEnabled"] is True and usage["rawMaxTokens"] > parts["Autocompact buffer"] > 0
        assert (
            usage["maxTokens"] == usage["rawMaxTokens"] - parts["Autocompact buffer"] == usage["autoCompactThreshold"]
        )
        assert parts["System prompt"] > 100 and parts["System tools"] > 100
        assert parts["MCP tools"] == sum(t["tokens"] for t in usage["mcpTools"]) > 0
        assert {t["serverName"] for t in usage["mcpTools"]} == {"notes"}
        assert "mcp__notes__echo" in {t["name"] for t in usage["mcpTools"]}
        assert "shell_command" in {t["name"] for t in usage["systemTools"]}
        assert sum(v for k, v in parts.items() if k not in ("Free space", "Autocompact buffer")) == usage["totalTokens"]
        assert parts["Free space"] == usage["maxTokens"] - usage["totalTokens"]
        assert usage["percentage"] == round(100 * usage["totalTokens"] / usage["rawMaxTokens"], 1)
    assert before["ra_measured"] is False and "ra_last_input_tokens" not in before
    assert before["apiUsage"]["input_tokens"] == 0
    # After the call: the provider's count (6000 in, 120 out) is the total, the messages what it
    # holds beyond the system prompt and the tools.
    assert after["ra_measured"] is True and after["ra_last_input_tokens"] == 6000
    assert after["totalTokens"] == 6120 > before["totalTokens"]
    assert after["apiUsage"]["input_tokens"] == 6000 and after["apiUsage"]["output_tokens"] == 120
    messages = {c["name"]: c["tokens"] for c in after["categories"]}["Messages"]
    assert messages > {c["name"]: c["tokens"] for c in before["categories"]}["Messages"]


def test_context_usage_lists_the_sdks_agents(replay_server: ReplayServer, tmp_path: Path) -> None:
    agents = {"reviewer": AgentDefinition(description="Reviews diffs carefully", prompt="You review.")}
    opts = options(replay_server, tmp_path, agents=agents)

    async def run() -> dict[str, Any]:
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=opts) as client:
            return await client.get_context_usage()

    usage = asyncio.run(run())
    assert {"agentType": "reviewer", "source": "sdk", "tokens": len("Reviews diffs carefully") // 4} in usage["agents"]


def test_reconnect_restarts_a_stdio_server_whose_tools_then_work(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "mcp__notes__echo", {"text": "again"}))
    enqueue_text(replay_server, "ok")
    pidfile = tmp_path / "pid"
    opts = options(replay_server, tmp_path, mcp_servers={"notes": _notes(pidfile)}, permission_mode="bypassPermissions")

    async def run() -> tuple[int, int, dict[str, Any], str]:
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=opts) as client:
            await client.get_mcp_status()  # the session is open: the server runs
            first = _pid(pidfile)
            await client.reconnect_mcp_server("notes")
            second = _pid(pidfile, other_than=first)
            status = await client.get_mcp_status()
            with pytest.raises(Exception) as unknown:
                await client.reconnect_mcp_server("nope")
            await _ask(client, "echo")
            return first, second, status, str(unknown.value)

    first, second, status, unknown = asyncio.run(run())
    assert first != second and _gone(first)
    assert status["mcpServers"][0]["status"] == "connected"
    assert "mcp_reconnect: no MCP server named 'nope' (configured: notes)" in unknown
    assert [m["content"] for m in tool_messages(chat_requests(replay_server)[1])] == ["notes says: again"]


def test_toggle_off_withdraws_and_refuses_the_tools_and_on_brings_them_back(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    off_file, on_file = work / "off.txt", work / "on.txt"
    enqueue_tools(replay_server, ("c1", "mcp__notes__touch", {"path": str(off_file)}))  # forced while off
    enqueue_text(replay_server, "could not")
    enqueue_tools(replay_server, ("c2", "mcp__notes__touch", {"path": str(on_file)}))
    enqueue_text(replay_server, "done")
    pidfile = tmp_path / "pid"
    opts = options(replay_server, tmp_path, mcp_servers={"notes": _notes(pidfile)}, permission_mode="bypassPermissions")

    async def run() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=opts) as client:
            await client.get_mcp_status()
            out["pid"] = _pid(pidfile)
            await client.toggle_mcp_server("notes", False)
            out["off"] = await client.get_mcp_status()
            await client.toggle_mcp_server("notes", False)  # again: nothing changes
            with pytest.raises(Exception) as again:
                await client.reconnect_mcp_server("notes")  # does not turn it back on
            out["reconnect_off"] = str(again.value)
            await _ask(client, "touch off.txt")
            await client.toggle_mcp_server("notes", True)
            out["on"] = await client.get_mcp_status()
            await _ask(client, "touch on.txt")
            with pytest.raises(Exception) as unknown:
                await client.toggle_mcp_server("nope", False)
            out["unknown"] = str(unknown.value)
        return out

    out = asyncio.run(run())
    assert out["off"] == {"mcpServers": [{"name": "notes", "status": "disabled"}]}
    assert _gone(out["pid"])  # a disabled server is stopped
    assert "notes is disabled" in out["reconnect_off"]
    requests = chat_requests(replay_server)
    assert not any(n.startswith("mcp__notes__") for n in _offered(requests[0]))
    refused = tool_messages(requests[1])[0]["content"]
    assert refused == "Tool mcp__notes__touch is not available: MCP server notes is disabled." and not off_file.exists()
    assert out["on"]["mcpServers"][0]["status"] == "connected"
    assert "mcp__notes__touch" in _offered(requests[2])
    assert on_file.exists() and tool_messages(requests[3])[-1]["content"] == f"created {on_file}"
    assert "mcp_toggle: no MCP server named 'nope'" in out["unknown"]


def _subagent_script(target: Path) -> Any:
    """Parent spawns a child, waits for it, answers; the child calls the notes server's touch.
    Their requests interleave, so each is answered by whose it is and how far it got."""
    from tests.cli.support import SSE, sse_text, sse_tools
    from tests.support.replay import Received, Scripted

    def scripted(body: str) -> Scripted:
        return Scripted(200, dict(SSE), [body.encode()])

    def answer(request: Received) -> Scripted | None:
        if not request.path.endswith("/chat/completions"):
            return None
        messages = request.json()["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        results = [m for m in messages if m["role"] == "tool"]
        if any("CHILD TASK" in str(u) for u in users[:1]):
            if not results:
                return scripted(sse_tools(("k1", "mcp__notes__touch", {"path": str(target)})))
            return scripted(sse_text("child done"))
        if not results:
            return scripted(sse_tools(("p1", "spawn_agent", {"task": "CHILD TASK: touch the file"})))
        if len(results) == 1:
            agent = json.loads(results[0]["content"])["agent_id"]
            return scripted(sse_tools(("p2", "wait", {"agent_id": agent})))
        return scripted(sse_text("parent done"))

    return answer


def test_a_disabled_servers_tool_is_refused_to_a_subagent_too(replay_server: ReplayServer, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "sub.txt"
    replay_server.responder = _subagent_script(target)
    opts = options(
        replay_server,
        tmp_path,
        mcp_servers={"notes": _notes(tmp_path / "pid")},
        permission_mode="bypassPermissions",
        extra_args={"profile": "anthropic", "provider": "openai-compatible"},
    )

    async def run() -> list[Any]:
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=opts) as client:
            await client.toggle_mcp_server("notes", False)
            return await _ask(client, "delegate")

    messages = asyncio.run(run())
    assert messages[-1].result == "parent done"
    requests = chat_requests(replay_server)
    child = [r for r in requests if "CHILD TASK" in str(r["messages"][1:2])]
    assert len(child) == 2  # the child tried the tool, read the refusal, answered
    assert not any(n.startswith("mcp__notes__") for body in requests for n in _offered(body))
    refused = "Tool mcp__notes__touch is not available: MCP server notes is disabled."
    assert tool_messages(child[1])[0]["content"] == refused
    assert not target.exists()


def test_rewind_files_says_why_it_cannot(replay_server: ReplayServer, tmp_path: Path) -> None:
    async def run() -> str:
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=options(replay_server, tmp_path)) as client:
            with pytest.raises(Exception) as rewind:
                await client.rewind_files("0b6c4f1e-0000-4000-8000-000000000000")
            return str(rewind.value)

    assert "ra keeps no file checkpoints" in asyncio.run(run())


def _sleeping_child_script() -> Any:
    """Parent spawns a child that runs ``sleep 60``, then waits for it; the child would answer after."""
    from tests.cli.support import SSE, sse_text, sse_tools
    from tests.support.replay import Received, Scripted

    def scripted(body: str) -> Scripted:
        return Scripted(200, dict(SSE), [body.encode()])

    def answer(request: Received) -> Scripted | None:
        if not request.path.endswith("/chat/completions"):
            return None
        messages = request.json()["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        results = [m for m in messages if m["role"] == "tool"]
        if any("CHILD TASK" in str(u) for u in users[:1]):
            if not results:
                return scripted(sse_tools(("k1", "shell", {"command": "sleep 60"})))
            return scripted(sse_text("child done"))
        if not results:
            return scripted(sse_tools(("p1", "spawn_agent", {"task": "CHILD TASK: sleep"})))
        if len(results) == 1:
            agent = json.loads(results[0]["content"])["agent_id"]
            return scripted(sse_tools(("p2", "wait", {"agent_id": agent})))
        return scripted(sse_text("parent done"))

    return answer


def test_stop_task_stops_a_subagent_by_its_agent_id(replay_server: ReplayServer, tmp_path: Path) -> None:
    replay_server.responder = _sleeping_child_script()
    opts = options(
        replay_server,
        tmp_path,
        permission_mode="bypassPermissions",
        extra_args={"profile": "anthropic", "provider": "openai-compatible"},
    )

    async def run() -> tuple[str, str, float, Any]:
        from claude_agent_sdk import ResultMessage, ToolResultBlock, UserMessage

        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=opts) as client:
            with pytest.raises(Exception) as unknown:
                await client.stop_task("task-1")
            await client.query("delegate")
            agent, stopped_at, result = "", 0.0, None
            async for message in client.receive_response():
                if isinstance(message, UserMessage) and not agent and isinstance(message.content, list):
                    for block in message.content:
                        if isinstance(block, ToolResultBlock) and "agent_id" in str(block.content):
                            agent = json.loads(str(block.content))["agent_id"]
                            await asyncio.sleep(0.5)  # the child's sleep is running
                            stopped_at = time.monotonic()
                            await client.stop_task(agent)
                if isinstance(message, ResultMessage):
                    result = message
            return str(unknown.value), agent, time.monotonic() - stopped_at, result

    unknown, agent, elapsed, result = asyncio.run(run())
    assert "stop_task: no such task: 'task-1'" in unknown and "this session's: none" in unknown
    assert agent.startswith("agent") and elapsed < 15
    assert result.result == "parent done"
    waited = json.loads(tool_messages(chat_requests(replay_server)[-1])[-1]["content"])
    assert waited["agent_id"] == agent and waited["status"] == "closed"


def test_toggle_and_reconnect_reach_the_programs_in_process_server(replay_server: ReplayServer, tmp_path: Path) -> None:
    from claude_agent_sdk import create_sdk_mcp_server, tool

    calls: list[dict[str, Any]] = []

    @tool("add", "Add two numbers", {"a": int, "b": int})
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        return {"content": [{"type": "text", "text": f"sum={args['a'] + args['b']}"}]}

    calculator = create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add])
    enqueue_tools(replay_server, ("c1", "mcp__calc__add", {"a": 1, "b": 1}))  # forced while off
    enqueue_text(replay_server, "no")
    enqueue_tools(replay_server, ("c2", "mcp__calc__add", {"a": 2, "b": 40}))
    enqueue_text(replay_server, "42")
    opts = options(replay_server, tmp_path, mcp_servers={"calc": calculator}, permission_mode="bypassPermissions")

    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=opts) as client:
            await client.toggle_mcp_server("calc", False)
            off = await client.get_mcp_status()
            await _ask(client, "add 1 and 1")
            await client.toggle_mcp_server("calc", True)
            await client.reconnect_mcp_server("calc")
            on = await client.get_mcp_status()
            await _ask(client, "add 2 and 40")
            return off, on

    off, on = asyncio.run(run())
    assert off["mcpServers"] == [{"name": "calc", "status": "disabled"}]
    assert on["mcpServers"][0]["status"] == "connected"
    requests = chat_requests(replay_server)
    assert "mcp__calc__add" not in _offered(requests[0]) and "mcp__calc__add" in _offered(requests[2])
    refused = "Tool mcp__calc__add is not available: MCP server calc is disabled."
    assert tool_messages(requests[1])[0]["content"] == refused
    assert calls == [{"a": 2, "b": 40}]
    assert tool_messages(requests[3])[-1]["content"] == "sum=42"
