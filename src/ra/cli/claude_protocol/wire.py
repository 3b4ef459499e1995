"""ra's SDK messages as Claude Code writes them on its stream-json stdout, line for line.

:mod:`ra.sdk.messages` already uses Claude's field names; what the Claude Agent SDK's parser
needs beyond them is done here:

* ``system``/``init`` carries ``claude_code_version`` - the protocol level ra implements
  (:data:`PROTOCOL_VERSION`, a version the SDK accepts without a warning) - and the fields
  Claude Code sends with it (``apiKeySource``, ``slash_commands``, ``agents``, ...);
* an ``assistant`` message goes out as one line per content block, the lines sharing the
  message's ``id`` (as Claude Code streams them), and a ``thinking`` block has a ``signature``
  (empty: ra's providers do not sign reasoning; the SDK's parser requires the key);
* tool results go out as one ``user`` line per result, with ``tool_use_result`` - an object, as
  the SDK types it: ``content`` (the result as the model reads it) and ``is_error`` (Claude Code's
  per-tool fields, such as ``stdout`` for Bash, are not there: ra's tools return one text);
* a ``result`` always carries ``errors`` (the TypeScript SDK reads it on every error result; ra
  says why the query stopped when nothing else did) and ``modelUsage`` (the TypeScript SDK's
  types require it: the query's usage and cost under the model in use, in camelCase);
* after each ``result`` a ``session_state_changed``/``idle`` marked ``sdk_host_only`` when the
  SDK asked for it (``CLAUDE_CODE_SDK_READS_SESSION_STATE``): the SDK then knows the run is over
  and closes stdin at once instead of waiting.
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

__all__ = ["PROTOCOL_VERSION", "ModelFacts", "claude_lines", "idle_state"]

#: The Claude Code version whose stream-json and control protocol ra speaks (``claude_code_version``
#: in ``init``): the one ``claude-agent-sdk`` 0.2.189 (which ra is tested with) bundles.
PROTOCOL_VERSION = "2.1.332"


#: Why an error result ended, for the result's ``errors`` when no error event said more (ra's
#: ``ra_stop_reason`` -> a sentence). The TypeScript SDK puts these in the error it throws.
_STOPPED = {
    "turn_limit": "stopped: the maximum number of turns was reached",
    "round_limit": "stopped: the maximum number of tool rounds was reached",
    "time_limit": "stopped: the time limit was reached",
    "budget_limit": "stopped: the budget (--max-budget-usd) was reached",
    "max_tokens": "stopped: the answer was cut at the output token limit",
    "context_overflow": "stopped: the conversation no longer fits the model's context window",
    "aborted": "stopped: the session was closed",
    "interrupted": "stopped: the query was interrupted",
    "error": "stopped by an error",
}


class ModelFacts(NamedTuple):
    """The model a result is reported under, for ``modelUsage``."""

    name: str
    context_window: int
    max_output_tokens: int


def claude_lines(
    message: dict[str, Any], *, agents: list[str] | None = None, model: ModelFacts | None = None
) -> list[dict[str, Any]]:
    """The lines Claude Code would write for one of ra's messages (its ``to_json()``)."""
    kind = message.get("type")
    if kind == "system" and message.get("subtype") == "init":
        return [_init(message, agents or [])]
    if kind == "assistant":
        return _assistant(message)
    if kind == "user":
        return _user(message)
    if kind == "result":
        return [_result(message, model)]
    return [message]


def _result(message: dict[str, Any], model: ModelFacts | None) -> dict[str, Any]:
    errors = list(message.get("errors") or ())
    if message.get("is_error") and not errors:
        reason = str(message.get("ra_stop_reason", "error"))
        errors = [_STOPPED.get(reason, f"stopped: {reason}")]
    usage = message.get("usage") or {}
    model_usage = {}
    if model is not None:
        model_usage[model.name] = {
            "inputTokens": usage.get("input_tokens", 0),
            "outputTokens": usage.get("output_tokens", 0),
            "cacheReadInputTokens": usage.get("cache_read_input_tokens", 0),
            "cacheCreationInputTokens": usage.get("cache_creation_input_tokens", 0),
            "webSearchRequests": 0,
            "costUSD": message.get("total_cost_usd", 0),
            "contextWindow": model.context_window,
            "maxOutputTokens": model.max_output_tokens,
        }
    return {**message, "errors": errors, "modelUsage": model_usage}


def _init(message: dict[str, Any], agents: list[str]) -> dict[str, Any]:
    return {
        **message,
        "apiKeySource": "none",
        "claude_code_version": PROTOCOL_VERSION,
        "output_style": "default",
        "slash_commands": [],
        "agents": agents,
        "skills": [],
        "plugins": [],
    }


def _assistant(message: dict[str, Any]) -> list[dict[str, Any]]:
    body = message["message"]
    blocks = body.get("content") or []
    if len(blocks) <= 1:
        return [_signed(message, blocks)]
    lines = []
    for block in blocks:
        line = _signed(message, [block])
        line["uuid"] = str(uuid.uuid4())
        lines.append(line)
    return lines


def _signed(message: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
    out = []
    for block in blocks:
        if block.get("type") == "thinking" and "signature" not in block:
            block = {**block, "signature": ""}
        out.append(block)
    return {**message, "message": {**message["message"], "content": out}}


def _user(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["message"].get("content")
    if not isinstance(content, list):
        return [message]
    lines = []
    for i, block in enumerate(content):
        result = {"content": block.get("content"), "is_error": bool(block.get("is_error"))}
        line = {**message, "message": {"role": "user", "content": [block]}, "tool_use_result": result}
        if i:
            line["uuid"] = str(uuid.uuid4())
        lines.append(line)
    return lines


def idle_state(session_id: str) -> dict[str, Any]:
    """The marker that tells the SDK no further turn is owed (only sent when it asks for it)."""
    return {
        "type": "system",
        "subtype": "session_state_changed",
        "state": "idle",
        "sdk_host_only": True,
        "session_id": session_id,
        "uuid": str(uuid.uuid4()),
    }
