"""Many MCP servers as one :class:`~ra.tools.sources.ToolSource`: what a session plugs in.

``McpServers(servers)`` takes the servers by name (``parse_mcp_servers`` / ``load_mcp_config``
give that mapping). :meth:`start` starts them all at once and returns when each is connected or
failed (each within its own ``startup_timeout``); a server that fails, or a configuration entry
that was a :class:`~ra.mcp.spec.ServerProblem` from the start, is a ``failed`` status and the
others go on. :meth:`tools` gives every connected server's tools as :class:`RegisteredTool`:

* named ``mcp__<server>__<tool>`` (:mod:`ra.mcp.names`; the server is called with the original);
* the server's description and input schema as they are (a tool whose schema is not a valid
  JSON Schema object is left out, with a warning in the log: registering it would fail);
* tagged ``{"mcp", "mcp:<server>"}``;
* ``effect=READ`` when the server says ``readOnlyHint: true``; otherwise no effect (ra then
  treats the tool as one that may change anything: asked for in ``default`` mode, refused in
  ``plan`` mode). ``destructiveHint`` / ``idempotentHint`` cannot make a tool safer than that,
  and no annotation maps to ``EDIT``: ``accept_edits`` mode allows edits without asking, which
  must not extend to whatever a server calls an update.

:meth:`changed` says whether any server's list changed (``tools/list_changed``, a restart with a
different list, a server that failed) since the last :meth:`tools` call; the session re-reads
the tools then, between model calls.

A host may :meth:`~McpServers.restart` one server (a fresh process or connection; the old one
is closed first) and turn one off and on (:meth:`~McpServers.set_enabled`): a server turned off
is closed, offers no tools, reports ``disabled``, and every tool it offered before - in whatever
registry it still sits, a subagent's too - answers calls with an error saying the server is
disabled; turned on, it starts again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from ra.llm.types import ToolDefinition
from ra.mcp.connection import McpConnection
from ra.mcp.names import assign_names
from ra.mcp.spec import McpServerSpec, ServerProblem
from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolOutput
from ra.tools.sources import ToolSourceStatus, UnknownServer

__all__ = ["McpServers", "tool_effect"]

_log = logging.getLogger("ra.mcp")


def tool_effect(annotations: Any) -> ToolEffect | None:
    """The effect an MCP tool's annotations declare: READ for ``readOnlyHint: true``, else None."""
    if annotations is not None and getattr(annotations, "read_only_hint", None) is True:
        return ToolEffect.READ
    return None


