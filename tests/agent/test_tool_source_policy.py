"""Policy on tools from tool sources, tried as an attacker would: permission rules (``mcp__server``,
``mcp__server__tool``, globs, ``mcp__.*``; deny beats allow), hook matchers, plan mode and
parallel rounds hold for a source's tools - also for tools that appear later, under a rule written
before they existed - and a source cannot take a built-in's name to inherit its rules."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ra.agent import SessionConfig
from ra.agent.events import EventKind
from ra.agent.hooks import HookResult, Hooks
from ra.agent.tool_sources import SourceTools, reserved_names
from ra.llm.testing import StepLike, call, calls, reply
from ra.tools.registry import ToolContext, ToolRegistry

from .support import Recorder, default_tools
from .test_tool_sources import build, offered, profile_of, results
from .tool_source_support import ProcessToolSource, spec

#: Rules that name the source's ``echo`` tool, every way a user may write one.
NAMING_ECHO = ["mcp__proc", "mcp__proc__echo", "mcp__.*", "mcp__proc__.*", "mcp__*", "mcp__proc__*"]


@pytest.mark.parametrize("rule", NAMING_ECHO)
async def test_a_bare_deny_rule_hides_the_source_tool_and_denies_a_call_by_name(rule: str) -> None:
    # Before, ``mcp__.*`` and ``mcp__proc__.*`` (a hook matcher's spelling) matched nothing: the
    # tool was offered and ran, under a rule meant to forbid it.
    source = ProcessToolSource("proc", [spec("echo", "read")])
    config = SessionConfig(permission_mode="bypass", disallowed_tools=(rule,))
    session, model = build([call("mcp__proc__echo", text="x"), reply("ok")], mcp_servers=source, config=config)
    await session.submit("go")
    assert "mcp__proc__echo" not in offered(model.requests[0])
    assert results(model.requests[1]) == [f"Denied by the rule {rule!r}."]
    assert source.tool_calls == 0
    await session.close()
    await source.close()


async def test_a_deny_rule_written_before_the_tool_existed_holds_and_beats_an_allow_rule() -> None:
    source = ProcessToolSource("proc", [spec("echo", "read")])
    config = SessionConfig(
        permission_mode="dont_ask",
        allowed_tools=("mcp__proc", "mcp__proc__late"),
        disallowed_tools=("mcp__proc__late", "mcp__proc__spy(*secret*)"),
    )
    steps: list[StepLike] = [
        call("mcp__proc__echo", offer=spec("late")),  # the server starts offering two more tools
        call("mcp__proc__echo", offer=spec("spy")),
        calls(("mcp__proc__late", {}), ("mcp__proc__spy", {"q": "the secret key"}), ("mcp__proc__spy", {"q": "ok"})),
        reply("done"),
    ]
    session, model = build(steps, mcp_servers=source, config=config)
    await session.submit("go")
    last = model.requests[-1]
    assert "mcp__proc__late" not in offered(last) and "mcp__proc__spy" in offered(last)
    late, secret, fine = results(last)[-3:]
    assert late == "Denied by the rule 'mcp__proc__late'."
    assert secret == "Denied by the rule 'mcp__proc__spy(*secret*)'."
    assert fine.startswith("spy ran")  # the allow rule lets the rest of the server's calls run
    assert source.tool_calls == 3
    await session.close()
    await source.close()


@pytest.mark.parametrize("matcher", ["mcp__proc__.*", "mcp__.*", "mcp__proc__late", "mcp__proc__l.*"])
async def test_a_pre_tool_use_hook_matcher_stops_a_tool_that_appeared_later(matcher: str) -> None:
    source = ProcessToolSource("proc", [spec("echo", "read")])
    hooks = Hooks()
    asked: list[str] = []

    def guard(data: Any) -> HookResult:
        asked.append(data.tool_name)
        return HookResult(decision="deny", reason="no server tools here")

    hooks.on("PreToolUse", guard, matcher=matcher)
    config = SessionConfig(permission_mode="bypass")
    session, model = build([call("mcp__proc__late"), reply("ok")], mcp_servers=source, hooks=hooks, config=config)
    await session.start()
    await source.offer(spec("late", "read"))
    await session.submit("go")
    assert asked == ["mcp__proc__late"]
    assert results(model.requests[-1]) == ["no server tools here"] and source.tool_calls == 0
    await session.close()
    await source.close()


async def test_plan_mode_blocks_source_tools_without_a_read_only_effect_also_after_a_change() -> None:
    source = ProcessToolSource("proc", [spec("echo", "read"), spec("stamp", None)])
    steps: list[StepLike] = [
        calls(("mcp__proc__stamp", {}), ("mcp__proc__echo", {})),
        reply("plan: stamp it"),
        call("mcp__proc__echo"),
        reply("plan again"),
    ]
    session, model = build(steps, mcp_servers=source, config=SessionConfig(permission_mode="plan"))
    await session.submit("plan")
    first = model.requests[0]
    assert "mcp__proc__echo" in offered(first) and "mcp__proc__stamp" not in offered(first)
    stamp, echo = results(model.requests[1])
    assert stamp.startswith("Not allowed in plan mode: mcp__proc__stamp runs commands")
    assert echo.startswith("echo ran")
    # The server now says echo may change things (no read-only hint): plan mode drops it.
    await source.offer(spec("echo", None))
    await session.submit("plan more")
    assert "mcp__proc__echo" not in offered(model.requests[2])
    assert results(model.requests[3])[-1].startswith("Not allowed in plan mode: mcp__proc__echo")
    assert source.tool_calls == 1
    await session.close()
    await source.close()


async def test_default_mode_asks_for_a_source_tool_that_declares_nothing() -> None:
    source = ProcessToolSource("proc", [spec("echo", "read"), spec("stamp", None)])
    steps: list[StepLike] = [calls(("mcp__proc__stamp", {}), ("mcp__proc__echo", {})), reply("ok")]
    session, model = build(steps, mcp_servers=source, config=SessionConfig(permission_mode="default"))
    await session.submit("go")
    stamp, echo = results(model.requests[1])
    assert stamp.startswith("Not allowed: mcp__proc__stamp runs commands") and "no one to ask" in stamp
    assert echo.startswith("echo ran")  # the server's read-only hint: a read, as for ra's own tools
    await session.close()
    await source.close()


async def test_a_source_tool_that_declares_nothing_never_runs_beside_an_edit() -> None:
    loop = asyncio.get_running_loop()
    edits: list[tuple[float, float]] = []

    async def edit_note(args: dict[str, Any], ctx: ToolContext) -> str:
        began = loop.time()
        await asyncio.sleep(0.2)
        edits.append((began, loop.time()))
        return "edited"

    tools = default_tools()
    tools.add("edit_note", "Edit the note.", None, edit_note, effect="edit")
    source = ProcessToolSource("proc", [spec("stamp", None)])
    steps: list[StepLike] = [
        calls(("mcp__proc__stamp", {"sleep": 0.2}), ("edit_note", {}), ("mcp__proc__stamp", {"sleep": 0.2})),
        reply("ok"),
    ]
    session, model = build(steps, mcp_servers=source, profile=profile_of(tools, parallel=True))
    await session.submit("go")
    assert [r.split(" ")[0] for r in results(model.requests[1])] == ["stamp", "edited", "stamp"]
    (edit,) = edits
    before, after = source.spans
    assert before[1] <= edit[0] and edit[1] <= after[0]  # the edit runs alone, in the model's order
    await session.close()
    await source.close()


async def test_a_source_cannot_take_a_built_in_name_or_a_claude_code_name() -> None:
    # A host's own source, with names of its own choosing (no mcp__ prefix).
    offered_names = [
        spec("echo", "read"),
        spec("shell", "read"),
        spec("Bash", "read"),
        spec("Read"),
        spec("ok", "read"),
    ]
    source = ProcessToolSource("raw", offered_names, prefix="")
    config = SessionConfig(permission_mode="dont_ask", allowed_tools=("Bash(git status)", "echo"))
    steps: list[StepLike] = [
        calls(("Bash", {"command": "git status"}), ("shell", {"command": "git status"}), ("echo", {"text": "t"})),
        reply("ok"),
    ]
    session, model = build(steps, mcp_servers=source, config=config)
    events = Recorder(session)
    await session.submit("go")
    registry = session.profile.tool_registry
    assert registry.get("echo").tags == frozenset()  # still the profile's echo, not the source's
    assert "shell" not in registry and "Bash" not in registry and "Read" not in registry and "ok" in registry
    bash, shell, echo = results(model.requests[1])
    assert "unknown tool" in bash.lower() and "unknown tool" in shell.lower()  # an allow rule opens nothing
    assert echo == "echo: t"
    taken = [e.data["tool"] for e in events.of(EventKind.WARNING) if e.data["code"] == "tool_name_taken"]
    assert sorted(taken) == ["Bash", "Read", "echo", "shell"]
    await session.close()
    await source.close()


async def test_two_sources_offering_one_name_keep_the_first_and_a_bad_schema_is_left_out() -> None:
    first = ProcessToolSource("a", [spec("t", "read")], prefix="mcp__x__")
    second = ProcessToolSource("b", [spec("t", None)], prefix="mcp__x__")
    bad = {
        "name": "bad",
        "description": "d",
        "effect": None,
        "schema": {"type": "object", "properties": {"n": {"type": 7}}},
    }
    third = ProcessToolSource("c", [bad, spec("good", "read")])
    registry = default_tools()
    control = SourceTools(registry, [(first, True), (second, True), (third, True)], reserved=reserved_names(registry))
    emitted: list[Any] = []
    await control.start(emitted.append)
    assert registry.get("mcp__x__t").effect == "read"  # the first source's
    assert "mcp__c__good" in registry and "mcp__c__bad" not in registry
    codes = sorted(e.code for e in emitted)
    assert codes == ["tool_name_taken", "tool_source_failed"]
    await control.close(emitted.append)
    assert all(not s.alive for s in (first, second, third))


def test_reserved_names_cover_the_registry_and_claude_codes_names() -> None:
    names = reserved_names(ToolRegistry())
    assert {"Bash", "Read", "Edit", "Write", "Task", "shell", "read_file", "apply_patch"} <= names


@pytest.mark.parametrize(
    ("rule", "names"),
    [
        ("mcp__.*", ["mcp__a__b", "mcp__github__create_issue"]),
        ("mcp__github__.*", ["mcp__github__create_issue"]),
        ("mcp__github", ["mcp__github__create_issue"]),
        ("mcp__git*", ["mcp__github__create_issue", "mcp__gitlab__x"]),
    ],
)
def test_rules_in_a_hook_matchers_spelling_name_the_tools_they_mean(rule: str, names: list[str]) -> None:
    from ra.agent.permissions.rules import Rule

    parsed = Rule.parse(rule)
    assert all(parsed.names_tool(n) for n in names)
    assert not parsed.names_tool("shell") and not parsed.names_tool("mcp_x")


def test_an_agent_definition_names_mcp_tools_by_server_tool_or_glob_and_tolerates_absent_ones() -> None:
    from ra.agent.subagents.definitions import AgentDefinition

    only = AgentDefinition("d", "p", tools=("Read", "mcp__github"))
    assert only.allows_tool("read_file") and only.allows_tool("mcp__github__x") and not only.allows_tool("mcp__gh__x")
    assert not only.allows_tool("shell")
    without = AgentDefinition("d", "p", disallowed_tools=("mcp__.*",))
    assert without.allows_tool("shell") and not without.allows_tool("mcp__github__x")
    # A server that is not connected yet is no error; an unknown built-in still is.
    narrowed = AgentDefinition("d", "p", tools=("echo", "mcp__later__t")).registry_for(default_tools())
    assert narrowed.names() == ["echo"]
    with pytest.raises(ValueError, match="ech0"):
        AgentDefinition("d", "p", tools=("ech0",)).registry_for(default_tools())


async def test_a_subagent_is_held_by_the_parents_rules_on_source_tools_too() -> None:
    from ra.agent.subagents.manager import SubAgentManager

    source = ProcessToolSource("proc", [spec("echo", "read")])
    config = SessionConfig(permission_mode="bypass", disallowed_tools=("mcp__proc__.*",))
    session, model = build([], mcp_servers=source, config=config)
    await session.start()
    model.add(call("mcp__proc__echo", text="x"), reply("done"))
    handle = SubAgentManager(session).spawn("try the server")
    await asyncio.wait_for(handle.wait(), 10)
    child_first, child_second = model.requests
    assert "mcp__proc__echo" not in offered(child_first)
    assert results(child_second) == ["Denied by the rule 'mcp__proc__.*'."] and source.tool_calls == 0
    await session.close()
    await source.close()
