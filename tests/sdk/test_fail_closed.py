"""A decision of "ask" with nobody to ask denies: in ``ra.query()``, a Session and a subagent
alike (issue 16, section 2). Real files, a scripted model, the real profiles and tools.

Before: ``ra.query()`` with ``permission_mode="accept_edits"``, allow rules for other commands
and no ``can_use_tool`` ran the model's ``touch``; the one-shot CLI denied the same call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ra.agent import Session, SessionConfig
from ra.env.local import LocalExecutionEnvironment
from ra.llm import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.llm.types import Request
from ra.profiles import create_anthropic_profile
from ra.sdk import QueryOptions, ResultMessage, query


def _client(model: ScriptedAdapter) -> Client:
    return Client({"scripted": model}, default_provider="scripted")


def _results(request: Request) -> list[str]:
    return [str(p.tool_result.content) for m in request.messages for p in m.content if p.tool_result is not None]


async def test_query_with_accept_edits_and_no_callback_does_not_run_an_unlisted_command(tmp_path: Path) -> None:
    model = ScriptedAdapter(
        [
            call("shell", command=f"touch {tmp_path}/pwned"),
            call("write_file", file_path="notes.txt", content="edited\n"),
            call("shell", command="git status"),
            reply("done"),
        ]
    )
    options = QueryOptions(
        profile="anthropic",
        provider="scripted",
        model="m",
        client=_client(model),
        cwd=tmp_path,
        permission_mode="accept_edits",
        allowed_tools=["Bash(git status:*)", "Bash(ls:*)"],
    )
    messages = [m async for m in query("go", options=options)]
    assert not (tmp_path / "pwned").exists()
    assert (tmp_path / "notes.txt").read_text() == "edited\n"  # accept_edits: edits still run
    touch, _, status = _results(model.requests[-1])
    assert "there is no one to ask" in touch
    assert "no one to ask" not in status  # the allowed command ran
    (result,) = [m for m in messages if isinstance(m, ResultMessage)]
    assert [(d["tool_name"], d["tool_input"]) for d in result.permission_denials] == [
        ("shell", {"command": f"touch {tmp_path}/pwned"})
    ]


async def test_a_plain_query_still_runs_everything(tmp_path: Path) -> None:
    """No mode, no rules, no callback: nothing asks for checks, so the mode is bypass."""
    model = ScriptedAdapter([call("shell", command="touch made"), reply("done")])
    options = QueryOptions(profile="anthropic", provider="scripted", model="m", client=_client(model), cwd=tmp_path)
    messages = [m async for m in query("go", options=options)]
    assert (tmp_path / "made").exists()
    assert messages[0].data["permissionMode"] == "bypassPermissions"  # type: ignore[attr-defined]


async def test_allow_rules_alone_turn_checking_on(tmp_path: Path) -> None:
    model = ScriptedAdapter([call("shell", command="touch made"), reply("done")])
    options = QueryOptions(
        profile="anthropic",
        provider="scripted",
        model="m",
        client=_client(model),
        cwd=tmp_path,
        allowed_tools=["Bash(ls:*)"],
    )
    messages = [m async for m in query("go", options=options)]
    assert not (tmp_path / "made").exists()
    assert messages[0].data["permissionMode"] == "default"  # type: ignore[attr-defined]


async def test_a_deny_rule_that_cannot_tell_asks_and_nobody_asked_denies(tmp_path: Path) -> None:
    """In bypass mode a deny rule is the only guard: ``$CMD`` could be ``rm``, so it is not run."""
    model = ScriptedAdapter([call("shell", command=f"C=touch; $C {tmp_path}/pwned"), reply("done")])
    options = QueryOptions(
        profile="anthropic",
        provider="scripted",
        model="m",
        client=_client(model),
        cwd=tmp_path,
        permission_mode="bypass",
        disallowed_tools=["Bash(touch:*)"],
    )
    [m async for m in query("go", options=options)]
    assert not (tmp_path / "pwned").exists()
    assert "deny rule 'Bash(touch:*)' may match" in _results(model.requests[-1])[0]


async def test_a_subagent_with_nobody_to_ask_denies(tmp_path: Path) -> None:
    def route(request: Request) -> Any:
        first = next(m.text for m in request.messages if m.role == "user")
        got = _results(request)
        if first == "child task":
            return call("shell", command=f"touch {tmp_path}/pwned") if not got else reply("child done")
        if not got:
            return call("spawn_agent", task="child task")
        if len(got) == 1:
            return call("wait", agent_id=json.loads(got[0])["agent_id"])
        return reply("parent done")

    model = ScriptedAdapter(default=route)
    config = SessionConfig(
        permission_mode="default",
        allowed_tools=("Task", "wait"),
        prices={"m": ModelPrice.free()},
    )
    session = Session(
        create_anthropic_profile(model="m", provider="scripted"),
        LocalExecutionEnvironment(str(tmp_path)),
        _client(model),
        config,
    )
    try:
        result = await session.submit("parent")
    finally:
        await session.close()
    assert result.text == "parent done"
    assert not (tmp_path / "pwned").exists()
    (child,) = [r for r in model.requests if next(m.text for m in r.messages if m.role == "user") == "child task"][-1:]
    assert "there is no one to ask" in _results(child)[0]
