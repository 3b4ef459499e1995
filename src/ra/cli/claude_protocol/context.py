"""``get_context_usage``: ra's :class:`~ra.agent.context_usage.ContextUsage` in the shape of the SDK's
``ContextUsageResponse`` (``claude_agent_sdk.types``).

What ra fills: the categories (system prompt, the session's tools, MCP tools, messages, the room
compaction keeps for the answer, free space), the totals against the profile's window, the
model, whether ra compacts on its own and from where, the MCP tools and the named agents with
their estimated tokens, the session's own tools, and the session's token usage. What it has no
truthful value for is empty: ``memoryFiles`` (ra reads no CLAUDE.md memory files), ``gridRows``
(Claude's terminal drawing). The colours are names for a host to map; Claude's theme keys mean
nothing outside its terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ra.agent.context_usage import ContextUsage

__all__ = ["context_usage_response"]


def _category(name: str, tokens: int, color: str) -> dict[str, Any]:
    return {"name": name, "tokens": tokens, "color": color}


def context_usage_response(
    usage: ContextUsage, agents: Mapping[str, Any], sdk_agents: Iterable[str] = ()
) -> dict[str, Any]:
    """The ``ContextUsageResponse`` object; ``agents``: the session's named agents (definitions
    with a ``description``), ``sdk_agents``: those the SDK's ``initialize`` gave."""
    window = usage.window
    reserve = window - usage.compact_threshold if usage.compact_threshold is not None else 0
    effective = window - reserve
    categories = [
        _category("System prompt", usage.system_prompt, "gray"),
        _category("System tools", usage.tool_tokens, "blue"),
        _category("MCP tools", usage.mcp_tool_tokens, "cyan"),
        _category("Messages", usage.messages, "purple"),
    ]
    if reserve:
        categories.append(_category("Autocompact buffer", reserve, "yellow"))
    categories.append(_category("Free space", max(0, effective - usage.total), "default"))
    from_sdk = set(sdk_agents)
    response: dict[str, Any] = {
        "categories": categories,
        "totalTokens": usage.total,
        "maxTokens": effective,
        "rawMaxTokens": window,
        "percentage": round(100.0 * usage.total / window, 1) if window > 0 else 0.0,
        "model": usage.model,
        "isAutoCompactEnabled": usage.auto_compact,
        "memoryFiles": [],
        "mcpTools": [
            {"name": t.name, "serverName": t.server, "tokens": t.tokens, "isLoaded": True} for t in usage.mcp_tools
        ],
        "agents": [
            {
                "agentType": name,
                "source": "sdk" if name in from_sdk else "ra",
                "tokens": len(str(getattr(definition, "description", "") or "")) // 4,
            }
            for name, definition in agents.items()
        ],
        "gridRows": [],
        "systemTools": [{"name": t.name, "tokens": t.tokens} for t in usage.tools],
        "apiUsage": {
            "input_tokens": usage.usage.input_tokens,
            "output_tokens": usage.usage.output_tokens,
            "cache_read_input_tokens": usage.usage.cache_read_tokens or 0,
            "cache_creation_input_tokens": usage.usage.cache_write_tokens or 0,
        },
    }
    if usage.compact_threshold is not None:
        response["autoCompactThreshold"] = usage.compact_threshold
    if usage.last_input_tokens is not None:
        response["ra_last_input_tokens"] = usage.last_input_tokens
    response["ra_measured"] = usage.measured
    return response
