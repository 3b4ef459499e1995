"""The model's plan in the editor: ``ra acp --profile openai`` (the real process, the scripted Chat
Completions server, the ``agent-client-protocol`` package's client side) sends each successful
``update_plan`` as a ``plan`` session/update instead of a tool call, shows a refused one as the
failed call it is, and replays the plans on ``session/load``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.acp.support import Editor, bounded, running_agent
from tests.cli.support import enqueue_text, enqueue_tools
from tests.support.replay import ReplayServer

pytestmark = pytest.mark.slow

OPENAI = ("--provider", "openai-compatible", "--profile", "openai")
FIRST = [
    {"step": "Read the parser", "status": "in_progress"},
    {"step": "Fix the bug", "status": "pending"},
]
SECOND = [
    {"step": "Read the parser", "status": "completed"},
    {"step": "Fix the bug", "status": "in_progress"},
]
TWO_RUNNING = [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]


def entries(update: Any) -> list[tuple[str, str, str]]:
    return [(e.content, e.status, e.priority) for e in update.entries]


def expected(plan: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    return [(s["step"], s["status"], "medium") for s in plan]


def summary(updates: list[Any]) -> list[tuple[str, Any]]:
    """Each update's kind with what identifies it: a call's id and status, a plan's entries."""
    out: list[tuple[str, Any]] = []
    for u in updates:
        kind = u.session_update
        if kind == "plan":
            out.append((kind, entries(u)))
        elif kind in ("tool_call", "tool_call_update"):
            out.append((kind, (u.tool_call_id, u.status)))
        elif kind in ("user_message_chunk", "agent_message_chunk"):
            if out and out[-1][0] == kind:  # the text arrives in pieces
                out[-1] = (kind, out[-1][1] + u.content.text)
            else:
                out.append((kind, u.content.text))
    return out


async def test_plans_reach_the_editor_as_plan_updates_and_load_replays_them(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    enqueue_tools(replay_server, ("c1", "update_plan", {"plan": FIRST, "explanation": "Two steps."}))
    enqueue_tools(replay_server, ("c2", "update_plan", {"plan": TWO_RUNNING}))
    enqueue_tools(replay_server, ("c3", "update_plan", {"plan": SECOND}))
    enqueue_text(replay_server, "Fixed.")
    async with running_agent(tmp_path, replay_server, args=OPENAI) as agent:
        sid = await agent.new_session()
        response = await agent.prompt(sid, "fix the parser")
        assert response.stop_reason == "end_turn"
        live = summary(agent.editor.updates)
        assert live == [
            ("plan", expected(FIRST)),
            ("tool_call", ("c2", "pending")),  # held back while it ran: shown once it failed
            ("tool_call_update", ("c2", "failed")),
            ("plan", expected(SECOND)),
            ("agent_message_chunk", "Fixed."),
        ]
        refused = agent.editor.of("tool_call_update")[-1]
        assert "at most one step may be in_progress" in refused.content[0].content.text
    later = Editor()
    async with running_agent(tmp_path, replay_server, editor=later, args=OPENAI) as agent:
        await bounded(agent.conn.load_session(cwd=str(agent.cwd), session_id=sid, mcp_servers=[]))
        replayed = summary(later.updates)
        assert replayed == [
            ("user_message_chunk", "fix the parser"),
            ("plan", expected(FIRST)),
            ("tool_call", ("c2", "pending")),
            ("tool_call_update", ("c2", "failed")),
            ("plan", expected(SECOND)),
            ("agent_message_chunk", "Fixed."),
        ]
        assert later.of("plan")[-1].entries[1].status == "in_progress"  # the latest plan is the last sent


@pytest.mark.parametrize("answer", ["allow_once", "reject_once"])
async def test_a_plan_call_the_editor_is_asked_about_is_shown_first(
    tmp_path: Path, replay_server: ReplayServer, answer: str
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"permissions": {"ask": ["update_plan"]}}))
    editor = Editor()
    editor.answers.append(answer)
    enqueue_tools(replay_server, ("c1", "update_plan", {"plan": FIRST}))
    enqueue_text(replay_server, "ok")
    async with running_agent(
        tmp_path, replay_server, editor=editor, args=(*OPENAI, "--settings", str(settings))
    ) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "plan it")
    (question,) = editor.questions
    assert question["tool_call"].tool_call_id == "c1"
    (shown,) = editor.of("tool_call")
    assert (shown.kind, shown.title, shown.raw_input) == ("think", "Update the plan", {"plan": FIRST})
    calls = [u for u in summary(editor.updates) if u[0] != "agent_message_chunk"]
    if answer == "allow_once":
        assert calls == [
            ("tool_call", ("c1", "pending")),
            ("tool_call_update", ("c1", "in_progress")),
            ("tool_call_update", ("c1", "completed")),
            ("plan", expected(FIRST)),
        ]
    else:
        assert calls == [("tool_call", ("c1", "pending")), ("tool_call_update", ("c1", "failed"))]


async def test_a_plan_tool_of_another_kind_stays_a_tool_call(tmp_path: Path, replay_server: ReplayServer) -> None:
    # The ra profile offers no update_plan: the call is an unknown tool, shown and failed, no plan.
    enqueue_tools(replay_server, ("c1", "update_plan", {"plan": FIRST}))
    enqueue_text(replay_server, "ok")
    async with running_agent(tmp_path, replay_server) as agent:
        sid = await agent.new_session()
        await agent.prompt(sid, "plan it")
        assert not agent.editor.of("plan")
        assert summary(agent.editor.of("tool_call") + agent.editor.of("tool_call_update")) == [
            ("tool_call", ("c1", "pending")),
            ("tool_call_update", ("c1", "failed")),
        ]
