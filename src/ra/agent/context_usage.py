"""How full the next request's context is, by part: what a host shows as "context usage".

ra counts no tokens itself; it knows the provider's input count of the last model call and the
characters of everything it sends, and estimates tokens as characters / 4 (:mod:`.context`).
:func:`measure` puts those together the way compaction sees them:

* the system prompt, the tool definitions (the session's own and those of MCP servers, told
  apart by the ``mcp:<server>`` tag) and the messages, each characters / 4;
* the total: once a call reported its usage, the provider's count of that call plus what was
  added since (characters / 4) - the same figure compaction compares with the window - and the
  messages are then that total less the system prompt and the tools (the provider counted them
  all together); before any such call, the sum of the estimates.

It is work for one request (the tool list is read once), not for every step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ra.llm.types import Usage

    from .state import RunState

__all__ = ["ContextUsage", "ToolTokens", "measure"]


@dataclass(frozen=True, slots=True)
class ToolTokens:
    """One tool definition's estimated share of the context."""

    name: str
    tokens: int
    #: The MCP server that offers it (None: one of the session's own tools).
    server: str | None = None


@dataclass(frozen=True, slots=True)
class ContextUsage:
    """The context of the next model call, in (estimated) tokens."""

    model: str
    #: The profile's ``context_window_size`` (0: not known).
    window: int
    #: The whole context: the provider's count of the last call plus what was added since, or the
    #: sum of the parts before any call reported usage (``measured`` says which).
    total: int
    measured: bool
    #: The provider's input tokens for the last model call (None before one reported them).
    last_input_tokens: int | None
    system_prompt: int
    tools: tuple[ToolTokens, ...]
    mcp_tools: tuple[ToolTokens, ...]
    messages: int
    #: Whether ra compacts before a call when the window is nearly full, and from how many tokens.
    auto_compact: bool
    compact_threshold: int | None
    #: Tokens used over the session's life.
    usage: Usage

    @property
    def tool_tokens(self) -> int:
        return sum(t.tokens for t in self.tools)

    @property
    def mcp_tool_tokens(self) -> int:
        return sum(t.tokens for t in self.mcp_tools)


def _server_of(tags: frozenset[str]) -> str | None:
    for tag in tags:
        if tag.startswith("mcp:"):
            return tag[4:]
    return None


def measure(run: RunState) -> ContextUsage:
    """The context usage of ``run``'s next request (see the module docstring)."""
    registry = run.pipeline.registry
    own: list[ToolTokens] = []
    mcp: list[ToolTokens] = []
    for definition in run.tool_definitions():
        chars = len(definition.name) + len(definition.description) + len(json.dumps(definition.parameters))
        tool = registry.get(definition.name)
        server = None if tool is None else _server_of(tool.tags)
        (own if server is None else mcp).append(ToolTokens(definition.name, chars // 4, server))
    system_message = run.request_system_message()
    system = len(system_message.text or "") // 4 if system_message is not None else 0
    tools = sum(t.tokens for t in own) + sum(t.tokens for t in mcp)
    messages = run.history.chars // 4
    monitor = run.context
    if monitor.measured:
        total = monitor.estimate(run.context_chars)
        messages = max(0, total - system - tools)
    else:
        total = system + tools + messages
    window = run.profile.context_window_size or 0
    config = run.config
    auto = config.context_overflow == "compact" and config.compaction.auto and window > 0
    threshold = max(0, window - config.compaction.budgets(window).reserve) if auto else None
    return ContextUsage(
        model=run.model,
        window=window,
        total=total,
        measured=monitor.measured,
        last_input_tokens=monitor.last_input_tokens,
        system_prompt=system,
        tools=tuple(own),
        mcp_tools=tuple(mcp),
        messages=messages,
        auto_compact=auto,
        compact_threshold=threshold,
        usage=run.usage,
    )
