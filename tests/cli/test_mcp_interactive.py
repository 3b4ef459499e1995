"""MCP servers in an interactive ``ra`` session (a pty): the tools are there before the first input
(``/tools``), one set of servers serves the whole session (``/new`` keeps them), and none
outlives it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect
import pytest

from tests.cli.support import MCP_NOTES as NOTES
from tests.cli.support import chat_requests, clean_env, enqueue_text, enqueue_tools, ra_command, tool_messages
from tests.support.replay import ReplayServer

PROMPT = "ra> "


@pytest.mark.parametrize("recorded", [True, False])
def test_servers_start_with_the_session_and_outlive_new_but_not_the_session(
    replay_server: ReplayServer, tmp_path: Path, recorded: bool
) -> None:
    pidfile = tmp_path / "server.pid"
    servers = json.dumps(
        {"mcpServers": {"notes": {"command": sys.executable, "args": [NOTES, "--pidfile", str(pidfile)]}}}
    )
    enqueue_tools(replay_server, ("c1", "mcp__notes__echo", {"text": "one"}))
    enqueue_text(replay_server, "first done")
    enqueue_tools(replay_server, ("c2", "mcp__notes__echo", {"text": "two"}))
    enqueue_text(replay_server, "second done")
    command = ra_command()
    child = pexpect.spawn(
        command[0],
        [
            *command[1:],
            "--base-url",
            f"{replay_server.base_url}/v1",
            "--model",
            "m",
            "--mcp-config",
            servers,
            *([] if recorded else ["--no-session-persistence"]),
        ],
        env=clean_env(tmp_path, TERM="xterm", NO_COLOR="1", RA_HISTORY_FILE=str(tmp_path / "history")),
        cwd=str(tmp_path),
        encoding="utf-8",
        dimensions=(40, 160),
        timeout=30,
    )
    try:
        child.expect_exact(PROMPT)
        child.sendline("/tools")
        child.expect(r"mcp__notes__echo\s+unknown\s+Say the text back\.")
        child.expect_exact(PROMPT)
        pid = int(pidfile.read_text())
        child.sendline("echo one")
        child.expect("first done")
        child.expect_exact(PROMPT)
        child.sendline("/new")
        child.expect("new conversation")
        child.expect_exact(PROMPT)
        child.sendline("/tools")
        child.expect(r"mcp__notes__echo\s+unknown\s+Say the text back\.")
        child.expect_exact(PROMPT)
        child.sendline("echo two")
        child.expect("second done")
        child.expect_exact(PROMPT)
        assert int(pidfile.read_text()) == pid  # the same server, not one per conversation
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        if child.isalive():
            child.terminate(force=True)
    requests = chat_requests(replay_server)
    assert "notes says: one" in tool_messages(requests[1])[0]["content"]
    assert "notes says: two" in tool_messages(requests[3])[0]["content"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    raise AssertionError(f"the MCP server (pid {pid}) outlived the interactive session")
