"""What processing an input produces: :class:`SubmitResult`, and the counters behind it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ra.llm.types import Usage

from .config import SessionState, StopReason

__all__ = ["EXIT_REASONS", "SubmitResult", "Tally", "exit_reason"]

#: ra's stop reasons as the Go-port spec's exit reasons (``LoopState.ExitReason``): what the SDK's
#: result reports as ``stop_reason`` and a SessionEnd hook receives as ``exit_reason``.
EXIT_REASONS: dict[StopReason, str] = {
    StopReason.COMPLETED: "end_turn",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.TURN_LIMIT: "max_turns",
    StopReason.ROUND_LIMIT: "max_turns",
    StopReason.BUDGET_LIMIT: "error_max_budget_usd",
    StopReason.INTERRUPTED: "interrupted",
    StopReason.TIME_LIMIT: "interrupted",
    StopReason.ABORTED: "aborted",
    StopReason.ERROR: "error",
    StopReason.CONTEXT_OVERFLOW: "error",
}


def exit_reason(reason: StopReason | str) -> str:
    """The Go-port spec's exit reason for one of ra's stop reasons."""
    return EXIT_REASONS.get(StopReason(reason), "error")


@dataclass(slots=True)
class SubmitResult:
    """What ``Session.submit()`` returns once the input (and its follow-ups) are processed."""

    #: The last assistant text (the answer, on natural completion).
    text: str
    stop_reason: StopReason
    #: The session state afterwards: IDLE, AWAITING_INPUT or CLOSED.
    state: SessionState
    #: Model calls made while processing this submit.
    steps: int = 0
    #: Tool calls answered (run, failed or skipped).
    tool_calls: int = 0
    #: Inputs processed: 1 plus the follow-ups that ran.
    inputs: int = 0
    usage: Usage = field(default_factory=Usage)
    #: The error that ended processing (stop_reason ERROR), if any.
    error: BaseException | None = None

    @classmethod
    def ended(
        cls,
        reason: StopReason,
        state: SessionState,
        tally: Tally | None = None,
        *,
        text: str = "",
        inputs: int = 0,
        error: BaseException | None = None,
    ) -> SubmitResult:
        """The result of a submit that ended with ``reason``, its counters read from ``tally``."""
        if tally is None:
            return cls(text, reason, state, inputs=inputs, error=error)
        return cls(text, reason, state, tally.steps, tally.tool_calls, inputs, tally.usage, error)

    def raise_for_error(self) -> SubmitResult:
        if self.error is not None:
            raise self.error
        return self


@dataclass(slots=True)
class Tally:
    """Counters of the submit in progress (kept on the run so an interrupted submit can report them)."""

    steps: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
