"""The context the model sees after a compaction, built from the turns alone.

:func:`context_from_turns` is pure: the same turns always give the same messages. The compactor
uses it to replace ``History.messages``, and resuming a recorded session uses it to rebuild the
context, so a resumed session sends what the live one would have sent.

After the last :class:`~ra.agent.history.CompactionTurn` ``c`` the context is:

1. one user message: a short note, the summary, the files read and changed (``c.details``), and
   how many of the user's messages follow;
2. the user's own messages ``c.user_messages``, each one verbatim as its own user message - the
   summary is written by a model and is never trusted to carry the task alone;
3. the messages of ``turns[c.first_kept:]`` (CompactionTurns add none).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ra.llm.types import Message

from ..history import CompactionTurn, Turn, message_chars, turn_messages

__all__ = ["clip_middle", "context_from_turns", "last_compaction", "select_user_messages", "summary_message"]

#: How many file names of each list the summary message shows (the newest ones).
_FILES_SHOWN = 100


def last_compaction(turns: Sequence[Turn]) -> tuple[int, CompactionTurn] | None:
    """The index and the last CompactionTurn of ``turns``, or None. Walks back from the end:
    right after a compaction this costs one step."""
    for index in range(len(turns) - 1, -1, -1):
        turn = turns[index]
        if isinstance(turn, CompactionTurn):
            return index, turn
    return None


def context_from_turns(turns: Sequence[Turn]) -> list[Message]:
    """The messages the model is sent for ``turns`` (without the system prompt)."""
    found = last_compaction(turns)
    if found is None:
        return [m for turn in turns for m in turn_messages(turn)]
    _, compaction = found
    first_kept = min(max(compaction.first_kept, 0), len(turns))
    messages = [summary_message(compaction)]
    messages.extend(Message.user(text) for text in compaction.user_messages)
    for turn in turns[first_kept:]:
        if not isinstance(turn, CompactionTurn):
            messages.extend(turn_messages(turn))
    return messages


def summary_message(compaction: CompactionTurn) -> Message:
    """The user message that opens a compacted context."""
    details = compaction.details
    parts = [
        "[Context compacted] The earlier part of this conversation was replaced by the summary below "
        "to make room in the context window. A model wrote the summary; where it disagrees with the "
        "user's own words, the user's words win.",
        f"<summary>\n{compaction.summary.strip()}\n</summary>",
    ]
    modified = _names(details.get("modified_files"))
    read = [name for name in _names(details.get("read_files")) if name not in set(modified)]
    if read:
        parts.append(_file_list("Files read earlier (read them again before relying on their content)", read))
    if modified:
        parts.append(_file_list("Files changed earlier", modified))
    count = len(compaction.user_messages)
    omitted = details.get("omitted_user_messages", 0)
    if count:
        note = (
            f"The {count} message(s) that follow are the user's own earlier messages, repeated word for word "
            "(the first is the original request)"
        )
        if isinstance(omitted, int) and omitted > 0:
            note += f"; {omitted} other message(s) of the user are only in the summary"
        parts.append(note + ". They are not new requests.")
    return Message.user("\n\n".join(parts))


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _file_list(title: str, names: list[str]) -> str:
    shown = names[-_FILES_SHOWN:]
    more = len(names) - len(shown)
    head = f"{title}{f' ({more} older not listed)' if more else ''}:"
    return "\n".join([head, *(f"- {name}" for name in shown)])


def select_user_messages(candidates: Sequence[str], budget_tokens: int) -> tuple[list[str], int]:
    """The user's messages to repeat after a summary, oldest first, and how many were left out.

    The first candidate (the original request) is always kept - cut in the middle only when it
    alone is larger than the budget. Then the newest ones, newest first, while they fit.
    """
    if not candidates:
        return [], 0
    budget = max(0, budget_tokens) * 4
    first = clip_middle(candidates[0], budget) if budget else candidates[0]
    left = budget - len(first)
    newest: list[str] = []
    for text in reversed(candidates[1:]):
        if len(text) > left:
            break
        newest.append(text)
        left -= len(text)
    kept = [first, *reversed(newest)]
    return kept, len(candidates) - len(kept)


def clip_middle(text: str, limit: int) -> str:
    """``text`` cut in the middle to about ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    note = f"\n[... {len(text) - limit} characters left out here ...]\n"
    half = max(0, (limit - len(note)) // 2)
    return text[:half] + note + text[len(text) - half :] if half else text[:limit]


def turn_chars(turn: Turn) -> int:
    """Characters a turn adds to the context."""
    return sum(message_chars(m) for m in turn_messages(turn))
