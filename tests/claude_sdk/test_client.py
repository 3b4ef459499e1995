"""``ClaudeSDKClient`` programs on ``ra``: several queries on one session, interrupt, modes, model, MCP status."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import AssistantMessage, ClaudeSDKClient, ResultMessage, ToolUseBlock

from tests.claude_sdk.support import BOUND_S, options
from tests.cli.support import chat_requests, enqueue_text, enqueue_tools
from tests.support.replay import ReplayServer

#: The slow lane (``pytest -m slow``, which CI runs): the real `ra` command per test, driven by the SDK.
pytestmark = pytest.mark.slow


def test_two_queries_share_the_session(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "First.")
    enqueue_text(replay_server, "Second.")

    async def run() -> tuple[ResultMessage, ResultMessage]:
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=options(replay_server, tmp_path)) as client:
            await client.query("one")
            a = [m async for m in client.receive_response()][-1]
            await client.query("two")
            b = [m async for m in client.receive_response()][-1]
            return a, b

    a, b = asyncio.run(run())
    assert (a.result, b.result) == ("First.", "Second.") and a.session_id == b.session_id
    sent = [m["content"] for m in chat_requests(replay_server)[1]["messages"] if m["role"] != "system"]
    assert sent == ["one", "First.", "two"]


def test_interrupt_stops_a_running_command_and_keeps_the_session(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "sleep 30"}))
    enqueue_text(replay_server, "After the interrupt.")

    async def run() -> tuple[ResultMessage, ResultMessage, float]:
        opts = options(replay_server, tmp_path, permission_mode="bypassPermissions")
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=opts) as client:
            await client.query("sleep")
            started = 0.0
            first: ResultMessage | None = None
            async for message in client.receive_response():
                if isinstance(message, AssistantMessage) and any(isinstance(b, ToolUseBlock) for b in message.content):
                    await asyncio.sleep(0.3)  # the command is running
                    started = time.monotonic()
                    await client.interrupt()
                if isinstance(message, ResultMessage):
                    first = message
            elapsed = time.monotonic() - started
            await client.query("go on")
            second = [m async for m in client.receive_response()][-1]
            assert first is not None
            return first, second, elapsed

    first, second, elapsed = asyncio.run(run())
    assert (first.subtype, first.is_error) == ("error_during_execution", True)
    assert elapsed < 10
    assert second.result == "After the interrupt." and second.session_id == first.session_id


def test_set_permission_mode_and_mcp_status(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made.txt"}))
    enqueue_text(replay_server, "ok")

    async def run() -> dict[str, Any]:
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=options(replay_server, tmp_path)) as client:
            await client.set_permission_mode("bypassPermissions")
            status = await client.get_mcp_status()
            await client.query("make it")
            [m async for m in client.receive_response()]
            return status

    status = asyncio.run(run())
    assert status == {"mcpServers": []}
    assert (tmp_path / "work" / "made.txt").exists()  # default mode would have denied it (nobody to ask)


def test_set_model_changes_the_model_of_the_next_call(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "a")
    enqueue_text(replay_server, "b")

    async def run() -> None:
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=options(replay_server, tmp_path)) as client:
            await client.query("one")
            [m async for m in client.receive_response()]
            await client.set_model("other-model")
            await client.query("two")
            [m async for m in client.receive_response()]

    asyncio.run(run())
    assert [r["model"] for r in chat_requests(replay_server)] == ["test-model", "other-model"]


def test_a_message_ra_cannot_read_ends_its_query_with_an_error(replay_server: ReplayServer, tmp_path: Path) -> None:
    """A message ra cannot send to the model (a block kind it does not take) still ends its
    query: ``receive_response()`` returns an error result naming why, and the session goes on."""
    enqueue_text(replay_server, "Second.")

    async def document() -> Any:
        yield {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "nonsense_block", "data": "x"}]},
            "parent_tool_use_id": None,
            "session_id": "default",
        }

    async def run() -> tuple[ResultMessage, ResultMessage]:
        async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=options(replay_server, tmp_path)) as client:
            await client.query(document())
            a = [m async for m in client.receive_response()][-1]
            await client.query("two")
            b = [m async for m in client.receive_response()][-1]
            return a, b

    a, b = asyncio.run(run())
    assert a.is_error and a.subtype == "error_during_execution" and "not sent to the model" in a.errors[0]
    assert not b.is_error and b.result == "Second."
    assert len(chat_requests(replay_server)) == 1