class McpServers:
    """MCP servers by name, started together; a ``ToolSource`` (also an async context manager)."""

    def __init__(
        self,
        servers: Mapping[str, McpServerSpec | ServerProblem],
        *,
        cwd: str | None = None,
        startup_timeout: float = 30.0,
        tool_timeout: float = 300.0,
    ) -> None:
        if startup_timeout <= 0 or tool_timeout <= 0:
            raise ValueError("startup_timeout and tool_timeout must be positive numbers of seconds")
        self._problems: dict[str, ServerProblem] = {}
        self._connections: dict[str, McpConnection] = {}
        self._order = list(servers)
        self._cwd = cwd
        self._startup_timeout = startup_timeout
        self._tool_timeout = tool_timeout
        for name, spec in servers.items():
            if isinstance(spec, ServerProblem):
                self._problems[name] = spec
            else:
                self._connections[name] = self._connection(name, spec)
        #: Servers the host turned off (set_enabled(name, False)).
        self._disabled: set[str] = set()
        #: One restart or toggle at a time per server.
        self._locks: dict[str, asyncio.Lock] = {}
        self._changed = False
        self._started = False
        self._closed = False
        #: Built tools by (server, tool name, list version), so tools() compiles each schema once.
        self._built: dict[tuple[str, str, int], RegisteredTool | None] = {}

    def _connection(self, name: str, spec: McpServerSpec) -> McpConnection:
        return McpConnection(
            name,
            spec,
            cwd=self._cwd,
            startup_timeout=self._startup_timeout,
            tool_timeout=self._tool_timeout,
            on_change=self._mark_changed,
        )

    def _mark_changed(self) -> None:
        self._changed = True

    @property
    def connections(self) -> Mapping[str, McpConnection]:
        """The servers that can be started, by name (for inspection: state, process, restarts)."""
        return self._connections

    # -- ToolSource --------------------------------------------------------------------------
    async def start(self) -> None:
        """Start every server at once; returns when each is connected or failed. Never raises for
        a server's failure; starting twice does nothing more; a closed set cannot start again."""
        if self._closed:
            raise RuntimeError("these MCP servers were closed; make a new McpServers to start them again")
        if self._started:
            return
        self._started = True
        for name, problem in self._problems.items():
            _log.warning("MCP server %s not started: %s", name, problem.message)
        await asyncio.gather(*(c.start() for c in self._connections.values()))
        self._changed = False

    def statuses(self) -> list[ToolSourceStatus]:
        out: list[ToolSourceStatus] = []
        for name in self._order:
            problem = self._problems.get(name)
            if name in self._disabled:
                transport = self._connections[name].transport if name in self._connections else "unknown"
                out.append(ToolSourceStatus(name, transport, "disabled"))
            elif problem is not None:
                out.append(ToolSourceStatus(name, "unknown", "failed", 0, problem.message))
            else:
                out.append(self._connections[name].status())
        return out

    def changed(self) -> bool:
        return self._changed

    def tools(self) -> list[RegisteredTool]:
        self._changed = False
        offered = [
            (connection, tool)
            for connection in self._connections.values()
            if connection.state in ("connected", "pending") and connection.name not in self._disabled
            for tool in connection.tools
        ]
        names = assign_names((c.name, t.name) for c, t in offered)
        out: list[RegisteredTool] = []
        for connection, tool in offered:
            key = (connection.name, tool.name, connection.version)
            if key not in self._built:
                self._built[key] = self._build(connection, tool, names[(connection.name, tool.name)])
            built = self._built[key]
            if built is not None and built.name != names[(connection.name, tool.name)]:
                built = self._build(connection, tool, names[(connection.name, tool.name)])
                self._built[key] = built
            if built is not None:
                out.append(built)
        live = {(c.name, c.version) for c in self._connections.values()}
        for key in [k for k in self._built if (k[0], k[2]) not in live]:
            del self._built[key]
        return out

    def _build(self, connection: McpConnection, tool: Any, name: str) -> RegisteredTool | None:
        server, original = connection.name, tool.name

        async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
            # The server is looked up at each call: a restart replaces its connection, and a
            # server turned off refuses the tools it offered before (a registry may still hold them).
            if server in self._disabled:
                return ToolOutput(
                    f"MCP server {server} is disabled; its tool {original} cannot be called", is_error=True
                )
            current = self._connections[server]
            # Progress notifications reach the host as output deltas while the call runs.
            on_progress = None if ctx is None else (lambda line: ctx.emit_output(line, "stderr"))
            return await current.call(original, arguments, on_progress=on_progress)

        description = tool.description or getattr(tool, "title", None) or f"Tool {original} of MCP server {server}."
        schema = dict(tool.input_schema or {})
        schema.setdefault("type", "object")  # some servers send {} for "no arguments"
        try:
            registered = RegisteredTool(
                ToolDefinition(name, description, schema),
                execute,
                effect=tool_effect(tool.annotations),
                tags=frozenset({"mcp", f"mcp:{server}"}),
            )
            registered.validator  # noqa: B018 - a schema the registry would refuse is refused here
        except (ValueError, TypeError) as exc:
            _log.warning("MCP server %s: tool %s left out: %s", server, original, exc)
            return None
        return registered

    # -- ControllableSource ----------------------------------------------------------------
    def _known(self, name: str) -> None:
        if name not in self._problems and name not in self._connections:
            configured = ", ".join(self._order) or "none"
            raise UnknownServer(f"no MCP server named {name!r} (configured: {configured})")

    def _lock(self, name: str) -> asyncio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        return lock

    async def restart(self, name: str) -> None:
        """Close the server and start a new process or connection for it; returns when it is
        connected. ValueError (naming the server) when it is disabled, misconfigured or does not
        come up again; :class:`UnknownServer` for a name not configured."""
        self._known(name)
        async with self._lock(name):
            if name in self._disabled:
                raise ValueError(f"MCP server {name} is disabled; enable it (mcp_toggle) to start it again")
            problem = self._problems.get(name)
            if problem is not None:
                raise ValueError(f"MCP server {name} cannot be started: {problem.message}")
            connection = await self._replace(name)
            if connection.state != "connected":
                raise ValueError(f"MCP server {name} did not start again: {connection.error or connection.state}")

    async def set_enabled(self, name: str, enabled: bool) -> None:
        """Turn the server off (closed; its tools withdrawn and refused) or on (started again).
        Turning on a server that then fails to start is a ValueError naming it (it stays on, as
        ``failed``); asking for the state it is already in changes nothing."""
        self._known(name)
        async with self._lock(name):
            if not enabled:
                if name in self._disabled:
                    return
                self._disabled.add(name)  # first: calls are refused from now on
                self._changed = True
                connection = self._connections.get(name)
                if connection is not None:
                    await connection.close()
                return
            if name not in self._disabled:
                return
            self._disabled.discard(name)
            self._changed = True
            if name in self._problems:
                return  # back to its failed status
            connection = await self._replace(name)
            if connection.state != "connected":
                why = connection.error or connection.state
                raise ValueError(f"MCP server {name} was enabled but did not start: {why}")

    async def _replace(self, name: str) -> McpConnection:
        """A new connection for ``name`` in place of the old one (closed first), started."""
        if self._closed:
            raise ValueError(f"MCP server {name}: the servers were closed")
        if not self._started:
            raise ValueError(f"MCP server {name}: the servers have not been started yet")
        old = self._connections[name]
        await old.close()
        connection = self._connection(name, old.spec)
        self._connections[name] = connection
        for key in [k for k in self._built if k[0] == name]:
            del self._built[key]
        self._changed = True
        await connection.start()
        self._changed = True
        return connection

    async def close(self) -> None:
        """Close every server at once (bounded, idempotent)."""
        self._closed = True
        await asyncio.gather(*(c.close() for c in self._connections.values()))

    async def __aenter__(self) -> McpServers:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
