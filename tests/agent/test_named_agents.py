"""Named agents (ra.agent.subagents.definitions): AgentDefinition, spawn_agent(agent_type=...), agent files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ra.agent import GenericProfile, Session, SessionConfig
from ra.agent.events import EventKind as E
from ra.agent.permissions import PermissionAllow, PermissionDeny
from ra.agent.subagents import SubAgentError, SubAgentManager
from ra.agent.subagents.definitions import (
    AgentDefinition,
    RoleProfile,
    describe_agents,
    load_agent_files,
    parse_agent_file,
)
from ra.agent.subagents.tools import subagent_tools
from ra.env.local import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, StepLike, call, reply
from ra.llm.types import Request, ToolDefinition
from ra.profiles import create_anthropic_profile
from ra.tools.registry import ToolRegistry

from .support import FAST_RETRY, FakeEnv, Recorder

REVIEWER = AgentDefinition(
    description="Reviews a diff and lists problems.",
    prompt="You review code. Never change files.",
    tools=("read_tool", "edit_tool"),
    model="review-model",
    max_turns=3,
    permission_mode="plan",
)
WRITER = AgentDefinition(
    description="Writes code.", prompt="You write code.", disallowed_tools=("exec_tool",), model="inherit"
)


def registry(ran: list[str]) -> ToolRegistry:
    reg = ToolRegistry()
    for name, effect in (("read_tool", "read"), ("edit_tool", "edit"), ("exec_tool", "execute")):
        reg.add(name, name, None, lambda args, ctx, n=name: ran.append(n) or f"{n} ok", effect=effect)
    for tool in subagent_tools():
        reg.register(tool)
    return reg


class Router:
    """Answers each request from the script of the agent that sent it; keeps each agent's requests."""

    def __init__(self, scripts: dict[str, list[StepLike]]) -> None:
        self.scripts = scripts
        self.requests: dict[str, list[Request]] = {key: [] for key in scripts}

    def __call__(self, request: Request) -> Any:
        first = next(m.text for m in request.messages if m.role == "user")
        self.requests[first].append(request)
        item = self.scripts[first].pop(0)
        return item(request) if callable(item) else item


def results(request: Request) -> list[str]:
    return [str(p.tool_result.content) for m in request.messages for p in m.content if p.tool_result is not None]


def parent(
    scripts: dict[str, list[StepLike]], ran: list[str], agents: dict[str, AgentDefinition] | None = None
) -> tuple[Session, Router]:
    router = Router(scripts)
    model = ScriptedAdapter(default=router)
    profile = GenericProfile("scripted", "test-model", registry(ran), system_prompt="You are the parent.")
    free = ModelPrice.free()
    config = SessionConfig(
        retry_policy=FAST_RETRY,
        agents=dict(agents if agents is not None else {"reviewer": REVIEWER, "writer": WRITER}),
        prices={"test-model": free, "review-model": free},
    )
    return Session(profile, FakeEnv(), Client(providers={"scripted": model}), config), router


def wait_for_child(request: Request) -> StepLike:
    return call("wait", agent_id=json.loads(results(request)[-1])["agent_id"])


# -- AgentDefinition -------------------------------------------------------------------------------


def test_definition_validation() -> None:
    with pytest.raises(ValueError, match="needs a description"):
        AgentDefinition(description=" ", prompt="p")
    with pytest.raises(ValueError, match="needs a prompt"):
        AgentDefinition(description="d", prompt="")
    with pytest.raises(ValueError, match="max_turns must be >= 1"):
        AgentDefinition(description="d", prompt="p", max_turns=0)
    with pytest.raises(ValueError, match="max_turns must be >= 1"):
        AgentDefinition(description="d", prompt="p", max_turns=True)
    with pytest.raises(ValueError, match="unknown permission mode 'careful'"):
        AgentDefinition(description="d", prompt="p", permission_mode="careful")
    ok = AgentDefinition(
        description="d", prompt="p", tools=["a", "b"], disallowed_tools=["c"], permission_mode="dontAsk"
    )
    assert (ok.tools, ok.disallowed_tools, ok.permission_mode) == (("a", "b"), ("c",), "dont_ask")
    assert ok.inherits_model and WRITER.inherits_model and not REVIEWER.inherits_model


