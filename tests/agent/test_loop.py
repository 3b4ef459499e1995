"""The core loop (spec 9.1, 9.3, 9.7): completion, tool rounds, limits, inputs, follow-ups."""

from __future__ import annotations

import asyncio

import pytest

from ra.agent import (
    AssistantTurn,
    SessionBusyError,
    SessionClosedError,
    SessionConfig,
    SessionState,
    SteeringTurn,
    StopReason,
    ToolResultsTurn,
    UserTurn,
)
from ra.agent.events import EventKind as E
from ra.agent.loop import asks_question
from ra.llm.testing import Step, call, calls, reply
from ra.llm.types import ContentKind, Request, Role, ToolCall

from .support import FakeEnv, Recorder, make_session, user_texts


async def test_session_created_with_profile_and_env() -> None:
    env = FakeEnv()
    session, _ = make_session(env=env)
    assert session.state is SessionState.IDLE
    assert session.execution_env is env
    assert session.profile.model == "test-model"
    assert len(session.id) == 36  # a UUID


async def test_natural_completion_text_only() -> None:
    session, model = make_session([reply("All done.")])
    result = await session.submit("hello")
    assert result.text == "All done."
    assert result.stop_reason is StopReason.COMPLETED
    assert result.state is SessionState.IDLE and session.state is SessionState.IDLE
    assert result.steps == 1 and result.tool_calls == 0
    assert [type(t) for t in session.history] == [UserTurn, AssistantTurn]
    request = model.requests[0]
    assert request.messages[0].role == Role.SYSTEM
    assert "You are a test agent." in request.messages[0].text
    assert "/work/project" in request.messages[0].text  # environment block
    assert request.messages[1].text == "hello"
    assert request.model == "test-model" and request.provider == "scripted"
    assert request.tool_choice is not None and request.tool_choice.mode == "auto"
    assert [t.name for t in request.tools or []] == ["echo", "boom", "nap"]


async def test_tool_round_then_completion() -> None:
    session, model = make_session([call("echo", _id="c1", text="hi"), reply("Finished.")])
    result = await session.submit("do it")
    assert result.text == "Finished." and result.steps == 2 and result.tool_calls == 1
    kinds = [type(t) for t in session.history]
    assert kinds == [UserTurn, AssistantTurn, ToolResultsTurn, AssistantTurn]
    results = session.history[2]
    assert isinstance(results, ToolResultsTurn)
    assert results.results[0].content == "echo: hi" and results.results[0].tool_call_id == "c1"
    second = model.requests[1]
    tool_msgs = [m for m in second.messages if m.role == Role.TOOL]
    assert len(tool_msgs) == 1
    assert tool_msgs[0].content[0].tool_result is not None
    assert tool_msgs[0].content[0].tool_result.content == "echo: hi"
    assert tool_msgs[0].name == "echo"
    assistant = next(m for m in second.messages if m.role == Role.ASSISTANT)
    assert assistant.tool_calls[0].id == "c1"


async def test_multiple_sequential_inputs() -> None:
    session, model = make_session([reply("one"), call("echo", text="x"), reply("two")])
    first = await session.submit("first")
    second = await session.submit("second")
    assert (first.text, second.text) == ("one", "two")
    assert user_texts(model.requests[-1]) == ["first", "second"]
    assert len(session.history) == 6
    assert session.turn_count == 3


async def test_round_limit_stops_the_input() -> None:
    config = SessionConfig(max_tool_rounds_per_input=2)
    session, model = make_session(config=config, default=call("echo", text="again"))
    rec = Recorder(session)
    result = await session.submit("loop forever")
    assert result.stop_reason is StopReason.ROUND_LIMIT
    assert session.state is SessionState.IDLE
    assert len(model.requests) == 2
    limit = rec.of(E.TURN_LIMIT)
    assert len(limit) == 1 and limit[0].data["round"] == 2 and limit[0].data["scope"] == "input"
    # The limit is per input: the next input gets its own rounds.
    result = await session.submit("more")
    assert result.stop_reason is StopReason.ROUND_LIMIT
    assert len(model.requests) == 4


