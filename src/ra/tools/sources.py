"""Tool sources: where a session's tools come from besides its profile (MCP servers, a host's own).

A source starts once (it may start processes or open connections), offers tools that can change
while it runs, and closes. The session plugs every source in at one point: it starts them before
its first input, registers their tools, re-reads them between model calls when one says its list
changed, and closes the sources it owns. ``ra.mcp.McpServers`` is the source for MCP servers; a
host may write its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ra.tools.registry import RegisteredTool

__all__ = ["ToolSource", "ToolSourceStatus"]


@dataclass(frozen=True, slots=True)
class ToolSourceStatus:
    """How one server (or other provider of tools) stands, as a host or a user is shown it."""

    #: The server's name as configured.
    name: str
    #: "stdio", "http", "sse" or "in-process".
    transport: str
    #: "connected", "failed", "pending" or "closed".
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
