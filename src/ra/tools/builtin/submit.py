"""``submit(answer)``: the tool that ends a submit-mode run (ra-spec "Submit-enabled").

In submit mode the agent does not stop when the model writes a plain answer; it stops when the
model calls ``submit``. The answer it passes becomes the result of the input. The executor does
nothing but hand the answer back with ``end_input=True``: the agent loop ends the input after the
tool round (other tool calls of that step were refused by the one-call-per-step limit before they
ran), and the tool result stays in the history, so the conversation is still valid if the host
submits another input afterwards.
"""

from __future__ import annotations

from typing import Any

from ra.llm.types import ToolDefinition
from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolError, ToolOutput

__all__ = ["SUBMIT_TOOL_NAME", "submit_tool"]

SUBMIT_TOOL_NAME = "submit"

_DESCRIPTION = (
    "Finish the task and hand in your final answer. Call this once, only when the work is complete "
    "(or when you are certain it cannot be completed); the run ends as soon as it is called and "
    "`answer` is returned to the user as the result. Put everything the user needs in `answer`: it "
    "is the only text they will see."
)

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {
            "type": "string",
            "description": "The final answer or result of the task, complete and self-contained.",
        }
    },
    "required": ["answer"],
    "additionalProperties": False,
}


def _submit(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    answer = arguments.get("answer")
    if not isinstance(answer, str):  # the schema already says so; keep the executor honest alone too
        raise ToolError("submit needs `answer` as a string")
    return ToolOutput(answer, end_input=True, metadata={"submitted": True})


def submit_tool(name: str = SUBMIT_TOOL_NAME) -> RegisteredTool:
    """The ``submit`` tool. The run's result is the untruncated answer (the outcome's full output);
    only the copy kept in the history for the model is bounded like any tool output."""
    return RegisteredTool(ToolDefinition(name, _DESCRIPTION, _PARAMETERS), _submit, effect=ToolEffect.NONE)
