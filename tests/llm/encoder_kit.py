"""Checks every adapter that remembers a conversation (``providers/conversations.py``) must pass,
shared by the adapters' encoding tests: a step the caller vouches for reads nothing of the
messages sent before, and a vouched prefix that is not the same objects is translated again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ra.llm.types import Message, Request

#: What an adapter's test supplies: a new adapter, the first messages, one step's new messages,
#: and the bytes a new adapter (nothing remembered) sends for a request.
MakeAdapter = Callable[[], Any]
Start = Callable[[], list[Message]]
AgentStep = Callable[[int], list[Message]]
FreshBytes = Callable[[Request], bytes]


class _Watched(Message):
    """A Message that counts reads of the fields the adapter looks at."""

    __slots__ = ("reads",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads = 0

    def __getattribute__(self, name: str) -> Any:
        if name in ("role", "name", "tool_call_id", "content"):
            object.__setattr__(self, "reads", object.__getattribute__(self, "reads") + 1)
        return object.__getattribute__(self, name)


def watched(message: Message) -> _Watched:
    return _Watched(message.role, message.content, message.name, message.tool_call_id)


def check_a_vouched_conversation_is_not_read_again(
    make_adapter: MakeAdapter, model: str, start: Start, agent_step: AgentStep, fresh_bytes: FreshBytes
) -> None:
    """With ``Request.conversation`` and ``unchanged`` (the agent loop's), a step reads nothing of
    the messages sent before (only their identity is checked) and the bytes are a fresh
    translation's; without them, each earlier message is read by the checks at every step."""
    for vouched in (True, False):
        adapter = make_adapter()
        conversation = object()
        history: list[Message] = [watched(m) for m in start()]
        sent = 0
        for i in range(40):
            request = Request(model, list(history), conversation=conversation, unchanged=sent if vouched else 0)
            before = [m.reads for m in history[:sent]]  # type: ignore[attr-defined]
            body = adapter.encode_body(request, stream=True)
            after = [m.reads for m in history[:sent]]  # type: ignore[attr-defined]
            assert body == fresh_bytes(request)
            if vouched:
                assert after == before, i
            elif sent:
                assert all(a > b for a, b in zip(after, before, strict=True)), i
            sent = len(history)
            history.extend(watched(m) for m in agent_step(i))


def check_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again(
    make_adapter: MakeAdapter,
    model: str,
    start: Start,
    agent_step: AgentStep,
    fresh_bytes: FreshBytes,
    *,
    steps: int = 6,
    removed_index: int = 2,
    also: Callable[[Any, Request], None] | None = None,
) -> None:
    """The caller's word covers the messages' contents, not which messages they are: a message
    replaced, removed or inserted in the vouched part, another conversation's list, or a count that
    is more than was sent, and the request is sent as it is now. ``also``: a further check of the
    adapter's answer to each changed request."""
    conversation = object()
    base = start()
    for i in range(steps):
        base.extend(agent_step(i))

    def replaced(ms: list[Message]) -> list[Message]:
        return [*ms[:3], Message.user("swapped in"), *ms[4:]]

    def removed(ms: list[Message]) -> list[Message]:
        return ms[:removed_index] + ms[removed_index + 1 :]

    def inserted(ms: list[Message]) -> list[Message]:
        return [ms[0], Message.user("inserted"), *ms[1:]]

    def shorter(ms: list[Message]) -> list[Message]:
        return ms[:-2]

    def other(ms: list[Message]) -> list[Message]:
        return [*start(), *agent_step(9)]

    for change in (replaced, removed, inserted, shorter, other):
        adapter = make_adapter()
        adapter.encode_body(Request(model, list(base), conversation=conversation), stream=True)
        messages = change(list(base))
        request = Request(model, messages, conversation=conversation, unchanged=len(base))
        assert adapter.encode_body(request, stream=True) == fresh_bytes(request), change.__name__
        if also is not None:
            also(adapter, request)