def test_registry_for_narrows_to_the_named_tools() -> None:
    reg = registry([])
    assert REVIEWER.registry_for(reg).names() == ["read_tool", "edit_tool"]
    assert "exec_tool" not in WRITER.registry_for(reg).names()
    assert "edit_tool" in WRITER.registry_for(reg).names()
    assert reg.names() == ["read_tool", "edit_tool", "exec_tool", "spawn_agent", "send_input", "wait", "close_agent"]
    plain = AgentDefinition(description="d", prompt="p")
    assert plain.registry_for(reg) is reg
    with pytest.raises(ValueError, match="names tools the profile does not have: nope"):
        AgentDefinition(description="d", prompt="p", tools=("read_tool", "nope")).registry_for(reg)


def test_registry_for_accepts_claude_code_tool_names() -> None:
    """Agent files written for Claude Code list ``Read, Grep, Glob``: they name ra's tools."""
    reg = create_anthropic_profile(model="m").tool_registry
    explorer = AgentDefinition(description="d", prompt="p", tools=("Read", "Grep", "Glob"), disallowed_tools=("Grep",))
    assert explorer.registry_for(reg).names() == ["read_file", "glob"]
    no_shell = AgentDefinition(description="d", prompt="p", disallowed_tools=("Bash", "Task"))
    names = no_shell.registry_for(reg).names()
    assert "shell" not in names and "spawn_agent" not in names and "read_file" in names


def test_describe_agents_lists_the_types_and_offers_them_as_an_enum() -> None:
    spawn = subagent_tools()[0].definition
    described = describe_agents(spawn, {"reviewer": REVIEWER, "writer": WRITER})
    assert described.description.endswith(
        "Agent types (agent_type):\n- reviewer: Reviews a diff and lists problems.\n- writer: Writes code."
    )
    assert described.parameters["properties"]["agent_type"]["enum"] == ["reviewer", "writer"]
    assert "enum" not in spawn.parameters["properties"]["agent_type"]  # the original is untouched
    assert describe_agents(spawn, {}) is spawn


# -- spawning by type ----------------------------------------------------------------------------------


async def test_the_model_sees_the_agent_types_in_spawn_agents_definition() -> None:
    session, router = parent({"parent": [reply("ok")]}, [])
    await session.submit("parent")
    (spawn,) = [t for t in router.requests["parent"][0].tools or [] if t.name == "spawn_agent"]
    assert isinstance(spawn, ToolDefinition)
    assert "- reviewer: Reviews a diff and lists problems." in spawn.description
    assert spawn.parameters["properties"]["agent_type"]["enum"] == ["reviewer", "writer"]


async def test_a_typed_child_gets_its_role_tools_model_turns_and_mode() -> None:
    ran: list[str] = []
    scripts: dict[str, list[StepLike]] = {
        "parent": [call("spawn_agent", task="review it", agent_type="reviewer"), wait_for_child, reply("done")],
        "review it": [call("edit_tool"), call("read_tool"), reply("looks good")],
    }
    session, router = parent(scripts, ran)
    rec = Recorder(session)
    assert (await session.submit("parent")).text == "done"
    spawned = json.loads(results(router.requests["parent"][1])[0])
    assert (spawned["agent_type"], spawned["model"], spawned["max_turns"]) == ("reviewer", "review-model", 3)
    first = router.requests["review it"][0]
    assert first.model == "review-model"
    system = first.messages[0].text
    assert system.startswith("You are the parent.")
    role = "# Your role: reviewer\n\nYou review code. Never change files."
    assert role in system and system.index(role) < system.index("# Plan mode")  # in plan mode, and told so
    # its tools are read_tool and edit_tool, and plan mode offers only the one that changes nothing
    assert [t.name for t in first.tools or []] == ["read_tool"]
    # plan mode: the edit (called by name all the same) was denied, the read ran.
    assert ran == ["read_tool"]
    assert results(router.requests["review it"][1])[0].startswith("Not allowed in plan mode")
    (handle,) = SubAgentManager(session).handles()
    assert handle.agent_type == "reviewer" and handle.session.permission_mode == "plan"
    assert handle.session.config.max_turns == 3
    wait_output = json.loads(next(e for e in rec.of(E.TOOL_CALL_END) if e["tool_name"] == "wait")["output"])
    assert wait_output["output"] == "looks good"


async def test_a_typed_child_in_plan_mode_is_denied_edits() -> None:
    ran: list[str] = []
    planner = AgentDefinition(description="Plans.", prompt="Plan only.", permission_mode="plan")
    scripts: dict[str, list[StepLike]] = {
        "parent": [call("spawn_agent", task="plan it", agent_type="planner"), wait_for_child, reply("done")],
        "plan it": [call("edit_tool"), lambda r: reply(results(r)[-1])],
    }
    session, router = parent(scripts, ran, {"planner": planner})
    await session.submit("parent")
    assert ran == []
    assert results(router.requests["plan it"][-1])[-1].startswith("Not allowed in plan mode: edit_tool changes files")


