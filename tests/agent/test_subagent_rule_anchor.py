"""A subagent spawned with a ``working_dir`` outside the project keeps the parent's relative file
rules about the parent's files. Before, the child read ``Read(./.env)`` relative to its own
directory: spawned in ``..``, it read ``project/.env`` and wrote ``project/secrets/x`` past
``Read(./.env)`` and ``Edit(./secrets/**)``. Real files, the real tools, a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ra.agent import Session, SessionConfig
from ra.env.local import LocalExecutionEnvironment
from ra.llm import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.llm.types import Request
from ra.profiles import create_anthropic_profile


def _results(request: Request) -> list[str]:
    return [str(p.tool_result.content) for m in request.messages for p in m.content if p.tool_result is not None]


async def _child_runs(tmp_path: Path, child_call: Any, config: SessionConfig) -> str:
    project = tmp_path / "project"

    def route(request: Request) -> Any:
        first = next(m.text for m in request.messages if m.role == "user")
        got = _results(request)
        if first == "child task":
            return child_call if not got else reply("child done")
        if not got:
            return call("spawn_agent", task="child task", working_dir="..")
        if len(got) == 1:
            return call("wait", agent_id=json.loads(got[0])["agent_id"])
        return reply("parent done")

    model = ScriptedAdapter(default=route)
    session = Session(
        create_anthropic_profile(model="m", provider="scripted"),
        LocalExecutionEnvironment(str(project)),
        Client({"scripted": model}, default_provider="scripted"),
        config,
    )
    try:
        await session.submit("parent")
    finally:
        await session.close()
    child = [r for r in model.requests if next(m.text for m in r.messages if m.role == "user") == "child task"][-1]
    return _results(child)[0]


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "project" / "secrets").mkdir(parents=True)
    (tmp_path / "project" / ".env").write_text("TOKEN=SECRET\n")
    return tmp_path


DENY = SessionConfig(
    permission_mode="bypass", disallowed_tools=("Read(./.env)", "Edit(./secrets/**)"), prices={"m": ModelPrice.free()}
)


async def test_a_child_in_another_directory_cannot_read_what_a_relative_deny_rule_names(tmp: Path) -> None:
    result = await _child_runs(tmp, call("read_file", file_path="project/.env"), DENY)
    assert "SECRET" not in result and "Denied by the rule" in result


async def test_a_child_in_another_directory_cannot_write_what_a_relative_deny_rule_names(tmp: Path) -> None:
    result = await _child_runs(tmp, call("write_file", file_path="project/secrets/x", content="x"), DENY)
    assert not (tmp / "project/secrets/x").exists() and "Denied by the rule" in result


async def test_a_relative_allow_rule_does_not_follow_the_child_out_of_the_project(tmp: Path) -> None:
    (tmp / "other").mkdir()
    config = SessionConfig(
        permission_mode="default", allowed_tools=("Task", "wait", "Edit(*.md)"), prices={"m": ModelPrice.free()}
    )
    result = await _child_runs(tmp, call("write_file", file_path="other/README.md", content="x"), config)
    assert not (tmp / "other/README.md").exists() and "no one to ask" in result
    # Inside the project the same allow rule still works for the child.
    result = await _child_runs(tmp, call("write_file", file_path="project/README.md", content="x"), config)
    assert (tmp / "project/README.md").read_text() == "x", result
