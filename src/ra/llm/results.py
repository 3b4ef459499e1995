"""What ``generate()`` returns: each step's result, the whole operation's, and stop conditions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidToolCallError
from .types import FinishReason, Message, Response, ToolCall, ToolDefinition, ToolResult, Usage, Warning

__all__ = ["GenerateResult", "RepairToolCall", "StepResult", "StopCondition", "has_tool_call", "step_count_is"]


@dataclass(slots=True)
class StepResult:
    """One model call of a (possibly multi-step) operation and the tool results it led to."""

    text: str
    reasoning: str | None
    tool_calls: list[ToolCall]
    tool_results: list[ToolResult]
    finish_reason: FinishReason
    usage: Usage
    response: Response
    warnings: list[Warning] = field(default_factory=list)

    @classmethod
    def of(cls, response: Response, tool_results: list[ToolResult]) -> StepResult:
        return cls(
            text=response.text,
            reasoning=response.reasoning,
            tool_calls=response.tool_calls,
            tool_results=tool_results,
            finish_reason=response.finish_reason,
            usage=response.usage,
            response=response,
            warnings=list(response.warnings),
        )


@dataclass(slots=True)
class GenerateResult:
    """The outcome of ``generate()``: the final step's fields, every step, and total usage.

    ``messages`` is the whole conversation as it stands at the end (system and input messages,
    every assistant turn and tool result), ready to be extended and sent again.
    """

    text: str
    reasoning: str | None
    tool_calls: list[ToolCall]
    tool_results: list[ToolResult]
    finish_reason: FinishReason
    usage: Usage
    total_usage: Usage
    steps: list[StepResult]
    response: Response
    output: Any = None
    messages: list[Message] = field(default_factory=list)

    @classmethod
    def from_steps(cls, steps: list[StepResult], messages: list[Message]) -> GenerateResult:
        last = steps[-1]
        total = Usage()
        for step in steps:
            total = total + step.usage
        return cls(
            text=last.text,
            reasoning=last.reasoning,
            tool_calls=last.tool_calls,
            tool_results=last.tool_results,
            finish_reason=last.finish_reason,
            usage=last.usage,
            total_usage=total,
            steps=steps,
            response=last.response,
            messages=messages,
        )

    @property
    def warnings(self) -> list[Warning]:
        return [w for step in self.steps for w in step.warnings]


StopCondition = Callable[[list[StepResult]], "bool | Awaitable[bool]"]
RepairToolCall = Callable[
    [ToolCall, InvalidToolCallError, ToolDefinition], "ToolCall | Awaitable[ToolCall | None] | None"
]


def step_count_is(n: int) -> StopCondition:
    """A ``stop_when`` that stops once ``n`` steps have run."""
    return lambda steps: len(steps) >= n


def has_tool_call(name: str) -> StopCondition:
    """A ``stop_when`` that stops after a step in which the model called tool ``name``."""
    return lambda steps: bool(steps) and any(c.name == name for c in steps[-1].tool_calls)
