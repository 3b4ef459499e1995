"""``--permission-prompt-tool stdio``: the host program's ``can_use_tool`` answers ra's permission questions.

ra asks only about the calls its permission check would ask about (:mod:`ra.agent.permissions`:
after hooks, deny rules, ask rules, the mode and allow rules), with a ``can_use_tool`` control
request carrying Claude Code's name for the tool (``Bash``, ``Read``, ``Edit``, ...; an MCP or
unmapped tool keeps its own), the input, ``tool_use_id`` and ``permission_suggestions`` (the rule
an "always" answer would add, as a Claude ``addRules`` update). The answer:

* ``{"behavior": "allow", "updatedInput": {...}}``: the call runs, with that input. The input is
  checked again against the deny rules first (an allowed rewrite cannot reach what a deny rule
  forbids); ``updatedPermissions`` with an ``addRules``/``allow`` entry for the session is taken as
  "always" (the suggested rule is added);
* ``{"behavior": "deny", "message": "...", "interrupt": bool}``: the model reads the message;
  ``interrupt`` also ends the input.

Anything else - an error answer, an unreadable one, no answer within the bound
(:data:`PERMISSION_TIMEOUT_S`, ``RA_SDK_PERMISSION_TIMEOUT`` seconds) - denies the call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ra.agent.permissions import PermissionAllow, PermissionDeny
from ra.agent.permissions.tool_names import claude_name

if TYPE_CHECKING:
    from ra.agent.permissions import PermissionContext

    from .channel import Channel

__all__ = ["PERMISSION_TIMEOUT_S", "SdkPermissionPrompt"]

#: How long a permission question waits for the host program's answer (a person may be asked).
PERMISSION_TIMEOUT_S = 300.0


def permission_timeout() -> float:
    raw = os.environ.get("RA_SDK_PERMISSION_TIMEOUT")
    try:
        value = float(raw) if raw else PERMISSION_TIMEOUT_S
    except ValueError:
        return PERMISSION_TIMEOUT_S
    return value if value > 0 else PERMISSION_TIMEOUT_S


class SdkPermissionPrompt:
    """A ``can_use_tool`` callback for ra's permission check that asks the SDK."""

    def __init__(self, channel: Channel, *, timeout: float | None = None) -> None:
        self.channel = channel
        self.timeout = timeout if timeout is not None else permission_timeout()

    async def __call__(
        self, tool_name: str, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionAllow | PermissionDeny:
        suggestion = context.suggestion
        payload: dict[str, Any] = {
            "tool_name": claude_name(tool_name),
            "input": tool_input,
            "tool_use_id": context.tool_use_id,
            "permission_suggestions": _suggestions(suggestion),
            "decision_reason": context.reason,
        }
        if context.agent_id is not None:
            payload["agent_id"] = context.agent_id
        answer = await self.channel.request("can_use_tool", payload, timeout=self.timeout)
        return read_answer(answer, bool(suggestion))


def _suggestions(rule: str | None) -> list[dict[str, Any]]:
    if not rule:
        return []
    tool, _, rest = rule.partition("(")
    value: dict[str, Any] = {"toolName": claude_name(tool)}
    if rest:
        value["ruleContent"] = rest[:-1]
    return [{"type": "addRules", "rules": [value], "behavior": "allow", "destination": "session"}]


def read_answer(answer: Mapping[str, Any], can_always: bool = False) -> PermissionAllow | PermissionDeny:
    """The SDK's answer as ra's; ValueError for one that cannot be read (the caller denies)."""
    behavior = answer.get("behavior")
    if behavior == "allow":
        updated = answer.get("updatedInput")
        if updated is not None and not isinstance(updated, Mapping):
            raise ValueError(f"can_use_tool: updatedInput must be an object, got {type(updated).__name__}")
        always = can_always and _adds_allow_rule(answer.get("updatedPermissions"))
        return PermissionAllow(dict(updated) if updated is not None else None, always=always)
    if behavior == "deny":
        message = answer.get("message")
        text = message if isinstance(message, str) and message.strip() else "The user denied this tool call."
        return PermissionDeny(text, interrupt=answer.get("interrupt") is True)
    raise ValueError(f"can_use_tool: behavior must be 'allow' or 'deny', got {behavior!r}")


def _adds_allow_rule(updates: Any) -> bool:
    if not isinstance(updates, list):
        return False
    return any(
        isinstance(u, Mapping) and u.get("type") in ("addRules", "replaceRules") and u.get("behavior") == "allow"
        for u in updates
    )
