"""Servers ra's authors did not write: ``mcp-server-time`` (PyPI) and ``server-everything`` (npm).

server-everything is found through ``RA_TEST_NPM_DIR`` (a directory made with
``npm install --prefix DIR @modelcontextprotocol/server-everything@<pinned>``), else run with
``npx -y``; the tests skip, saying why, only when there is no node or npx at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from ra.mcp import McpServers, StdioServer
from ra.tools.registry import ToolEffect
from tests.mcp.support import _read_port, free_port, http, leftovers, npm_everything, stop_process

#: npx may have to download the package on first use.
#: The slow lane (``pytest -m slow``, which CI runs): servers from PyPI and npm, started per test.
pytestmark = pytest.mark.slow


NPM_START = 120.0


def everything_or_skip() -> list[str]:
    command = npm_everything()
    if command is None:
        pytest.skip("server-everything needs node and npx (or RA_TEST_NPM_DIR); neither is on this machine")
    return command


async def test_mcp_server_time_over_stdio() -> None:
    spec = StdioServer(sys.executable, ("-m", "mcp_server_time", "--local-timezone", "UTC"))
    async with McpServers({"time": spec}) as servers:
        (status,) = servers.statuses()
        assert status.state == "connected", status.error
        tools = {t.name: t for t in servers.tools()}
        assert {"mcp__time__get_current_time", "mcp__time__convert_time"} <= set(tools)
        now = tools["mcp__time__get_current_time"]
        assert now.effect is ToolEffect.READ  # the server annotates it read-only
        result = await now.executor({"timezone": "Europe/Paris"}, None)
        assert not result.is_error, result.content
        assert json.loads(result.content)["timezone"] == "Europe/Paris"
        bad = await now.executor({"timezone": "Mars/Olympus"}, None)
        assert bad.is_error
        cookie = servers.connections["time"].process.cookie
    assert not leftovers(cookie)


def _check_everything_tools(tools: dict) -> None:
    assert tools["mcp__everything__echo"].effect is ToolEffect.READ


@pytest.mark.timeout(NPM_START + 60)
async def test_server_everything_over_stdio() -> None:
    command = everything_or_skip()
    spec = StdioServer(command[0], (*command[1:], "stdio"))
    async with McpServers({"everything": spec}, startup_timeout=NPM_START) as servers:
        (status,) = servers.statuses()
        assert status.state == "connected", status.error
        assert status.server and "everything" in status.server
        tools = {t.name: t for t in servers.tools()}
        _check_everything_tools(tools)
        echo = await tools["mcp__everything__echo"].executor({"message": "hi there"}, None)
        assert "hi there" in echo.content and not echo.is_error
        total = await tools["mcp__everything__get-sum"].executor({"a": 2, "b": 40}, None)
        assert "42" in total.content
        image = await tools["mcp__everything__get-tiny-image"].executor({}, None)
        assert image.image_data is not None and image.image_media_type == "image/png"
        weather = await tools["mcp__everything__get-structured-content"].executor({"location": "Chicago"}, None)
        assert not weather.is_error and "temperature" in weather.metadata["structured_content"]
        links = await tools["mcp__everything__get-resource-links"].executor({"count": 2}, None)
        assert "[resource link:" in links.content
        cookie = servers.connections["everything"].process.cookie
    assert not leftovers(cookie)


def _run_everything(transport: str, path: str) -> Iterator[str]:
    command = everything_or_skip()
    process = subprocess.Popen(
        [*command, transport],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PORT": str(free_port())},
    )
    try:
        port = _read_port(process, NPM_START)
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        stop_process(process)


@pytest.fixture
def everything_http() -> Iterator[str]:
    yield from _run_everything("streamableHttp", "/mcp")


@pytest.fixture
def everything_sse() -> Iterator[str]:
    yield from _run_everything("sse", "/sse")


@pytest.mark.timeout(NPM_START + 60)
async def test_server_everything_over_streamable_http(everything_http: str) -> None:
    async with McpServers({"everything": http(everything_http)}) as servers:
        (status,) = servers.statuses()
        assert (status.transport, status.state) == ("http", "connected"), status.error
        tools = {t.name: t for t in servers.tools()}
        _check_everything_tools(tools)
        echo = await tools["mcp__everything__echo"].executor({"message": "over http"}, None)
        assert "over http" in echo.content
        image = await tools["mcp__everything__get-tiny-image"].executor({}, None)
        assert image.image_data is not None


@pytest.mark.timeout(NPM_START + 60)
async def test_server_everything_over_the_older_sse_transport(everything_sse: str) -> None:
    async with McpServers({"everything": http(everything_sse, transport="sse")}) as servers:
        (status,) = servers.statuses()
        assert (status.transport, status.state) == ("sse", "connected"), status.error
        echo = next(t for t in servers.tools() if t.name == "mcp__everything__echo")
        assert "over sse" in (await echo.executor({"message": "over sse"}, None)).content
