"""``ra acp`` driven by the ``agent-client-protocol`` package's client side: the real process, the
scripted Chat Completions server, real files. Prompts, tool calls and their diffs, permissions
through the editor (reject, allow always, answers it cannot take), cancel, modes, load and list."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import acp
from tests.acp.support import (
    PATCH,
    Editor,
    TerminalEditor,
    bounded,
    last_tool_result,
    option_ids,
    patch_call,
    running_agent,
)
from tests.cli.support import SSE, chat_requests, enqueue_text, enqueue_tools, sse_text
from tests.support.replay import ReplayServer

pytestmark = pytest.mark.slow


async def test_an_allowed_edit_streams_a_tool_call_and_its_diff(tmp_path: Path, replay_server: ReplayServer) -> None:
    editor = Editor()
    editor.answers.append("allow_once")
    enqueue_tools(replay_server, patch_call())
    enqueue_text(replay_server, "done")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        target = agent.cwd / "a.py"
        target.write_text("x = 1\ny = 2\n")
        sid = await agent.new_session()
        response = await agent.prompt(sid, "change y")
        assert response.stop_reason == "end_turn"
        assert target.read_text() == "x = 1\ny = 3\n"
        (start,) = editor.of("tool_call")
        assert (start.tool_call_id, start.kind, start.status) == ("c1", "edit", "pending")
        assert start.title == "Patch a/a.py" or "a.py" in start.title
        assert [loc.path for loc in start.locations] == [str(target)]
        assert start.raw_input == {"patch": PATCH}
        (question,) = editor.questions
        assert question["tool_call"].tool_call_id == "c1"
        assert option_ids(question) == ["allow_once", "allow_always", "reject_once"]
        statuses = [u.status for u in editor.of("tool_call_update")]
        assert statuses == ["in_progress", "completed"]
        (diff,) = editor.of("tool_call_update")[-1].content
        assert diff.type == "diff"
        assert (diff.path, diff.old_text, diff.new_text) == (str(target), "x = 1\ny = 2\n", "x = 1\ny = 3\n")


@pytest.mark.parametrize("answer", ["allow", "yes", "reject_always", "cancelled"])
async def test_an_answer_that_is_not_an_offered_allow_denies(
    tmp_path: Path, replay_server: ReplayServer, answer: str
) -> None:
    editor = Editor()
    editor.answers.append(answer)
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch made"}))
    enqueue_text(replay_server, "ok")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "make a file")
        assert len(editor.questions) == 1
        assert not (agent.cwd / "made").exists()
        assert "not run" in last_tool_result(replay_server) or "Denied" in last_tool_result(replay_server)


async def test_allow_always_adds_a_rule_for_that_command_only(tmp_path: Path, replay_server: ReplayServer) -> None:
    editor = Editor()
    editor.answers.extend(["allow_always", "reject_once"])
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch one"}))
    enqueue_tools(replay_server, ("c2", "shell_command", {"command": "touch one two"}))
    enqueue_tools(replay_server, ("c3", "shell_command", {"command": "rm -f one"}))
    enqueue_text(replay_server, "done")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "touch things")
        # "touch one" asked and allowed always (the rule: its first two words): "touch one two" runs
        # without a question; "rm" is asked (and rejected).
        assert [q["tool_call"].tool_call_id for q in editor.questions] == ["c1", "c3"]
        assert "Always allow shell_command(touch one:*)" in [o.name for o in editor.questions[0]["options"]]
        assert (agent.cwd / "one").exists() and (agent.cwd / "two").exists()
        assert "rejected" in last_tool_result(replay_server)


async def test_cancel_stops_the_turn_and_the_session_goes_on(tmp_path: Path, replay_server: ReplayServer) -> None:
    # The model starts answering, then stalls: the editor cancels.
    replay_server.enqueue(
        200, sse_text("thinking about it for a long while"), SSE, chunking="events", stall_after=2, stall_seconds=20
    )
    enqueue_text(replay_server, "second answer")
    async with running_agent(tmp_path, replay_server) as agent:
        sid = await agent.new_session()
        turn = asyncio.ensure_future(agent.prompt(sid, "first"))
        for _ in range(300):
            if agent.editor.of("agent_message_chunk"):
                break
            await asyncio.sleep(0.05)
        assert agent.editor.of("agent_message_chunk")
        await bounded(agent.conn.cancel(session_id=sid))
        response = await bounded(turn, 10)
        assert response.stop_reason == "cancelled"
        agent.editor.updates.clear()
        response = await agent.prompt(sid, "second")
        assert response.stop_reason == "end_turn"
        assert agent.editor.text() == "second answer"


async def test_an_allow_that_arrives_after_cancel_does_not_run_the_call(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    editor = Editor()
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch late"}))
    enqueue_text(replay_server, "unused")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        sid = await agent.new_session()

        async def cancel_then_allow(question: dict) -> str:
            await agent.conn.cancel(session_id=sid)
            await asyncio.sleep(0.3)
            return "allow_once"

        editor.answers.append(cancel_then_allow)
        response = await agent.prompt(sid, "touch it")
        assert response.stop_reason == "cancelled"
        assert not (agent.cwd / "late").exists()


async def test_modes_map_onto_permission_modes(tmp_path: Path, replay_server: ReplayServer) -> None:
    editor = Editor()
    enqueue_tools(replay_server, patch_call())
    enqueue_text(replay_server, "edited")
    enqueue_tools(replay_server, ("c2", "shell_command", {"command": "touch planned"}))
    enqueue_text(replay_server, "planned")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        target = agent.cwd / "a.py"
        target.write_text("x = 1\ny = 2\n")
        response = await bounded(agent.conn.new_session(cwd=str(agent.cwd), mcp_servers=[]))
        sid = response.session_id
        assert response.modes.current_mode_id == "default"
        assert [m.id for m in response.modes.available_modes] == [
            "default",
            "acceptEdits",
            "plan",
            "dontAsk",
            "bypassPermissions",
        ]
        await bounded(agent.conn.set_session_mode(session_id=sid, mode_id="acceptEdits"))
        assert editor.of("current_mode_update")[-1].current_mode_id == "acceptEdits"
        await agent.prompt(sid, "edit")
        assert target.read_text() == "x = 1\ny = 3\n" and not editor.questions  # an edit runs unasked
        await bounded(agent.conn.set_session_mode(session_id=sid, mode_id="plan"))
        await agent.prompt(sid, "plan")
        assert not (agent.cwd / "planned").exists() and not editor.questions  # refused, not asked
        with pytest.raises(Exception, match="Invalid params"):
            await bounded(agent.conn.set_session_mode(session_id=sid, mode_id="yolo"))


async def test_load_replays_a_recorded_session_and_goes_on(tmp_path: Path, replay_server: ReplayServer) -> None:
    editor = Editor()
    editor.answers.append("allow_once")
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo recorded"}), text="Let me look.")
    enqueue_text(replay_server, "It says recorded.")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "what does echo say?")
        listed = await bounded(agent.conn.list_sessions(cwd=str(agent.cwd)))
        assert [s.session_id for s in listed.sessions] == [sid]
        assert listed.sessions[0].title == "what does echo say?"
    later = Editor()
    enqueue_text(replay_server, "Still here.")
    async with running_agent(tmp_path, replay_server, editor=later) as agent:
        await bounded(agent.conn.load_session(cwd=str(agent.cwd), session_id=sid, mcp_servers=[]))
        kinds = [u.session_update for u in later.updates]
        assert kinds == [
            "user_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
        ]
        assert later.updates[0].content.text == "what does echo say?"
        assert later.updates[2].title == "echo recorded" and later.updates[2].kind == "execute"
        assert later.updates[3].status == "completed" and "recorded" in later.updates[3].content[0].content.text
        later.updates.clear()
        response = await agent.prompt(sid, "and now?")
        assert response.stop_reason == "end_turn" and later.text() == "Still here."
        sent = [m.get("content") for m in chat_requests(replay_server)[-1]["messages"]]
        assert "what does echo say?" in sent and "and now?" in sent


async def test_file_reads_go_through_the_editor_buffer(tmp_path: Path, replay_server: ReplayServer) -> None:
    editor = Editor()
    enqueue_tools(replay_server, ("c1", "read_file", {"file_path": "notes.txt"}))
    enqueue_text(replay_server, "read it")
    async with running_agent(tmp_path, replay_server, editor=editor, fs=True) as agent:
        path = agent.cwd / "notes.txt"
        path.write_text("on disk\n")
        editor.buffers[str(path)] = "unsaved in the editor\n"
        sid = await agent.new_session()
        await agent.prompt(sid, "read notes")
        result = last_tool_result(replay_server)
        assert "unsaved in the editor" in result and "on disk" not in result
        assert str(path) in editor.reads
        (start,) = editor.of("tool_call")
        assert start.kind == "read" and start.locations[0].path == str(path)


async def test_edits_write_through_the_editor(tmp_path: Path, replay_server: ReplayServer) -> None:
    editor = Editor()
    editor.answers.append("allow_once")
    enqueue_tools(replay_server, patch_call())
    enqueue_text(replay_server, "done")
    async with running_agent(tmp_path, replay_server, editor=editor, fs=True) as agent:
        target = agent.cwd / "a.py"
        target.write_text("x = 1\ny = 2\n")
        sid = await agent.new_session()
        await agent.prompt(sid, "change y")
        assert editor.writes == [(str(target), "x = 1\ny = 3\n")]
        (diff,) = editor.of("tool_call_update")[-1].content
        assert (diff.old_text, diff.new_text) == ("x = 1\ny = 2\n", "x = 1\ny = 3\n")


async def test_a_tool_name_that_is_no_tool_runs_nothing_and_asks_nothing(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    # Claude's name, another case, a name with a space: none is a tool of the session.
    enqueue_tools(
        replay_server,
        ("c1", "Bash", {"command": "touch dodge1"}),
        ("c2", "SHELL_COMMAND", {"command": "touch dodge2"}),
        ("c3", "shell_command ", {"command": "touch dodge3"}),
    )
    enqueue_text(replay_server, "ok")
    async with running_agent(tmp_path, replay_server) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "dodge")
        assert not agent.editor.questions
        assert not list(agent.cwd.glob("dodge*"))
        assert [u.status for u in agent.editor.of("tool_call_update")] == ["failed"] * 3


async def test_commands_run_in_the_editor_terminal_when_it_offers_one(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    editor = TerminalEditor()
    editor.answers.append("allow_once")
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo via-terminal; exit 3"}))
    enqueue_text(replay_server, "ran")
    async with running_agent(tmp_path, replay_server, editor=editor, fs=True, terminal=True) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "run it")
        assert editor.commands == [("bash", ["-c", "echo via-terminal; exit 3"], str(agent.cwd))]
        result = last_tool_result(replay_server)
        assert "via-terminal" in result and "3" in result
        assert editor.released == editor.created  # every terminal released
        (update,) = [u for u in editor.of("tool_call_update") if u.status in ("completed", "failed")]
        assert "via-terminal" in update.content[0].content.text
        # While it ran, the call embedded the editor's terminal (shown live there).
        embeds = [c for u in editor.of("tool_call_update") for c in (u.content or ()) if c.type == "terminal"]
        assert [c.terminal_id for c in embeds] == editor.created


async def test_fork_copies_the_conversation_into_a_new_session(tmp_path: Path, replay_server: ReplayServer) -> None:
    enqueue_text(replay_server, "first answer")
    enqueue_text(replay_server, "forked answer")
    async with running_agent(tmp_path, replay_server) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "first question")
        fork = await bounded(agent.conn.fork_session(session_id=sid, cwd=str(agent.cwd), mcp_servers=[]))
        assert fork.session_id != sid
        await agent.prompt(fork.session_id, "in the fork")
        sent = [m.get("content") for m in chat_requests(replay_server)[-1]["messages"]]
        assert "first question" in sent and "first answer" in sent and "in the fork" in sent
        listed = await bounded(agent.conn.list_sessions(cwd=str(agent.cwd)))
        assert {s.session_id for s in listed.sessions} == {sid, fork.session_id}
        await bounded(agent.conn.close_session(session_id=fork.session_id))
        with pytest.raises(Exception, match="Invalid params"):
            await agent.prompt(fork.session_id, "after close")


async def test_embedded_context_and_images_reach_the_model(tmp_path: Path, replay_server: ReplayServer) -> None:
    import base64

    from acp.schema import EmbeddedResourceContentBlock, ImageContentBlock, TextResourceContents

    enqueue_text(replay_server, "seen")
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
    async with running_agent(tmp_path, replay_server) as agent:
        sid = await agent.new_session()
        blocks = [
            acp.text_block("look at this"),
            EmbeddedResourceContentBlock(
                type="resource", resource=TextResourceContents(uri="file:///x/notes.md", text="NOTE TEXT")
            ),
            ImageContentBlock(type="image", data=png, mime_type="image/png"),
        ]
        response = await bounded(agent.conn.prompt(session_id=sid, prompt=blocks))
        assert response.stop_reason == "end_turn"
        (user,) = [m for m in chat_requests(replay_server)[-1]["messages"] if m["role"] == "user"]
        parts = user["content"]
        text = " ".join(p.get("text", "") for p in parts if p.get("type") == "text")
        assert "look at this" in text and "NOTE TEXT" in text and "file:///x/notes.md" in text
        assert any(p.get("type") == "image_url" for p in parts)
        with pytest.raises(Exception, match="Invalid params"):
            bad = [ImageContentBlock(type="image", data="not base64!", mime_type="image/png")]
            await bounded(agent.conn.prompt(session_id=sid, prompt=bad))


async def test_a_session_closed_by_a_fatal_error_goes_on_at_the_next_prompt(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    replay_server.enqueue(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
    enqueue_text(replay_server, "back again")
    async with running_agent(tmp_path, replay_server) as agent:
        sid = await agent.new_session()
        with pytest.raises(Exception, match="Internal error"):
            await agent.prompt(sid, "first")
        response = await agent.prompt(sid, "second")
        assert response.stop_reason == "end_turn" and agent.editor.text() == "back again"


async def test_allow_always_is_not_offered_where_no_rule_would_match_and_is_refused_if_sent(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    # A compound command has no "always" rule (one rule cannot cover both parts); an editor that
    # answers allow_always anyway gets a denial, not a run.
    editor = Editor()
    editor.answers.append("allow_always")
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch a && touch b"}))
    enqueue_text(replay_server, "ok")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "touch both")
        (question,) = editor.questions
        assert option_ids(question) == ["allow_once", "reject_once"]
        assert not (agent.cwd / "a").exists() and not (agent.cwd / "b").exists()
        assert "not offered" in last_tool_result(replay_server)


async def test_cancel_stops_a_running_command(tmp_path: Path, replay_server: ReplayServer) -> None:
    editor = Editor()
    editor.answers.append("allow_once")
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "sleep 30; touch finished"}))
    enqueue_text(replay_server, "after")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        sid = await agent.new_session()
        turn = asyncio.ensure_future(agent.prompt(sid, "wait"))
        for _ in range(300):
            if any(u.status == "in_progress" for u in editor.of("tool_call_update")):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        started = asyncio.get_running_loop().time()
        await bounded(agent.conn.cancel(session_id=sid))
        response = await bounded(turn, 15)
        assert response.stop_reason == "cancelled"
        assert asyncio.get_running_loop().time() - started < 10
        assert not (agent.cwd / "finished").exists()
        assert (await agent.prompt(sid, "go on")).stop_reason == "end_turn"


async def test_the_editors_mcp_servers_are_started_for_the_session(tmp_path: Path, replay_server: ReplayServer) -> None:
    import sys

    from acp.schema import EnvVariable, McpServerStdio

    from tests.cli.support import MCP_NOTES

    editor = Editor()
    editor.answers.append("allow_once")
    enqueue_tools(replay_server, ("c1", "mcp__notes__getenv", {"variable": "NOTE_VAR"}))
    enqueue_text(replay_server, "ok")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        server = McpServerStdio(
            name="notes",
            command=sys.executable,
            args=[MCP_NOTES, "--name", "notes"],
            env=[EnvVariable(name="NOTE_VAR", value="from-the-editor")],
        )
        response = await bounded(agent.conn.new_session(cwd=str(agent.cwd), mcp_servers=[server]))
        await agent.prompt(response.session_id, "read the variable")
        assert "from-the-editor" in last_tool_result(replay_server)
        (question,) = editor.questions  # an MCP tool that declares nothing is asked about
        assert question["tool_call"].kind == "other"


@pytest.mark.parametrize("session_id", ["../../etc/passwd", "no-such-session", ""])
async def test_load_refuses_ids_that_are_not_recorded_sessions(
    tmp_path: Path, replay_server: ReplayServer, session_id: str
) -> None:
    async with running_agent(tmp_path, replay_server) as agent:
        with pytest.raises(Exception, match="Invalid params"):
            await bounded(agent.conn.load_session(cwd=str(agent.cwd), session_id=session_id, mcp_servers=[]))
        with pytest.raises(Exception, match="Invalid params"):
            await bounded(agent.conn.new_session(cwd="relative/dir", mcp_servers=[]))


async def test_a_content_filter_stop_is_a_refusal(tmp_path: Path, replay_server: ReplayServer) -> None:
    body = sse_text("I can't help with that").replace('"finish_reason": "stop"', '"finish_reason": "content_filter"')
    replay_server.enqueue(200, body, SSE, chunking="events")
    async with running_agent(tmp_path, replay_server) as agent:
        sid = await agent.new_session()
        response = await agent.prompt(sid, "something")
        assert response.stop_reason == "refusal"


async def test_the_step_limit_is_max_turn_requests(tmp_path: Path, replay_server: ReplayServer) -> None:
    enqueue_tools(replay_server, ("c1", "read_file", {"file_path": "a.txt"}))
    enqueue_tools(replay_server, ("c2", "read_file", {"file_path": "a.txt"}))
    async with running_agent(tmp_path, replay_server, args=("--max-steps", "1")) as agent:
        (agent.cwd / "a.txt").write_text("a\n")
        sid = await agent.new_session()
        response = await agent.prompt(sid, "read forever")
        assert response.stop_reason == "max_turn_requests"


async def test_a_running_command_s_output_reaches_the_editor_before_it_ends(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    editor = Editor()
    editor.answers.append("allow_once")
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo early; sleep 1.5; echo late"}))
    enqueue_text(replay_server, "ok")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "run")
        updates = editor.of("tool_call_update")
        progress = [u for u in updates if u.status is None and u.content]
        assert progress and "early" in progress[0].content[0].content.text
        assert "late" not in progress[0].content[0].content.text
        assert updates[-1].status == "completed" and "late" in updates[-1].content[0].content.text


async def test_an_editor_that_goes_away_mid_question_runs_nothing_and_ra_exits(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    editor = Editor()
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "touch orphan"}))
    enqueue_text(replay_server, "unused")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        sid = await agent.new_session()

        async def hang_up(question: dict) -> str:
            agent.process.stdin.close()  # the editor closes the pipe and never answers
            await asyncio.sleep(30)
            return "allow_once"

        editor.answers.append(hang_up)
        turn = asyncio.ensure_future(agent.conn.prompt(session_id=sid, prompt=[acp.text_block("touch")]))
        code = await bounded(agent.process.wait(), 20)
        turn.cancel()
        await asyncio.gather(turn, return_exceptions=True)
        assert code == 0
        await asyncio.sleep(0.5)
        assert not (agent.cwd / "orphan").exists()


async def test_reasoning_streams_as_thought_chunks(tmp_path: Path, replay_server: ReplayServer) -> None:
    body = sse_text("The answer.")
    thinking = (
        'data: {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": "m", '
        '"choices": [{"index": 0, "delta": {"reasoning_content": "Let me think."}, "finish_reason": null}]}\n\n'
    )
    first = body.index("data: ", 1)  # after the role chunk
    replay_server.enqueue(200, body[:first] + thinking + body[first:], SSE, chunking="events")
    async with running_agent(tmp_path, replay_server) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "think")
        kinds = [u.session_update for u in agent.editor.updates]
        assert kinds.index("agent_thought_chunk") < kinds.index("agent_message_chunk")
        assert "".join(u.content.text for u in agent.editor.of("agent_thought_chunk")) == "Let me think."
        assert agent.editor.text() == "The answer."


async def test_the_editors_http_mcp_server_is_used_with_its_headers(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    """``initialize`` says ra takes MCP over HTTP: an editor's ``http`` server (a real one on
    127.0.0.1) serves the session's tools, with the headers the editor gave."""
    from acp.schema import HttpHeader, HttpMcpServer

    from tests.mcp.support import http_kit

    editor = Editor()
    editor.answers.append("allow_once")
    enqueue_tools(replay_server, ("c1", "mcp__remote__header", {"name": "x-team"}))
    enqueue_text(replay_server, "ok")
    with http_kit() as url:
        async with running_agent(tmp_path, replay_server, editor=editor) as agent:
            assert agent.init.agent_capabilities.mcp_capabilities.http
            headers = [HttpHeader(name="X-Team", value="blue")]
            server = HttpMcpServer(type="http", name="remote", url=url, headers=headers)
            response = await bounded(agent.conn.new_session(cwd=str(agent.cwd), mcp_servers=[server]))
            await agent.prompt(response.session_id, "read the header")
            assert last_tool_result(replay_server) == "blue"
