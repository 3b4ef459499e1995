"""The decision seam (ra.agent.controls): points, order, decisions, failures, and the limits on it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ra.agent import SessionConfig, SessionState, StopReason
from ra.agent.controls import Admit, Allow, Continue, Control, Deny, Stop
from ra.agent.events import EventKind as E
from ra.llm.testing import Step, call, calls, reply

from .support import Recorder, make_session


class Log(Control):
    """Records every point it is asked at."""

    def __init__(self, log: list[str], name: str = "log") -> None:
        self.log = log
        self.name = name

    async def session_start(self, run):  # type: ignore[no-untyped-def]
        self.log.append("session_start")

    async def input_start(self, run, text):  # type: ignore[no-untyped-def]
        self.log.append(f"input_start {text}")

    async def before_step(self, run):  # type: ignore[no-untyped-def]
        self.log.append("before_step")

    async def after_model(self, run, response):  # type: ignore[no-untyped-def]
        self.log.append(f"after_model {len(response.tool_calls)}")

    async def before_tool(self, run, call, tool):  # type: ignore[no-untyped-def]
        self.log.append(f"before_tool {call.name}")

    async def after_tool(self, run, outcome, tool):  # type: ignore[no-untyped-def]
        self.log.append(f"after_tool {outcome.call.name}")

    async def after_step(self, run, response, outcomes):  # type: ignore[no-untyped-def]
        self.log.append(f"after_step {len(outcomes)}")

    async def on_stop(self, run, answer):  # type: ignore[no-untyped-def]
        self.log.append(f"on_stop {answer}")

    async def input_end(self, run, reason):  # type: ignore[no-untyped-def]
        self.log.append(f"input_end {reason}")

    async def session_end(self, run, reason):  # type: ignore[no-untyped-def]
        self.log.append(f"session_end {reason}")


async def test_every_point_is_asked_in_loop_order() -> None:
    log: list[str] = []
    session, _ = make_session([call("echo", text="x"), reply("done")])
    session.controls.add(Log(log))
    await session.submit("go")
    await session.close()
    assert log == [
        "session_start",
        "input_start go",
        "before_step",
        "after_model 1",
        "before_tool echo",
        "after_tool echo",
        "after_step 1",
        "before_step",
        "after_model 0",
        "after_step 0",
        "on_stop done",
        "input_end completed",
        "session_end closed",
    ]


async def test_controls_run_in_order_and_the_first_deny_wins() -> None:
    seen: list[str] = []

    class Named(Control):
        def __init__(self, name: str, decision: Any) -> None:
            self.name, self.decision = name, decision

        async def before_tool(self, run, call, tool):  # type: ignore[no-untyped-def]
            seen.append(self.name)
            return self.decision

    session, model = make_session([call("echo", text="x"), reply("ok")])
    for control in (Named("a", None), Named("b", Deny("b says no")), Named("c", Deny("c says no"))):
        session.controls.add(control)
    rec = Recorder(session)
    await session.submit("go")
    assert seen == ["a", "b"]
    end = rec.of(E.TOOL_CALL_END)[0]
    assert end["output"] == "b says no" and end["is_error"] and end["denied"]
    tool_message = next(m for m in model.requests[1].messages if m.role == "tool")
    assert tool_message.content[0].tool_result.content == "b says no"  # type: ignore[union-attr]


async def test_allow_with_arguments_rewrites_the_call_and_is_revalidated() -> None:
    class Rewrite(Control):
        def __init__(self, arguments: dict[str, Any]) -> None:
            self.arguments = arguments

        async def before_tool(self, run, call, tool):  # type: ignore[no-untyped-def]
            return Allow(self.arguments)

    session, model = make_session([calls(("echo", {"text": "model"})), reply("ok")])
    session.controls.add(Rewrite({"text": "rewritten"}))
    await session.submit("go")
    assert next(m for m in model.requests[1].messages if m.role == "tool").content[0].tool_result.content == (
        "echo: rewritten"  # type: ignore[union-attr]
    )
    session2, model2 = make_session([calls(("echo", {"text": "model"})), reply("ok")])
    session2.controls.add(Rewrite({"wrong": 1}))
    await session2.submit("go")
    result = next(m for m in model2.requests[1].messages if m.role == "tool").content[0].tool_result  # type: ignore[union-attr]
    assert result.is_error and "The rewritten arguments are not valid" in result.content


async def test_a_failing_before_tool_check_denies_and_other_failures_warn() -> None:
    class Broken(Control):
        async def before_tool(self, run, call, tool):  # type: ignore[no-untyped-def]
            raise RuntimeError("policy server down")

        async def after_step(self, run, response, outcomes):  # type: ignore[no-untyped-def]
            raise ValueError("metrics sink down")

    session, _ = make_session([call("echo", text="x"), reply("ok")])
    session.controls.add(Broken())
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.COMPLETED
    end = rec.of(E.TOOL_CALL_END)[0]
    assert end["is_error"] and "the check before echo failed (policy server down)" in end["output"]
    warnings = [w for w in rec.of(E.WARNING) if w["code"] == "control_failed"]
    assert warnings and warnings[0]["point"] == "after_step" and "metrics sink down" in warnings[0]["message"]


async def test_before_step_stop_ends_the_input_with_its_reason() -> None:
    class StopAfterTwo(Control):
        async def before_step(self, run):  # type: ignore[no-untyped-def]
            return Stop(StopReason.TURN_LIMIT, "two is enough") if run.input_steps >= 2 else None

    session, model = make_session(default=call("echo", text="x"), config=SessionConfig(enable_loop_detection=False))
    session.controls.add(StopAfterTwo())
    result = await session.submit("go")
    assert result.stop_reason is StopReason.TURN_LIMIT and len(model.requests) == 2
    assert session.state is SessionState.IDLE


async def test_after_model_stop_answers_the_calls_without_running_them() -> None:
    ran: list[str] = []

    class Guard(Control):
        async def after_model(self, run, response):  # type: ignore[no-untyped-def]
            return Stop(StopReason.INTERRUPTED, "operator said stop") if response.tool_calls else None

    session, _ = make_session([calls(("echo", {"text": "1"}), ("echo", {"text": "2"})), reply("never")])
    session.controls.add(Guard())
    session.profile.tool_registry.add("echo", "", None, lambda args, ctx: ran.append("x") or "ran")
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.INTERRUPTED and ran == []
    ends = rec.of(E.TOOL_CALL_END)
    assert [e.get("skipped") for e in ends] == [True, True]
    assert "(operator said stop)" in ends[0]["output"]


async def test_a_stop_control_can_make_the_model_continue() -> None:
    class NotYet(Control):
        async def on_stop(self, run, answer):  # type: ignore[no-untyped-def]
            return Continue("Also write the changelog.") if "changelog" not in answer else None

    session, model = make_session([reply("code done"), reply("changelog done")])
    session.controls.add(NotYet())
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.text == "changelog done" and len(model.requests) == 2
    assert model.requests[1].messages[-1].text == "Also write the changelog."
    assert rec.of(E.STEERING_INJECTED)[0]["content"] == "Also write the changelog."


async def test_input_start_admit_adds_context_after_the_prompt_in_control_order() -> None:
    class Adds(Control):
        def __init__(self, note: str) -> None:
            self.note = note

        async def input_start(self, run, text):  # type: ignore[no-untyped-def]
            return Admit(f"{self.note} for {text}", source="mine")

    session, model = make_session([reply("ok")])
    session.controls.add(Adds("first"))
    session.controls.add(Adds("second"))
    await session.submit("go")
    texts = [m.text for m in model.requests[0].messages if m.role.value == "user"]
    assert texts == ["go", "first for go", "second for go"]
    added = [t for t in session.history if type(t).__name__ == "ContextTurn"]
    assert [t.source for t in added] == ["mine", "mine"]


async def test_context_admitted_for_a_refused_input_is_never_recorded() -> None:
    """A control that admits with context, then a later one that refuses: neither the prompt nor
    the context reaches the history (nor, later, the model)."""

    class Adds(Control):
        async def input_start(self, run, text):  # type: ignore[no-untyped-def]
            return Admit("secret context")

    class Refuses(Control):
        async def input_start(self, run, text):  # type: ignore[no-untyped-def]
            return Stop(StopReason.INTERRUPTED, "no") if text == "bad" else None

    session, model = make_session([reply("ok")])
    session.controls.add(Adds())
    session.controls.add(Refuses())
    result = await session.submit("bad")
    assert result.stop_reason is StopReason.INTERRUPTED and len(session.history) == 0
    await session.submit("good")
    texts = [m.text for m in model.requests[0].messages if m.role.value == "user"]
    assert texts == ["good", "secret context"]


def test_an_object_with_no_control_point_is_refused() -> None:
    session, _ = make_session([])
    with pytest.raises(TypeError, match="implements none of the control points"):
        session.controls.add(object())


async def test_parallel_round_checks_run_one_at_a_time_then_calls_run_together() -> None:
    active = 0
    peak_checks = 0
    events: list[str] = []

    class SlowCheck(Control):
        async def before_tool(self, run, call, tool):  # type: ignore[no-untyped-def]
            nonlocal active, peak_checks
            active += 1
            peak_checks = max(peak_checks, active)
            await asyncio.sleep(0.01)
            active -= 1
            events.append(f"check {call.arguments['name']}")

    async def timed(args: dict[str, Any], ctx: Any) -> str:
        events.append(f"start {args['name']}")
        await asyncio.sleep(0.02)
        return args["name"]

    session, _ = make_session(
        [calls(("timed", {"name": "a"}), ("timed", {"name": "b"}), ("timed", {"name": "c"})), reply("ok")],
        parallel=True,
    )
    session.profile.tool_registry.add("timed", "", None, timed)
    session.controls.add(SlowCheck())
    await session.submit("go")
    assert peak_checks == 1
    assert events == ["check a", "check b", "check c", "start a", "start b", "start c"]


async def test_time_limit_is_a_session_setting() -> None:
    session, model = make_session(default=Step(text="slow", delay=5.0), config=SessionConfig(time_limit_s=0.1))
    rec = Recorder(session)
    result = await asyncio.wait_for(session.submit("go"), 3)
    assert result.stop_reason is StopReason.TIME_LIMIT and session.state is SessionState.IDLE
    limit = rec.of(E.TURN_LIMIT)[0]
    assert limit["scope"] == "time" and limit["limit"] == 0.1
    # The timer was for that input only: a quick next input is not cut short.
    model.default = reply("quick")
    assert (await session.submit("again")).text == "quick"


async def test_max_turns_per_input_rearms_for_every_input() -> None:
    session, model = make_session(
        default=call("echo", text="x"), config=SessionConfig(max_turns_per_input=2, enable_loop_detection=False)
    )
    rec = Recorder(session)
    first = await session.submit("one")
    second = await session.submit("two")
    assert first.stop_reason is StopReason.TURN_LIMIT and second.stop_reason is StopReason.TURN_LIMIT
    assert len(model.requests) == 4
    assert [e["scope"] for e in rec.of(E.TURN_LIMIT)] == ["turns_per_input", "turns_per_input"]


async def test_inherited_controls_reach_subagents() -> None:
    from ra.agent.subagents import SubAgentManager

    asked: list[str] = []

    class Audit(Control):
        inherit = True

        async def before_tool(self, run, call, tool):  # type: ignore[no-untyped-def]
            asked.append(f"{run.agent_id or 'parent'}:{call.name}")

    session, model = make_session([])
    session.controls.add(Audit())
    model.script.extend([call("echo", text="child"), reply("child done")])
    handle = SubAgentManager(session).spawn("do it")
    await handle.wait()
    assert asked == [f"{handle.id}:echo"]
    await session.close()


async def test_a_subagent_has_the_built_in_controls_once_and_the_inherited_ones_after() -> None:
    from ra.agent.hooks import Hooks
    from ra.agent.session import builtin_controls
    from ra.agent.subagents import SubAgentManager

    class Audit(Control):
        inherit = True

        async def before_tool(self, run, call, tool):  # type: ignore[no-untyped-def]
            return None

    session, model = make_session([])
    session.controls.add(Audit())
    model.script.extend([reply("child done")])
    handle = SubAgentManager(session).spawn("do it")
    await handle.wait()
    built_in = [type(c) for c in builtin_controls(Hooks(), None)]
    child = [type(c) for c in handle.session.controls]
    assert child[: len(built_in)] == built_in and child[-1] is Audit
    assert all(child.count(t) == 1 for t in built_in)
    await session.close()


@pytest.mark.parametrize("point", ["input_start", "before_step", "after_model"])
async def test_a_controls_stop_with_aborted_closes_the_session(point: str) -> None:
    """Stop(ABORTED) from a control ends like abort(): the session closes and says so (it stayed
    PROCESSING, so every later submit() raised SessionBusyError)."""

    class Abort(Control):
        pass

    async def stop(self, *args: Any) -> Stop:  # type: ignore[no-untyped-def]
        return Stop(StopReason.ABORTED, "operator pulled the plug")

    setattr(Abort, point, stop)
    session, _ = make_session([call("echo", text="x"), reply("done")])
    session.controls.add(Abort())
    kinds: list[Any] = []
    session.add_listener(lambda event: kinds.append(event.kind))
    result = await asyncio.wait_for(session.submit("go"), 5)
    await asyncio.wait_for(session.wait_closed(), 5)
    assert result.stop_reason is StopReason.ABORTED
    assert session.state is SessionState.CLOSED
    assert kinds[-1] is E.SESSION_END
