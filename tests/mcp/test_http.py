"""MCP servers over streamable HTTP on 127.0.0.1: the kit server run by uvicorn in a subprocess."""

from __future__ import annotations

import asyncio
import time

import pytest

from ra.mcp import McpServers
from ra.mcp.connection import McpConnection
from tests.mcp.servers.kit import PNG
from tests.mcp.support import http, http_kit

#: Real servers started per test: the slow lane (`pytest -m slow`), which CI runs.
pytestmark = pytest.mark.slow

TOKEN = "tok-9f8e7d6c5b4a"


async def test_results_headers_and_bearer_token_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("KIT_TOKEN", TOKEN)
    with http_kit("--token-env", "KIT_TOKEN") as url:
        spec = http(url, headers={"X-Team": "blue"}, bearer_token_env_var="KIT_TOKEN")
        async with McpServers({"remote": spec}) as servers:
            (status,) = servers.statuses()
            assert (status.transport, status.state, status.server) == ("http", "connected", "kit 1.2.3")
            tools = {t.name: t for t in servers.tools()}
            assert (await tools["mcp__remote__echo"].executor({"text": "over http"}, None)).content == "over http"
            assert (await tools["mcp__remote__header"].executor({"name": "x-team"}, None)).content == "blue"
            image = await tools["mcp__remote__image"].executor({}, None)
            assert image.image_data == PNG
            failed = await tools["mcp__remote__fail"].executor({}, None)
            assert failed.is_error and failed.content == "it broke"


async def test_a_missing_or_wrong_token_fails_that_server_without_showing_the_token(monkeypatch) -> None:
    monkeypatch.setenv("KIT_TOKEN", TOKEN)
    monkeypatch.delenv("UNSET_TOKEN_VAR", raising=False)
    monkeypatch.setenv("WRONG_TOKEN", "tok-wrong-000000")
    with http_kit("--token-env", "KIT_TOKEN") as url:
        servers = McpServers(
            {
                "unset": http(url, bearer_token_env_var="UNSET_TOKEN_VAR"),
                "wrong": http(url, bearer_token_env_var="WRONG_TOKEN", headers={"X-Key": "hdr-secret-1234"}),
            },
            startup_timeout=10,
        )
        async with servers:
            unset, wrong = servers.statuses()
    assert unset.state == "failed" and "UNSET_TOKEN_VAR" in unset.error and "not set" in unset.error
    assert wrong.state == "failed"
    for status in (unset, wrong):
        assert TOKEN not in str(status) and "tok-wrong" not in str(status) and "hdr-secret" not in str(status)


async def test_list_changed_arrives_over_http() -> None:
    with http_kit() as url:
        async with McpServers({"remote": http(url)}) as servers:
            add = next(t for t in servers.tools() if t.name == "mcp__remote__add_tool")
            await add.executor({}, None)
            for _ in range(150):
                if servers.changed():
                    break
                await asyncio.sleep(0.02)
            assert "mcp__remote__extra" in [t.name for t in servers.tools()]


async def test_a_server_that_goes_away_answers_the_call_and_then_fails() -> None:
    connection = McpConnection("remote", http("http://127.0.0.1:9/mcp"), startup_timeout=3)
    await connection.start()
    assert connection.state == "failed"  # nothing listens on port 9

    with http_kit() as url:
        connection = McpConnection("remote", http(url), startup_timeout=3, tool_timeout=10)
        await connection.start()
        assert connection.state == "connected", connection.error
    # The server process is gone now (http_kit killed it).
    try:
        started_at = time.monotonic()
        result = await connection.call("echo", {"text": "anyone?"})
        assert result.is_error
        assert time.monotonic() - started_at < 8
        for _ in range(200):
            if connection.state == "failed":
                break
            await asyncio.sleep(0.05)
        assert connection.state == "failed" and "could not restart" in connection.error
        assert (await connection.call("echo", {"text": "x"})).is_error
    finally:
        await connection.close()


async def test_a_hung_http_server_answers_the_call_in_time_and_ends_failed(monkeypatch) -> None:
    monkeypatch.setattr("ra.mcp.connection.PING_TIMEOUT", 0.5)
    with http_kit() as url:
        connection = McpConnection("remote", http(url), startup_timeout=2, tool_timeout=10)
        await connection.start()
        try:
            started_at = time.monotonic()
            result = await connection.call("hang", {}, timeout=1.0)
            assert result.is_error and "no answer within 1s" in result.content
            assert time.monotonic() - started_at < 2.0
            # Hung: no ping answer, so a restart, which the blocked server cannot answer either.
            for _ in range(200):
                if connection.state == "failed":
                    break
                await asyncio.sleep(0.05)
            assert connection.state == "failed", connection.state
            assert time.monotonic() - started_at < 8
            assert "could not restart" in connection.error
        finally:
            closing = time.monotonic()
            await connection.close()
            assert time.monotonic() - closing < 5
