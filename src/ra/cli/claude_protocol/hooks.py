"""The SDK's hook callbacks (``ClaudeAgentOptions.hooks``) as hooks of ra's engine.

The SDK's ``initialize`` request lists, per event, matchers with the ids of callbacks that live
in the host program: ``{"PreToolUse": [{"matcher": "Bash", "hookCallbackIds": ["hook_0"],
"timeout": 30}]}``. Each id becomes one hook in :class:`ra.agent.hooks.Hooks` under the same event
and matcher; when it fires, ra sends a ``hook_callback`` request with the hook input as Claude
Code's hook JSON (``tool_name`` in Claude's spelling, ``ra_tool_name`` ra's) and reads the
answer exactly as it reads a command hook's JSON stdout (:meth:`HookResult.from_json`).

The wait is bounded by the matcher's ``timeout`` (Claude Code's 60 s when none). A callback that
does not answer in time, answers with an error, or cannot be asked (the SDK's input ended) is a
failed hook: a PreToolUse call is denied (fail closed, as for every hook in ra), other events go
on with a WARNING. A matcher's ``onFailure`` (the TypeScript SDK's): ``'block'`` is what ra does
for PreToolUse anyway and is refused for other events, where ra would go on; ``'continue'`` on a
PreToolUse matcher is named in a notice (the call is still denied).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ra.agent.hooks.types import HookEvent

if TYPE_CHECKING:
    from ra.agent.hooks import Hooks
    from ra.agent.hooks.types import HookInput

    from .channel import Channel

__all__ = ["DEFAULT_TIMEOUT_S", "register_sdk_hooks"]

#: Claude Code's default bound for a hook, in seconds.
DEFAULT_TIMEOUT_S = 60.0


class SdkHookCallback:
    """One callback of the host program, called over the control channel."""

    __slots__ = ("__name__", "callback_id", "channel", "timeout")

    def __init__(self, channel: Channel, callback_id: str, timeout: float) -> None:
        self.channel = channel
        self.callback_id = callback_id
        self.timeout = timeout
        self.__name__ = f"sdk:{callback_id}"

    async def __call__(self, data: HookInput) -> dict[str, Any]:
        payload = data.to_json()
        answer = await self.channel.request(
            "hook_callback",
            {"callback_id": self.callback_id, "input": payload, "tool_use_id": payload.get("tool_use_id")},
            timeout=self.timeout,
        )
        return answer


def register_sdk_hooks(config: Any, hooks: Hooks, channel: Channel) -> list[str]:
    """Register the hooks of an ``initialize`` request's ``hooks`` object; returns notices (one
    per thing ra cannot use). A malformed object raises ValueError (the SDK gets an error
    answer to ``initialize``)."""
    notices: list[str] = []
    if config is None:
        return notices
    if not isinstance(config, Mapping):
        raise ValueError("initialize: 'hooks' must be an object of event name to a list of matchers")
    for event_name, matchers in config.items():
        try:
            event = HookEvent(event_name)
        except ValueError:
            raise ValueError(f"initialize: unknown hook event {event_name!r}") from None
        if not isinstance(matchers, list):
            raise ValueError(f"initialize: hooks.{event_name} must be a list of matchers")
        for i, entry in enumerate(matchers):
            where = f"initialize: hooks.{event_name}[{i}]"
            if not isinstance(entry, Mapping):
                raise ValueError(f"{where} must be an object")
            ids = entry.get("hookCallbackIds")
            if not isinstance(ids, list) or not all(isinstance(x, str) and x for x in ids):
                raise ValueError(f"{where}.hookCallbackIds must be a list of callback ids")
            matcher = entry.get("matcher")
            if matcher is not None and not isinstance(matcher, str):
                raise ValueError(f"{where}.matcher must be a string or null")
            timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
            if timeout is None:
                timeout = DEFAULT_TIMEOUT_S
            if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
                raise ValueError(f"{where}.timeout must be a positive number of seconds")
            on_failure = entry.get("onFailure")
            if on_failure not in (None, "continue", "block"):
                raise ValueError(f"{where}.onFailure must be 'continue' or 'block'")
            if on_failure == "block" and event is not HookEvent.PRE_TOOL_USE:
                raise ValueError(
                    f"{where}: onFailure 'block' is honoured only for PreToolUse (a PreToolUse hook that fails "
                    f"denies the call); when a {event_name} hook fails, ra goes on"
                )
            if on_failure == "continue" and event is HookEvent.PRE_TOOL_USE:
                notices.append(
                    f"{where}: onFailure 'continue' is not honoured: a PreToolUse hook that fails denies the call"
                )
            for callback_id in ids:
                # The channel's own bound fires first (it cancels the request on the SDK's side).
                hook = SdkHookCallback(channel, callback_id, float(timeout))
                hooks.on(event, hook, matcher=matcher, timeout=float(timeout) + 1.0)
    return notices
