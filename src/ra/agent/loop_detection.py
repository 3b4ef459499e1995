"""Loop detection (coding-agent-loop-spec 2.10).

Each tool call the model makes is reduced to a signature (its name and a hash of its canonical
JSON arguments). The detector keeps only the last ``window`` signatures - it never rescans the
history - and reports a loop when they are one pattern of length 1, 2 or 3 repeated to fill the
window (pattern lengths that do not divide the window are skipped, as in the spec).

After a detection the window is cleared, so the next warning needs another full window of
repetition instead of firing on every following step.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Sequence

from ra.llm.types import ToolCall

__all__ = ["LoopDetector", "detect_loop", "tool_call_signature"]


def tool_call_signature(call: ToolCall) -> str:
    """``name:hash`` of the arguments; the raw text is used when it was not valid JSON."""
    if call.arguments_error is not None and call.raw_arguments is not None:
        canonical = call.raw_arguments
    else:
        try:
            canonical = json.dumps(call.arguments, sort_keys=True, separators=(",", ":"), default=str)
        except (TypeError, ValueError):
            canonical = repr(call.arguments)
    digest = hashlib.blake2b(canonical.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"{call.name}:{digest}"


def detect_loop(signatures: Sequence[str], window_size: int) -> bool:
    """The spec's check: do the most recent calls repeat one pattern of length 1, 2 or 3?

    Each pattern length is checked over the largest multiple of it that fits the window (the last
    9 calls for a 3-call cycle in a window of 10), and needs at least two repetitions. The spec's
    letter - skip lengths that do not divide the window - would never see an a-b-c cycle at the
    default window of 10.
    """
    if window_size < 1 or len(signatures) < window_size:
        return False
    recent = list(signatures)[-window_size:]
    for pattern_len in (1, 2, 3):
        span = (window_size // pattern_len) * pattern_len
        if span < 2 * pattern_len:
            continue
        tail = recent[window_size - span :]
        pattern = tail[:pattern_len]
        if all(tail[i : i + pattern_len] == pattern for i in range(pattern_len, span, pattern_len)):
            return True
    return False


class LoopDetector:
    """Rolling window of call signatures for one session."""

    __slots__ = ("_recent",)

    def __init__(self, window: int = 10) -> None:
        self._recent: deque[str] = deque(maxlen=window)

    def record(self, call: ToolCall, window: int) -> None:
        if self._recent.maxlen != window:
            self._recent = deque(self._recent, maxlen=window)
        self._recent.append(tool_call_signature(call))

    def check(self, window: int) -> bool:
        """True (and the window cleared) when the last ``window`` calls form a loop."""
        if detect_loop(self._recent, window):
            self._recent.clear()
            return True
        return False

    def reset(self) -> None:
        self._recent.clear()
