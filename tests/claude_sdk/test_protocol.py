"""The control protocol spoken to ``ra`` line by line, as a misbehaving host would: malformed lines,
unknown subtypes, requests nobody answers. ra answers with errors and goes on; it never hangs."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.claude_sdk.support import ra_path
from tests.cli.support import chat_requests, clean_env, enqueue_text, enqueue_tools, tool_messages
from tests.support.replay import ReplayServer

#: The slow lane (``pytest -m slow``, which CI runs): the real `ra` command per test, driven by the SDK.
pytestmark = pytest.mark.slow


BASE = ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]


def _ra(
    server: ReplayServer, tmp_path: Path, lines: list[Any], *flags: str, **env: str
) -> tuple[list[dict[str, Any]], str, int]:
    (tmp_path / "work").mkdir(exist_ok=True)
    environ = clean_env(tmp_path, OPENAI_COMPATIBLE_BASE_URL=f"{server.base_url}/v1", RA_MODEL="test-model", **env)
    stdin = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    done = subprocess.run(
        [ra_path(), *BASE, *flags],
        input=stdin,
        env=environ,
        cwd=tmp_path / "work",
        capture_output=True,
        text=True,
        timeout=60,
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()], done.stderr, done.returncode


def _user(text: str) -> dict[str, Any]:
    return {"type": "user", "session_id": "", "message": {"role": "user", "content": text}, "parent_tool_use_id": None}


def _responses(out: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["response"]["request_id"]: m["response"] for m in out if m["type"] == "control_response"}


def test_malformed_and_unknown_control_messages_get_errors_and_the_run_goes_on(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_text(replay_server, "fine")
    lines = [
        {"type": "control_request", "request_id": "r1", "request": {"subtype": "initialize", "hooks": None}},
        "this is not json",
        "[1, 2]",
        {"type": "control_request", "request_id": "r2", "request": {"subtype": "rewind_files", "user_message_id": "x"}},
        {"type": "control_request", "request_id": "r3", "request": "initialize"},
        {"type": "control_request", "request_id": "r4", "request": {"subtype": "set_permission_mode", "mode": "yolo"}},
        {"type": "control_request", "request_id": "r5", "request": {"subtype": "initialize", "hooks": None}},
        {
            "type": "control_request",
            "request_id": "r6",
            "request": {"subtype": "initialize", "hooks": {"NoSuchEvent": []}},
        },
        {"type": "control_response", "response": {"subtype": "success", "request_id": "nobody-asked"}},
        {"type": "user", "message": 42},
        _user("hi"),
    ]
    out, stderr, code = _ra(replay_server, tmp_path, lines)
    answers = _responses(out)
    assert answers["r1"]["subtype"] == "success"
    assert answers["r2"]["subtype"] == "error" and "rewind_files" in answers["r2"]["error"]
    assert answers["r3"]["subtype"] == "error"
    assert answers["r4"]["subtype"] == "error" and "yolo" in answers["r4"]["error"]
    assert answers["r5"]["subtype"] == "error" and "already initialized" in answers["r5"]["error"]
    assert answers["r6"]["subtype"] == "error"
    assert "not JSON" in stderr and "not a JSON object" in stderr and "was not sent to the model" in stderr
    result = [m for m in out if m["type"] == "result"]
    # The message that could not be read still ends its query: an error result that says why.
    assert code == 0 and [r["is_error"] for r in result] == [True, False] and result[1]["result"] == "fine"
    assert result[0]["subtype"] == "error_during_execution" and "not sent to the model" in result[0]["errors"][0]


def test_a_permission_question_nobody_answers_denies_the_call(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made.txt"}))
    enqueue_text(replay_server, "ok")
    (tmp_path / "work").mkdir()
    environ = clean_env(
        tmp_path,
        OPENAI_COMPATIBLE_BASE_URL=f"{replay_server.base_url}/v1",
        RA_MODEL="test-model",
        RA_SDK_PERMISSION_TIMEOUT="1",
    )
    process = subprocess.Popen(
        [ra_path(), *BASE, "--permission-prompt-tool", "stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environ,
        cwd=tmp_path / "work",
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    out: list[dict[str, Any]] = []
    try:
        # stdin stays open (a host that is there but never answers) until the result arrives.
        for line in ({"type": "control_request", "request_id": "r1", "request": {"subtype": "initialize"}}, _user("x")):
            process.stdin.write(json.dumps(line) + "\n")
        process.stdin.flush()
        # A thread reads the lines (select() on the pipe would not see lines already buffered).
        lines: queue.Queue[str] = queue.Queue()
        stdout = process.stdout
        threading.Thread(target=lambda: [lines.put(x) for x in stdout], daemon=True).start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            out.append(json.loads(line))
            if out[-1]["type"] == "result":
                break
        process.stdin.close()
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    asked = [m for m in out if m["type"] == "control_request"]
    assert asked[0]["request"]["subtype"] == "can_use_tool" and asked[0]["request"]["tool_name"] == "Bash"
    cancelled = [m for m in out if m["type"] == "control_cancel_request"]
    assert cancelled == [{"type": "control_cancel_request", "request_id": asked[0]["request_id"]}]
    assert not (tmp_path / "work" / "made.txt").exists()
    assert "did not answer within 1s" in tool_messages(chat_requests(replay_server)[1])[0]["content"]
    assert out[-1]["type"] == "result"


def test_stdin_ending_while_a_question_waits_denies_the_call(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made.txt"}))
    enqueue_text(replay_server, "ok")
    lines = [{"type": "control_request", "request_id": "r1", "request": {"subtype": "initialize"}}, _user("touch")]
    out, _stderr, _code = _ra(replay_server, tmp_path, lines, "--permission-prompt-tool", "stdio")
    assert not (tmp_path / "work" / "made.txt").exists()
    assert "input has ended" in tool_messages(chat_requests(replay_server)[1])[0]["content"]
    assert out[-1]["type"] == "result"


def test_messages_match_the_sdk_parser(replay_server: ReplayServer, tmp_path: Path) -> None:
    """Every line parses with the SDK's own parser; an assistant reply with text and a tool call
    is two lines sharing the message id."""
    from claude_agent_sdk._internal.message_parser import parse_message

    enqueue_tools(replay_server, ("c1", "read_file", {"file_path": "a.txt"}), text="Reading.")
    enqueue_text(replay_server, "done")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("x\n")
    out, _stderr, code = _ra(replay_server, tmp_path, [_user("read")], "--include-partial-messages")
    assert code == 0
    for line in out:
        parse_message(line)
    init = out[0]
    assert (init["type"], init["subtype"]) == ("system", "init") and init["claude_code_version"].startswith("2.")
    first = [m for m in out if m["type"] == "assistant"][:2]
    assert [b["type"] for m in first for b in m["message"]["content"]] == ["text", "tool_use"]
    assert first[0]["message"]["id"] == first[1]["message"]["id"] and first[0]["uuid"] != first[1]["uuid"]
    user = next(m for m in out if m["type"] == "user")
    block = user["message"]["content"][0]
    assert user["tool_use_result"] == {"content": block["content"], "is_error": bool(block.get("is_error"))}
    assert any(m["type"] == "stream_event" for m in out)
    result = out[-1]
    assert {"total_cost_usd", "usage", "num_turns", "duration_ms", "session_id", "is_error", "result"} <= set(result)


def test_a_task_with_stream_json_input_is_a_usage_error(replay_server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    environ = clean_env(tmp_path, OPENAI_COMPATIBLE_BASE_URL=f"{replay_server.base_url}/v1", RA_MODEL="m")
    for extra in (["a task"], ["--output-format", "json"]):
        flags = [*BASE, *extra] if extra[0] == "a task" else ["--input-format", "stream-json", *extra]
        done = subprocess.run([ra_path(), *flags], input="", env=environ, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
    done = subprocess.run(
        [ra_path(), "--permission-prompt-tool", "stdio", "task"],
        input="",
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "needs --input-format stream-json" in done.stderr
    sdk_server = json.dumps({"mcpServers": {"calc": {"type": "sdk", "name": "calc"}}})
    command = [ra_path(), "--mcp-config", sdk_server, "task"]
    done = subprocess.run(command, input="", env=environ, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "SDK server" in done.stderr  # nobody to route its calls to
    assert replay_server.requests == []


def test_system_prompt_file_and_add_dir(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "ok")
    (tmp_path / "prompt.txt").write_text("You answer in haiku.\n")
    (tmp_path / "extra").mkdir()
    flags = ["--system-prompt-file", str(tmp_path / "prompt.txt"), "--add-dir", str(tmp_path / "extra")]
    out, stderr, code = _ra(replay_server, tmp_path, [_user("hi")], *flags)
    assert code == 0 and out[-1]["result"] == "ok", stderr
    assert chat_requests(replay_server)[0]["messages"][0]["content"].startswith("You answer in haiku.")
    out, stderr, code = _ra(replay_server, tmp_path, [_user("hi")], "--add-dir", str(tmp_path / "nope"))
    assert code == 2 and "--add-dir" in stderr and out == []
    assert len(chat_requests(replay_server)) == 1


def test_malformed_mcp_toggle_and_reconnect_are_errors_that_change_nothing(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    from tests.cli.support import mcp_json, notes_server

    enqueue_tools(replay_server, ("c1", "mcp__notes__echo", {"text": "still on"}))
    enqueue_text(replay_server, "ok")

    def request(request_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"type": "control_request", "request_id": request_id, "request": body}

    lines = [
        request("r1", {"subtype": "initialize", "hooks": None}),
        request("r2", {"subtype": "mcp_toggle", "serverName": "notes", "enabled": "false"}),  # a string, not false
        request("r3", {"subtype": "mcp_toggle", "enabled": False}),
        request("r4", {"subtype": "mcp_reconnect", "serverName": 5}),
        request("r5", {"subtype": "stop_task"}),
        _user("echo"),
    ]
    flags = ("--mcp-config", mcp_json(notes=notes_server()), "--permission-mode", "bypassPermissions")
    out, _, code = _ra(replay_server, tmp_path, lines, *flags)
    answers = _responses(out)
    assert answers["r2"]["subtype"] == "error" and "'enabled' must be true or false" in answers["r2"]["error"]
    assert answers["r3"]["subtype"] == "error" and "'serverName'" in answers["r3"]["error"]
    assert answers["r4"]["subtype"] == "error" and "'serverName'" in answers["r4"]["error"]
    assert answers["r5"]["subtype"] == "error" and "'task_id'" in answers["r5"]["error"]
    assert code == 0 and tool_messages(chat_requests(replay_server)[1]) == [
        {"role": "tool", "tool_call_id": "c1", "content": "notes says: still on"}
    ]


def test_set_max_thinking_tokens_is_answered(replay_server: ReplayServer, tmp_path: Path) -> None:
    """The TypeScript SDK's ``setMaxThinkingTokens``: on a model without Anthropic's extended
    thinking it is an error that names what to use instead, and the run goes on."""
    enqueue_text(replay_server, "fine")
    lines = [
        {"type": "control_request", "request_id": "r1", "request": {"subtype": "initialize", "hooks": None}},
        {
            "type": "control_request",
            "request_id": "r2",
            "request": {"subtype": "set_max_thinking_tokens", "max_thinking_tokens": 2048},
        },
        {
            "type": "control_request",
            "request_id": "r3",
            "request": {"subtype": "set_max_thinking_tokens", "max_thinking_tokens": "lots"},
        },
        _user("hi"),
    ]
    out, stderr, code = _ra(replay_server, tmp_path, lines)
    responses = _responses(out)
    assert responses["r2"]["subtype"] == "error" and "reasoning_effort" in responses["r2"]["error"]
    assert responses["r3"]["subtype"] == "error" and "integer or null" in responses["r3"]["error"]
    assert code == 0 and out[-1]["type"] == "result" and out[-1]["result"] == "fine", stderr
