"""Tool use, permissions, hooks and SDK MCP tools: Claude Agent SDK programs on ``ra``, with real files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    SystemMessage,
    ToolUseBlock,
    UserMessage,
    create_sdk_mcp_server,
    query,
    tool,
)

from tests.claude_sdk.support import BOUND_S, options
from tests.cli.support import chat_requests, enqueue_text, enqueue_tools, tool_messages
from tests.support.replay import ReplayServer

#: The slow lane (``pytest -m slow``, which CI runs): the real `ra` command per test, driven by the SDK.
pytestmark = pytest.mark.slow


PATCH = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n"


async def _run(prompt: str, opts: Any) -> list[Any]:
    async with asyncio.timeout(BOUND_S):
        return [m async for m in query(prompt=prompt, options=opts)]


async def _client_run(prompt: str, opts: Any) -> list[Any]:
    """One query through ``ClaudeSDKClient`` (what ``can_use_tool`` needs: a streaming session)."""
    async with asyncio.timeout(BOUND_S), ClaudeSDKClient(options=opts) as client:
        await client.query(prompt)
        return [m async for m in client.receive_response()]


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in tool_messages(body)]


def test_tool_use_edits_a_file(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "apply_patch", {"patch": PATCH}))
    enqueue_text(replay_server, "Done.")
    opts = options(replay_server, tmp_path, permission_mode="acceptEdits")
    (tmp_path / "work" / "a.txt").write_text("old\n")
    messages = asyncio.run(_run("change old to new in a.txt", opts))
    assert (tmp_path / "work" / "a.txt").read_text() == "new\n"
    uses = [b for m in messages if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, ToolUseBlock)]
    assert [(u.id, u.name) for u in uses] == [("c1", "apply_patch")]
    results = [m for m in messages if isinstance(m, UserMessage)]
    assert results and results[0].parent_tool_use_id is None
    # An object, as the SDK types it (a program calls .get on it).
    assert results[0].tool_use_result.get("is_error") is False and "a.txt" in str(results[0].tool_use_result["content"])
    assert messages[-1].subtype == "success" and messages[-1].num_turns == 2


def test_can_use_tool_deny_leaves_the_file_and_tells_the_model(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "rm a.txt"}))
    enqueue_text(replay_server, "I was not allowed.")
    asked: list[tuple[str, dict[str, Any]]] = []

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        asked.append((name, tool_input))
        return PermissionResultDeny(message="No deleting files, please.")

    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("keep me\n")
    messages = asyncio.run(_client_run("delete a.txt", options(replay_server, tmp_path, can_use_tool=can_use_tool)))
    assert asked == [("Bash", {"command": "rm a.txt"})]  # Claude's name for the shell tool
    assert (work / "a.txt").read_text() == "keep me\n"
    assert _tool_results(chat_requests(replay_server)[1]) == ["No deleting files, please."]
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.permission_denials[0]["tool_name"] == "shell_command"


def test_can_use_tool_allow_with_updated_input_runs_the_rewrite(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo one > out.txt"}))
    enqueue_text(replay_server, "ok")

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        return PermissionResultAllow(updated_input={"command": "echo two > out.txt"})

    asyncio.run(_client_run("write", options(replay_server, tmp_path, can_use_tool=can_use_tool)))
    assert (tmp_path / "work" / "out.txt").read_text() == "two\n"


def test_an_allow_cannot_rewrite_into_what_a_deny_rule_forbids(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo hi"}))
    enqueue_text(replay_server, "ok")

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        return PermissionResultAllow(updated_input={"command": "rm a.txt"})

    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("keep\n")
    opts = options(replay_server, tmp_path, can_use_tool=can_use_tool, disallowed_tools=["Bash(rm:*)"])
    asyncio.run(_client_run("hi", opts))
    assert (work / "a.txt").read_text() == "keep\n"
    assert "Bash(rm:*)" in _tool_results(chat_requests(replay_server)[1])[0]


def test_a_claude_spelled_deny_rule_covers_ras_tool(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "rm a.txt"}))
    enqueue_text(replay_server, "ok")
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("keep\n")
    opts = options(replay_server, tmp_path, permission_mode="bypassPermissions", disallowed_tools=["Bash(rm:*)"])
    asyncio.run(_run("rm it", opts))
    assert (work / "a.txt").read_text() == "keep\n"
    assert "Denied by the rule" in _tool_results(chat_requests(replay_server)[1])[0]


def test_a_pre_tool_use_hook_blocks_the_call(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made.txt"}))
    enqueue_text(replay_server, "Blocked.")
    seen: list[dict[str, Any]] = []

    async def no_touch(input_data: dict[str, Any], tool_use_id: str | None, context: Any) -> dict[str, Any]:
        seen.append(input_data)
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "touch is not allowed here",
            }
        }

    hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[no_touch])]}
    opts = options(replay_server, tmp_path, permission_mode="bypassPermissions", hooks=hooks)
    asyncio.run(_run("make a file", opts))
    assert not (tmp_path / "work" / "made.txt").exists()
    assert seen[0]["tool_name"] == "Bash" and seen[0]["tool_input"] == {"command": "touch made.txt"}
    assert _tool_results(chat_requests(replay_server)[1]) == ["touch is not allowed here"]


def test_a_hook_that_never_answers_denies_within_its_timeout(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made.txt"}))
    enqueue_text(replay_server, "ok")

    async def stuck(input_data: dict[str, Any], tool_use_id: str | None, context: Any) -> dict[str, Any]:
        await asyncio.sleep(3600)
        return {}

    hooks = {"PreToolUse": [HookMatcher(matcher=None, hooks=[stuck], timeout=1)]}
    opts = options(replay_server, tmp_path, permission_mode="bypassPermissions", hooks=hooks)
    messages = asyncio.run(_run("make a file", opts))
    assert not (tmp_path / "work" / "made.txt").exists()
    assert "did not answer within 1s" in _tool_results(chat_requests(replay_server)[1])[0]
    assert messages[-1].subtype == "success"


def test_an_sdk_mcp_tool_is_called_by_the_model(replay_server: ReplayServer, tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    @tool("add", "Add two numbers", {"a": int, "b": int})
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        return {"content": [{"type": "text", "text": f"sum={args['a'] + args['b']}"}]}

    calculator = create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add])
    enqueue_tools(replay_server, ("c1", "mcp__calc__add", {"a": 2, "b": 40}))
    enqueue_text(replay_server, "42")
    opts = options(replay_server, tmp_path, mcp_servers={"calc": calculator}, allowed_tools=["mcp__calc__add"])
    messages = asyncio.run(_run("add 2 and 40", opts))
    assert calls == [{"a": 2, "b": 40}]
    assert _tool_results(chat_requests(replay_server)[1]) == ["sum=42"]
    offered = [t["function"]["name"] for t in chat_requests(replay_server)[0]["tools"]]
    assert "mcp__calc__add" in offered
    init = messages[0]
    assert {"name": "calc", "status": "connected"}.items() <= init.data["mcp_servers"][0].items()
    assert messages[-1].result == "42"


def test_a_claude_write_rule_covers_apply_patch(replay_server: ReplayServer, tmp_path: Path) -> None:
    """A program that forbids ``Write`` on Claude gets no file written by ra's patch tool either."""
    enqueue_tools(replay_server, ("c1", "apply_patch", {"patch": PATCH}))
    enqueue_text(replay_server, "ok")
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("old\n")
    opts = options(replay_server, tmp_path, permission_mode="bypassPermissions", disallowed_tools=["Write"])
    asyncio.run(_run("patch", opts))
    assert (work / "a.txt").read_text() == "old\n"
    offered = [t["function"]["name"] for t in chat_requests(replay_server)[0]["tools"]]
    assert "apply_patch" not in offered


