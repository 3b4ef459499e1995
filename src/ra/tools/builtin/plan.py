"""``update_plan``: the model keeps a short, visible plan of the task's steps and their status.

The tool changes nothing and answers with a one-line confirmation; its point is the plan itself,
which travels to the host as the call's metadata (``TOOL_CALL_END.metadata``: ``{"plan": [{"step",
"status"}, ...], "explanation": str | None}``, read back with :func:`plan_from_metadata`). Each
call replaces the whole plan, so the newest successful call is the current plan; there is no state
in the tool, which keeps one profile usable by many sessions at once. A host that has only the
recorded conversation (a resumed session) gets the same plan back from a call and its result with
:func:`recorded_plan`.

The arguments match codex's tool of the same name: ``{"explanation"?: string, "plan": [{"step":
string, "status": "pending" | "in_progress" | "completed"}]}``, with at most one step in progress.
Anything else is refused with an error result that says what to fix; the pipeline's schema check
catches most of it, and :func:`parse_plan` checks everything again on its own (steps that are
blank, two steps in progress, sizes), so a host re-reading recorded arguments gets the same answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ra.llm.types import ToolCall, ToolDefinition, ToolResult
from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolOutput

__all__ = [
    "MAX_STEPS",
    "MAX_STEP_CHARS",
    "PLAN_STATUSES",
    "PLAN_TOOL_NAME",
    "Plan",
    "PlanError",
    "PlanStep",
    "parse_plan",
    "plan_from_metadata",
    "recorded_plan",
    "update_plan_tool",
]

PLAN_TOOL_NAME = "update_plan"
PLAN_STATUSES = ("pending", "in_progress", "completed")
#: Bounds on one plan, so a runaway call cannot flood the host's display.
MAX_STEPS = 100
MAX_STEP_CHARS = 2_000

_DESCRIPTION = (
    "Record your plan for the current task as a short list of steps, each marked pending, "
    "in_progress or completed, so the user can follow your progress. Use it for work with several "
    "distinct steps; skip it for quick, single-step requests. Every call replaces the whole plan: "
    "send all steps each time, with their current status.\n\n"
    "Keep exactly one step in_progress while you work (never more than one), mark a step completed "
    "as soon as it is done, and add, drop or reword steps when the work turns out differently. "
    "`explanation` may say briefly why the plan changed."
)

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string", "description": "Optional: why the plan is new or changed."},
        "plan": {
            "type": "array",
            "description": "Every step of the plan, in order.",
            "items": {
                "type": "object",
                "properties": {
                    "step": {"type": "string", "description": "What the step does, in a few words."},
                    "status": {"type": "string", "enum": list(PLAN_STATUSES)},
                },
                "required": ["step", "status"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["plan"],
    "additionalProperties": False,
}


class PlanError(ValueError):
    """The arguments are not a valid plan; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class PlanStep:
    step: str
    #: "pending", "in_progress" or "completed".
    status: str


@dataclass(frozen=True, slots=True)
class Plan:
    """One complete plan, as the model last sent it."""

    steps: tuple[PlanStep, ...]
    explanation: str | None = None

    def to_metadata(self) -> dict[str, Any]:
        """The plan as JSON data (what ``TOOL_CALL_END.metadata`` carries)."""
        return {
            "plan": [{"step": s.step, "status": s.status} for s in self.steps],
            "explanation": self.explanation,
        }

    def summary(self) -> str:
        """The confirmation the model reads: how many steps stand where."""
        if not self.steps:
            return "Plan cleared."
        counts = Counter(s.status for s in self.steps)
        parts = [f"{counts[status]} {status.replace('_', ' ')}" for status in reversed(PLAN_STATUSES) if counts[status]]
        return f"Plan updated: {', '.join(parts)}."


