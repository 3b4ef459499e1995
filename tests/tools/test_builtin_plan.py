"""update_plan through the real pipeline: a valid plan is confirmed and reported as metadata; every
malformed call is an error result that names the problem, never an exception."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ra.llm.types import ToolCall, ToolResult
from ra.tools.builtin import update_plan_tool
from ra.tools.builtin.plan import (
    MAX_STEP_CHARS,
    MAX_STEPS,
    Plan,
    PlanError,
    PlanStep,
    parse_plan,
    plan_from_metadata,
    recorded_plan,
)
from ra.tools.registry import ToolEffect

from .builtin_support import Runner, local_env

STEPS = [
    {"step": "Read the parser", "status": "completed"},
    {"step": "Fix the off-by-one", "status": "in_progress"},
    {"step": "Add a test", "status": "pending"},
]


async def test_a_valid_plan_is_confirmed_and_carried_as_metadata(tmp_path: Path) -> None:
    run = Runner(update_plan_tool(), local_env(tmp_path))
    out = await run(plan=STEPS, explanation="  found the bug  ")
    assert not out.is_error
    assert out.content == "Plan updated: 1 completed, 1 in progress, 1 pending."
    assert out.metadata == {"plan": STEPS, "explanation": "found the bug"}
    plan = plan_from_metadata(out.metadata)
    assert plan is not None and plan.steps[1] == PlanStep("Fix the off-by-one", "in_progress")
    assert plan.explanation == "found the bug"
    assert list(tmp_path.iterdir()) == []  # noqa: ASYNC240 - it touches nothing


async def test_an_empty_plan_clears_it(tmp_path: Path) -> None:
    out = await Runner(update_plan_tool(), local_env(tmp_path))(plan=[])
    assert not out.is_error and out.content == "Plan cleared."
    assert out.metadata == {"plan": [], "explanation": None}


def test_the_tool_changes_nothing_and_matches_codex_arguments() -> None:
    tool = update_plan_tool()
    assert tool.name == "update_plan" and tool.effect is ToolEffect.NONE and not tool.mutating
    params = tool.definition.parameters
    assert params["required"] == ["plan"]
    assert set(params["properties"]) == {"explanation", "plan"}
    assert params["properties"]["plan"]["items"]["required"] == ["step", "status"]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "plan"),
        ({"plan": "1. read 2. fix"}, "'1. read 2. fix' is not of type 'array'"),
        ({"plan": {"step": "a", "status": "pending"}}, "is not of type 'array'"),
        ({"plan": [{"step": "a", "status": "done"}]}, "'done' is not one of"),
        ({"plan": [{"step": "a", "status": "IN_PROGRESS"}]}, "'IN_PROGRESS' is not one of"),
        ({"plan": [{"step": "a"}]}, "status"),
        ({"plan": [{"step": 3, "status": "pending"}]}, "is not of type 'string'"),
        ({"plan": ["read it"]}, "is not of type 'object'"),
        ({"plan": [{"step": "a", "status": "pending", "priority": "high"}]}, "priority"),
        ({"plan": [], "explanation": ["why"]}, "is not of type 'string'"),
        ({"plan": [], "steps": []}, "steps"),
    ],
)
async def test_the_schema_refuses_malformed_plans(tmp_path: Path, arguments: dict[str, Any], problem: str) -> None:
    out = await Runner(update_plan_tool(), local_env(tmp_path))(**arguments)
    assert out.is_error and out.metadata is None
    assert out.content.startswith("Invalid arguments for tool update_plan") and problem in out.content


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"plan": [{"step": "", "status": "pending"}]}, "plan[0].step must be a non-empty string"),
        ({"plan": [{"step": " \n\t", "status": "pending"}]}, "plan[0].step must be a non-empty string"),
        (
            {"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]},
            "at most one step may be in_progress, but plan[0], plan[1] are",
        ),
        ({"plan": [{"step": "a", "status": "pending"}] * (MAX_STEPS + 1)}, f"at most {MAX_STEPS} are allowed"),
        ({"plan": [{"step": "x" * (MAX_STEP_CHARS + 1), "status": "pending"}]}, "plan[0].step is"),
    ],
)
async def test_the_tool_refuses_what_the_schema_lets_through(
    tmp_path: Path, arguments: dict[str, Any], problem: str
) -> None:
    out = await Runner(update_plan_tool(), local_env(tmp_path))(**arguments)
    assert out.is_error and out.metadata is None
    assert out.content.startswith("The plan was not updated: ") and problem in out.content


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (None, "takes a JSON object"),
        ([{"step": "a", "status": "pending"}], "got a list"),
        ({}, "`plan` is missing"),
        ({"plan": None}, "got null"),
        ({"plan": "a, b"}, "got a string"),
        ({"plan": [True]}, "plan[0] must be an object"),
        ({"plan": [{"step": "a", "status": None}]}, "plan[0].status must be one of"),
        ({"plan": [{"step": "a", "status": "done"}]}, "got 'done'"),
        ({"plan": [{"step": None, "status": "pending"}]}, "got null"),
        ({"plan": [{"step": "a", "status": "pending", "note": 1}]}, "unknown field(s) note"),
        ({"plan": [], "explanation": 7}, "`explanation` must be a string"),
        ({"plan": [], "todos": []}, "unknown argument(s) todos"),
    ],
)
def test_parse_plan_checks_everything_on_its_own(arguments: Any, problem: str) -> None:
    with pytest.raises(PlanError) as caught:
        parse_plan(arguments)
    assert problem in str(caught.value)


def test_parse_plan_keeps_order_and_trims() -> None:
    plan = parse_plan({"plan": [{"step": " b ", "status": "pending"}, {"step": "a", "status": "completed"}]})
    assert plan == Plan((PlanStep("b", "pending"), PlanStep("a", "completed")), None)
    assert parse_plan({"plan": [], "explanation": "   "}).explanation is None


def test_metadata_that_is_no_plan_reads_as_none() -> None:
    assert plan_from_metadata(None) is None
    assert plan_from_metadata({"submitted": True}) is None
    assert plan_from_metadata({"plan": "x"}) is None
    two = [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]
    assert plan_from_metadata({"plan": two}) is None


def test_recorded_plan_needs_a_successful_update_plan_call() -> None:
    call = ToolCall("c1", "update_plan", {"plan": STEPS})
    plan = recorded_plan(call, ToolResult("c1", "Plan updated", False))
    assert plan is not None and [s.status for s in plan.steps] == ["completed", "in_progress", "pending"]
    assert recorded_plan(call, ToolResult("c1", "Denied", True)) is None
    assert recorded_plan(call, None) is None
    assert recorded_plan(ToolCall("c2", "shell", {"plan": STEPS}), ToolResult("c2", "ok", False)) is None
    bad = ToolCall("c3", "update_plan", {"plan": [{"step": "", "status": "pending"}]})
    assert recorded_plan(bad, ToolResult("c3", "ok", False)) is None
