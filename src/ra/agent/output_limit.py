"""A response cut at the output token limit (agentic-loop-go-port-spec 7).

* Cut in the middle of its text: the partial text is kept (it is in the history and the
  answer), and the model is asked to continue where it stopped.
* Cut in the middle of a tool call: the last call is incomplete (its arguments were cut off), so
  it is not run; it is answered with an error result that says so and asks for a smaller call.
  The complete calls before it run as usual.

Bounded: after :data:`MAX_CUT_RESPONSES` cut responses in a row the input stops with
``max_tokens`` (every call of the last one answered as not run), as without this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import StopReason
from .controls.decisions import Stop
from .events import WarningEvent
from .history import ContextTurn

if TYPE_CHECKING:
    from .state import RunState

__all__ = ["CONTINUE_MESSAGE", "CUT_CALL_RESULT", "MAX_CUT_RESPONSES", "continue_cut_text", "output_cut"]

#: Cut responses in a row that the loop continues; the next one stops the input.
MAX_CUT_RESPONSES = 3

CONTINUE_MESSAGE = (
    "Your last response was cut off at the output token limit. Continue exactly where it stopped, "
    "without repeating what you already wrote."
)
CUT_CALL_RESULT = (
    "Not executed: your response was cut off at the output token limit while this tool call was being "
    "written, so its arguments are incomplete. Make the call again with smaller arguments (for example, "
    "split a large file write or edit into several smaller ones)."
)


def output_cut(run: RunState) -> Stop | None:
    """A response was cut at the output limit: None to go on (continue the text, or run the
    complete calls), or the Stop once too many responses in a row were cut."""
    run.cut_responses += 1
    if run.cut_responses > MAX_CUT_RESPONSES:
        run.cut_responses = 0
        return Stop(
            StopReason.MAX_TOKENS,
            f"the response was cut at the output token limit ({MAX_CUT_RESPONSES + 1} responses in a row)",
        )
    return None


def continue_cut_text(run: RunState) -> None:
    """Ask the model to go on with a text answer that was cut off."""
    run.history.append(ContextTurn(CONTINUE_MESSAGE, source="max_tokens"))
    run.emit(
        WarningEvent(
            "max_tokens",
            f"The response was cut at the output token limit; the model is asked to continue "
            f"({run.cut_responses} of {MAX_CUT_RESPONSES}).",
            {"cut_responses": run.cut_responses},
        )
    )
