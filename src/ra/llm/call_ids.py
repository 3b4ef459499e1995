"""One id per tool call of a reply.

A reply's tool calls are answered by id: each result names the call it answers, and a provider
rejects (or misfiles) a conversation in which two calls share one. Models and servers do send
duplicates - a small model repeating ``call_0``, a proxy numbering each reply from 1 - and a
collection keyed by id then silently kept only one of them. Here a later duplicate is renumbered
(``call_0`` -> ``call_0~2``) so that every call runs and is answered by its own result; the
renamed id is what the conversation carries from then on, so the provider sees ids that match.
"""

from __future__ import annotations

from .types import Message

__all__ = ["renumber_duplicate_call_ids", "unused_id"]


def unused_id(call_id: str, taken: set[str] | dict[str, object]) -> str:
    """``call_id`` with the first ``~N`` suffix (N >= 2) not in ``taken``."""
    n = 2
    while f"{call_id}~{n}" in taken:
        n += 1
    return f"{call_id}~{n}"


def renumber_duplicate_call_ids(message: Message) -> int:
    """Give every tool call of ``message`` its own id, in place (the first keeps its id, later
    duplicates get :func:`unused_id`); returns how many were renamed. Linear in the parts."""
    seen: set[str] = set()
    renamed = 0
    for part in message.content:
        call = part.tool_call
        if call is None:
            continue
        if call.id in seen:
            call.id = unused_id(call.id, seen)
            renamed += 1
        seen.add(call.id)
    return renamed
