"""What ra's MCP client costs: a tool call's round trip over stdio, and starting servers in parallel.

Cases (medians, milliseconds):

* **round trip**: ``tools/call echo`` to one stdio server, three ways —
  *raw*: one JSON-RPC line written to the server's stdin and its answer read from its stdout
  (the server's own time plus the pipes: nothing of a client);
  *mcp ClientSession*: the ``mcp`` package's own stdio client and session;
  *ra*: ``McpConnection.call`` (the session, ra's transport, the result mapped to a ToolOutput).
  "added" is ra minus raw (target: < 5 ms). Run against two servers: ``tiny`` (bench/_tinymcp.py,
  plain JSON lines) and ``kit`` (tests/mcp/servers/kit.py, written with the ``mcp`` package).
* **start**: ``McpServers`` with 3 stdio servers, from ``start()`` to all connected (target:
  < 1 s), against one server started alone; for ``tiny`` and for ``python -m mcp_server_time``.

Run: ``python bench/bench_mcp.py [--calls N] [--starts R]``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ra.mcp import McpServers, StdioServer  # noqa: E402
from ra.mcp.connection import McpConnection  # noqa: E402

TINY = StdioServer(sys.executable, (str(ROOT / "bench" / "_tinymcp.py"),))
KIT = StdioServer(sys.executable, (str(ROOT / "tests" / "mcp" / "servers" / "kit.py"),))
TIME = StdioServer(sys.executable, ("-m", "mcp_server_time", "--local-timezone", "UTC"))


def raw_round_trip(spec: StdioServer, calls: int) -> float:
    process = subprocess.Popen(
        [spec.command, *spec.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None and process.stdout is not None

    def send(message: dict) -> None:
        process.stdin.write((json.dumps(message) + "\n").encode())  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]

    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    process.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    times = []
    for i in range(1, calls + 1):
        started = time.perf_counter()
        send(
            {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
        )
        process.stdout.readline()
        times.append(time.perf_counter() - started)
    process.stdin.close()
    process.wait(timeout=10)
    process.stdout.close()
    return statistics.median(times[5:] or times) * 1000


async def session_round_trip(spec: StdioServer, calls: int) -> float:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=spec.command, args=list(spec.args))
    times = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        for _ in range(calls):
            started = time.perf_counter()
            await session.call_tool("echo", {"text": "x"})
            times.append(time.perf_counter() - started)
    return statistics.median(times[5:] or times) * 1000


async def ra_round_trip(spec: StdioServer, calls: int) -> float:
    connection = McpConnection("bench", spec)
    await connection.start()
    assert connection.state == "connected", connection.error
    times = []
    try:
        for _ in range(calls):
            started = time.perf_counter()
            result = await connection.call("echo", {"text": "x"})
            times.append(time.perf_counter() - started)
            assert result.content == "x", result.content
    finally:
        await connection.close()
    return statistics.median(times[5:] or times) * 1000


async def start_time(specs: dict[str, StdioServer], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        servers = McpServers(specs)
        started = time.perf_counter()
        await servers.start()
        times.append(time.perf_counter() - started)
        states = [s.state for s in servers.statuses()]
        await servers.close()
        assert states == ["connected"] * len(specs), servers.statuses()
    return statistics.median(times) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    opts = parser.parse_args()
    print("round trip, tools/call echo over stdio (median ms)")
    for label, spec in (("tiny", TINY), ("kit", KIT)):
        raw = raw_round_trip(spec, opts.calls)
        session = await session_round_trip(spec, opts.calls)
        ours = await ra_round_trip(spec, opts.calls)
        print(
            f"  {label:5} raw {raw:6.3f}   mcp ClientSession {session:6.3f}   ra {ours:6.3f}   "
            f"added by ra over raw {ours - raw:6.3f}"
        )
    print("start, McpServers.start() until all connected (median ms)")
    for label, spec in (("tiny", TINY), ("time", TIME)):
        one = await start_time({"a": spec}, opts.starts)
        three = await start_time({"a": spec, "b": spec, "c": spec}, opts.starts)
        print(f"  {label:5} 1 server {one:7.1f}   3 servers in parallel {three:7.1f}")


if __name__ == "__main__":
    asyncio.run(main())
