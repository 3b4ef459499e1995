"""``ra acp`` in the default suite: the real process answering a prompt and a rejected edit,
through the ACP package's client side (the rest, slower, is in test_acp_agent.py)."""

from __future__ import annotations

from pathlib import Path

from tests.acp.support import Editor, last_tool_result, patch_call, running_agent
from tests.cli.support import enqueue_text, enqueue_tools
from tests.support.replay import ReplayServer


async def test_a_prompt_is_answered_with_streamed_text(tmp_path: Path, replay_server: ReplayServer) -> None:
    enqueue_text(replay_server, "Hello from ra")
    async with running_agent(tmp_path, replay_server) as agent:
        assert agent.init.agent_info.name == "ra"
        caps = agent.init.agent_capabilities
        assert caps.load_session and caps.prompt_capabilities.image and caps.prompt_capabilities.embedded_context
        assert caps.mcp_capabilities.http and caps.mcp_capabilities.sse
        sessions = caps.session_capabilities
        assert sessions.list is not None and sessions.fork is not None and sessions.close is not None
        sid = await agent.new_session()
        response = await agent.prompt(sid, "hi")
        assert response.stop_reason == "end_turn"
        assert agent.editor.text() == "Hello from ra"
        assert len(agent.editor.of("agent_message_chunk")) > 1  # streamed, not one block at the end
        assert agent.editor.of("usage_update")[-1].used == 110
        assert response.usage.input_tokens == 100


async def test_a_rejected_edit_leaves_the_file_and_tells_the_model(tmp_path: Path, replay_server: ReplayServer) -> None:
    editor = Editor()
    editor.answers.append("reject_once")
    enqueue_tools(replay_server, patch_call())
    enqueue_text(replay_server, "ok, I will not")
    async with running_agent(tmp_path, replay_server, editor=editor) as agent:
        target = agent.cwd / "a.py"
        target.write_text("x = 1\ny = 2\n")
        sid = await agent.new_session()
        response = await agent.prompt(sid, "change y")
        assert response.stop_reason == "end_turn"
        assert target.read_text() == "x = 1\ny = 2\n"
        assert "rejected" in last_tool_result(replay_server)
        assert editor.of("tool_call_update")[-1].status == "failed"


def test_help_and_bad_flags(tmp_path: Path) -> None:
    from tests.cli.support import clean_env, run_ra

    env = clean_env(tmp_path)
    shown = run_ra(["acp", "--help"], env)
    assert shown.returncode == 0
    assert '"agent_servers"' in shown.stdout and '"type": "custom"' in shown.stdout
    assert "--permission-mode" in shown.stdout and "--mcp-config" in shown.stdout
    bad = run_ra(["acp", "--no-such-flag"], env)
    assert bad.returncode == 2 and "ra: error:" in bad.stderr and not bad.stdout
    mode = run_ra(["acp", "--permission-mode", "yolo"], env)
    assert mode.returncode == 2 and "yolo" in mode.stderr and not mode.stdout
