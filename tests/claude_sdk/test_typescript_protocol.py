"""What the TypeScript Claude Agent SDK sends that the Python one does not, spoken to ``ra`` line by
line (no node needed): its flags in ``--flag=value`` form, the ``initialize`` fields that carry the
system prompt and the in-process MCP servers, and the result fields its types require.
``test_typescript_sdk.py`` runs the SDK itself."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.claude_sdk.support import ra_path
from tests.claude_sdk.test_protocol import BASE, _ra, _responses, _user
from tests.cli.support import chat_requests, clean_env, enqueue_text, enqueue_tools, tool_messages
from tests.support.replay import ReplayServer

#: The slow lane (``pytest -m slow``, which CI runs): the real `ra` command per test, driven by the SDK.
pytestmark = pytest.mark.slow


def _initialize(**fields: Any) -> dict[str, Any]:
    return {"type": "control_request", "request_id": "init", "request": {"subtype": "initialize", **fields}}


def _system(server: ReplayServer) -> str:
    return chat_requests(server)[0]["messages"][0]["content"]


def test_the_system_prompt_comes_in_initialize(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "ok")
    enqueue_text(replay_server, "ok")
    lines = [_initialize(systemPrompt=["You are terse.", "", "Answer in English."]), _user("hi")]
    out, stderr, code = _ra(replay_server, tmp_path, lines)
    assert code == 0 and _responses(out)["init"]["subtype"] == "success", stderr
    assert _system(replay_server).startswith("You are terse.\n\nAnswer in English.")
    # [""] is what the SDK sends for a program that set no system prompt: the profile's own; the
    # preset's append goes in as the user's instructions.
    out, stderr, code = _ra(
        replay_server, tmp_path, [_initialize(systemPrompt=[""], appendSystemPrompt="Sign R."), _user("hi")]
    )
    assert code == 0, stderr
    second = chat_requests(replay_server)[1]["messages"][0]["content"]
    assert second.startswith("You are ra") and "Sign R." in second


def test_a_system_prompt_given_twice_is_refused_before_any_model_call(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    lines = [_initialize(systemPrompt=["You are terse."]), _user("hi")]
    out, stderr, code = _ra(replay_server, tmp_path, lines, "--system-prompt", "You are verbose.")
    answer = _responses(out)["init"]
    assert answer["subtype"] == "error" and "--system-prompt" in answer["error"]
    assert code == 2 and "--system-prompt" in stderr
    assert replay_server.requests == []


def test_what_ra_does_not_read_from_initialize_is_refused(replay_server: ReplayServer, tmp_path: Path) -> None:
    """Settings, deny rules, managed settings or MCP servers sent in initialize: the run does not
    start - not even for a host that goes on after the error answer - rather than run without them."""
    cases = {
        "settings": {"permissions": {"deny": ["Bash"]}},
        "disallowedTools": ["Bash"],
        "managedSettings": {"permissions": {"deny": ["Bash"]}},
        "mcpServers": {"notes": {"command": "true"}},
    }
    for key, value in cases.items():
        out, stderr, code = _ra(replay_server, tmp_path, [_initialize(**{key: value}), _user("rm -rf /")])
        answer = _responses(out)["init"]
        assert answer["subtype"] == "error" and repr(key) in answer["error"] and "Delivery" in answer["error"], key
        assert code == 2 and key in stderr, (key, stderr)
        assert not [m for m in out if m["type"] in ("system", "assistant", "result")], key
    assert replay_server.requests == []


def test_a_first_initialize_that_cannot_be_set_up_ends_the_run(replay_server: ReplayServer, tmp_path: Path) -> None:
    """Hooks the program asked for that cannot be registered: ra does not go on without them."""
    lines = [_initialize(hooks={"PreToolUse": "not a list"}), _user("touch made.txt")]
    out, stderr, code = _ra(replay_server, tmp_path, lines, "--permission-mode", "bypassPermissions")
    assert _responses(out)["init"]["subtype"] == "error"
    assert code == 2 and replay_server.requests == [], stderr


def test_rules_naming_mcp_servers_are_checked_against_initializes_servers(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    """The TypeScript SDK names its in-process servers only in initialize; a rule naming another
    server (a mistyped deny rule would deny nothing) is still refused, before any model call."""
    for servers in (None, ["calc"]):
        fields = {} if servers is None else {"sdkMcpServers": servers}
        lines = [_initialize(**fields), _user("add")]
        out, stderr, code = _ra(replay_server, tmp_path, lines, "--disallowedTools=mcp__clac__add")
        answer = _responses(out)["init"]
        assert answer["subtype"] == "error" and "mcp__clac__add" in answer["error"], answer
        assert code == 2 and "names no configured MCP server" in stderr
        assert ("calc" in answer["error"]) == (servers is not None)
    assert replay_server.requests == []
    # Without any initialize the command line's servers are the ones checked.
    out, stderr, code = _ra(replay_server, tmp_path, [_user("add")], "--allowedTools=mcp__calc__add")
    assert code == 2 and "names no configured MCP server" in stderr and replay_server.requests == []


def test_an_in_process_server_cannot_take_a_configured_servers_name(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    """Two servers under one name would offer the same tool names: refused, whichever way the
    SDK's server is named (initialize or --mcp-config)."""
    from tests.cli.support import mcp_json, notes_server

    configured = mcp_json(notes=notes_server())
    out, stderr, code = _ra(
        replay_server, tmp_path, [_initialize(sdkMcpServers=["notes"]), _user("hi")], "--mcp-config", configured
    )
    assert _responses(out)["init"]["subtype"] == "error" and code == 2 and "'notes' is both" in stderr
    sdk = json.dumps({"mcpServers": {"notes": {"type": "sdk", "name": "notes"}}})
    out, stderr, code = _ra(replay_server, tmp_path, [_user("hi")], "--mcp-config", configured, "--mcp-config", sdk)
    assert code == 2 and "'notes' is both" in stderr, stderr
    assert replay_server.requests == []


