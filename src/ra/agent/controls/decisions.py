"""The decisions a control returns: the values the loop acts on.

``Allow`` and ``Deny`` are the tool pipeline's own (a tool gate answers with them, with or without
a session); ``Stop``, ``Admit`` and ``Continue`` are the loop's.
"""

from __future__ import annotations

from dataclasses import dataclass

from ra.tools.pipeline import Allow, Deny

from ..config import StopReason

__all__ = ["Admit", "Allow", "Continue", "Deny", "Stop"]


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
