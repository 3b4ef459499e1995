"""Plan mode as the model meets it: told so in the system prompt, offered only the tools that
change nothing, answering with the plan - and a call to a tool it was not offered is still
denied. Before, every tool was offered and edits and commands failed one by one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ra.agent import Session, SessionConfig
from ra.agent.permissions import PermissionAllow, PermissionContext
from ra.env.local import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, StepLike, call, reply
from ra.llm.types import Request
from ra.profiles import create_anthropic_profile, create_openai_profile

from .support import FAST_RETRY
from .test_permissions import build, effect_tools, results


def names(request: Request) -> list[str]:
    return [t.name for t in request.tools or ()]


def system(request: Request) -> str:
    return request.messages[0].text if request.messages and request.messages[0].role == "system" else ""


async def test_plan_mode_offers_only_tools_that_change_nothing_and_says_so() -> None:
    ran: list[str] = []
    session, model = build(
        [reply("1. read a.py\n2. change f()")], tools=effect_tools(ran), config=SessionConfig(permission_mode="plan")
    )
    result = await session.submit("plan the change")
    (request,) = model.requests
    assert sorted(names(request)) == ["network_tool", "none_tool", "read_tool"]
    assert "# Plan mode" in system(request) and "final answer is the plan" in system(request)
    assert system(request).startswith("test")  # the profile's prompt is kept
    assert result.text == "1. read a.py\n2. change f()"  # the answer is the plan


async def test_outside_plan_mode_every_tool_is_offered_and_nothing_is_said() -> None:
    session, model = build([reply("ok")], tools=effect_tools([]))
    await session.submit("go")
    assert len(names(model.requests[0])) == 6 and "Plan mode" not in system(model.requests[0])


async def test_a_tool_not_offered_is_still_denied_when_called_by_name() -> None:
    ran: list[str] = []
    steps: list[StepLike] = [call("edit_tool"), call("execute_tool"), call("undeclared_tool"), reply("plan")]
    session, model = build(steps, tools=effect_tools(ran), config=SessionConfig(permission_mode="plan"))
    await session.submit("go")
    assert ran == []
    assert all(r.startswith("Not allowed in plan mode") for r in results(model.requests[-1]))


async def test_switching_mode_changes_the_offered_tools_and_the_prompt_at_the_next_step() -> None:
    holder: dict[str, Session] = {}

    def to_plan(name: str, args: dict[str, Any], ctx: PermissionContext) -> Any:
        holder["s"].set_permission_mode("plan")
        return PermissionAllow()

    ran: list[str] = []
    steps: list[StepLike] = [call("execute_tool", arg="1"), reply("the plan")]
    session, model = build(steps, tools=effect_tools(ran), can_use_tool=to_plan)
    holder["s"] = session
    await session.submit("go")
    first, second = model.requests
    assert "edit_tool" in names(first) and "Plan mode" not in system(first)
    assert "edit_tool" not in names(second) and "# Plan mode" in system(second)
    session.set_permission_mode("default")
    model.add(reply("back"))
    await session.submit("again")
    assert "edit_tool" in names(model.requests[-1]) and "Plan mode" not in system(model.requests[-1])


async def test_the_real_profiles_lose_their_shell_and_edit_tools_in_plan_mode(tmp_path: Path) -> None:
    for profile in (create_anthropic_profile(model="m"), create_openai_profile(model="m")):
        model = ScriptedAdapter([reply("plan")])
        session = Session(
            profile,
            LocalExecutionEnvironment(str(tmp_path)),
            Client(providers={profile.provider or profile.id: model}),
            SessionConfig(permission_mode="plan", retry_policy=FAST_RETRY, prices={"m": ModelPrice.free()}),
        )
        await session.submit("plan")
        offered = set(names(model.requests[0]))
        everything = {t.name for t in profile.tools()}
        assert offered and offered < everything
        for name in ("shell", "write_file", "edit_file", "apply_patch", "spawn_agent"):
            assert name not in offered
        assert "read_file" in offered or "grep" in offered