def test_allow_dangerously_skip_permissions_alone_grants_nothing(replay_server: ReplayServer, tmp_path: Path) -> None:
    """The opt-in flag the TypeScript SDK passes with allowDangerouslySkipPermissions does not
    change the mode: without --permission-mode a command is still not run unasked."""
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made.txt"}))
    enqueue_text(replay_server, "ok")
    _out, _, code = _ra(
        replay_server, tmp_path, [_initialize(), _user("touch")], "--allow-dangerously-skip-permissions"
    )
    assert code == 0 and not (tmp_path / "work" / "made.txt").exists()
    assert "nobody can be asked" in tool_messages(chat_requests(replay_server)[1])[0]["content"]


def test_on_failure_block_is_accepted_where_ra_blocks_and_refused_elsewhere(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_text(replay_server, "ok")
    block = {"hookCallbackIds": ["hook_0"], "onFailure": "block"}
    out, stderr, code = _ra(replay_server, tmp_path, [_initialize(hooks={"PreToolUse": [block]}), _user("hi")])
    answer = _responses(out)["init"]
    assert answer["subtype"] == "success" and answer["response"]["hook_on_failure_supported"] is True, stderr
    assert code == 0
    for hooks in ({"UserPromptSubmit": [block]}, {"PreToolUse": [{**block, "onFailure": "maybe"}]}):
        out, stderr, code = _ra(replay_server, tmp_path, [_initialize(hooks=hooks), _user("hi")])
        assert _responses(out)["init"]["subtype"] == "error" and "onFailure" in stderr and code == 2
    assert len(chat_requests(replay_server)) == 1


def test_sdk_mcp_servers_must_be_a_list_of_names(replay_server: ReplayServer, tmp_path: Path) -> None:
    out, _, code = _ra(replay_server, tmp_path, [_initialize(sdkMcpServers="calc"), _user("hi")])
    assert "'sdkMcpServers' must be a list of names" in _responses(out)["init"]["error"] and code == 2


def test_the_typescript_sdks_flags(replay_server: ReplayServer, tmp_path: Path) -> None:
    """Every flag the TypeScript SDK passes and the Python one does not, in its ``--flag=value``
    form: each ignored one named in one warning, those ra honours silent."""
    enqueue_text(replay_server, "ok")
    ignored = [
        "--debug-file=/tmp/nowhere.log",
        "--channels=team",
        "--plugin-dir-no-mcp=/tmp",
        "--initialize-fields=settings",
        "--thinking=adaptive",
    ]
    silent = [
        "--allow-dangerously-skip-permissions",
        "--await-initialize",
        "--permission-mode=bypassPermissions",
        "--tools=default",  # the profile's tools: --tools is honoured
    ]
    out, stderr, code = _ra(replay_server, tmp_path, [_initialize(), _user("hi")], *ignored, *silent)
    assert code == 0 and out[-1]["result"] == "ok", stderr
    warned = [line for line in stderr.splitlines() if "accepted and ignored" in line]
    assert sorted(w.split()[2] for w in warned) == sorted(f.split("=")[0] for f in ignored), stderr
    assert "--allow-dangerously-skip-permissions" not in stderr and "--await-initialize" not in stderr


def test_flags_whose_limits_ra_cannot_apply_are_refused(replay_server: ReplayServer, tmp_path: Path) -> None:
    """An organization's managed settings, a main-thread agent (its tool limits), another
    checkout's project files: ra cannot apply them, so it does not run rather than run without."""
    (tmp_path / "work").mkdir()
    environ = clean_env(tmp_path, OPENAI_COMPATIBLE_BASE_URL=f"{replay_server.base_url}/v1", RA_MODEL="test-model")
    managed = json.dumps({"permissions": {"deny": ["Bash"]}})
    cases = {
        "managed settings": [f"--managed-settings={managed}"],
        "managed settings ": ["--managed-settings-in-initialize"],
        "named agent": ["--agent=read-only-reviewer"],
        "another checkout": ["--project-config-root=/srv/trusted"],
    }
    for words, flags in cases.items():
        done = subprocess.run(
            [ra_path(), *BASE, *flags],
            input=json.dumps(_user("hi")) + "\n",
            env=environ,
            cwd=tmp_path / "work",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and words.strip() in done.stderr and done.stdout == "", (flags, done.stderr)
    assert replay_server.requests == []


def test_permission_prompts_none_asks_nobody(replay_server: ReplayServer, tmp_path: Path) -> None:
    """``permissionPrompts: 'none'``: what would be asked is denied; canUseTool is never asked,
    even with ``--permission-prompt-tool stdio`` given too."""
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made.txt"}))
    enqueue_text(replay_server, "ok")
    lines = [_initialize(), _user("touch")]
    flags = ("--permission-prompt-tool=stdio", "--permission-prompts=none")
    out, _, code = _ra(replay_server, tmp_path, lines, *flags)
    assert code == 0 and not [m for m in out if m["type"] == "control_request"]
    assert not (tmp_path / "work" / "made.txt").exists()
    assert "nobody can be asked" in tool_messages(chat_requests(replay_server)[1])[0]["content"]


def test_results_carry_errors_and_model_usage(replay_server: ReplayServer, tmp_path: Path) -> None:
    """The TypeScript SDK reads ``errors`` of every error result (a missing one is a TypeError in
    it) and its types require ``modelUsage``."""
    enqueue_text(replay_server, "fine")
    out, _, code = _ra(replay_server, tmp_path, [_user("hi")])
    result = out[-1]
    assert code == 0 and result["errors"] == []
    usage = result["modelUsage"]["test-model"]
    assert (usage["inputTokens"], usage["outputTokens"], usage["webSearchRequests"]) == (100, 10, 0)
    assert usage["costUSD"] == result["total_cost_usd"] and usage["contextWindow"] > 0
    enqueue_tools(replay_server, ("c1", "read_file", {"file_path": "a.txt"}))
    (tmp_path / "work" / "a.txt").write_text("x\n")
    out, _, code = _ra(replay_server, tmp_path, [_user("read")], "--max-turns=1")
    result = out[-1]
    assert code == 1 and result["subtype"] == "error_max_turns"
    assert result["errors"] == ["stopped: the maximum number of turns was reached"]