def test_the_sdks_agents_become_named_agents(replay_server: ReplayServer, tmp_path: Path) -> None:
    from claude_agent_sdk import AgentDefinition

    enqueue_text(replay_server, "ok")
    agents = {"reviewer": AgentDefinition(description="Reviews diffs", prompt="You review.", tools=["Read", "Grep"])}
    # The anthropic profile has Claude-like tools, spawn_agent (Task) among them; the ra profile has none.
    opts = options(
        replay_server, tmp_path, agents=agents, extra_args={"profile": "anthropic", "provider": "openai-compatible"}
    )
    messages = asyncio.run(_run("hi", opts))
    assert messages[0].data["agents"] == ["reviewer"]
    spawn = next(t for t in chat_requests(replay_server)[0]["tools"] if t["function"]["name"] == "spawn_agent")
    assert "reviewer" in json.dumps(spawn) and "Reviews diffs" in json.dumps(spawn)


def test_allow_with_the_suggested_rule_is_not_asked_again(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo one"}))
    enqueue_tools(replay_server, ("c2", "shell_command", {"command": "echo one two"}))
    enqueue_text(replay_server, "ok")
    asked: list[Any] = []

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        asked.append((name, tool_input, context.suggestions))
        return PermissionResultAllow(updated_permissions=context.suggestions)

    asyncio.run(_client_run("echo", options(replay_server, tmp_path, can_use_tool=can_use_tool)))
    assert len(asked) == 1  # "echo one two" matched the rule the first answer added
    rule = asked[0][2][0].rules[0]
    assert (rule.tool_name, rule.rule_content) == ("Bash", "echo one:*")
    assert "one two" in _tool_results(chat_requests(replay_server)[2])[-1]


def test_a_rule_granted_with_updated_permissions_holds_after_resume(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    """The rule the first run's answer added is in the record: ``resume`` in a new ``ra`` process
    does not ask about the same kind of call again, and a deny rule of the new run still wins."""
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo one"}))
    enqueue_text(replay_server, "ok")
    asked: list[str] = []

    async def grant(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        asked.append(tool_input["command"])
        return PermissionResultAllow(updated_permissions=context.suggestions)

    async def refuse(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        asked.append(tool_input["command"])
        return PermissionResultDeny(message="no")

    first = asyncio.run(_client_run("echo", options(replay_server, tmp_path, can_use_tool=grant)))
    session_id = first[-1].session_id
    assert asked == ["echo one"]

    enqueue_tools(replay_server, ("c2", "shell_command", {"command": "echo one two"}))
    enqueue_text(replay_server, "ok")
    asyncio.run(_client_run("again", options(replay_server, tmp_path, can_use_tool=refuse, resume=session_id)))
    assert asked == ["echo one"]  # not asked: the rule came back with the record
    assert "one two" in _tool_results(chat_requests(replay_server)[-1])[-1]

    enqueue_tools(replay_server, ("c3", "shell_command", {"command": "echo one three"}))
    enqueue_text(replay_server, "ok")
    opts = options(
        replay_server, tmp_path, can_use_tool=refuse, resume=session_id, disallowed_tools=["Bash(echo one three)"]
    )
    asyncio.run(_client_run("and again", opts))
    assert asked == ["echo one"]
    assert "Denied by the rule" in _tool_results(chat_requests(replay_server)[-1])[-1]


def test_settings_json_rules_apply(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "rm a.txt"}))
    enqueue_text(replay_server, "ok")
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("keep\n")
    settings = json.dumps({"permissions": {"deny": ["Bash(rm:*)"], "defaultMode": "bypassPermissions"}})
    asyncio.run(_run("rm", options(replay_server, tmp_path, settings=settings)))
    assert (work / "a.txt").read_text() == "keep\n"


def test_update_plan_is_an_ordinary_tool_under_its_own_name(replay_server: ReplayServer, tmp_path: Path) -> None:
    """With the OpenAI profile the SDK sees update_plan as it is: listed at init, called, answered;
    hooks match it by its name, and a plan is nothing to ask permission for."""
    plan = [{"step": "Look", "status": "completed"}, {"step": "Fix", "status": "in_progress"}]
    enqueue_tools(replay_server, ("c1", "update_plan", {"plan": plan}))
    enqueue_text(replay_server, "ok")
    asked: list[str] = []
    seen: list[dict[str, Any]] = []

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        asked.append(name)
        return PermissionResultDeny(message="no")

    async def watch(input_data: dict[str, Any], tool_use_id: str | None, context: Any) -> dict[str, Any]:
        seen.append(input_data)
        return {}

    hooks = {"PostToolUse": [HookMatcher(matcher="update_plan", hooks=[watch])]}
    extra = {"profile": "openai", "provider": "openai-compatible"}
    opts = options(replay_server, tmp_path, can_use_tool=can_use_tool, hooks=hooks, extra_args=extra)
    messages = asyncio.run(_client_run("plan it", opts))
    init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
    assert "update_plan" in init.data["tools"]
    uses = [b for m in messages if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, ToolUseBlock)]
    assert [(u.name, u.input) for u in uses] == [("update_plan", {"plan": plan})]
    assert _tool_results(chat_requests(replay_server)[1]) == ["Plan updated: 1 completed, 1 in progress."]
    assert asked == []
    assert [(d["tool_name"], d["tool_input"]) for d in seen] == [("update_plan", {"plan": plan})]
    assert messages[-1].subtype == "success"


def test_a_deny_that_interrupts_ends_the_query(replay_server: ReplayServer, tmp_path: Path) -> None:
    """``PermissionResultDeny(interrupt=True)``: the call does not run and the query ends there
    (no further model call), as an interrupted query."""
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made.txt"}))
    enqueue_text(replay_server, "should not be asked for")

    async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
        return PermissionResultDeny(message="Stop everything.", interrupt=True)

    messages = asyncio.run(_client_run("make a file", options(replay_server, tmp_path, can_use_tool=can_use_tool)))
    assert not (tmp_path / "work" / "made.txt").exists()
    assert len(chat_requests(replay_server)) == 1
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.is_error and result.subtype == "error_during_execution"


def test_a_pre_tool_use_hook_that_allows_with_updated_input_runs_the_rewrite(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    """A hook's ``allow`` with ``updatedInput`` runs the rewritten call, unasked (a command would
    otherwise be asked about in the default mode), and the rewrite still meets the deny rules."""
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo one > out.txt"}))
    enqueue_tools(replay_server, ("c2", "shell_command", {"command": "echo three > out.txt"}))
    enqueue_text(replay_server, "ok")

    async def rewrite(input_data: dict[str, Any], tool_use_id: str | None, context: Any) -> dict[str, Any]:
        command = input_data["tool_input"]["command"]
        new = "echo two > out.txt" if "one" in command else "rm -f out.txt"
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "updatedInput": {"command": new},
            }
        }

    hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[rewrite])]}
    opts = options(replay_server, tmp_path, hooks=hooks, disallowed_tools=["Bash(rm:*)"])
    asyncio.run(_run("write", opts))
    assert (tmp_path / "work" / "out.txt").read_text() == "two\n"
    assert "Bash(rm:*)" in _tool_results(chat_requests(replay_server)[2])[1]
