"""Context-window awareness (coding-agent-loop-spec 5.5) and the prune strategy (ra-spec).

**Awareness.** Before each model call the session estimates the size of the request. After the
first response the provider's own count is known, so the estimate is the last call's input +
output tokens plus the characters added since, divided by 4; before that it is all characters
divided by 4 (the spec's heuristic). Crossing ``context_warning_threshold`` of the profile's
``context_window_size`` emits one WARNING; it re-arms when usage falls back below (after pruning).

**Pruning** (``context_overflow="prune"``), on a context-length error from the provider:

* keep every system message and the first user message (the task);
* treat an assistant message and the tool results that answer it as one unit - never split;
* drop the oldest units until about half of the rest (by characters) is gone, then keep dropping
  up to the next user message, when there is one, so the context resumes at a user boundary;
* always keep the newest unit.

The caller retries with the smaller context, and prunes again if the provider still refuses;
when nothing more can be dropped it gives up with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass

from ra.llm.types import Message, Role, Usage

from .history import message_chars

__all__ = ["ContextMonitor", "PruneResult", "prune_messages"]


class ContextMonitor:
    """Tracks the approximate size of the next request and decides when to warn."""

    __slots__ = ("_base_chars", "_base_tokens", "last_input_tokens", "warned")

    def __init__(self) -> None:
        self._base_tokens: int | None = None
        self._base_chars = 0
        self.warned = False
        #: The provider's input token count for the last model call (None before one reported it).
        self.last_input_tokens: int | None = None

    @property
    def measured(self) -> bool:
        """Whether the estimate stands on the provider's count (else: characters / 4 only)."""
        return self._base_tokens is not None

    def record_usage(self, usage: Usage | None, chars_now: int) -> None:
        """Anchor the estimate on the provider's count for the call that just finished."""
        if usage is not None and usage.input_tokens > 0:
            self.last_input_tokens = usage.input_tokens
            self._base_tokens = usage.input_tokens + usage.output_tokens
            self._base_chars = chars_now
        else:
            self._base_tokens = None

    def reset(self) -> None:
        """Forget the provider's count (the context changed under it, e.g. after pruning)."""
        self._base_tokens = None

    def estimate(self, chars_now: int) -> int:
        if self._base_tokens is not None and chars_now >= self._base_chars:
            return self._base_tokens + (chars_now - self._base_chars) // 4
        return chars_now // 4

    def check(self, chars_now: int, window: int | None, threshold: float) -> tuple[int, float] | None:
        """``(tokens, fraction)`` when a WARNING is due now, else None."""
        if not window or window <= 0:
            return None
        tokens = self.estimate(chars_now)
        fraction = tokens / window
        if fraction > threshold:
            if not self.warned:
                self.warned = True
                return tokens, fraction
        else:
            self.warned = False
        return None


@dataclass(slots=True)
class PruneResult:
    messages: list[Message]
    dropped_messages: int
    dropped_chars: int


def prune_messages(messages: list[Message]) -> PruneResult | None:
    """The pruned context, or None when nothing can be dropped without breaking the rules."""
    first_user = next((i for i, m in enumerate(messages) if m.role == Role.USER), None)
    if first_user is None:
        return None
    # Units after the first user message: a non-tool message plus the tool results after it.
    units: list[list[int]] = []
    for i in range(first_user + 1, len(messages)):
        role = messages[i].role
        if role == Role.SYSTEM:
            continue  # system messages are always kept, wherever they are
        if role == Role.TOOL and units:
            units[-1].append(i)
        else:
            units.append([i])
    if len(units) < 2:
        return None

    sizes = [sum(message_chars(messages[i]) for i in unit) for unit in units]
    target = sum(sizes) // 2
    dropped = 0
    cut = 0
    while cut < len(units) - 1 and dropped < target:
        dropped += sizes[cut]
        cut += 1
    cut = max(cut, 1)
    # Prefer to resume at a user message: keep dropping up to the next one, if any remains.
    for k in range(cut, len(units)):
        if messages[units[k][0]].role == Role.USER:
            cut = k
            break
    drop = {i for unit in units[:cut] for i in unit}
    kept = [m for i, m in enumerate(messages) if i not in drop]
    return PruneResult(kept, len(drop), sum(sizes[:cut]))
