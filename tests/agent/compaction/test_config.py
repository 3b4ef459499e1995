"""CompactionConfig: documented defaults, refused bad values, numbers scaled to the window."""

from __future__ import annotations

import pytest

from ra.agent import SessionConfig
from ra.agent.compaction import CompactionConfig


def test_the_documented_defaults() -> None:
    c = CompactionConfig()
    assert (c.reserve_tokens, c.keep_recent_tokens, c.user_message_tokens) == (16_384, 20_000, 20_000)
    assert (c.tool_output_protect_tokens, c.tool_output_minimum_tokens) == (40_000, 20_000)
    assert c.summary_model is None and c.summary_max_tokens is None and c.summary_tool_result_chars == 2_000
    assert c.auto is True and c.clear_tool_outputs is True
    assert SessionConfig().compaction == c


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"reserve_tokens": 0}, "reserve_tokens"),
        ({"reserve_tokens": -5}, "reserve_tokens"),
        ({"keep_recent_tokens": 0}, "keep_recent_tokens"),
        ({"user_message_tokens": -1}, "user_message_tokens"),
        ({"tool_output_protect_tokens": 1.5}, "tool_output_protect_tokens"),
        ({"tool_output_minimum_tokens": True}, "tool_output_minimum_tokens"),
        ({"summary_max_tokens": 0}, "summary_max_tokens"),
        ({"summary_max_tokens": "many"}, "summary_max_tokens"),
        ({"summary_model": "  "}, "summary_model"),
        ({"summary_tool_result_chars": -1}, "summary_tool_result_chars"),
        ({"auto": "yes"}, "auto"),
        ({"clear_tool_outputs": 1}, "clear_tool_outputs"),
    ],
)
def test_bad_values_are_refused_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=rf"compaction\.{field}"):
        CompactionConfig(**kwargs)  # type: ignore[arg-type]


async def test_a_value_broken_after_construction_is_refused_at_submit() -> None:
    from ..support import make_session

    session, _ = make_session()
    session.config.compaction.reserve_tokens = -1
    with pytest.raises(ValueError, match=r"compaction\.reserve_tokens"):
        await session.submit("x")


def test_numbers_are_capped_by_the_window_so_a_compacted_context_fits() -> None:
    c = CompactionConfig()
    small = c.budgets(8_000)
    assert small.reserve == 2_000 and small.keep_recent == 2_000 and small.summary_max == 1_600
    assert small.user_messages == 1_000 and small.protect_tool_output == 2_000 and small.minimum_tool_output == 400
    kept = small.keep_recent + small.user_messages + small.summary_max + small.reserve
    assert kept < 8_000
    large = c.budgets(1_000_000)
    assert large.reserve == 16_384 and large.keep_recent == 20_000 and large.summary_max == int(16_384 * 0.8)
    unknown = c.budgets(None)
    assert unknown.reserve == 16_384 and unknown.minimum_tool_output == 20_000
    assert CompactionConfig(summary_max_tokens=500).budgets(8_000).summary_max == 500
