"""A subagent's work reaches the editor: the real ``ra acp`` with a scripted model whose parent
spawns a child and waits for it, and whose child runs a command. The child's call is streamed as
a tool call of its own that names the agent, and its permission question names that call."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.acp.support import Editor, running_agent
from tests.cli.support import SSE, sse_text, sse_tools
from tests.support.replay import Received, ReplayServer, Scripted

pytestmark = pytest.mark.slow

#: A profile with the subagent tools (ra's own profile, the default for an unknown model, has none).
PROFILE = ("--profile", "openai", "--provider", "openai-compatible")


def _scripted(body: str) -> Scripted:
    return Scripted(200, dict(SSE), [body.encode()])


def _script(command: str) -> object:
    """Parent: spawn_agent, then wait for it, then answer. Child (its task is its first user
    message): runs ``command`` with shell, then answers. Parent and child requests
    interleave, so each is answered by whose it is and how far it got."""

    def answer(request: Received) -> Scripted | None:
        if not request.path.endswith("/chat/completions"):
            return None
        messages = request.json()["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        results = [m for m in messages if m["role"] == "tool"]
        if any("CHILD TASK" in str(u) for u in users[:1]):
            if not results:
                return _scripted(sse_tools(("k1", "shell", {"command": command})))
            return _scripted(sse_text("child done"))
        if not results:
            return _scripted(sse_tools(("p1", "spawn_agent", {"task": "CHILD TASK: run the command"})))
        if len(results) == 1:
            found = re.search(r"agent-[0-9a-f]{8}", str(results[0]["content"]))
            if found is None:
                raise ValueError(f"no agent id in the spawn_agent result: {results[0]['content']!r}")
            agent = found.group(0)
            return _scripted(sse_tools(("p2", "wait", {"agent_id": agent})))
        return _scripted(sse_text("parent done"))

    return answer


@pytest.mark.parametrize("answer", ["allow_once", "reject_once"])
async def test_a_subagents_tool_call_is_streamed_and_its_question_names_it(
    tmp_path: Path, replay_server: ReplayServer, answer: str
) -> None:
    replay_server.responder = _script("touch child.txt")  # type: ignore[assignment]
    editor = Editor()
    editor.answers.extend(["allow_once", answer])  # spawn_agent is asked about too (it starts an agent)
    async with running_agent(tmp_path, replay_server, editor=editor, args=PROFILE) as agent:
        sid = await agent.new_session()
        response = await agent.prompt(sid, "delegate")
        assert response.stop_reason == "end_turn"
        spawned = [u for u in editor.of("tool_call") if u.tool_call_id == "p1"]
        assert len(spawned) == 1
        children = [u for u in editor.of("tool_call") if u.tool_call_id.endswith(":k1")]
        assert len(children) == 1, [u.tool_call_id for u in editor.of("tool_call")]
        child = children[0]
        agent_id = child.tool_call_id.removesuffix(":k1")
        assert agent_id.startswith("agent-")
        assert child.title == f"[{agent_id}] touch child.txt" and child.kind == "execute"
        assert child.field_meta == {"ra": {"agentId": agent_id, "agentPath": [agent_id], "parentToolCallId": "p1"}}
        # The child's question reached the editor, about the call it was shown.
        first, question = editor.questions
        assert first["tool_call"].tool_call_id == "p1"
        assert question["tool_call"].tool_call_id == child.tool_call_id
        assert question["tool_call"].title == f"[{agent_id}] touch child.txt"
        ends = [u for u in editor.of("tool_call_update") if u.tool_call_id == child.tool_call_id and u.status]
        assert [u.status for u in ends] == (["completed"] if answer == "allow_once" else ["failed"]), ends
        assert (agent.cwd / "child.txt").exists() is (answer == "allow_once")
        # The child's call was shown before the parent's wait ended.
        order = [getattr(u, "tool_call_id", None) for u in editor.updates]
        wait_end = max(i for i, u in enumerate(editor.updates) if getattr(u, "tool_call_id", None) == "p2")
        assert order.index(child.tool_call_id) < wait_end
        # The parent's own calls keep their ids; the child's text is not the parent's message.
        assert "child done" not in editor.text() and "parent done" in editor.text()
