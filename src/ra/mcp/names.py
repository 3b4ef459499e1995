"""The names the model sees for MCP tools: ``mcp__<server>__<tool>``, as Claude Code and codex write them.

Providers accept tool names of at most 64 characters from ``[A-Za-z0-9_-]``; MCP allows a server
or a tool any name. So every character outside that set becomes ``_``, and a name longer than 64
characters keeps its first 53 and ends in ``_`` plus 10 hex digits of a SHA-256 over the original
server and tool names: the same in every run (permission rules and transcripts keep working), and
different for two long names that share their first 53 characters.

Two different tools can still end up with one name (``a.b`` and ``a_b`` both read ``a_b``; server
``a__b`` with tool ``c`` and server ``a`` with tool ``b__c`` both read ``mcp__a__b__c``). Neither
may silently replace the other, so :func:`assign_names` gives each of them the hash suffix, except
one whose name needed no change at all (it keeps its plain name). The result depends only on the
set of tools, never on the order in which servers answered.

The server is always called with the tool's original name; these names exist for the model, the
permission rules and the hooks.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["MAX_TOOL_NAME", "assign_names", "mcp_server_prefix", "mcp_tool_name"]

#: The longest tool name every provider accepts.
MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_DIGEST_CHARS = 10
_KEEP = MAX_TOOL_NAME - 1 - _DIGEST_CHARS


def _clean(part: str) -> str:
    return _UNSAFE.sub("_", part)


def _digest(server: str, tool: str) -> str:
    return hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:_DIGEST_CHARS]


def _suffixed(name: str, server: str, tool: str) -> str:
    return f"{name[:_KEEP]}_{_digest(server, tool)}"


def mcp_server_prefix(server: str) -> str:
    """``mcp__<server>__``: what every tool name of ``server`` starts with (before any shortening)."""
    return f"mcp__{_clean(server)}__"


def mcp_tool_name(server: str, tool: str) -> str:
    """The model-facing name of ``tool`` on ``server`` (sanitised, at most 64 characters)."""
    name = f"{mcp_server_prefix(server)}{_clean(tool)}"
    if len(name) > MAX_TOOL_NAME:
        return _suffixed(name, server, tool)
    return name


def assign_names(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Names for many ``(server, tool)`` pairs at once, with no two pairs sharing a name.

    Pairs whose :func:`mcp_tool_name` coincide all get the hash suffix, except one that is its own
    plain ``mcp__<server>__<tool>`` (nothing replaced, nothing cut) when exactly one such pair is
    among them.
    """
    by_name: dict[str, list[tuple[str, str]]] = {}
    for pair in dict.fromkeys(pairs):
        by_name.setdefault(mcp_tool_name(*pair), []).append(pair)
    names: dict[tuple[str, str], str] = {}
    for name, group in by_name.items():
        if len(group) == 1:
            names[group[0]] = name
            continue
        plain = [(s, t) for s, t in group if f"mcp__{s}__{t}" == name]
        keep = plain[0] if len(plain) == 1 else None
        for server, tool in group:
            names[(server, tool)] = name if (server, tool) == keep else _suffixed(name, server, tool)
    return names