async def test_a_typed_child_inherits_the_model_and_loses_disallowed_tools() -> None:
    scripts: dict[str, list[StepLike]] = {
        "parent": [call("spawn_agent", task="write it", agent_type="writer"), wait_for_child, reply("done")],
        "write it": [reply("written")],
    }
    session, router = parent(scripts, [])
    await session.submit("parent")
    child = router.requests["write it"][0]
    assert child.model == "test-model"
    names = [t.name for t in child.tools or []]
    assert "exec_tool" not in names and "edit_tool" in names
    assert "spawn_agent" not in names  # at the depth limit, as for every child


async def test_an_unknown_agent_type_is_refused_with_the_list_of_types() -> None:
    scripts: dict[str, list[StepLike]] = {
        "parent": [call("spawn_agent", task="x", agent_type="hacker"), reply("done")],
    }
    session, router = parent(scripts, [])
    await session.submit("parent")
    (refused,) = results(router.requests["parent"][-1])
    assert "hacker" in refused and "reviewer" in refused and "writer" in refused
    assert session.subagents == {}
    with pytest.raises(SubAgentError, match="unknown agent_type 'hacker'; the agent types are: reviewer, writer"):
        SubAgentManager(session).spawn("x", agent_type="hacker")


async def test_without_agent_types_an_agent_type_is_refused() -> None:
    scripts: dict[str, list[StepLike]] = {"parent": [reply("ok")]}
    session, _ = parent(scripts, [], {})
    with pytest.raises(SubAgentError, match="none are defined in this session"):
        SubAgentManager(session).spawn("x", agent_type="reviewer")


async def test_a_definition_naming_missing_tools_cannot_be_spawned() -> None:
    broken = AgentDefinition(description="d", prompt="p", tools=("read_tool", "teleport"))
    session, _ = parent({"parent": [reply("ok")]}, [], {"broken": broken})
    with pytest.raises(SubAgentError, match=r"agent type 'broken': the agent definition names tools .*teleport"):
        SubAgentManager(session).spawn("x", agent_type="broken")


async def test_a_definition_listing_spawn_agent_can_still_be_spawned_at_the_depth_limit() -> None:
    lead = AgentDefinition(description="d", prompt="p", tools=("read_tool", "spawn_agent", "wait"))
    scripts: dict[str, list[StepLike]] = {"parent": [reply("ok")], "x": [reply("done")]}
    session, _ = parent(scripts, [], {"lead": lead})
    await session.submit("parent")
    handle = SubAgentManager(session).spawn("x", agent_type="lead")
    result = await handle.wait(5)
    assert result is not None and result.success


def test_role_profile_wraps_the_base_profile() -> None:
    base = GenericProfile("scripted", "base-model", registry([]), system_prompt="Base.")
    narrowed = REVIEWER.registry_for(base.tool_registry)
    role = RoleProfile(base, "reviewer", REVIEWER, model="review-model", registry=narrowed)
    assert (role.id, role.model, role.provider) == ("scripted", "review-model", "scripted")
    assert [t.name for t in role.tools()] == ["read_tool", "edit_tool"]
    clone = role.clone(model="other")
    assert (clone.model, clone.role_name, clone.tool_registry) == ("other", "reviewer", narrowed)


# -- agent files -----------------------------------------------------------------------------------------

AGENT_FILE = """---
name: code-reviewer
description: "Reviews changes for bugs."
tools: read_file, grep , glob
disallowed-tools: [shell, 'write_file']
model: claude-haiku-4-5
max_turns: 7
permission_mode: acceptEdits
# a comment
color: blue
---

You are a careful reviewer.

List every problem with a file and line.
"""


def test_parse_agent_file_reads_front_matter_and_the_prompt() -> None:
    name, definition = parse_agent_file(AGENT_FILE, default_name="ignored")
    assert name == "code-reviewer"
    assert definition == AgentDefinition(
        description="Reviews changes for bugs.",
        prompt="You are a careful reviewer.\n\nList every problem with a file and line.",
        tools=("read_file", "grep", "glob"),
        disallowed_tools=("shell", "write_file"),
        model="claude-haiku-4-5",
        max_turns=7,
        permission_mode="accept_edits",
    )


