"""Where each conversation's last request ended, for adapters that cache their translation.

An agent sends its whole history with every step. An adapter that caches each Message's
translation still has to look every message up and check it, which grows with the history;
remembering, per conversation, the messages of its last request and what the walk over them
made lets the next request start after them, once it is known that they are still there and
unchanged:

* always: the same Message objects, in the same places (one C-level identity pass);
* when the caller vouches for them (``Request.unchanged``: the agent loop's context only grows
  between requests and it never edits a Message it sent): nothing more;
* otherwise: the same role, name, call id and parts list in each (C-level ``map`` passes over
  copies taken when they were sent, tens of nanoseconds a message).

A conversation is ``Request.conversation``, else its first Message. The memory is bounded: the
least recently sent conversations are forgotten once more than ``CACHE_LIMIT`` messages beyond
the newest one are held (the newest is always kept; its caller holds those messages anyway).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..types import ContentPart, Message, Request

__all__ = ["CACHE_LIMIT", "Conversations", "Prefix", "conversation_key", "evict", "still_valid"]

#: Bound on cached translations and on the messages remembered beyond the newest conversation;
#: an agent history is a few hundred messages, so this only bites for long-lived adapters that
#: serve many unrelated conversations.
CACHE_LIMIT = 8192

_ROLE = operator.attrgetter("role")
_NAME = operator.attrgetter("name")
_CALL_ID = operator.attrgetter("tool_call_id")
_CONTENT = operator.attrgetter("content")

S = TypeVar("S")


@dataclass(slots=True)
class Prefix(Generic[S]):
    """A conversation's last request: its messages, their roles, names, call ids and parts lists
    (a copy, to notice parts added, removed or replaced), and the adapter's state after them."""

    owner: object  # what the key's id is of (kept alive here, so that the id is not reused)
    messages: tuple[Message, ...]
    roles: list[Any]
    names: list[str | None]
    call_ids: list[str | None]
    contents: list[list[ContentPart]]
    state: S


def conversation_key(request: Request) -> tuple[int, object]:
    """The key a request's conversation is remembered under, and the object it is the id of."""
    owner: object = request.conversation
    if owner is None:
        owner = request.messages[0] if request.messages else None
    return id(owner), owner


class Conversations(Generic[S]):
    """Each conversation's last request and the state an adapter left after it."""

    def __init__(self) -> None:
        self.prefixes: dict[int, Prefix[S]] = {}
        self.total = 0  # messages held by prefixes, at most CACHE_LIMIT beyond the newest

    def recall(self, key: int, messages: Sequence[Message], unchanged: int) -> Prefix[S] | None:
        """The conversation's last request, when ``messages`` still starts with exactly its
        messages: the same objects, each unchanged (only identity when ``unchanged`` vouches for
        all of them)."""
        prefix = self.prefixes.get(key)
        if prefix is None:
            return None
        known = prefix.messages
        n = len(known)
        if len(messages) < n or not all(map(operator.is_, messages, known)):
            return None
        if unchanged >= n:
            return prefix
        head = messages[:n]
        if (
            list(map(_ROLE, head)) != prefix.roles
            or list(map(_NAME, head)) != prefix.names
            or list(map(_CALL_ID, head)) != prefix.call_ids
            or list(map(_CONTENT, head)) != prefix.contents
        ):
            return None
        return prefix

    def remember(
        self,
        key: int,
        owner: object,
        messages: Sequence[Message],
        prefix: Prefix[S] | None,
        start: int,
        state: S,
    ) -> None:
        """Remember this request (``prefix``: what ``recall`` gave, which covered its first
        ``start`` messages) and the state after it, replacing the conversation's previous one."""
        tail = messages[start:]
        if prefix is None:
            roles: list[Any] = []
            names: list[str | None] = []
            call_ids: list[str | None] = []
            contents: list[list[ContentPart]] = []
        else:  # the previous record is replaced: its lists grow by the new messages only
            roles, names, call_ids, contents = prefix.roles, prefix.names, prefix.call_ids, prefix.contents
        roles.extend(map(_ROLE, tail))
        names.extend(map(_NAME, tail))
        call_ids.extend(map(_CALL_ID, tail))
        contents.extend([m.content[:] for m in tail])
        prefixes = self.prefixes
        old = prefixes.pop(key, None)
        total = self.total + len(messages) - (len(old.messages) if old is not None else 0)
        while prefixes and total > CACHE_LIMIT:
            total -= len(prefixes.pop(next(iter(prefixes))).messages)
        self.total = total
        prefixes[key] = Prefix(owner, tuple(messages), roles, names, call_ids, contents, state)


def still_valid(entry: list[Any], message: Message) -> bool:
    """Whether a translation cache entry (``[message, role, name, tool_call_id, parts copy, ...]``)
    is still the translation of ``message``: the same object with the same role, name, call id and
    parts (identity first; the parts list compares item by item, identity first)."""
    return (
        entry[0] is message
        and entry[1] is message.role
        and entry[2] is message.name
        and entry[3] is message.tool_call_id
        and entry[4] == message.content
    )


def evict(cache: dict[int, Any]) -> None:
    """Make room in a translation cache that reached ``CACHE_LIMIT``: the oldest quarter goes."""
    if len(cache) >= CACHE_LIMIT:
        for key in list(cache)[: CACHE_LIMIT // 4]:
            del cache[key]
