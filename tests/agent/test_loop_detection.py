"""Loop detection (spec 2.10, 9.1): the pattern check and its effect on the session."""

from __future__ import annotations

import pytest

from ra.agent import SessionConfig, SteeringTurn
from ra.agent.events import EventKind as E
from ra.agent.loop_detection import LoopDetector, detect_loop, tool_call_signature
from ra.llm.testing import call, reply
from ra.llm.types import ToolCall, ToolCallData

from .support import Recorder, make_session


@pytest.mark.parametrize(
    ("sequence", "window", "expected"),
    [
        ("aaaaaaaaaa", 10, True),  # pattern of 1
        ("ababababab", 10, True),  # pattern of 2
        ("abcabcabc", 9, True),  # pattern of 3
        # 3 does not divide 10: the 3-cycle is checked over the last 9 calls (the spec's letter
        # skipped it, so an a-b-c loop was never seen at the default window).
        ("abcabcabca", 10, True),
        ("xabcabcabc", 10, True),
        ("abcabcabcd", 10, False),
        ("abcabcabdc", 10, False),
        ("ababababa", 9, True),  # 2 over the last 8
        ("abcab", 5, False),  # 3 over 3 calls would be a single occurrence, not a repetition
        ("abcabc", 6, True),
        ("aaaaaaaaab", 10, False),
        ("aaaaaaaaa", 10, False),  # fewer calls than the window
        ("xyaaaaaaaaaa", 10, True),  # only the last window counts
        ("abcdabcdabcd", 12, False),  # patterns longer than 3 are not loops
    ],
)
def test_detect_loop(sequence: str, window: int, expected: bool) -> None:
    assert detect_loop(list(sequence), window) is expected


def test_signature_canonical_and_distinct() -> None:
    a = tool_call_signature(ToolCall("1", "read_file", {"path": "a", "limit": 5}))
    b = tool_call_signature(ToolCall("2", "read_file", {"limit": 5, "path": "a"}))
    c = tool_call_signature(ToolCall("3", "read_file", {"path": "b", "limit": 5}))
    d = tool_call_signature(ToolCall("4", "grep", {"path": "a", "limit": 5}))
    raw = tool_call_signature(ToolCall.from_data(ToolCallData("5", "read_file", "{oops")))
    assert a == b and len({a, c, d, raw}) == 4
    assert a.startswith("read_file:")


def test_detector_clears_after_a_hit() -> None:
    detector = LoopDetector(3)
    same = ToolCall("1", "ls", {})
    for _ in range(3):
        detector.record(same, 3)
    assert detector.check(3) is True
    detector.record(same, 3)
    assert detector.check(3) is False  # needs another full window


async def test_loop_warning_injected_as_steering() -> None:
    session, model = make_session(
        [call("echo", text="same") for _ in range(10)] + [reply("ok, changing approach")],
    )
    rec = Recorder(session)
    await session.submit("go")
    events = rec.of(E.LOOP_DETECTION)
    assert len(events) == 1
    message = events[0]["message"]
    assert message.startswith("Loop detected: the last 10 tool calls follow a repeating pattern")
    steering = [t for t in session.history if isinstance(t, SteeringTurn)]
    assert [t.content for t in steering] == [message]
    assert model.requests[-1].messages[-1].role == "user"
    assert model.requests[-1].messages[-1].text == message


async def test_alternating_pattern_detected_with_small_window() -> None:
    config = SessionConfig(loop_detection_window=4)
    session, _ = make_session([call("echo", text="a"), call("echo", text="b")] * 2 + [reply("ok")], config=config)
    rec = Recorder(session)
    await session.submit("go")
    assert len(rec.of(E.LOOP_DETECTION)) == 1


async def test_three_call_cycle_detected_at_the_default_window() -> None:
    cycle = [call("echo", text="a"), call("echo", text="b"), call("echo", text="c")]
    session, _ = make_session(cycle * 3 + [call("echo", text="a"), reply("ok")])
    assert session.config.loop_detection_window == 10
    rec = Recorder(session)
    await session.submit("go")
    assert len(rec.of(E.LOOP_DETECTION)) == 1


async def test_loop_detection_can_be_disabled() -> None:
    config = SessionConfig(enable_loop_detection=False)
    session, _ = make_session([call("echo", text="same") for _ in range(12)] + [reply("ok")], config=config)
    rec = Recorder(session)
    await session.submit("go")
    assert rec.of(E.LOOP_DETECTION) == []
    assert not any(isinstance(t, SteeringTurn) for t in session.history)


async def test_varied_calls_are_not_a_loop() -> None:
    session, _ = make_session([call("echo", text=str(i)) for i in range(12)] + [reply("ok")])
    rec = Recorder(session)
    await session.submit("go")
    assert rec.of(E.LOOP_DETECTION) == []
