"""An "always allow" in the editor lasts: a new ``ra acp`` process that loads or resumes the session
does not ask again about what the user allowed, tells the user which rules came back, still
obeys its own deny rules, and refuses a rule someone edited into the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acp.support import Editor, bounded, last_tool_result, running_agent
from tests.cli.support import enqueue_text, enqueue_tools
from tests.support.replay import ReplayServer

pytestmark = pytest.mark.slow


async def _granted(tmp_path: Path, server: ReplayServer) -> str:
    """A session where the editor answered "always allow" for ``touch one``; returns its id."""
    editor = Editor()
    editor.answers.append("allow_always")
    enqueue_tools(server, ("c1", "shell_command", {"command": "touch one"}))
    enqueue_text(server, "done")
    async with running_agent(tmp_path, server, editor=editor) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "touch one")
        assert [q["tool_call"].tool_call_id for q in editor.questions] == ["c1"]
        assert (agent.cwd / "one").exists()
    return sid


async def _reopen(agent: object, how: str, sid: str) -> None:
    conn = agent.conn  # type: ignore[attr-defined]
    cwd = str(agent.cwd)  # type: ignore[attr-defined]
    if how == "load":
        await bounded(conn.load_session(cwd=cwd, session_id=sid, mcp_servers=[]))
    else:
        await bounded(conn.resume_session(cwd=cwd, session_id=sid, mcp_servers=[]))


@pytest.mark.parametrize("how", ["load", "resume"])
async def test_an_always_answer_is_not_asked_again_in_a_new_process(
    tmp_path: Path, replay_server: ReplayServer, how: str
) -> None:
    sid = await _granted(tmp_path, replay_server)
    later = Editor()  # answers every question with reject_once
    enqueue_tools(replay_server, ("c2", "shell_command", {"command": "touch one two"}))
    enqueue_text(replay_server, "done again")
    async with running_agent(tmp_path, replay_server, editor=later) as agent:
        await _reopen(agent, how, sid)
        notices = [u.content.text for u in later.of("agent_message_chunk") if u.content.text.startswith("ra: ")]
        assert len(notices) == 1 and "shell_command(touch one:*)" in notices[0] and "Restored 1" in notices[0]
        await agent.prompt(sid, "touch two")
        assert later.questions == []
        assert (agent.cwd / "two").exists()


async def test_a_deny_rule_of_the_new_process_still_wins(tmp_path: Path, replay_server: ReplayServer) -> None:
    sid = await _granted(tmp_path, replay_server)
    later = Editor()
    enqueue_tools(replay_server, ("c2", "shell_command", {"command": "touch one two"}))
    enqueue_text(replay_server, "denied")
    args = ("--disallowed-tools", "shell_command(touch one two:*)")
    async with running_agent(tmp_path, replay_server, editor=later, args=args) as agent:
        await _reopen(agent, "load", sid)
        await agent.prompt(sid, "touch two")
        assert later.questions == []
        assert not (agent.cwd / "two").exists()
        assert "Denied by the rule" in last_tool_result(replay_server)


async def test_a_rule_edited_into_the_record_is_refused_with_a_notice(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    sid = await _granted(tmp_path, replay_server)
    [record] = (tmp_path / "sessions").rglob(f"*_{sid}.jsonl")
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    grant = next(line for line in lines if line.get("type") == "permission_rule")
    assert grant["rule"] == "shell_command(touch one:*)"
    grant["rule"] = "shell_command"  # every command, not what the user allowed
    record.write_text("".join(json.dumps(line) + "\n" for line in lines))

    later = Editor()  # rejects
    enqueue_tools(replay_server, ("c2", "shell_command", {"command": "rm -f one"}))
    enqueue_text(replay_server, "asked")
    async with running_agent(tmp_path, replay_server, editor=later) as agent:
        await _reopen(agent, "load", sid)
        notices = [u.content.text for u in later.of("agent_message_chunk") if u.content.text.startswith("ra: ")]
        assert len(notices) == 1 and "Not restoring the permission rule shell_command " in notices[0]
        await agent.prompt(sid, "remove one")
        assert [q["tool_call"].tool_call_id for q in later.questions] == ["c2"]
        assert (agent.cwd / "one").exists()


async def test_a_fork_keeps_the_rule_and_says_so_at_its_first_prompt(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    sid = await _granted(tmp_path, replay_server)
    later = Editor()  # rejects
    enqueue_tools(replay_server, ("c2", "shell_command", {"command": "touch one two"}))
    enqueue_text(replay_server, "forked")
    async with running_agent(tmp_path, replay_server, editor=later) as agent:
        forked = await bounded(agent.conn.fork_session(cwd=str(agent.cwd), session_id=sid, mcp_servers=[]))
        assert forked.session_id != sid and later.updates == []  # nothing for an id the editor does not know yet
        await agent.prompt(forked.session_id, "touch two")
        assert later.questions == [] and (agent.cwd / "two").exists()
        first = later.updates[0]
        assert first.session_update == "agent_message_chunk" and "shell_command(touch one:*)" in first.content.text
