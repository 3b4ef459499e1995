"""ra.sdk: the Claude Agent SDK's shape on ra - ``query()``, ``AgentClient``, typed messages.

Names load lazily (PEP 562) so that ``import ra.sdk`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "query": ".client",
    "QueryOptions": ".client",
    "AgentClient": ".client",
    "Message": ".messages",
    "MessageStream": ".messages",
    "SystemMessage": ".messages",
    "AssistantMessage": ".messages",
    "UserMessage": ".messages",
    "StreamEvent": ".messages",
    "ResultMessage": ".messages",
    "TextBlock": ".messages",
    "ThinkingBlock": ".messages",
    "ToolProgressMessage": ".messages",
    "ToolUseBlock": ".messages",
    "ToolResultBlock": ".messages",
    "parse_message": ".reading",
    "read_messages": ".reading",
    "MessageFormatError": ".reading",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from .client import AgentClient, QueryOptions, query
    from .messages import (
        AssistantMessage,
        Message,
        MessageStream,
        ResultMessage,
        StreamEvent,
        SystemMessage,
        TextBlock,
        ThinkingBlock,
        ToolProgressMessage,
        ToolResultBlock,
        ToolUseBlock,
        UserMessage,
    )
    from .reading import MessageFormatError, parse_message, read_messages
