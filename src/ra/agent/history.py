"""Conversation history (coding-agent-loop-spec 2.4) and its incremental conversion to messages.

The spec's loop converts the whole history to LLM messages before every model call; that is work
proportional to the history on every step. Here each turn is converted once, when it is appended,
and the resulting messages are kept in :attr:`History.messages` (the *context*), together with a
running character count for context-window estimates.

``turns`` is the complete record of the session. ``messages`` is what the model is sent; it can
be shorter than the turns after context pruning (``ra.agent.context``), which drops old messages
but never old turns.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from ra.llm.types import ContentKind, ContentPart, ImageData, Message, Role, ToolCall, ToolResult, Usage

__all__ = [
    "AssistantTurn",
    "CompactionTurn",
    "ContextTurn",
    "History",
    "SteeringTurn",
    "SystemTurn",
    "ToolResultsTurn",
    "Turn",
    "UserTurn",
    "message_chars",
    "plain_assistant_parts",
]


@dataclass(slots=True)
class UserTurn:
    content: str
    timestamp: float = field(default_factory=time.time)
    #: Images sent with the text (``ImageData``), in the same user message.
    images: tuple[ImageData, ...] = ()


@dataclass(slots=True)
class AssistantTurn:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    usage: Usage = field(default_factory=Usage)
    response_id: str | None = None
    timestamp: float = field(default_factory=time.time)
    #: The provider's message as received: it carries what must round-trip verbatim (thinking
    #: signatures, redacted reasoning, provider item ids). None for hand-made turns.
    message: Message | None = None


@dataclass(slots=True)
class ToolResultsTurn:
    results: list[ToolResult]
    timestamp: float = field(default_factory=time.time)
    #: Tool names, parallel to ``results`` (some providers need the name next to the result).
    names: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SystemTurn:
    content: str
    timestamp: float = field(default_factory=time.time)


@dataclass(slots=True)
class SteeringTurn:
    content: str
    timestamp: float = field(default_factory=time.time)


@dataclass(slots=True)
class ContextTurn:
    """Context a hook or control added for the model (a user message it did not type): kept
    apart from UserTurn so that what the user asked can always be told from what was added."""

    content: str
    #: Who added it, e.g. "SessionStart" or "UserPromptSubmit".
    source: str = ""
    timestamp: float = field(default_factory=time.time)


@dataclass(slots=True)
class CompactionTurn:
    """The older part of the conversation was compacted (:mod:`ra.agent.compaction`).

    It adds no message of its own when appended: the compaction replaces ``History.messages``
    with the context rebuilt from the turns (``ra.agent.compaction.context_from_turns``: the
    summary, the user's own messages, the kept turns), and so does a resumed session. The turns
    before it stay in the history and in the record; ``first_kept`` says where the context
    resumes, so that a resumed session rebuilds the same context from its turns.
    """

    #: The structured summary of the turns before ``first_kept`` (it includes earlier summaries).
    summary: str
    #: Index in the history's turns of the first turn kept verbatim in the context.
    first_kept: int
    #: Estimated tokens of the context before and after.
    tokens_before: int = 0
    tokens_after: int = 0
    #: "auto" (the window was nearly full), "overflow" (the provider refused), "manual".
    trigger: str = "auto"
    #: The user's own messages carried verbatim after the summary (newest kept first in budget).
    user_messages: list[str] = field(default_factory=list)
    #: What the summary tracks across compactions, e.g. {"read_files": [...], "modified_files": [...]}.
    details: dict[str, Any] = field(default_factory=dict)
    timestamp: float = field(default_factory=time.time)


Turn = UserTurn | AssistantTurn | ToolResultsTurn | SystemTurn | SteeringTurn | ContextTurn | CompactionTurn


def turn_messages(turn: Turn) -> list[Message]:
    """The LLM messages for one turn. SteeringTurns become user messages (spec 2.6)."""
    if isinstance(turn, UserTurn) and turn.images:
        parts = [ContentPart(ContentKind.TEXT, text=turn.content)]
        parts.extend(ContentPart.of_image(image) for image in turn.images)
        return [Message(Role.USER, parts)]
    if isinstance(turn, UserTurn | SteeringTurn | ContextTurn):
        return [Message.user(turn.content)]
    if isinstance(turn, AssistantTurn):
        message = turn.message
        if message is None:
            message = Message(Role.ASSISTANT, plain_assistant_parts(turn))
        # Providers reject an assistant message with no content; an empty answer adds nothing.
        return [message] if message.content else []
    if isinstance(turn, ToolResultsTurn):
        names = turn.names
        return [
            Message.tool_result(
                r.tool_call_id,
                r.content,
                r.is_error,
                name=names[i] if i < len(names) else None,
                image_data=r.image_data,
                image_media_type=r.image_media_type,
            )
            for i, r in enumerate(turn.results)
        ]
    if isinstance(turn, SystemTurn):
        return [Message.system(turn.content)]
    if isinstance(turn, CompactionTurn):
        return []  # the compaction rebuilt History.messages itself
    raise TypeError(f"not a turn: {type(turn).__name__}")


def plain_assistant_parts(turn: AssistantTurn) -> list[ContentPart]:
    """The content of the assistant message made from ``turn``'s text and tool calls alone (a
    turn without a provider message; the record leaves out a message that is exactly this)."""
    parts: list[ContentPart] = []
    if turn.content:
        parts.append(ContentPart(ContentKind.TEXT, text=turn.content))
    parts.extend(ContentPart(ContentKind.TOOL_CALL, tool_call=c.to_data()) for c in turn.tool_calls)
    return parts


def message_chars(message: Message) -> int:
    """Characters a message contributes to the context (the basis of the 4-chars-a-token estimate)."""
    total = 0
    for part in message.content:
        if part.text is not None:
            total += len(part.text)
        elif part.tool_call is not None:
            args = part.tool_call.arguments
            total += len(part.tool_call.name) + (len(args) if isinstance(args, str) else _dict_chars(args))
        elif part.tool_result is not None:
            content = part.tool_result.content
            total += len(content) if isinstance(content, str) else len(str(content))
        elif part.thinking is not None:
            total += len(part.thinking.text)
    return total


def _dict_chars(value: dict[str, object]) -> int:
    # Cheaper than json.dumps and close enough for an estimate.
    total = 2
    for key, item in value.items():
        total += len(key) + 4 + (len(item) if isinstance(item, str) else len(repr(item)))
    return total


class History(Sequence[Turn]):
    """The session's turns (a read-only sequence) plus the context messages built from them."""

    __slots__ = ("_last_request", "_turns", "chars", "conversation", "messages", "pruned_messages")

    def __init__(self) -> None:
        self._turns: list[Turn] = []
        #: The context sent to the model (without the system prompt), oldest first.
        self.messages: list[Message] = []
        #: Characters in ``messages``.
        self.chars = 0
        #: Messages dropped from the context by pruning, in total.
        self.pruned_messages = 0
        #: Names this conversation in its requests (``Request.conversation``): a token, not the
        #: History, so an adapter that remembers it keeps nothing else alive.
        self.conversation = object()
        #: (the context list, the system message, the message count) of the last request.
        self._last_request: tuple[list[Message], Message | None, int] | None = None

    def append(self, turn: Turn) -> None:
        self._turns.append(turn)
        for message in turn_messages(turn):
            self.messages.append(message)
            self.chars += message_chars(message)

    def answer_open_calls(self, note: str) -> int:
        """Answer the last assistant turn's tool calls with ``note`` (an error result) when they
        have no results yet; returns how many were answered.

        Every tool call must be followed by its result or providers reject the conversation.
        An interrupt, a crash or a stop can leave the last calls unanswered; this is the one
        repair for all of them (the session's interrupt, a host continuing a conversation).
        """
        last = self._turns[-1] if self._turns else None
        if not isinstance(last, AssistantTurn) or not last.tool_calls:
            return 0
        calls = last.tool_calls
        self.append(ToolResultsTurn([ToolResult(c.id, note, True) for c in calls], names=[c.name for c in calls]))
        return len(calls)

    def request_messages(self, system: Message | None) -> tuple[list[Message], int]:
        """The messages of the next request (``system``, then the context) and how many of them,
        from the first, are the previous request's (``Request.unchanged``): all of its messages
        while the context has only grown since and the system message is the same object, else
        none. Turns only ever add messages; pruning, compaction and a resume put in a new list,
        which resets the count. A fresh list each time (pointers copied, nothing rebuilt): the
        request may be kept after the call, while the context goes on growing."""
        context = self.messages
        messages = [system, *context] if system is not None else list(context)
        last = self._last_request
        unchanged = min(last[2], len(messages)) if last is not None and last[0] is context and last[1] is system else 0
        self._last_request = (context, system, len(messages))
        return messages, unchanged

    def replace_messages(self, messages: list[Message]) -> None:
        """Swap the context for a pruned one (the turns stay as they are)."""
        self.pruned_messages += max(0, len(self.messages) - len(messages))
        self.messages = messages
        self.chars = sum(message_chars(m) for m in messages)

    @property
    def turns(self) -> list[Turn]:
        """The turn list itself (read it; add turns only through :meth:`append`)."""
        return self._turns

    def __len__(self) -> int:
        return len(self._turns)

    @overload
    def __getitem__(self, index: int) -> Turn: ...

    @overload
    def __getitem__(self, index: slice) -> list[Turn]: ...

    def __getitem__(self, index: int | slice) -> Turn | list[Turn]:
        return self._turns[index]

    def __iter__(self) -> Iterator[Turn]:
        return iter(self._turns)

    def __repr__(self) -> str:
        return f"History({len(self._turns)} turns, {len(self.messages)} messages, ~{self.chars} chars)"