async def test_round_limit_zero_means_unlimited() -> None:
    config = SessionConfig(max_tool_rounds_per_input=0, enable_loop_detection=False)
    script = [call("echo", text=str(i)) for i in range(250)] + [reply("done")]
    session, model = make_session(script, config=config)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.COMPLETED
    assert len(model.requests) == 251


async def test_turn_limit_spans_inputs() -> None:
    config = SessionConfig(max_turns=3)
    session, model = make_session(
        [call("echo", text="a"), reply("first done")], config=config, default=call("echo", text="b")
    )
    rec = Recorder(session)
    first = await session.submit("one")
    assert first.stop_reason is StopReason.COMPLETED
    second = await session.submit("two")
    assert second.stop_reason is StopReason.TURN_LIMIT
    assert len(model.requests) == 3
    event = rec.of(E.TURN_LIMIT)[0]
    assert event.data["total_turns"] == 3 and event.data["scope"] == "session"
    # Still usable, but every further input stops at once.
    third = await session.submit("three")
    assert third.stop_reason is StopReason.TURN_LIMIT and third.steps == 0


async def test_reasoning_effort_passed_and_changed_mid_session() -> None:
    seen: list[str | None] = []
    answers = [call("bump"), call("echo", text="y"), reply("ok"), reply("again"), reply("more")]

    def answer(request: Request) -> Step:
        seen.append(request.reasoning_effort)
        return answers[len(seen) - 1]

    session, _ = make_session(config=SessionConfig(reasoning_effort="low"), default=answer)
    # A tool changes the setting mid-input: the very next model call must use it.
    session.profile.tool_registry.add(
        "bump", "raise effort", None, lambda args, ctx: setattr(ctx.config, "reasoning_effort", "high") or "raised"
    )
    await session.submit("go")
    assert seen == ["low", "high", "high"]
    session.config.reasoning_effort = None  # provider default
    await session.submit("again")
    session.config.reasoning_effort = "xhigh"  # provider-specific values pass through
    await session.submit("once more")
    assert seen[3:] == [None, "xhigh"]


async def test_follow_up_runs_after_the_input() -> None:
    session, model = make_session()

    def queue_follow_up(args: dict, ctx) -> str:
        ctx.session.follow_up("and then this")
        return "queued"

    session.profile.tool_registry.add("queue", "queue a follow-up", None, queue_follow_up)
    model.add(call("queue"), reply("first answer"), reply("second answer"))
    rec = Recorder(session)
    result = await session.submit("start")
    assert result.text == "second answer"
    assert result.inputs == 2 and result.steps == 3
    inputs = rec.of(E.USER_INPUT)
    assert [(e.data["content"], e.data["source"]) for e in inputs] == [
        ("start", "submit"),
        ("and then this", "follow_up"),
    ]
    assert len(rec.of(E.PROCESSING_END)) == 1
    assert user_texts(model.requests[-1]) == ["start", "and then this"]


async def test_follow_up_while_idle_runs_after_next_input() -> None:
    session, model = make_session([reply("a"), reply("b")])
    session.follow_up("later")
    assert session.pending_follow_ups == 1
    result = await session.submit("now")
    assert result.inputs == 2 and result.text == "b"
    assert user_texts(model.requests[0]) == ["now"]
    assert user_texts(model.requests[1]) == ["now", "later"]


async def test_second_submit_while_processing_is_refused() -> None:
    session, _ = make_session([reply("slow", delay=0.2)])
    first = asyncio.create_task(session.submit("one"))
    await asyncio.sleep(0.02)
    assert session.state is SessionState.PROCESSING
    with pytest.raises(SessionBusyError, match="already processing"):
        await session.submit("two")
    assert (await first).text == "slow"


async def test_concurrent_submits_one_wins() -> None:
    session, _ = make_session([reply("only", delay=0.05)])
    results = await asyncio.gather(session.submit("a"), session.submit("b"), return_exceptions=True)
    assert sum(isinstance(r, SessionBusyError) for r in results) == 1


