"""The decisions a control returns: the values the loop acts on.

``Allow`` and ``Deny`` are the tool pipeline's own (a tool gate answers with them, with or without
a session); ``Stop``, ``Admit`` and ``Continue`` are the loop's; ``CancelCompaction`` and
``UseSummary`` answer ``before_compact``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ra.tools.pipeline import Allow, Deny

from ..config import StopReason

__all__ = ["Admit", "Allow", "CancelCompaction", "Continue", "Deny", "Stop", "UseSummary"]


@dataclass(frozen=True, slots=True)
class Stop:
    """End the input with ``reason``; ``message`` says why (for logs and the host). With reason
    ``ERROR``, ``error`` is the exception reported (ERROR event, ``SubmitResult.error``)."""

    reason: StopReason
    message: str = ""
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class Admit:
    """Let the input in and add ``context`` for the model right after the prompt (``source`` says
    who added it, e.g. "UserPromptSubmit"). It is recorded only once every control let the input in:
    a refused prompt never enters the history, and neither does what was added for it."""

    context: str
    source: str = ""


@dataclass(frozen=True, slots=True)
class Continue:
    """The model wanted to stop; add ``message`` as a user message and take another step."""

    message: str


@dataclass(frozen=True, slots=True)
class CancelCompaction:
    """Do not compact now. Before a call the loop goes on with the context as it is; after the
    provider refused the context the input ends with a ``ContextOverflowError`` naming ``reason``."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class UseSummary:
    """Compact with this summary instead of asking the model for one (the user's messages are
    still kept verbatim after it, and the file lists are still added)."""

    summary: str

    def __post_init__(self) -> None:
        if not isinstance(self.summary, str) or not self.summary.strip():
            raise ValueError("UseSummary needs a non-empty summary text")
