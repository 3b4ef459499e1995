"""Edges of the governance code that a mutation of it would cross unnoticed by the other tests:
a limit of 0 (no limit) and of 1 (exactly one), a fallback to a model of another provider,
arguments rewritten by one control reaching the next, and a control that raises being reported
and skipped while the rest of the chain still decides. Each test names the mutation it kills."""

from __future__ import annotations

from typing import Any

import pytest

from ra.agent import GenericProfile, Session, SessionConfig, StopReason
from ra.agent.controls import Allow, Continue, Control, Stop
from ra.agent.events import EventKind as E
from ra.llm.client import Client
from ra.llm.errors import ServerError
from ra.llm.pricing import ModelPrice
from ra.llm.retrying import RetryPolicy
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.tools.pipeline import ToolCallOutcome

from .support import FakeEnv, Recorder, default_tools, make_session

NO_RETRY = RetryPolicy(max_retries=0)


def _four_rounds_then_done() -> list[Any]:
    return [call("echo", text=str(i)) for i in range(4)] + [reply("done")]


# -- limits ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["max_tool_rounds_per_input", "max_turns", "max_turns_per_input"])
async def test_a_limit_of_zero_is_no_limit(field: str) -> None:
    """Kills ``limit > 0`` -> ``limit >= 0`` (a 0 would stop the input before its first call)."""
    config = SessionConfig(enable_loop_detection=False, **{field: 0})
    session, model = make_session(_four_rounds_then_done(), config=config)
    result = await session.submit("go")
    assert (result.stop_reason, result.text) == (StopReason.COMPLETED, "done")
    assert len(model.requests) == 5


@pytest.mark.parametrize(
    ("field", "reason", "scope"),
    [
        ("max_tool_rounds_per_input", StopReason.ROUND_LIMIT, "input"),
        ("max_turns", StopReason.TURN_LIMIT, "session"),
        ("max_turns_per_input", StopReason.TURN_LIMIT, "turns_per_input"),
    ],
)
async def test_a_limit_of_one_allows_exactly_one(field: str, reason: StopReason, scope: str) -> None:
    """Kills ``>=`` -> ``>`` in the comparisons (a limit of 1 would allow two calls)."""
    config = SessionConfig(enable_loop_detection=False, **{field: 1})
    session, model = make_session(_four_rounds_then_done(), config=config)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is reason
    assert len(model.requests) == 1
    (limit,) = rec.of(E.TURN_LIMIT)
    assert (limit["scope"], limit["limit"]) == (scope, 1)


# -- fallback to another provider -------------------------------------------------------------------------------


async def test_a_fallback_to_another_provider_reaches_that_provider() -> None:
    """Kills dropping the provider of a ``(provider, model)`` entry: the call would go to the
    primary's provider under the fallback's name."""
    primary = ScriptedAdapter([ServerError("overloaded", provider="scripted", status_code=529)])
    other = ScriptedAdapter([reply("from the other provider")], name="other")
    client = Client(providers={"scripted": primary, "other": other})
    profile = GenericProfile("scripted", "test-model", default_tools(), system_prompt="You are a test agent.")
    config = SessionConfig(retry_policy=NO_RETRY, fallback_models=(("other", "backup-model"),))
    config.prices["test-model"] = config.prices["backup-model"] = ModelPrice.free()
    session = Session(profile, FakeEnv(), client, config)
    rec = Recorder(session)

    result = await session.submit("go")

    assert result.text == "from the other provider"
    assert [r.model for r in primary.requests] == ["test-model"]
    assert [(r.provider, r.model) for r in other.requests] == [("other", "backup-model")]
    (warning,) = [w for w in rec.of(E.WARNING) if w["code"] == "fallback_model"]
    assert (warning["fallback_provider"], warning["fallback_model"]) == ("other", "backup-model")
    assert [u["model"] for u in rec.of(E.USAGE)] == ["backup-model"]


# -- the control chain --------------------------------------------------------------------------------------------


class Rewrite(Control):
    """Appends ``suffix`` to the text it is shown, and records what it was shown."""

    def __init__(self, suffix: str | None, seen: list[str]) -> None:
        self.suffix = suffix
        self.seen = seen

    async def before_tool(self, run, call, tool):  # type: ignore[no-untyped-def]
        self.seen.append(call.arguments["text"])
        if self.suffix is None:
            return Allow()  # allowed, arguments unchanged: must not undo an earlier rewrite
        return Allow({"text": call.arguments["text"] + self.suffix})


async def test_rewritten_arguments_are_passed_down_the_chain() -> None:
    """Kills not handing the rewritten call to the next control, and a later ``Allow()`` (or the
    last rewrite alone) replacing an earlier rewrite."""
    seen: list[str] = []
    session, model = make_session([call("echo", text="model"), reply("ok")])
    for suffix in ("+a", None, "+b", None):
        session.controls.add(Rewrite(suffix, seen))
    await session.submit("go")
    assert seen == ["model", "model+a", "model+a", "model+a+b"]
    tool_turn = next(m for m in model.requests[1].messages if m.role == "tool")
    assert tool_turn.content[0].tool_result.content == "echo: model+a+b"  # type: ignore[union-attr]


class Raises(Control):
    async def before_step(self, run):  # type: ignore[no-untyped-def]
        raise RuntimeError("limits service down")

    async def after_tool(self, run, outcome, tool):  # type: ignore[no-untyped-def]
        raise RuntimeError("audit sink down")

    async def on_stop(self, run, answer):  # type: ignore[no-untyped-def]
        raise RuntimeError("reviewer down")


class Decides(Control):
    """Asked after :class:`Raises`: its decisions must still take effect."""

    def __init__(self) -> None:
        self.continued = False

    async def after_tool(self, run, outcome, tool):  # type: ignore[no-untyped-def]
        return ToolCallOutcome(outcome.call, "replaced by the second control", "replaced by the second control")

    async def on_stop(self, run, answer):  # type: ignore[no-untyped-def]
        if not self.continued:
            self.continued = True
            return Continue("one more step")
        return None

    async def before_step(self, run):  # type: ignore[no-untyped-def]
        return Stop(StopReason.TURN_LIMIT, "third step refused") if run.input_steps >= 2 else None


async def test_a_control_that_raises_is_warned_about_and_the_next_one_still_decides() -> None:
    """Kills dropping the warning, and stopping the chain (or reusing a stale decision) when a
    control raises: each point's second control decides as if the first had no opinion."""
    session, model = make_session([call("echo", text="x"), reply("first answer"), reply("never")])
    second = Decides()
    session.controls.add(Raises())
    session.controls.add(second)
    rec = Recorder(session)

    result = await session.submit("go")

    assert result.stop_reason is StopReason.TURN_LIMIT  # before_step: the second control's Stop
    assert second.continued  # on_stop: the second control was asked after the first raised
    tool_turn = next(m for m in model.requests[1].messages if m.role == "tool")
    assert tool_turn.content[0].tool_result.content == "replaced by the second control"  # type: ignore[union-attr]
    assert len(model.requests) == 2  # the third step (after the Continue) was refused
    warnings = [(w["control"], w["point"]) for w in rec.of(E.WARNING) if w["code"] == "control_failed"]
    assert ("Raises", "before_step") in warnings
    assert ("Raises", "after_tool") in warnings
    assert ("Raises", "on_stop") in warnings
