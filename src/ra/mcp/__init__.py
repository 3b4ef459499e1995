"""Model Context Protocol: tools from MCP servers in a session, and ra's tools served over MCP.

This package sits between ``ra.tools`` and ``ra.agent``. Reading a configuration needs nothing
extra; talking to a server needs the optional ``mcp`` package (``pip install 'ra-agent[mcp]'``),
which is imported only when a server is started, so ``import ra`` and ``import ra.mcp`` never
import it.
"""

from __future__ import annotations

from ra._lazy import lazy_exports

_EXPORTS = {
    "HttpServer": ".spec",
    "McpConfigError": ".spec",
    "McpConnection": ".connection",
    "McpServerSpec": ".spec",
    "McpServers": ".servers",
    "ServerProblem": ".spec",
    "StdioServer": ".spec",
    "assign_names": ".names",
    "create_server": ".serving",
    "load_mcp_config": ".spec",
    "mcp_tool_name": ".names",
    "parse_mcp_servers": ".spec",
    "serve": ".serving",
    "serve_async": ".serving",
    "to_tool_output": ".results",
    "tool_effect": ".servers",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
