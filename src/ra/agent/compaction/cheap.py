"""The cheap pass: clear the bodies of old tool outputs from what the model is sent.

Old tool outputs are most of a long coding session's context and the least needed part of it
(a file read twenty steps ago, a test run since repeated). Replacing them with a one-line marker
frees room without a model call and loses nothing for good: only ``History.messages`` changes,
the turns (and the session's record) keep every output. The newest outputs stay, up to a
budget; the pass runs only when it frees enough to be worth breaking the provider's prompt cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from ra.llm.types import Message, Role

__all__ = ["CLEARED_PREFIX", "Cleared", "clear_tool_outputs"]

#: How a cleared output starts (the pass skips outputs already cleared).
CLEARED_PREFIX = "[Old tool output cleared"


@dataclass(frozen=True, slots=True)
class Cleared:
    messages: list[Message]
    #: Tool outputs replaced by the marker, and the characters that freed.
    outputs: int
    freed_chars: int


def _marker(chars: int) -> str:
    return f"{CLEARED_PREFIX} to save context: {chars} characters. Run the tool again if you need them.]"


def clear_tool_outputs(messages: list[Message], protect_tokens: int, minimum_tokens: int) -> Cleared | None:
    """``messages`` with old tool outputs cleared, or None when that would free less than
    ``minimum_tokens``. The newest outputs, up to ``protect_tokens``, are kept as they are."""
    protect = protect_tokens * 4
    seen = 0
    clear: dict[int, int] = {}
    freed = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role != Role.TOOL:
            continue
        size, text = _result_size(message)
        if text is not None and text.startswith(CLEARED_PREFIX):
            continue
        if seen < protect:
            seen += size
            continue
        saved = size - len(_marker(size))
        if saved > 0:
            clear[index] = size
            freed += saved
    if not clear or freed < max(1, minimum_tokens * 4):
        return None
    out = list(messages)
    for index, size in clear.items():
        old = messages[index]
        result = next(p.tool_result for p in old.content if p.tool_result is not None)
        out[index] = Message.tool_result(result.tool_call_id, _marker(size), result.is_error, name=old.name)
    return Cleared(out, len(clear), freed)


def _result_size(message: Message) -> tuple[int, str | None]:
    size = 0
    text: str | None = None
    for part in message.content:
        result = part.tool_result
        if result is None:
            continue
        content = result.content
        text = content if isinstance(content, str) else None
        size += len(content) if isinstance(content, str) else len(str(content))
    return size, text
