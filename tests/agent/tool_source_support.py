"""A real ToolSource for the session tests: its tools are served by a child process.

``ProcessToolSource.start()`` starts ``python -c SERVER`` and reads its tool list; every tool call
is a JSON line to the process and a JSON line back; ``close()`` ends the process (the tests check
that it is gone). The server can change its own list (``offer`` / ``withdraw`` requests, which a
tool call or the test sends): the source then reads the new list and ``changed()`` says so, as an
MCP client does on ``notifications/tools/list_changed``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from ra.llm.types import ToolDefinition
from ra.tools.registry import RegisteredTool, ToolContext
from ra.tools.sources import ToolSourceStatus

SERVER = r"""
import json, os, sys, time
tools = {t["name"]: t for t in json.loads(sys.argv[1])}
for line in sys.stdin:
    req = json.loads(line)
    op = req["op"]
    if op == "list":
        out = {"tools": list(tools.values())}
    elif op == "offer":
        tools[req["tool"]["name"]] = req["tool"]
        out = {"changed": True}
    elif op == "withdraw":
        tools.pop(req["name"], None)
        out = {"changed": True}
    elif op == "call":
        name, args = req["name"], req["args"]
        if name not in tools:
            out = {"error": "no such tool: " + name}
        elif "offer" in args:
            tools[args["offer"]["name"]] = args["offer"]
            out = {"text": "offered " + args["offer"]["name"], "changed": True}
        else:
            time.sleep(args.get("sleep", 0))
            out = {"text": name + " ran with " + json.dumps(args, sort_keys=True) + " in " + str(os.getpid())}
    else:
        out = {"error": "bad op " + op}
    out["id"] = req["id"]
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""

OPEN = {"type": "object", "properties": {}, "additionalProperties": True}


def spec(name: str, effect: str | None = None, description: str = "") -> dict[str, Any]:
    """A tool as the server lists it."""
    return {"name": name, "description": description or f"The {name} tool.", "effect": effect, "schema": OPEN}


class ProcessToolSource:
    """A ToolSource whose tools run in a child process (see the module doc)."""

    def __init__(
        self,
        server: str = "proc",
        tools: list[dict[str, Any]] | None = None,
        *,
        prefix: str | None = None,
        command: list[str] | None = None,
        start_delay: float = 0.0,
        close_delay: float = 0.0,
    ) -> None:
        self.server = server
        self.prefix = f"mcp__{server}__" if prefix is None else prefix
        self.initial = tools if tools is not None else [spec("echo", "read")]
        self.command = command
        self.start_delay = start_delay
        self.close_delay = close_delay
        self.state = "pending"
        self.error: str | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.closes = 0
        self.tool_calls = 0
        self.pid: int | None = None
        #: (start, end) of each tool call, on the event loop's clock.
        self.spans: list[tuple[float, float]] = []
        self._tools: list[RegisteredTool] = []
        self._changed = False
        self._ids = 0
        self._lock = asyncio.Lock()

    # -- ToolSource ---------------------------------------------------------------------------
    async def start(self) -> None:
        self.starts += 1
        if self.state != "pending":
            return
        if self.start_delay:
            await asyncio.sleep(self.start_delay)
        command = self.command or [sys.executable, "-c", SERVER, json.dumps(self.initial)]
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
            )
            self.pid = self.proc.pid
            await self._reload()
        except Exception as exc:
            self.state, self.error = "failed", f"{type(exc).__name__}: {exc}"
            await self._kill()
            return
        self.state = "connected"
        self._changed = False

    def statuses(self) -> list[ToolSourceStatus]:
        return [ToolSourceStatus(self.server, "stdio", self.state, len(self._tools), self.error)]

    def tools(self) -> list[RegisteredTool]:
        self._changed = False
        return list(self._tools)

    def changed(self) -> bool:
        return self._changed

    async def close(self) -> None:
        self.closes += 1
        if self.close_delay:
            await asyncio.sleep(self.close_delay)
        await self._kill()
        self.state = "closed"

    # -- for the tests -------------------------------------------------------------------------
    async def offer(self, tool: dict[str, Any]) -> None:
        """The server adds (or changes) a tool and says its list changed."""
        await self._request({"op": "offer", "tool": tool})
        await self._reload()

    async def withdraw(self, name: str) -> None:
        await self._request({"op": "withdraw", "name": name})
        await self._reload()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    # -- internals ----------------------------------------------------------------------------
    async def _request(self, data: dict[str, Any]) -> dict[str, Any]:
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise RuntimeError(f"server {self.server} is not running")
        async with self._lock:
            self._ids += 1
            data = {**data, "id": self._ids}
            proc.stdin.write((json.dumps(data) + "\n").encode())
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), 10)
        if not line:
            raise RuntimeError(f"server {self.server} exited")
        return json.loads(line)

    async def _reload(self) -> None:
        listed = (await self._request({"op": "list"}))["tools"]
        self._tools = [self._build(t) for t in listed]
        self._changed = True

    def _build(self, listed: dict[str, Any]) -> RegisteredTool:
        original = listed["name"]

        async def execute(arguments: dict[str, Any], ctx: ToolContext) -> str:
            self.tool_calls += 1
            loop = asyncio.get_running_loop()
            began = loop.time()
            answer = await self._request({"op": "call", "name": original, "args": arguments})
            self.spans.append((began, loop.time()))
            if "error" in answer:
                raise RuntimeError(answer["error"])
            if answer.get("changed"):
                await self._reload()
            return str(answer["text"])

        return RegisteredTool(
            ToolDefinition(self.prefix + original, listed["description"], listed["schema"]),
            execute,
            effect=listed["effect"],
            tags=frozenset({"mcp", f"mcp:{self.server}"}),
        )

    async def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.returncode is None:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 2)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
