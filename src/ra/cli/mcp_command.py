"""``ra mcp list``: start the configured MCP servers, show how each one stands, stop them.

``ra mcp list [--tools] [--json] [--mcp-config FILE|JSON]... [--strict-mcp-config] [-C DIR]``
reads the servers exactly as a run in that directory would (:mod:`ra.cli.mcp_config`: the config
file, a trusted project's ``.mcp.json``, the flags), starts them all at once (each within its
startup timeout), and prints a table: name, transport, status, tool count, where it was
configured, and why it failed. ``--tools`` adds each server's tools under the names the model
sees (``mcp__server__tool``) with their descriptions. ``--json`` prints one JSON object per
server instead. Then every server is closed.

Exit 0 when every server connected (or none is configured), 1 when one failed: a script can
check its setup with ``ra mcp list >/dev/null``. Names, descriptions and errors come from the
servers: they are shown with control characters as symbols, never obeyed. A server's ``env`` and
``headers`` are never shown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import IO, Any, NoReturn

from .errors import UsageError

__all__ = ["run_mcp"]

#: Seconds ``ra mcp list`` allows beyond the longest startup timeout before it gives up on the
#: whole set (the servers' own timeouts bound each start; this bounds everything else).
_SLACK = 10.0
#: The startup timeout of a server that sets none (``ra.mcp.McpServers``' default).
DEFAULT_STARTUP_TIMEOUT = 30.0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"ra mcp: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="ra mcp",
        usage="ra mcp list [--tools] [--json] [--mcp-config FILE|JSON]... [--strict-mcp-config] [-C DIR]",
        description="Start the MCP servers a run in this directory would use, show each one's status "
        "(and with --tools its tools), then stop them. Exit 1 when a server failed.",
    )
    p.add_argument("action", nargs="?", choices=("list",), default="list", help=argparse.SUPPRESS)
    p.add_argument("--tools", action="store_true", help="also list each server's tools (mcp__server__tool)")
    p.add_argument("--json", action="store_true", help="one JSON object per server")
    p.add_argument("--mcp-config", action="append", metavar="FILE|JSON", help="as for `ra` (repeatable)")
    p.add_argument("--strict-mcp-config", action="store_true", help="only the --mcp-config servers")
    p.add_argument("-C", "--cwd", metavar="DIR", help="the directory whose servers to list (default: the current)")
    return p


def run_mcp(argv: list[str]) -> int:
    """``ra mcp ...``; returns the exit code."""
    args = _parser().parse_args(argv)
    from .config import config_path, load_config_file, working_directory
    from .mcp_config import missing_package_notice, remember_secrets, resolve_mcp_config

    cwd = working_directory(args.cwd)
    if not os.path.isdir(cwd):
        raise UsageError(f"ra mcp: working directory {cwd} does not exist or is not a directory")
    path = config_path(os.environ)
    file = load_config_file(path, required=bool(os.environ.get("RA_CONFIG")))
    config = resolve_mcp_config(
        args.mcp_config, strict=args.strict_mcp_config, file=file, config_file=str(path), cwd=cwd
    )
    remember_secrets(config)
    missing = missing_package_notice(config)
    for notice in [*config.notices, *([missing] if missing else [])]:
        sys.stderr.write(f"ra: {notice}\n")
    if not config.servers:
        if not args.json:
            sys.stdout.write(f"no MCP servers configured for {cwd} (see `ra --help`, MCP servers)\n")
        return 0
    statuses, tools = asyncio.run(_probe(config.servers, cwd))
    rows = [_row(status, config.sources.get(status.name), tools.get(status.name, [])) for status in statuses]
    if args.json:
        for row in rows:
            if not args.tools:
                row.pop("tool_list")
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        _table(rows, out=sys.stdout)
        if args.tools:
            _tool_lines(rows, out=sys.stdout)
    return 1 if any(row["status"] != "connected" for row in rows) else 0


async def _probe(servers: dict[str, Any], cwd: str) -> tuple[list[Any], dict[str, list[tuple[str, str]]]]:
    """Start ``servers``, read their statuses and tools, close them (all bounded)."""
    from ra.mcp import McpServers

    longest = max(
        (getattr(spec, "startup_timeout", None) or DEFAULT_STARTUP_TIMEOUT for spec in servers.values()),
        default=DEFAULT_STARTUP_TIMEOUT,
    )
    source = McpServers(servers, cwd=cwd, startup_timeout=DEFAULT_STARTUP_TIMEOUT)
    try:
        await asyncio.wait_for(source.start(), longest + _SLACK)
        by_server: dict[str, list[tuple[str, str]]] = {}
        for tool in source.tools():
            server = next((t[4:] for t in tool.tags if t.startswith("mcp:")), "")
            by_server.setdefault(server, []).append((tool.definition.name, tool.definition.description or ""))
        return source.statuses(), by_server
    finally:
        await source.close()


def _row(status: Any, source: str | None, tools: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "name": status.name,
        "transport": status.transport,
        "status": status.state,
        "tools": status.tools,
        "error": status.error,
        "server": status.server,
        "source": source,
        "tool_list": [{"name": name, "description": description} for name, description in tools],
    }


def _console(out: IO[str]) -> Any:
    from rich.console import Console

    # On a terminal long columns wrap; into a pipe or a file nothing is cut.
    return Console(file=out, width=None if out.isatty() else 4096, soft_wrap=False, highlight=False)


def _table(rows: list[dict[str, Any]], *, out: IO[str]) -> None:
    from rich.table import Table
    from rich.text import Text

    from .terminal_text import visible

    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("NAME", no_wrap=True)
    table.add_column("TRANSPORT", no_wrap=True)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("TOOLS", justify="right")
    table.add_column("SOURCE", overflow="fold")
    table.add_column("ERROR", overflow="fold")
    for row in rows:
        ok = row["status"] == "connected"
        table.add_row(
            Text(visible(row["name"])),
            Text(row["transport"]),
            Text(row["status"], style="green" if ok else "red"),
            Text(str(row["tools"])),
            Text(visible(row["source"] or "")),
            Text(visible(row["error"] or "")),
        )
    _console(out).print(table)


def _tool_lines(rows: list[dict[str, Any]], *, out: IO[str]) -> None:
    from .terminal_text import visible

    lines: list[str] = []
    for row in rows:
        if not row["tool_list"]:
            continue
        lines.append("")
        lines.append(f"{visible(row['name'])}:")
        width = max(len(t["name"]) for t in row["tool_list"])
        for tool in row["tool_list"]:
            description = " ".join(visible(tool["description"]).split())
            lines.append(f"  {visible(tool['name']).ljust(width)}  {description}".rstrip())
    out.write("\n".join(lines) + ("\n" if lines else ""))
