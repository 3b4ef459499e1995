"""What processing an input produces: :class:`SubmitResult`, and the counters behind it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ra.llm.types import Usage

from .config import SessionState, StopReason

__all__ = ["SubmitResult", "Tally"]


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