def test_parse_agent_file_defaults() -> None:
    name, definition = parse_agent_file("---\ndescription: d\n---\nDo it.", default_name="helper")
    assert name == "helper"
    assert (definition.tools, definition.disallowed_tools, definition.model, definition.max_turns) == (
        None,
        (),
        None,
        None,
    )
    _, listed = parse_agent_file("---\ndescription: d\ntools: [a, b]\n---\nDo it.", default_name="x")
    assert listed.tools == ("a", "b")
    _, bom = parse_agent_file("\ufeff---\ndescription: d\n---\nDo it.", default_name="x")
    assert bom.prompt == "Do it."


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no front matter", "starts with front matter"),
        ("---\ndescription d\n---\nx", "must be 'key: value' lines"),
        ("---\ndescription: d\ntools: [a, [b]]\n---\nx", "tools must be a comma-separated string or a list"),
        ("---\ndescription: d\nmaxTurns: 2.5\n---\nx", "maxTurns must be a whole number"),
        ("---\ndescription: d\nmodel: 4\n---\nx", "model must be a string"),
        ("---\ndescription: d\ndisallowedTools: x\ndisallowed_tools: y\n---\nx", "given twice"),
        ("---\ndescription: [d\n---\nx", "not valid YAML"),
        ("---\ndescription: !!python/object/apply:os.system ['touch pwned']\n---\nx", "not valid YAML"),
        ("---\nname: a\n---\nprompt", "needs a description"),
        ("---\ndescription: d\n---\n", "needs a prompt"),
        ("---\ndescription: d\npermission_mode: wild\n---\nx", "unknown permission mode 'wild'"),
    ],
)
def test_parse_agent_file_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_agent_file(text, default_name="x")


def test_load_agent_files_reads_a_folder_and_names_the_bad_file(tmp_path: Path) -> None:
    assert load_agent_files(tmp_path / "missing") == {}
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "b-tester.md").write_text("---\ndescription: Runs tests.\n---\nRun the tests.")
    (folder / "a.md").write_text(AGENT_FILE)
    (folder / "notes.txt").write_text("not an agent")
    agents = load_agent_files(folder)
    assert list(agents) == ["code-reviewer", "b-tester"]
    assert agents["b-tester"].prompt == "Run the tests."
    (folder / "c-bad.md").write_text("---\ndescription: d\nmax_turns: many\n---\nx")
    with pytest.raises(ValueError) as info:
        load_agent_files(folder)
    assert str(info.value).startswith(f"{folder / 'c-bad.md'}: ")
    assert str(info.value).endswith("maxTurns must be a whole number, got 'many'")


async def test_agents_from_files_drive_a_session(tmp_path: Path) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "reader.md").write_text("---\ndescription: Reads.\ntools: read_tool\n---\nOnly read.")
    agents = load_agent_files(folder)
    scripts: dict[str, list[StepLike]] = {
        "parent": [call("spawn_agent", task="read", agent_type="reader"), wait_for_child, reply("done")],
        "read": [reply("read it")],
    }
    session, router = parent(scripts, [], agents)
    await session.submit("parent")
    child = router.requests["read"][0]
    assert [t.name for t in child.tools or []] == ["read_tool"]
    assert child.messages[0].text.endswith("# Your role: reader\n\nOnly read.")


# -- Claude Code's agent files -------------------------------------------------------------------------

CLAUDE_AGENT = """---
name: planner
description: Plans a change without making it.
tools:
  - Read
  - Grep
  - Bash
  - Edit
disallowedTools: Bash
permissionMode: plan
maxTurns: 4
model: inherit
color: purple
skills: [tdd]
---
Plan the change. Never edit.
"""


def test_claude_code_keys_are_read_and_unknown_keys_warn() -> None:
    warnings: list[str] = []
    name, definition = parse_agent_file(CLAUDE_AGENT, default_name="x", warnings=warnings)
    assert name == "planner"
    assert definition == AgentDefinition(
        description="Plans a change without making it.",
        prompt="Plan the change. Never edit.",
        tools=("Read", "Grep", "Bash", "Edit"),
        disallowed_tools=("Bash",),
        model="inherit",
        max_turns=4,
        permission_mode="plan",
    )
    assert warnings == ["key 'color' is not used by ra and is ignored", "key 'skills' is not used by ra and is ignored"]
    aliased: list[str] = []
    _, sonnet = parse_agent_file("---\ndescription: d\nmodel: sonnet\n---\nx", default_name="x", warnings=aliased)
    assert sonnet.inherits_model and aliased == [
        "model 'sonnet' is Claude Code's alias; ra runs the agent on the parent's model"
    ]
    _, none = parse_agent_file("---\ndescription: d\ntools: []\n---\nx", default_name="x")
    assert none.tools == ()


