"""Where a compaction cuts: the first turn kept verbatim.

A cut lands only on a turn boundary and never between a tool call and its result: the kept part
starts with a turn that is not a :class:`~ra.agent.history.ToolResultsTurn` (results always come
right after the assistant turn that asked for them, so an assistant turn and its results are
either both summarised or both kept). The newest exchange is always kept, even when it alone is
larger than the budget; everything older than about ``keep_recent`` tokens is summarised.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..history import AssistantTurn, CompactionTurn, ToolResultsTurn, Turn
from .context import turn_chars

__all__ = ["can_start_context", "find_cut"]


def can_start_context(turn: Turn) -> bool:
    """Whether the kept part may start at ``turn``."""
    return not isinstance(turn, ToolResultsTurn | CompactionTurn)


def find_cut(turns: Sequence[Turn], start: int, keep_recent_tokens: int) -> int | None:
    """The index of the first turn to keep, or None when nothing before the newest exchange
    can be summarised (no assistant turn is there). ``start`` is where the current context begins (the previous
    compaction's ``first_kept``, or 0): only turns from there on are summarised."""
    end = len(turns)
    # The newest place the kept part may start: the newest exchange is always kept.
    newest = next((i for i in range(end - 1, start, -1) if can_start_context(turns[i])), None)
    if newest is None:
        return None
    budget = keep_recent_tokens * 4
    kept = 0
    cut = newest
    # Walk back from the newest boundary while the kept part stays within the budget.
    for index in range(end - 1, start, -1):
        kept += turn_chars(turns[index])
        if kept > budget:
            break
        if can_start_context(turns[index]) and index <= newest:
            cut = index
    # Worth a summary only when the model did something there: the user's own messages are
    # repeated verbatim anyway.
    if not any(isinstance(t, AssistantTurn) for t in turns[start:cut]):
        return None
    return cut
