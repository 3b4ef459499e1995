"""update_plan in a real session of the OpenAI profile, driven by a scripted model: the plan reaches
the host in TOOL_CALL_END's metadata, a bad plan is an error result the model recovers from, and
plan mode (read-only) still lets the model keep its plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ra.agent import Session, SessionConfig
from ra.agent.events import EventKind
from ra.env import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.testing import ScriptedAdapter, call, calls, reply
from ra.profiles import create_anthropic_profile, create_openai_profile
from ra.tools.builtin import update_plan_tool
from ra.tools.builtin.plan import plan_from_metadata

FIRST = [{"step": "Look at the code", "status": "in_progress"}, {"step": "Fix it", "status": "pending"}]
SECOND = [{"step": "Look at the code", "status": "completed"}, {"step": "Fix it", "status": "in_progress"}]
TWO_RUNNING = [{"step": "Look at the code", "status": "in_progress"}, {"step": "Fix it", "status": "in_progress"}]


def session_for(tmp_path: Path, model: ScriptedAdapter, profile: Any = None, **config: Any) -> Session:
    profile = profile or create_openai_profile()
    env = LocalExecutionEnvironment(tmp_path)
    return Session(profile, env, Client(providers={model.name: model}), SessionConfig(**config))


def tool_ends(session: Session) -> list[Any]:
    ends: list[Any] = []
    session.add_listener(lambda e: ends.append(e.payload) if e.kind is EventKind.TOOL_CALL_END else None)
    return ends


async def test_the_plan_reaches_the_host_and_a_bad_plan_is_an_error_the_model_reads(tmp_path: Path) -> None:
    model = ScriptedAdapter(
        [
            call("update_plan", explanation="Two steps.", plan=FIRST),
            call("update_plan", plan=TWO_RUNNING),
            call("update_plan", plan=SECOND),
            reply("Done."),
        ],
        name="openai",
    )
    session = session_for(tmp_path, model)
    ends = tool_ends(session)
    result = await session.submit("fix the bug")
    assert result.text == "Done."
    assert [e.tool_name for e in ends] == ["update_plan"] * 3
    assert [e.is_error for e in ends] == [False, True, False]
    first = plan_from_metadata(ends[0].metadata)
    assert first is not None and first.explanation == "Two steps."
    assert [(s.step, s.status) for s in first.steps] == [(d["step"], d["status"]) for d in FIRST]
    assert ends[1].metadata is None and "at most one step may be in_progress" in ends[1].output
    assert ends[2].metadata == {"plan": SECOND, "explanation": None}
    # What the model read back: a confirmation, the refusal, a confirmation.
    results = [m for m in model.requests[-1].messages if m.role == "tool"]
    texts = [m.content[0].tool_result.content for m in results]  # type: ignore[union-attr]
    assert texts[0] == "Plan updated: 1 in progress, 1 pending."
    assert texts[1].startswith("The plan was not updated: at most one step may be in_progress")
    assert texts[2] == "Plan updated: 1 completed, 1 in progress."
    # The tool is offered, and the prompt tells the model when to keep a plan.
    assert "update_plan" in [t.name for t in model.requests[0].tools]
    assert "## Keeping a plan" in model.requests[0].messages[0].text
    await session.close()


async def test_plan_mode_offers_and_runs_update_plan(tmp_path: Path) -> None:
    model = ScriptedAdapter([call("update_plan", plan=FIRST), reply("Here is the plan.")], name="openai")
    session = session_for(tmp_path, model, permission_mode="plan")
    ends = tool_ends(session)
    await session.submit("plan the fix")
    offered = [t.name for t in model.requests[0].tools]
    assert "update_plan" in offered and "apply_patch" not in offered and "shell" not in offered
    assert [e.is_error for e in ends] == [False] and ends[0].metadata["plan"] == FIRST
    await session.close()


async def test_a_plan_call_beside_other_calls_in_one_round(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    model = ScriptedAdapter(
        [calls(("read_file", {"file_path": "a.txt"}), ("update_plan", {"plan": FIRST})), reply("ok")],
        name="openai",
    )
    session = session_for(tmp_path, model)
    ends = tool_ends(session)
    await session.submit("go")
    assert sorted(e.tool_name for e in ends) == ["read_file", "update_plan"]
    assert all(not e.is_error for e in ends)
    await session.close()


async def test_without_the_tool_nothing_mentions_it_and_other_profiles_can_add_it(tmp_path: Path) -> None:
    model = ScriptedAdapter([reply("hi")], name="openai")
    session = session_for(tmp_path, model, create_openai_profile(enable_plan=False))
    await session.submit("hello")
    assert "update_plan" not in [t.name for t in model.requests[0].tools]
    assert "update_plan" not in model.requests[0].messages[0].text
    await session.close()

    profile = create_anthropic_profile()
    profile.tool_registry.register(update_plan_tool())
    model = ScriptedAdapter([call("update_plan", plan=FIRST), reply("ok")], name="anthropic")
    session = session_for(tmp_path, model, profile)
    ends = tool_ends(session)
    await session.submit("go")
    assert ends[0].metadata["plan"] == FIRST
    assert "- update_plan: Record your plan" in model.requests[0].messages[0].text
    await session.close()
