"""The subagent tools (coding-agent-loop-spec 7.2): ``spawn_agent``, ``send_input``, ``wait``,
``close_agent``.

They act on the session running the call (``ctx.session``) through
:class:`ra.agent.subagents.SubAgentManager`, so one set of tool objects serves every session and
every profile. They live in ``ra.agent`` (not ``ra.tools``) because they drive sessions: tools
below the agent layer never import it. Results are JSON objects, so the model reads field names
it can rely on and a host can parse them; the same data travels to the host as the TOOL_CALL_END
``metadata``.

Each tool carries the tag ``"subagent"`` (``RegisteredTool.tags``): that tag, not the tool's name,
is how a child at the depth limit gets a profile without these tools.

Parameter names are the spec's (``agent_id``, ``message``, ``task``, ``working_dir``, ``model``,
``max_turns``). ``wait`` also takes codex's ideas as optional extras: more ids (``agent_ids``) and
a ``timeout_ms`` after which it reports the agents still running instead of blocking on.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from ra.llm.types import ToolDefinition
from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolOutput

from .manager import DEFAULT_MAX_TURNS, SUBAGENT_TAG, SubAgentError, SubAgentManager

__all__ = ["close_agent_tool", "send_input_tool", "spawn_agent_tool", "subagent_tools", "wait_tool"]

#: Agent outputs can be long; bound what the model reads like the spec bounds spawn_agent (5.2).
_RESULT_LIMIT = 20_000

_Executor = Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutput]]

_TAGS = frozenset({SUBAGENT_TAG})

_AGENT_ID = {"type": "string", "description": "The id spawn_agent returned for the agent."}


def _json_output(data: dict[str, Any]) -> ToolOutput:
    return ToolOutput(json.dumps(data, ensure_ascii=False, indent=2), metadata=data)


def _error(message: str) -> ToolOutput:
    return ToolOutput(message, is_error=True)


def _manager(ctx: ToolContext) -> Any:
    if ctx.session is None:
        return None
    return SubAgentManager(ctx.session)


_NO_SESSION = "Subagent tools need a running session; this call was made outside one."


# ------------------------------------------------------------------------------------------------
# spawn_agent
# ------------------------------------------------------------------------------------------------

_SPAWN_DESCRIPTION = (
    "Start a subagent: a separate agent with its own conversation that works on one scoped task "
    "while you continue. It uses the same files and tools as you (inside `working_dir` when given) "
    "and starts from nothing but `task`, so state everything it needs: the goal, the relevant "
    "paths, constraints, and what its final answer must contain. Returns at once with the agent's "
    "id; use `wait` to collect its answer, `send_input` to redirect or follow up, and "
    "`close_agent` to stop it. Several subagents run in parallel."
)


def spawn_agent_tool(*, default_max_turns: int | None = None) -> RegisteredTool:
    """``spawn_agent(task, working_dir?, model?, max_turns?)``; ``max_turns`` defaults to
    ``default_max_turns`` (50 when None, spec 7.3)."""

    fallback_turns = DEFAULT_MAX_TURNS if default_max_turns is None else default_max_turns
    if fallback_turns < 1:
        raise ValueError(f"default_max_turns must be >= 1, got {fallback_turns}")

    parameters = {
        "type": "object",
        "properties": {
            "task": {
                "type": "string",
                "description": "The complete, self-contained task for the subagent, in plain language.",
            },
            "working_dir": {
                "type": "string",
                "description": "An existing subdirectory (relative to your working directory) to confine "
                "the subagent to. Default: your working directory.",
            },
            "model": {"type": "string", "description": "Another model for the subagent. Default: your model."},
            "agent_type": {
                "type": "string",
                "description": "A named kind of agent, when the session defines some (they are listed in this "
                "tool's description). Default: a general agent like you.",
            },
            "max_turns": {
                "type": "integer",
                "minimum": 1,
                "description": f"Most model calls the subagent may make. Default: {fallback_turns}.",
            },
        },
        "required": ["task"],
        "additionalProperties": False,
    }

    async def spawn_agent(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        from ra.agent.errors import SessionError

        manager = _manager(ctx)
        if manager is None:
            return _error(_NO_SESSION)
        max_turns = arguments.get("max_turns")
        try:
            handle = manager.spawn(
                arguments["task"],
                working_dir=arguments.get("working_dir") or None,
                model=arguments.get("model") or None,
                max_turns=None if max_turns is None else int(max_turns),
                default_max_turns=fallback_turns,
                agent_type=arguments.get("agent_type") or None,
                call_id=ctx.call_id,
            )
        except SessionError as exc:
            return _error(f"Could not spawn the agent: {exc}")
        data: dict[str, Any] = {
            "agent_id": handle.id,
            "status": handle.status.value,
            "model": handle.model,
            "max_turns": handle.max_turns,
        }
        if handle.agent_type is not None:
            data["agent_type"] = handle.agent_type
        if handle.working_dir is not None:
            data["working_dir"] = handle.working_dir
        return _json_output(data)

    return RegisteredTool(
        ToolDefinition("spawn_agent", _SPAWN_DESCRIPTION, parameters),
        spawn_agent,
        output_limit=_RESULT_LIMIT,
        truncation_mode="head_tail",
        effect=ToolEffect.EXECUTE,
        tags=_TAGS,
    )


# ------------------------------------------------------------------------------------------------
# send_input
# ------------------------------------------------------------------------------------------------

_SEND_DESCRIPTION = (
    "Send a message to a subagent you spawned. While it is working, the message reaches it after "
    "its current tool calls and it takes it into account; when it has already finished (or asked "
    "a question), the message starts a new round of work with its conversation so far. Call `wait` "
    "afterwards for its new answer. Fails for an agent that was closed."
)

_DELIVERY = {
    "steered": "delivered to the running agent; it continues with the message",
    "queued": "the agent was just finishing; the message is its next input",
    "resumed": "the agent was idle; it started working on the message",
}


def send_input_tool() -> RegisteredTool:
    """``send_input(agent_id, message)``: steer a working agent, or resume an idle one."""
    parameters = {
        "type": "object",
        "properties": {
            "agent_id": _AGENT_ID,
            "message": {"type": "string", "description": "The message for the agent."},
        },
        "required": ["agent_id", "message"],
        "additionalProperties": False,
    }

    async def send_input(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:

        manager = _manager(ctx)
        if manager is None:
            return _error(_NO_SESSION)
        try:
            handle = manager.get(arguments["agent_id"])
            delivery = handle.send_input(arguments["message"])
        except SubAgentError as exc:
            return _error(f"Could not send the message: {exc}")
        return _json_output(
            {"agent_id": handle.id, "status": handle.status.value, "delivery": delivery, "note": _DELIVERY[delivery]}
        )

    return RegisteredTool(
        ToolDefinition("send_input", _SEND_DESCRIPTION, parameters), send_input, effect=ToolEffect.EXECUTE, tags=_TAGS
    )


# ------------------------------------------------------------------------------------------------
# wait
# ------------------------------------------------------------------------------------------------

_WAIT_DESCRIPTION = (
    "Wait for a subagent to finish its current work and return its result: `output` (its final "
    "answer), `success`, and `turns_used`. Pass `agent_ids` to wait for several agents at once "
    "(the result then lists each). With `timeout_ms`, stop waiting after that long and report the "
    "agents still running (`timed_out: true`); without it, wait until they are done."
)


def wait_tool() -> RegisteredTool:
    """``wait(agent_id, agent_ids?, timeout_ms?)``: block until the agents are idle (or timeout)."""
    parameters = {
        "type": "object",
        "properties": {
            "agent_id": _AGENT_ID,
            "agent_ids": {
                "type": "array",
                "items": {"type": "string"},
                "description": "More agents to wait for together with agent_id.",
            },
            "timeout_ms": {
                "type": "integer",
                "minimum": 0,
                "description": "Longest time to wait, in milliseconds. Default: until they finish.",
            },
        },
        "required": ["agent_id"],
        "additionalProperties": False,
    }

    async def wait(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:

        manager = _manager(ctx)
        if manager is None:
            return _error(_NO_SESSION)
        ids = [arguments["agent_id"], *arguments.get("agent_ids", ())]
        timeout_ms = arguments.get("timeout_ms")
        try:
            handles, timed_out = await manager.wait(ids, None if timeout_ms is None else timeout_ms / 1000)
        except SubAgentError as exc:
            return _error(f"Could not wait: {exc}")
        if len(handles) == 1:
            data = handles[0].snapshot()
            data["timed_out"] = timed_out
        else:
            data = {"agents": [h.snapshot() for h in handles], "timed_out": timed_out}
        return _json_output(data)

    return RegisteredTool(
        ToolDefinition("wait", _WAIT_DESCRIPTION, parameters),
        wait,
        output_limit=_RESULT_LIMIT,
        truncation_mode="head_tail",
        effect=ToolEffect.NONE,
        tags=_TAGS,
    )


# ------------------------------------------------------------------------------------------------
# close_agent
# ------------------------------------------------------------------------------------------------

_CLOSE_DESCRIPTION = (
    "Stop a subagent: its current work is aborted, its running commands are stopped, and it takes "
    "no more input. Returns its final status with the last result it produced. Close agents whose "
    "work you no longer need."
)


def close_agent_tool() -> RegisteredTool:
    """``close_agent(agent_id)``: abort and close the agent; report its final status."""
    parameters = {
        "type": "object",
        "properties": {"agent_id": _AGENT_ID},
        "required": ["agent_id"],
        "additionalProperties": False,
    }

    async def close_agent(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:

        manager = _manager(ctx)
        if manager is None:
            return _error(_NO_SESSION)
        try:
            handle = manager.get(arguments["agent_id"])
        except SubAgentError as exc:
            return _error(f"Could not close the agent: {exc}")
        previous = handle.status.value
        await handle.close()
        data = handle.snapshot()
        data["previous_status"] = previous
        return _json_output(data)

    return RegisteredTool(
        ToolDefinition("close_agent", _CLOSE_DESCRIPTION, parameters),
        close_agent,
        output_limit=_RESULT_LIMIT,
        truncation_mode="head_tail",
        effect=ToolEffect.EXECUTE,
        tags=_TAGS,
    )


def subagent_tools(*, default_max_turns: int | None = None) -> list[RegisteredTool]:
    """The four subagent tools, in the spec's order."""
    return [
        spawn_agent_tool(default_max_turns=default_max_turns),
        send_input_tool(),
        wait_tool(),
        close_agent_tool(),
    ]
