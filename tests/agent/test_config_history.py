"""SessionConfig (spec 2.2) and History (spec 2.4): defaults, validation, incremental messages."""

from __future__ import annotations

import pytest

from ra.agent import (
    AssistantTurn,
    GenericProfile,
    History,
    ProviderProfile,
    SessionConfig,
    SteeringTurn,
    SystemTurn,
    ToolResultsTurn,
    UserTurn,
)
from ra.llm.types import Role, ToolCall, ToolResult


def test_spec_defaults() -> None:
    c = SessionConfig()
    assert c.max_turns == 0
    assert c.max_tool_rounds_per_input == 200
    assert c.default_command_timeout_ms == 10_000
    assert c.max_command_timeout_ms == 600_000
    assert c.reasoning_effort is None
    assert c.tool_output_limits == {} and c.tool_line_limits == {}
    assert c.enable_loop_detection is True and c.loop_detection_window == 10
    assert c.max_subagent_depth == 1
    assert c.context_overflow == "warn" and c.context_warning_threshold == 0.8
    assert c.steering_mode == "after_round" and c.max_tool_calls_per_step is None


def test_compact_is_a_mode_with_its_own_settings() -> None:
    from ra.agent.compaction import CompactionConfig

    config = SessionConfig(context_overflow="compact")
    assert config.context_overflow == "compact" and isinstance(config.compaction, CompactionConfig)
    with pytest.raises(TypeError, match="compaction must be a CompactionConfig"):
        SessionConfig(compaction={"reserve_tokens": 10})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"context_overflow": "shrink"}, "context_overflow"),
        ({"steering_mode": "sometimes"}, "steering_mode"),
        ({"max_turns": -1}, "max_turns"),
        ({"max_tool_rounds_per_input": -5}, "max_tool_rounds_per_input"),
        ({"loop_detection_window": 0}, "loop_detection_window"),
        ({"context_warning_threshold": 1.5}, "context_warning_threshold"),
        ({"max_tool_calls_per_step": 0}, "max_tool_calls_per_step"),
        ({"default_command_timeout_ms": 700_000}, "default_command_timeout_ms"),
        ({"tool_output_limits": {"shell": -1}}, "tool_output_limits"),
        ({"tool_line_limits": {"shell": "many"}}, "tool_line_limits"),
        ({"event_backlog_limit": 0}, "event_backlog_limit"),
    ],
)
def test_bad_config_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SessionConfig(**kwargs)


def test_history_converts_incrementally() -> None:
    h = History()
    h.append(UserTurn("fix it"))
    call = ToolCall("c1", "read_file", {"path": "a.py"})
    h.append(AssistantTurn("looking", [call]))
    h.append(ToolResultsTurn([ToolResult("c1", "print(1)")], names=["read_file"]))
    h.append(SteeringTurn("hurry"))
    h.append(SystemTurn("note"))
    h.append(AssistantTurn(""))  # empty: recorded, but adds no message
    assert len(h) == 6 and isinstance(h[0], UserTurn) and isinstance(h[-1], AssistantTurn)
    assert [m.role for m in h.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.USER, Role.SYSTEM]
    assert h.messages[1].tool_calls[0].id == "c1"
    assert h.messages[2].name == "read_file" and h.messages[2].tool_call_id == "c1"
    assert h.messages[3].text == "hurry"
    expected = len("fix it") + len("looking") + len("read_file") + len("print(1)") + len("hurry") + len("note")
    assert h.chars >= expected
    first = h.messages[0]
    h.append(UserTurn("again"))
    assert h.messages[0] is first  # existing messages are never rebuilt


def test_profile_interface() -> None:
    base = ProviderProfile("x", "m")
    with pytest.raises(NotImplementedError):
        base.build_system_prompt(None)  # type: ignore[arg-type]
    assert base.tools() == [] and base.provider_options() is None and base.provider == "x"
    with pytest.raises(ValueError):
        ProviderProfile("x", "")
    generic = GenericProfile(system_prompt="Base.", include_environment=False, options={"openai": {"store": False}})
    assert generic.build_system_prompt(None, "DOCS") == "Base.\n\nDOCS"  # type: ignore[arg-type]
    assert generic.provider_options() == {"openai": {"store": False}}


async def test_config_changed_to_an_invalid_value_is_refused_at_submit() -> None:
    from .support import make_session

    session, _ = make_session()
    session.config.context_overflow = "squash"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="context_overflow must be one of warn, prune, compact"):
        await session.submit("x")
    assert session.state.value == "idle"
