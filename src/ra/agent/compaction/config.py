"""``CompactionConfig``: the numbers compaction works with, validated, and scaled to the window.

The defaults suit a large window (they are the peers' numbers: pi's reserve and keep-recent,
opencode's tool-output thresholds, codex's user-message budget). A model with a small window
would not fit them, so :meth:`CompactionConfig.budgets` caps each at a share of the profile's
``context_window_size``; the compacted context (summary, the user's messages, the kept turns and
the room for the answer) then always fits, whatever the window.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Budgets", "CompactionConfig"]


@dataclass(frozen=True, slots=True)
class Budgets:
    """The token numbers in force for one window (see :meth:`CompactionConfig.budgets`)."""

    reserve: int
    keep_recent: int
    user_messages: int
    protect_tool_output: int
    minimum_tool_output: int
    summary_max: int


@dataclass(slots=True)
class CompactionConfig:
    """How ``context_overflow="compact"`` compacts (all numbers are tokens, estimated as chars / 4)."""

    #: Room kept free for the model's answer: compaction starts before a call when the context
    #: estimate plus this exceeds the profile's ``context_window_size``.
    reserve_tokens: int = 16_384
    #: The newest part of the conversation kept verbatim after a compaction (whole turns; the
    #: newest exchange is always kept, even when it alone is larger).
    keep_recent_tokens: int = 20_000
    #: The user's own messages repeated verbatim after the summary: the first request always,
    #: then the newest ones while they fit in this budget.
    user_message_tokens: int = 20_000
    #: The cheap pass: clear old tool outputs from what is sent before summarising anything.
    clear_tool_outputs: bool = True
    #: It keeps the newest tool outputs up to this many tokens intact ...
    tool_output_protect_tokens: int = 40_000
    #: ... and clears older ones only when that frees at least this many tokens.
    tool_output_minimum_tokens: int = 20_000
    #: The model that writes the summary (same provider); None = the session's model.
    summary_model: str | None = None
    #: Most tokens the summary may take; None = 0.8 x the reserve.
    summary_max_tokens: int | None = None
    #: Characters of each tool result shown to the summariser (the rest is cut in the middle).
    summary_tool_result_chars: int = 2_000
    #: Compact before a call when the window is nearly full. False: only when the provider
    #: refuses the context, and on ``Session.compact()``.
    auto: bool = True

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the bad field."""
        for name in (
            "reserve_tokens",
            "keep_recent_tokens",
            "user_message_tokens",
            "tool_output_protect_tokens",
            "tool_output_minimum_tokens",
            "summary_tool_result_chars",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"compaction.{name} must be an int >= 0, got {value!r}")
        if self.reserve_tokens < 1:
            raise ValueError("compaction.reserve_tokens must be >= 1 (the answer needs room)")
        if self.keep_recent_tokens < 1:
            raise ValueError("compaction.keep_recent_tokens must be >= 1")
        summary = self.summary_max_tokens
        if summary is not None and (isinstance(summary, bool) or not isinstance(summary, int) or summary < 1):
            raise ValueError(f"compaction.summary_max_tokens must be an int >= 1 or None, got {summary!r}")
        model = self.summary_model
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ValueError(f"compaction.summary_model must be a model name or None, got {model!r}")
        for flag in ("auto", "clear_tool_outputs"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"compaction.{flag} must be True or False, got {getattr(self, flag)!r}")

    def budgets(self, window: int | None) -> Budgets:
        """The numbers in force for a ``window`` of that many tokens (None or 0: unknown, as set).

        Each is capped at a share of the window - reserve, keep-recent, summary and protected
        tool output at a quarter each, the user's messages at an eighth, the cheap pass's
        minimum at a twentieth - so that what a compaction keeps always fits with room to spare.
        """
        summary = self.summary_max_tokens
        if not window or window <= 0:
            reserve = self.reserve_tokens
            return Budgets(
                reserve,
                self.keep_recent_tokens,
                self.user_message_tokens,
                self.tool_output_protect_tokens,
                self.tool_output_minimum_tokens,
                summary if summary is not None else max(1, int(reserve * 0.8)),
            )
        quarter = max(1, window // 4)
        reserve = min(self.reserve_tokens, quarter)
        summary_max = summary if summary is not None else max(1, int(reserve * 0.8))
        return Budgets(
            reserve=reserve,
            keep_recent=min(self.keep_recent_tokens, quarter),
            user_messages=min(self.user_message_tokens, max(1, window // 8)),
            protect_tool_output=min(self.tool_output_protect_tokens, quarter),
            minimum_tool_output=min(self.tool_output_minimum_tokens, max(1, window // 20)),
            summary_max=min(summary_max, quarter),
        )
