"""Tool sources: where a session's tools come from besides its profile (MCP servers, a host's own).

A source starts once (it may start processes or open connections), offers tools that can change
while it runs, and closes. The session plugs every source in at one point: it starts them before
its first input, registers their tools, re-reads them between model calls when one says its list
changed, and closes the sources it owns. ``ra.mcp.McpServers`` is the source for MCP servers; a
host may write its own.

A source may also let a host restart one server and turn one off and on (Claude Code's
``mcp_reconnect`` and ``mcp_toggle``): :class:`ControllableSource`. A server turned off offers no
tools, refuses calls to the tools it offered before, and reports the state ``"disabled"``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ra.tools.registry import RegisteredTool

__all__ = ["ControllableSource", "ToolSource", "ToolSourceStatus", "UnknownServer", "control_server"]


@dataclass(frozen=True, slots=True)
class ToolSourceStatus:
    """How one server (or other provider of tools) stands, as a host or a user is shown it."""

    #: The server's name as configured.
    name: str
    #: "stdio", "http", "sse" or "in-process".
    transport: str
    #: "connected", "failed", "pending", "closed" or "disabled" (turned off by the host).
    state: str
    #: How many tools it offers now.
    tools: int = 0
    #: Why it failed (never holds a secret).
    error: str | None = None
    #: The server's own name and version from its handshake, when known.
    server: str | None = None


@runtime_checkable
class ToolSource(Protocol):
    """Tools that come and go while a session runs. Every method is bounded in time."""

    async def start(self) -> None:
        """Connect or start whatever serves the tools. Never raises for one server's failure:
        that server's status says ``failed`` and the others go on."""

    def statuses(self) -> list[ToolSourceStatus]:
        """One status per configured server, in configuration order."""
        ...

    def tools(self) -> list[RegisteredTool]:
        """The tools offered now, already under the names the model sees."""
        ...

    def changed(self) -> bool:
        """Whether the tool list changed since the last :meth:`tools` call."""
        ...

    async def close(self) -> None:
        """Stop everything started; idempotent; leaves no process behind."""


class UnknownServer(LookupError):
    """No server of that name in this source (a :class:`ControllableSource` raises it)."""


@runtime_checkable
class ControllableSource(Protocol):
    """A source whose servers a host may restart and turn off and on, one by one, by name.

    Both raise :class:`UnknownServer` for a name the source does not have, and ``ValueError`` with
    a message naming the server when the request cannot be carried out (it failed to start
    again, it is disabled, the source is closed)."""

    async def restart(self, name: str) -> None:
        """Stop the server and start it again; returns once it is connected (bounded)."""

    async def set_enabled(self, name: str, enabled: bool) -> None:
        """Turn the server off (its tools are withdrawn and refused) or on again (it starts)."""


async def control_server(
    sources: Iterable[ToolSource], name: str, action: Literal["restart", "set_enabled"], *args: Any
) -> None:
    """``restart(name)`` or ``set_enabled(name, enabled)`` on the source that has server ``name``
    (the first whose statuses name it). :class:`UnknownServer` when none does; ValueError when
    that source cannot do it."""
    sources = list(sources)
    for source in sources:
        if not any(status.name == name for status in source.statuses()):
            continue
        handler = getattr(source, action, None)
        if handler is None:
            what = "restarted" if action == "restart" else "turned off or on"
            kind = type(source).__name__
            raise ValueError(f"MCP server {name} cannot be {what}: its source ({kind}) does not allow it")
        await handler(name, *args)
        return
    known = ", ".join(status.name for source in sources for status in source.statuses()) or "none"
    raise UnknownServer(f"no MCP server named {name!r} (configured: {known})")
