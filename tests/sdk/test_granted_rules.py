"""``ra.query()`` with ``resume``: an "always" answer given in an earlier query holds in the
resumed one (the rule comes back from the record), and a deny rule of the new options still wins."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ra.agent import GenericProfile, SessionConfig
from ra.agent.permissions import PermissionAllow, PermissionContext, PermissionDeny
from ra.agent.store import FileSessionStore
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.sdk import QueryOptions, query
from ra.tools.registry import ToolRegistry

from ..agent.support import FAST_RETRY, FakeEnv


async def test_an_always_answer_holds_in_a_resumed_query(tmp_path: Path) -> None:
    ran: list[str] = []
    asked: list[str] = []
    registry = ToolRegistry()
    registry.add(
        "shell",
        "run a command",
        {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        lambda args, ctx: ran.append(args["command"]) or "ok",
        effect="execute",
    )
    model = ScriptedAdapter([call("shell", command="pytest -x"), reply("done")])
    client = Client(providers={"scripted": model})
    profile = GenericProfile("scripted", "test-model", registry, system_prompt="test")
    store = FileSessionStore(tmp_path)

    def answer(always: bool) -> Any:
        def can_use_tool(name: str, args: dict[str, Any], ctx: PermissionContext) -> Any:
            asked.append(args["command"])
            return PermissionAllow(always=True) if always else PermissionDeny("no")

        return can_use_tool

    async def run(prompt: str, always: bool, resume: str | None = None, **fields: Any) -> list[Any]:
        config = SessionConfig(retry_policy=FAST_RETRY, permission_mode="default", **fields)
        config.prices["test-model"] = ModelPrice.free()
        options = QueryOptions(
            profile=profile,
            client=client,
            env=FakeEnv(),
            config=config,
            session_store=store,
            can_use_tool=answer(always),
            resume=resume,
        )
        return await asyncio.wait_for(_collect(query(prompt, options=options)), 10)

    first = await run("test", True)
    sid = first[0].session_id
    assert asked == ["pytest -x"]

    asked.clear()
    model.add(call("shell", command="pytest -x -q"))
    model.add(reply("again"))
    await run("test again", False, resume=sid)
    assert asked == [] and ran == ["pytest -x", "pytest -x -q"]

    model.add(call("shell", command="pytest -x -q"))
    model.add(reply("denied"))
    await run("and again", False, resume=sid, disallowed_tools=("shell(pytest -x -q)",))
    assert asked == [] and ran == ["pytest -x", "pytest -x -q"]


async def _collect(messages: Any) -> list[Any]:
    return [m async for m in messages]