def test_load_agent_files_passes_the_warnings_on_with_the_path(tmp_path: Path) -> None:
    (tmp_path / "p.md").write_text(CLAUDE_AGENT)
    warnings: list[str] = []
    assert list(load_agent_files(tmp_path, warnings=warnings)) == ["planner"]
    assert warnings[0] == f"{tmp_path / 'p.md'}: key 'color' is not used by ra and is ignored"


async def test_a_claude_code_agent_file_in_plan_mode_without_bash_gives_such_a_child(tmp_path: Path) -> None:
    """Before: camelCase keys were dropped, so this child ran with the parent's mode and tools."""
    (tmp_path / "p.md").write_text(CLAUDE_AGENT)
    agents = load_agent_files(tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    router = Router(
        {
            "parent": [call("spawn_agent", task="plan it", agent_type="planner"), wait_for_child, reply("done")],
            "plan it": [
                call("edit_file", file_path="a.py", old_string="x = 1", new_string="x = 2"),
                call("shell", command="touch made"),
                reply("the plan"),
            ],
        }
    )
    profile = create_anthropic_profile(model="m")
    session = Session(
        profile,
        LocalExecutionEnvironment(str(tmp_path)),
        Client(providers={"anthropic": ScriptedAdapter(default=router)}),
        SessionConfig(retry_policy=FAST_RETRY, agents=agents, prices={"m": ModelPrice.free()}),
    )
    assert (await session.submit("parent")).text == "done"
    first = router.requests["plan it"][0]
    offered = [t.name for t in first.tools or []]
    assert "shell" not in offered and "edit_file" not in offered  # Bash disallowed; Edit hidden by plan mode
    assert "read_file" in offered and "grep" in offered
    assert "# Plan mode" in first.messages[0].text
    edit, shell = results(router.requests["plan it"][-1])
    assert edit.startswith("Not allowed in plan mode") and (tmp_path / "a.py").read_text() == "x = 1\n"
    assert "shell" in shell and not (tmp_path / "made").exists()  # not even registered in the child
    (handle,) = SubAgentManager(session).handles()
    assert handle.session.permission_mode == "plan" and handle.session.config.max_turns == 4


async def test_an_agent_type_cannot_loosen_the_parents_mode() -> None:
    """An agent file (from a cloned repository, say) that asks for bypassPermissions must not
    open up what its parent runs under."""
    ran: list[str] = []
    wild = AgentDefinition(description="Does anything.", prompt="Go.", permission_mode="bypassPermissions")
    router = Router(
        {
            "parent": [call("spawn_agent", task="do it", agent_type="wild"), wait_for_child, reply("done")],
            "do it": [call("edit_tool"), reply("tried")],
        }
    )
    profile = GenericProfile("scripted", "test-model", registry(ran), system_prompt="You are the parent.")
    config = SessionConfig(
        retry_policy=FAST_RETRY,
        agents={"wild": wild},
        prices={"test-model": ModelPrice.free()},
        permission_mode="default",
    )

    def only_agents(name: str, args: dict[str, Any], ctx: Any) -> Any:
        return PermissionAllow() if name in ("spawn_agent", "wait") else PermissionDeny("edits need a human")

    client = Client(providers={"scripted": ScriptedAdapter(default=router)})
    session = Session(profile, FakeEnv(), client, config, can_use_tool=only_agents)
    rec = Recorder(session)
    await session.submit("parent")
    assert ran == []  # in bypass the edit would have run without asking
    assert results(router.requests["do it"][-1]) == ["edits need a human"]
    (handle,) = SubAgentManager(session).handles()
    assert handle.session.permission_mode == "default"
    (warning,) = [w for w in rec.of(E.WARNING) if w["code"] == "agent_mode_capped"]
    assert warning["requested"] == "bypass" and warning["mode"] == "default"


def test_looser_orders_the_modes() -> None:
    from ra.agent.subagents.definitions import looser

    assert looser("bypassPermissions", "default") and looser("accept_edits", "dont_ask")
    assert not looser("plan", "default") and not looser("default", "default") and not looser("dont_ask", "bypass")
