"""Context-window awareness (spec 5.5) and the prune strategy (ra-spec)."""

from __future__ import annotations

from ra.agent.context import ContextMonitor, prune_messages
from ra.agent.events import EventKind as E
from ra.llm.testing import Step, call, reply
from ra.llm.types import ContentKind, ContentPart, Message, Role, ToolCallData, Usage

from .support import Recorder, make_session


def assistant_call(call_id: str, size: int = 100) -> Message:
    return Message.assistant(
        [ContentPart(ContentKind.TOOL_CALL, tool_call=ToolCallData(call_id, "t", {"x": "y" * size}))]
    )


def tool(call_id: str, size: int = 100) -> Message:
    return Message.tool_result(call_id, "r" * size)


def test_prune_keeps_system_first_user_and_pairs() -> None:
    messages = [Message.system("sys"), Message.user("task")]
    for i in range(6):
        messages += [assistant_call(f"c{i}"), tool(f"c{i}")]
    result = prune_messages(messages)
    assert result is not None
    kept = result.messages
    assert kept[0].text == "sys" and kept[1].text == "task"
    assert kept[2].role == Role.ASSISTANT  # never starts with an orphaned tool result
    ids = [m.tool_call_id for m in kept if m.role == Role.TOOL]
    calls = [m.content[0].tool_call.id for m in kept if m.role == Role.ASSISTANT]  # type: ignore[union-attr]
    assert ids == calls == ["c3", "c4", "c5"]
    assert result.dropped_messages == 6 and len(kept) + 6 == len(messages)


def test_prune_resumes_at_a_user_boundary() -> None:
    messages = [Message.system("sys"), Message.user("task")]
    messages += [assistant_call("a"), tool("a"), assistant_call("b"), tool("b")]
    messages += [Message.user("second input"), assistant_call("c", 10), tool("c", 10), Message.assistant("done")]
    result = prune_messages(messages)
    assert result is not None
    assert [m.text for m in result.messages[:3]] == ["sys", "task", "second input"]


def test_prune_keeps_system_messages_anywhere_and_the_last_unit() -> None:
    messages = [Message.system("sys"), Message.user("task"), assistant_call("a", 5000), tool("a", 5000)]
    messages += [Message.system("mid-conversation note"), assistant_call("b", 10), tool("b", 10)]
    result = prune_messages(messages)
    assert result is not None
    texts = [m.text for m in result.messages if m.role == Role.SYSTEM]
    assert texts == ["sys", "mid-conversation note"]
    assert result.messages[-1].tool_call_id == "b"


def test_prune_gives_up_when_nothing_can_go() -> None:
    assert prune_messages([Message.system("s"), Message.user("task"), assistant_call("a"), tool("a")]) is None
    assert prune_messages([Message.system("s")]) is None


def test_monitor_estimates_and_warns_once() -> None:
    monitor = ContextMonitor()
    assert monitor.estimate(4000) == 1000
    assert monitor.check(4000, 2000, 0.8) is None  # 50%
    tokens, fraction = monitor.check(7000, 2000, 0.8)  # type: ignore[misc]
    assert tokens == 1750 and fraction > 0.8
    assert monitor.check(7200, 2000, 0.8) is None  # already warned
    assert monitor.check(100, 2000, 0.8) is None  # back under: re-armed
    assert monitor.check(7000, 2000, 0.8) is not None
    # The provider's count wins once known: 1500 tokens at 1000 chars, plus 400 chars -> +100.
    monitor.record_usage(Usage(input_tokens=1400, output_tokens=100), 1000)
    assert monitor.estimate(1400) == 1600
    assert monitor.check(1400, 0, 0.8) is None  # no window size: nothing to compare with


async def test_context_warning_event() -> None:
    usage = Usage(input_tokens=10, output_tokens=1)
    session, _ = make_session(
        [Step(tool_calls=call("echo", text="x" * 4000).tool_calls, usage=usage), reply("ok", usage=usage)],
        context_window=1000,
        system_prompt="s",
    )
    rec = Recorder(session)
    await session.submit("small")
    warnings = rec.of(E.WARNING)
    assert len(warnings) == 1
    data = warnings[0].data
    assert data["code"] == "context_usage" and data["context_window_size"] == 1000
    assert data["message"].startswith("Context usage at ~") and data["message"].endswith("% of context window")
    assert data["estimated_tokens"] > 800
    kinds = rec.kinds()
    # The warning comes before the model call that would carry the big context.
    assert kinds.index(E.WARNING) < [i for i, k in enumerate(kinds) if k is E.ASSISTANT_TEXT_END][-1]


def test_prune_moves_the_cut_forward_to_the_next_user_message() -> None:
    """Half the context is gone after the first (large) unit; the cut still moves on to the next
    user message so that the model resumes at an input, not in the middle of a tool exchange."""
    messages = [Message.system("sys"), Message.user("task")]
    messages += [assistant_call("a", 10_000), tool("a", 10_000), assistant_call("b", 50), tool("b", 50)]
    messages += [Message.user("second input"), assistant_call("c", 50), tool("c", 50), Message.assistant("done")]
    result = prune_messages(messages)
    assert result is not None
    assert [m.text for m in result.messages[:3]] == ["sys", "task", "second input"]
    assert result.dropped_messages == 4


def test_prune_without_a_later_user_message_cuts_at_half() -> None:
    messages = [Message.system("sys"), Message.user("task")]
    messages += [assistant_call("a", 10_000), tool("a", 10_000), assistant_call("b", 50), tool("b", 50)]
    messages += [assistant_call("c", 50), tool("c", 50)]
    result = prune_messages(messages)
    assert result is not None
    assert [m.tool_call_id for m in result.messages if m.role == Role.TOOL] == ["b", "c"]


async def _warnings_at(threshold: float | None) -> list:
    """One tool round that brings the estimate to ~61% of a 1,000-token window."""
    usage = Usage(input_tokens=10, output_tokens=1)
    session, _ = make_session(
        [Step(tool_calls=call("echo", text="x" * 2400).tool_calls, usage=usage), reply("ok", usage=usage)],
        context_window=1000,
        system_prompt="s",
    )
    if threshold is not None:
        session.config.context_warning_threshold = threshold
    rec = Recorder(session)
    await session.submit("small")
    return [e for e in rec.of(E.WARNING) if e["code"] == "context_usage"]


async def test_context_warning_threshold_is_the_configured_one() -> None:
    assert len(await _warnings_at(0.5)) == 1
    assert await _warnings_at(0.7) == []
    assert await _warnings_at(None) == []  # the default, 0.8
    warning = (await _warnings_at(0.6))[0]
    assert 600 < warning["estimated_tokens"] < 700