def parse_plan(arguments: Any) -> Plan:
    """``arguments`` as a :class:`Plan`; :class:`PlanError` naming the first problem otherwise."""
    if not isinstance(arguments, Mapping):
        raise PlanError(f"{PLAN_TOOL_NAME} takes a JSON object with a `plan` list, got {_kind(arguments)}")
    unknown = sorted(str(k) for k in arguments if k not in ("plan", "explanation"))
    if unknown:
        raise PlanError(f"unknown argument(s) {', '.join(unknown)}: {PLAN_TOOL_NAME} takes `plan` and `explanation`")
    explanation = arguments.get("explanation")
    if explanation is not None and not isinstance(explanation, str):
        raise PlanError(f"`explanation` must be a string, got {_kind(explanation)}")
    if "plan" not in arguments:
        raise PlanError("`plan` is missing: send every step as {step, status}")
    items = arguments["plan"]
    if not isinstance(items, list):
        raise PlanError(f"`plan` must be a list of {{step, status}} objects, got {_kind(items)}")
    if len(items) > MAX_STEPS:
        raise PlanError(f"`plan` has {len(items)} steps; at most {MAX_STEPS} are allowed: merge some")
    steps: list[PlanStep] = []
    for index, item in enumerate(items):
        where = f"plan[{index}]"
        if not isinstance(item, Mapping):
            raise PlanError(f"{where} must be an object with `step` and `status`, got {_kind(item)}")
        extra = sorted(str(k) for k in item if k not in ("step", "status"))
        if extra:
            raise PlanError(f"{where} has unknown field(s) {', '.join(extra)}: a step has only `step` and `status`")
        text = item.get("step")
        if not isinstance(text, str) or not text.strip():
            raise PlanError(f"{where}.step must be a non-empty string, got {_kind(text)}")
        if len(text) > MAX_STEP_CHARS:
            raise PlanError(f"{where}.step is {len(text)} characters long; at most {MAX_STEP_CHARS} are allowed")
        status = item.get("status")
        if status not in PLAN_STATUSES:
            raise PlanError(f"{where}.status must be one of {', '.join(PLAN_STATUSES)}, got {status!r}")
        steps.append(PlanStep(text.strip(), status))
    running = [i for i, s in enumerate(steps) if s.status == "in_progress"]
    if len(running) > 1:
        listed = ", ".join(f"plan[{i}]" for i in running)
        raise PlanError(f"at most one step may be in_progress, but {listed} are: mark one and leave the rest pending")
    return Plan(tuple(steps), (explanation.strip() or None) if explanation else None)


def plan_from_metadata(metadata: Mapping[str, Any] | None) -> Plan | None:
    """The plan a successful ``update_plan`` call reported (its ``TOOL_CALL_END.metadata``), or
    None when ``metadata`` holds no valid plan (another tool, a failed call)."""
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("plan"), list):
        return None
    try:
        return parse_plan({"plan": metadata["plan"], "explanation": metadata.get("explanation")})
    except PlanError:
        return None


def recorded_plan(call: ToolCall, result: ToolResult | None) -> Plan | None:
    """The plan a recorded call set: ``call`` is an ``update_plan`` call whose ``result`` is not
    an error and whose arguments are a valid plan; None otherwise (the call changed no plan)."""
    if call.name != PLAN_TOOL_NAME or result is None or result.is_error or call.arguments_error is not None:
        return None
    try:
        return parse_plan(call.arguments)
    except PlanError:
        return None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "an empty string" if not value.strip() else "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _update_plan(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    try:
        plan = parse_plan(arguments)
    except PlanError as exc:
        return ToolOutput(f"The plan was not updated: {exc}.", is_error=True)
    return ToolOutput(plan.summary(), metadata=plan.to_metadata())


def update_plan_tool() -> RegisteredTool:
    """The ``update_plan`` tool (offered by the OpenAI profile; any profile may register it). Its
    name is fixed: hosts recognise plan calls by it (:func:`recorded_plan`, ``ra acp``)."""
    definition = ToolDefinition(PLAN_TOOL_NAME, _DESCRIPTION, _PARAMETERS)
    return RegisteredTool(definition, _update_plan, effect=ToolEffect.NONE)
