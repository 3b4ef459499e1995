"""The SDK's in-process MCP servers (``create_sdk_mcp_server``) as a ToolSource, over the control channel.

The SDK lists such a server in ``--mcp-config`` as ``{"type": "sdk", "name": ...}``: its tools
are functions in the host program. ra speaks MCP's JSON-RPC to it through ``mcp_message`` control
requests (``{"server_name": NAME, "message": {...}}``, answered with ``{"mcp_response": {...}}``):
``initialize`` and ``tools/list`` when the session starts, ``tools/call`` for each call. The tools
are named ``mcp__NAME__TOOL`` like every MCP tool (:mod:`ra.mcp.names`), so permission rules,
hooks and ``allowed_tools`` written for Claude Code name them the same way.

A tool whose server says ``readOnlyHint: true`` is a read; any other may change anything
(asked about in ``default`` mode, refused in ``plan``), as for every MCP server. A server that
does not answer within :data:`START_TIMEOUT_S` is ``failed``; a call is bounded by
:data:`CALL_TIMEOUT_S` and one that fails becomes an error result the model reads.

``mcp_reconnect`` runs the handshake (``initialize``, ``tools/list``) again; ``mcp_toggle`` turns a
server off (its tools withdrawn, calls to them refused, status ``disabled``) and on again (with a
new handshake).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ra.llm.types import ToolDefinition
from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolOutput
from ra.tools.sources import ToolSourceStatus, UnknownServer, control_server

if TYPE_CHECKING:
    from ra.tools.sources import ToolSource

    from .channel import Channel

__all__ = ["CALL_TIMEOUT_S", "START_TIMEOUT_S", "SdkMcpServers", "ToolSources"]

START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 300.0
#: The MCP protocol revision ra asks for in ``initialize``.
MCP_PROTOCOL = "2025-06-18"


class _Server:
    __slots__ = ("error", "info", "name", "state", "tools")

    def __init__(self, name: str) -> None:
        self.name = name
        self.state = "pending"
        self.error: str | None = None
        self.info: str | None = None
        self.tools: list[dict[str, Any]] = []


class SdkMcpServers:
    """The host program's MCP servers, by name; a :class:`~ra.tools.sources.ToolSource`."""

    def __init__(self, names: Iterable[str], channel: Channel, *, call_timeout: float = CALL_TIMEOUT_S) -> None:
        self.channel = channel
        self.call_timeout = call_timeout
        self._servers = {name: _Server(name) for name in names}
        self._disabled: set[str] = set()
        self._ids = itertools.count(1)
        self._changed = False
        self._started = False

    async def _rpc(self, server: str, method: str, params: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            message["params"] = params
        answer = await self.channel.request("mcp_message", {"server_name": server, "message": message}, timeout=timeout)
        response = answer.get("mcp_response")
        if not isinstance(response, dict):
            raise ValueError(f"{method}: the answer has no mcp_response object")
        if "error" in response:
            error = response["error"]
            text = error.get("message") if isinstance(error, dict) else error
            raise ValueError(f"{method}: {text}")
        result = response.get("result")
        if not isinstance(result, dict):
            raise ValueError(f"{method}: the answer has no result object")
        return result

    async def _notify(self, server: str, method: str) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        await self.channel.request("mcp_message", {"server_name": server, "message": message}, timeout=START_TIMEOUT_S)

    # -- ToolSource ------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        await asyncio.gather(*(self._start_one(s) for s in self._servers.values()))
        self._changed = False

    async def _start_one(self, server: _Server) -> None:
        from ra import __version__

        server.state, server.error = "pending", None
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                init = await self._rpc(
                    server.name,
                    "initialize",
                    {
                        "protocolVersion": MCP_PROTOCOL,
                        "capabilities": {},
                        "clientInfo": {"name": "ra", "version": __version__},
                    },
                    START_TIMEOUT_S,
                )
                info = init.get("serverInfo")
                if isinstance(info, dict):
                    server.info = f"{info.get('name', '?')} {info.get('version', '')}".strip()
                await self._notify(server.name, "notifications/initialized")
                listed = await self._rpc(server.name, "tools/list", {}, START_TIMEOUT_S)
        except Exception as exc:
            server.state, server.error = "failed", str(exc) or type(exc).__name__
            return
        tools = listed.get("tools")
        server.tools = (
            [t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
            if isinstance(tools, list)
            else []
        )
        server.state = "connected"

    def statuses(self) -> list[ToolSourceStatus]:
        return [
            ToolSourceStatus(s.name, "in-process", "disabled")
            if s.name in self._disabled
            else ToolSourceStatus(s.name, "in-process", s.state, len(s.tools), s.error, s.info)
            for s in self._servers.values()
        ]

    # -- ControllableSource ----------------------------------------------------------------------
    def _server(self, name: str) -> _Server:
        server = self._servers.get(name)
        if server is None:
            raise UnknownServer(f"no MCP server named {name!r} (configured: {', '.join(self._servers) or 'none'})")
        return server

    async def restart(self, name: str) -> None:
        """The handshake again (the server lives in the host program: there is no process to restart)."""
        server = self._server(name)
        if name in self._disabled:
            raise ValueError(f"MCP server {name} is disabled; enable it (mcp_toggle) to start it again")
        await self._handshake(server, "did not start again")

    async def set_enabled(self, name: str, enabled: bool) -> None:
        server = self._server(name)
        if not enabled:
            if name not in self._disabled:
                self._disabled.add(name)
                self._changed = True
            return
        if name in self._disabled:
            self._disabled.discard(name)
            await self._handshake(server, "was enabled but did not start")

    async def _handshake(self, server: _Server, failed: str) -> None:
        self._changed = True
        await self._start_one(server)
        self._changed = True
        if server.state != "connected":
            raise ValueError(f"MCP server {server.name} {failed}: {server.error}")

    def changed(self) -> bool:
        return self._changed

    def tools(self) -> list[RegisteredTool]:
        from ra.mcp.names import assign_names

        self._changed = False
        offered = [
            (s.name, t)
            for s in self._servers.values()
            if s.state == "connected" and s.name not in self._disabled
            for t in s.tools
        ]
        names = assign_names((server, tool["name"]) for server, tool in offered)
        out = []
        for server, tool in offered:
            built = self._build(server, tool, names[(server, tool["name"])])
            if built is not None:
                out.append(built)
        return out

    def _build(self, server: str, tool: dict[str, Any], name: str) -> RegisteredTool | None:
        original = tool["name"]

        async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
            if server in self._disabled:
                return ToolOutput(
                    f"MCP server {server} is disabled; its tool {original} cannot be called", is_error=True
                )
            result = await self._rpc(
                server, "tools/call", {"name": original, "arguments": arguments}, self.call_timeout
            )
            return _output(result, server, original)

        schema = tool.get("inputSchema")
        schema = dict(schema) if isinstance(schema, dict) else {}
        schema.setdefault("type", "object")
        annotations = tool.get("annotations")
        read_only = isinstance(annotations, dict) and annotations.get("readOnlyHint") is True
        try:
            registered = RegisteredTool(
                ToolDefinition(name, str(tool.get("description") or f"Tool {original} of {server}."), schema),
                execute,
                effect=ToolEffect.READ if read_only else None,
                tags=frozenset({"mcp", f"mcp:{server}"}),
            )
            registered.validator  # noqa: B018 - a schema the registry would refuse is left out here
        except (ValueError, TypeError):
            return None
        return registered

    async def close(self) -> None:
        for server in self._servers.values():
            server.state = "closed"


def _output(result: dict[str, Any], server: str, tool: str) -> ToolOutput:
    """A ``tools/call`` result (JSON) as what ra's tool pipeline takes."""
    texts: list[str] = []
    for block in result.get("content") or ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        else:
            texts.append(f"[{block.get('type', 'content')} from MCP tool {tool}: not shown]")
    structured = result.get("structuredContent")
    if not texts and structured is not None:
        texts.append(json.dumps(structured, ensure_ascii=False, indent=2, default=str))
    metadata: dict[str, Any] = {"mcp_server": server, "mcp_tool": tool}
    if structured is not None:
        metadata["structured_content"] = structured
    return ToolOutput(
        "\n\n".join(texts) or "(the tool returned no content)",
        is_error=result.get("isError") is True,
        metadata=metadata,
    )


class ToolSources:
    """Several tool sources as one (the configured MCP servers and the SDK's)."""

    def __init__(self, sources: list[ToolSource]) -> None:
        self.sources = sources

    async def start(self) -> None:
        await asyncio.gather(*(s.start() for s in self.sources))

    def statuses(self) -> list[ToolSourceStatus]:
        return [status for s in self.sources for status in s.statuses()]

    def changed(self) -> bool:
        return any(s.changed() for s in self.sources)

    def tools(self) -> list[RegisteredTool]:
        return [tool for s in self.sources for tool in s.tools()]

    async def restart(self, name: str) -> None:
        await control_server(self.sources, name, "restart")

    async def set_enabled(self, name: str, enabled: bool) -> None:
        await control_server(self.sources, name, "set_enabled", enabled)

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.sources), return_exceptions=True)