async def test_submit_after_close_is_refused() -> None:
    session, _ = make_session([reply("x")])
    await session.close()
    with pytest.raises(SessionClosedError):
        await session.submit("hello")
    with pytest.raises(SessionClosedError):
        session.steer("hello")
    with pytest.raises(TypeError):
        await make_session()[0].submit(42)  # type: ignore[arg-type]


async def test_awaiting_input_when_the_answer_is_a_question() -> None:
    session, _ = make_session([reply("I found two configs. Which one should I use?"), reply("Done.")])
    rec = Recorder(session)
    result = await session.submit("fix the config")
    assert result.state is SessionState.AWAITING_INPUT
    assert session.state is SessionState.AWAITING_INPUT
    assert rec.of(E.PROCESSING_END)[0].data["state"] is SessionState.AWAITING_INPUT
    result = await session.submit("the first one")
    assert result.state is SessionState.IDLE


async def test_awaiting_input_rule_can_be_switched_off() -> None:
    session, _ = make_session([reply("Shall I go on?")], config=SessionConfig(detect_questions=False))
    assert (await session.submit("x")).state is SessionState.IDLE


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Should I continue?", True),
        ("Should I continue?**\n", True),
        ("Pick one: (a) or (b)?)", True),
        ("全部完成了吗\uff1f", True),
        ("Is it done? Yes, it is.", False),
        ("Done.", False),
        ("", False),
    ],
)
def test_question_rule(text: str, expected: bool) -> None:
    assert asks_question(text) is expected


async def test_empty_answer_adds_no_message() -> None:
    session, model = make_session([reply(""), reply("ok")])
    result = await session.submit("one")
    assert result.text == "" and result.stop_reason is StopReason.COMPLETED
    await session.submit("two")
    assert [m.role for m in model.requests[1].messages] == [Role.SYSTEM, Role.USER, Role.USER]


async def test_system_prompt_built_once_per_input() -> None:
    built: list[str | None] = []

    def prompt(env, docs) -> str:
        built.append(docs)
        return f"prompt #{len(built)}"

    session, model = make_session(
        [call("echo", text="a"), call("echo", text="b"), reply("x"), reply("y")], system_prompt=prompt
    )
    session.profile.project_docs = "# AGENTS.md\nbe nice"  # type: ignore[attr-defined]
    await session.submit("one")
    await session.submit("two")
    assert built == ["# AGENTS.md\nbe nice"] * 2
    assert [r.messages[0].text for r in model.requests] == ["prompt #1"] * 3 + ["prompt #2"]


async def test_thinking_round_trips_verbatim() -> None:
    session, model = make_session(
        [
            Step(
                tool_calls=[ToolCall("c1", "echo", {"text": "x"})],
                reasoning="let me think",
                reasoning_signature="sig==",
            ),
            reply("ok"),
        ]
    )
    await session.submit("go")
    assistant = next(m for m in model.requests[1].messages if m.role == Role.ASSISTANT)
    thinking = next(p for p in assistant.content if p.kind == ContentKind.THINKING)
    assert thinking.thinking is not None and thinking.thinking.signature == "sig=="
    turn = session.history[1]
    assert isinstance(turn, AssistantTurn) and turn.reasoning == "let me think"


async def test_steering_turn_is_a_user_message() -> None:
    session, model = make_session([reply("a")])
    session.steer("be brief")
    await session.submit("task")
    assert isinstance(session.history[1], SteeringTurn)
    assert user_texts(model.requests[0]) == ["task", "be brief"]


async def test_tool_calls_of_several_kinds_in_one_response() -> None:
    session, model = make_session([calls(("echo", {"text": "1"}), ("echo", {"text": "2"})), reply("ok")])
    await session.submit("go")
    tool_msgs = [m for m in model.requests[1].messages if m.role == Role.TOOL]
    assert [m.content[0].tool_result.content for m in tool_msgs] == ["echo: 1", "echo: 2"]  # type: ignore[union-attr]
