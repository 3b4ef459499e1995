"""``ra acp`` under a sandbox (``--sandbox`` or ``sandbox_mode`` in the config file): every
session's files and commands stay in ra, confined, even when the editor offers its file system
and terminal - the editor's buffers and terminal are outside the sandbox, so going through them
would walk around it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.support import TerminalEditor, last_tool_result, patch_call, running_agent
from tests.cli.support import clean_env, enqueue_text, enqueue_tools
from tests.env.sandbox.support import require_bwrap
from tests.support.replay import ReplayServer

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("how", ["flag", "config"])
async def test_a_read_only_sandbox_holds_in_an_editor_that_offers_files_and_a_terminal(
    tmp_path: Path, replay_server: ReplayServer, how: str
) -> None:
    require_bwrap()
    editor = TerminalEditor()
    editor.answers.extend(["allow_once", "allow_once"])
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made-by-shell"}))
    enqueue_tools(replay_server, patch_call("c2"))
    enqueue_text(replay_server, "tried")
    env = clean_env(tmp_path, RA_SESSIONS_DIR=str(tmp_path / "sessions"))
    args: tuple[str, ...] = ()
    if how == "flag":
        args = ("--sandbox", "read-only")
    else:
        config = tmp_path / "ra-config.toml"
        config.write_text('sandbox_mode = "read-only"\n')
        env["RA_CONFIG"] = str(config)
    async with running_agent(
        tmp_path, replay_server, editor=editor, fs=True, terminal=True, args=args, env=env
    ) as agent:
        (agent.cwd / "a.py").write_text("x = 1\ny = 2\n")
        sid = await agent.new_session()
        await agent.prompt(sid, "try to write")
        # Neither the editor's terminal nor its buffers were used, and nothing was written.
        assert editor.commands == [] and editor.writes == []
        assert not (agent.cwd / "made-by-shell").exists()
        assert (agent.cwd / "a.py").read_text() == "x = 1\ny = 2\n"
        assert "read-only" in last_tool_result(replay_server).lower() or "outside" in last_tool_result(replay_server)
