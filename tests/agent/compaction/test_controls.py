"""before_compact: a control cancels a compaction or writes its summary; PreCompact hooks map onto it."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from ra.agent import CancelCompaction, Control, StopReason, UseSummary
from ra.agent.compaction import CompactionConfig, CompactionPlan
from ra.agent.errors import ContextOverflowError
from ra.agent.events import EventKind as E
from ra.agent.history import CompactionTurn, UserTurn
from ra.agent.hooks import CommandHook, HookEvent, HookResult, PreCompactInput
from ra.llm.errors import ContextLengthError
from ra.llm.testing import Step
from ra.llm.types import Request

from ..support import FakeEnv, Recorder
from .helpers import agent, compact_session, is_summary_request

NO_CHEAP_PASS = CompactionConfig(clear_tool_outputs=False)


class Planner(Control):
    def __init__(self, answer: Any) -> None:
        self.plans: list[CompactionPlan] = []
        self.answer = answer

    async def before_compact(self, run: Any, plan: CompactionPlan) -> Any:
        self.plans.append(plan)
        return self.answer


async def test_a_control_cancels_the_compaction_and_the_loop_goes_on() -> None:
    session, model = compact_session(default=agent(20, size=400), compaction=NO_CHEAP_PASS)
    planner = session.controls.add(Planner(CancelCompaction("not now")))
    rec = Recorder(session)
    assert (await session.submit("go")).text == "done"
    assert planner.plans and planner.plans[0].trigger == "auto"
    assert not any(is_summary_request(r) for r in model.requests)
    assert not any(isinstance(t, CompactionTurn) for t in session.history)
    end = rec.of(E.COMPACTION_END)[0]
    assert end["cancelled"] is True and end["reason"] == "not now" and end["strategy"] == "none"


async def test_a_cancelled_compaction_after_an_overflow_ends_the_input_clearly() -> None:
    def answer(request: Request) -> Step | Exception:
        if len(request.messages) > 8:
            return ContextLengthError("too long", provider="scripted", status_code=400)
        return agent(20)(request)

    session, _ = compact_session(window=1_000_000, default=answer, compaction=NO_CHEAP_PASS)
    session.controls.add(Planner(CancelCompaction("the user keeps every word")))
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR and isinstance(result.error, ContextOverflowError)
    assert "cancelled: the user keeps every word" in str(result.error)


async def test_a_control_supplies_the_summary_and_no_model_writes_one() -> None:
    session, model = compact_session(default=agent(40, size=400), compaction=NO_CHEAP_PASS)
    planner = session.controls.add(Planner(UseSummary("HOST SUMMARY")))
    await session.submit("THE TASK")
    assert not any(is_summary_request(r) for r in model.requests)
    compaction = next(t for t in session.history if isinstance(t, CompactionTurn))
    assert compaction.summary == "HOST SUMMARY"
    plan = planner.plans[0]
    assert plan.first_kept == compaction.first_kept and plan.previous_summary is None
    assert isinstance(plan.turns[0], UserTurn) and plan.turns[0].content == "THE TASK"
    # The user's own messages are still kept verbatim after a supplied summary.
    after = model.requests[-1]
    assert "HOST SUMMARY" in after.messages[1].text and after.messages[2].text == "THE TASK"
    # A later plan names the previous summary.
    assert any(p.previous_summary == "HOST SUMMARY" for p in planner.plans[1:])


async def test_a_control_that_fails_or_answers_nonsense_has_no_say() -> None:
    class Broken(Control):
        async def before_compact(self, run: Any, plan: CompactionPlan) -> Any:
            raise RuntimeError("bug")

    session, _model = compact_session(default=agent(20, size=400), compaction=NO_CHEAP_PASS)
    session.controls.add(Broken())
    session.controls.add(Planner("yes please"))
    rec = Recorder(session)
    assert (await session.submit("go")).text == "done"
    assert any(isinstance(t, CompactionTurn) for t in session.history)  # compacted as if asked no one
    problems = [w for w in rec.of(E.WARNING) if w["code"] == "control_failed"]
    assert any("bug" in w["message"] for w in problems)
    assert any("answered str" in w["message"] for w in problems)
    try:
        UseSummary("  ")
    except ValueError as exc:
        assert "non-empty" in str(exc)
    else:
        raise AssertionError("an empty summary must be refused")


async def test_a_pre_compact_python_hook_sees_the_trigger_and_can_block() -> None:
    seen: list[PreCompactInput] = []

    def guard(event: PreCompactInput) -> dict[str, Any]:
        seen.append(event)
        return {"decision": "block", "reason": "auto compaction is off in this repo"}

    session, _model = compact_session(default=agent(20, size=400), compaction=NO_CHEAP_PASS)
    session.hooks.on(HookEvent.PRE_COMPACT, guard, matcher="auto")
    rec = Recorder(session)
    assert (await session.submit("go")).text == "done"
    assert seen and seen[0].trigger == "auto" and seen[0].custom_instructions is None
    assert not any(isinstance(t, CompactionTurn) for t in session.history)
    assert rec.of(E.COMPACTION_END)[0]["reason"] == "auto compaction is off in this repo"
    # A manual compaction does not match the "auto" matcher: it runs.
    turn = await session.compact("keep the API names")
    assert turn is not None and turn.trigger == "manual"
    assert all(e.trigger == "auto" for e in seen)


def hook_script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "precompact.sh"
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


class DirEnv(FakeEnv):
    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def working_directory(self) -> str:
        return str(self.root)


async def test_a_pre_compact_command_hook_exit_2_blocks_and_gets_claude_codes_input(tmp_path: Path) -> None:
    record = tmp_path / "input.json"
    script = hook_script(tmp_path, f'cat > {record}\necho "compaction blocked: checkpoint first" >&2\nexit 2\n')
    session, model = compact_session(
        default=agent(3, size=100), compaction=NO_CHEAP_PASS, window=1_000_000, env=DirEnv(tmp_path)
    )
    session.hooks.on(HookEvent.PRE_COMPACT, CommandHook(script), matcher="manual")
    await session.submit("go")
    assert await session.compact("keep the names of public functions") is None
    data = json.loads(record.read_text())
    assert data["hook_event_name"] == "PreCompact" and data["trigger"] == "manual"
    assert data["custom_instructions"] == "keep the names of public functions"
    assert data["cwd"] == str(tmp_path) and data["session_id"] == session.id
    assert not any(isinstance(t, CompactionTurn) for t in session.history)
    assert not any(is_summary_request(r) for r in model.requests)


async def test_a_pre_compact_command_hook_exit_0_or_1_lets_it_run(tmp_path: Path) -> None:
    for status in (0, 1):
        script = hook_script(tmp_path, f"cat > /dev/null\nexit {status}\n")
        session, _model = compact_session(
            default=agent(3, size=100), compaction=NO_CHEAP_PASS, window=1_000_000, env=DirEnv(tmp_path)
        )
        session.hooks.on(HookEvent.PRE_COMPACT, CommandHook(script))
        rec = Recorder(session)
        await session.submit("go")
        turn = await session.compact()
        assert turn is not None, status
        if status == 1:  # Claude Code's non-blocking error: reported, no say
            assert any(w["code"] == "hook_error" for w in rec.of(E.WARNING))


async def test_pre_compact_result_stop_also_cancels() -> None:
    session, _model = compact_session(default=agent(3, size=100), compaction=NO_CHEAP_PASS, window=1_000_000)
    session.hooks.on(HookEvent.PRE_COMPACT, lambda e: HookResult(stop=True, stop_reason="frozen"))
    await session.submit("go")
    assert await session.compact() is None
