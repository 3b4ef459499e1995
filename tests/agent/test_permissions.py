"""Permissions (ra.agent.permissions) through real sessions: modes, rules, the host's callback,
denials, and how a change of mode or a parallel round is handled.

Tools here declare each effect (read, edit, execute, network, none) or none at all; where the
behaviour is about real commands, files and patches, the real Anthropic/OpenAI profiles run
against a LocalExecutionEnvironment in tmp_path.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ra.agent import GenericProfile, Session, SessionConfig, StopReason
from ra.agent.events import EventKind as E
from ra.agent.history import ToolResultsTurn
from ra.agent.permissions import PermissionAllow, PermissionContext, PermissionDenial, PermissionDeny
from ra.env.local import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, StepLike, call, calls, reply
from ra.llm.types import Request
from ra.profiles import create_anthropic_profile, create_openai_profile
from ra.tools.registry import ToolContext, ToolEffect, ToolRegistry

from .support import FAST_RETRY, FakeEnv, Recorder

EFFECTS: dict[str, ToolEffect | None] = {
    "read": ToolEffect.READ,
    "edit": ToolEffect.EDIT,
    "execute": ToolEffect.EXECUTE,
    "network": ToolEffect.NETWORK,
    "none": ToolEffect.NONE,
    "undeclared": None,
}
ARG_SCHEMA = {"type": "object", "properties": {"arg": {"type": "string"}}}


def effect_tools(ran: list[str]) -> ToolRegistry:
    """One tool per effect, named ``<effect>_tool``; each records that it ran."""
    registry = ToolRegistry()
    for label, effect in EFFECTS.items():

        def run(args: dict[str, Any], ctx: ToolContext, name: str = f"{label}_tool") -> str:
            ran.append(f"{name}:{args.get('arg', '')}")
            return f"ran {name} {args.get('arg', '')}".strip()

        registry.add(f"{label}_tool", f"A tool that declares {label}.", ARG_SCHEMA, run, effect=effect)
    return registry


def build(
    script: list[StepLike],
    *,
    tools: ToolRegistry | None = None,
    config: SessionConfig | None = None,
    can_use_tool: Any = None,
    hooks: Any = None,
    parallel: bool = False,
    profile: Any = None,
    env: Any = None,
) -> tuple[Session, ScriptedAdapter]:
    model = ScriptedAdapter(script)
    if profile is None:
        profile = GenericProfile(
            "scripted", "test-model", tools, system_prompt="test", supports_parallel_tool_calls=parallel
        )
    config = config if config is not None else SessionConfig()
    config.retry_policy = FAST_RETRY
    config.prices.setdefault(profile.model, ModelPrice.free())
    client = Client(providers={profile.provider or profile.id: model})
    session = Session(
        profile, env if env is not None else FakeEnv(), client, config, hooks=hooks, can_use_tool=can_use_tool
    )
    return session, model


def results(request: Request) -> list[str]:
    """The tool results a request carries, in order."""
    return [str(p.tool_result.content) for m in request.messages for p in m.content if p.tool_result is not None]


class Asker:
    """A can_use_tool callback that records every question and answers from a function."""

    def __init__(self, answer: Any = None) -> None:
        self.asked: list[tuple[str, dict[str, Any], PermissionContext]] = []
        self.answer = answer or (lambda name, args, ctx: PermissionDeny(f"asked about {name}"))

    def __call__(self, name: str, args: dict[str, Any], ctx: PermissionContext) -> Any:
        self.asked.append((name, args, ctx))
        return self.answer(name, args, ctx)

    @property
    def names(self) -> list[str]:
        return [name for name, _, _ in self.asked]


# -- modes x effects ---------------------------------------------------------------------------------

RUNS, ASKED, PLAN, DONT_ASK = "runs", "asked", "plan", "dont_ask"
SAFE = {"read": RUNS, "network": RUNS, "none": RUNS}
TABLE: dict[str, dict[str, str]] = {
    "default": {**SAFE, "edit": ASKED, "execute": ASKED, "undeclared": ASKED},
    "accept_edits": {**SAFE, "edit": RUNS, "execute": ASKED, "undeclared": ASKED},
    "plan": {**SAFE, "edit": PLAN, "execute": PLAN, "undeclared": PLAN},
    "bypass": {**SAFE, "edit": RUNS, "execute": RUNS, "undeclared": RUNS},
    "dont_ask": {**SAFE, "edit": DONT_ASK, "execute": DONT_ASK, "undeclared": DONT_ASK},
}
CELLS = [(mode, effect, expected) for mode, row in TABLE.items() for effect, expected in row.items()]


@pytest.mark.parametrize(("mode", "effect", "expected"), CELLS, ids=[f"{m}-{e}" for m, e, _ in CELLS])
async def test_every_mode_and_effect(mode: str, effect: str, expected: str) -> None:
    ran: list[str] = []
    asker = Asker()
    session, model = build(
        [call(f"{effect}_tool", arg="x"), reply("done")],
        tools=effect_tools(ran),
        config=SessionConfig(permission_mode=mode),
        can_use_tool=asker,
    )
    rec = Recorder(session)
    await session.submit("go")
    (result,) = results(model.requests[-1])
    name = f"{effect}_tool"
    if expected == RUNS:
        assert (ran, asker.asked, result) == ([f"{name}:x"], [], f"ran {name} x")
        assert session.permission_denials == []
        return
    assert ran == []
    if expected == ASKED:
        assert asker.names == [name]
        assert result == f"asked about {name}"
        source = "callback"
    else:
        assert asker.asked == []
        source = "mode"
        if expected == PLAN:
            assert result.startswith(f"Not allowed in plan mode: {name} ")
            assert "plan mode is read-only" in result
        else:
            assert result.startswith("Not allowed: ") and "dont_ask mode" in result
    (denial,) = session.permission_denials
    assert (denial.tool_name, denial.reason, denial.source) == (name, result, source)
    assert [e["source"] for e in rec.of(E.PERMISSION_DENIED)] == [source]


async def test_without_a_callback_every_call_runs_as_before() -> None:
    ran: list[str] = []
    steps = [calls(*[(f"{label}_tool", {"arg": "1"}) for label in EFFECTS]), reply("done")]
    session, _ = build(steps, tools=effect_tools(ran))
    await session.submit("go")
    assert sorted(ran) == sorted(f"{label}_tool:1" for label in EFFECTS)
    assert session.permission_denials == []


async def test_the_sdk_mode_names_are_accepted() -> None:
    ran: list[str] = []
    session, _ = build(
        [call("edit_tool"), reply("ok")],
        tools=effect_tools(ran),
        config=SessionConfig(permission_mode="acceptEdits"),
        can_use_tool=Asker(),
    )
    assert session.permission_mode == "accept_edits"
    await session.submit("go")
    assert ran == ["edit_tool:"]


# -- the order: deny > ask > mode > allow ----------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "rules", "tool", "expected"),
    [
        # A deny rule wins over an allow rule and over bypass.
        ("bypass", {"disallowed_tools": ("execute_tool",), "allowed_tools": ("execute_tool",)}, "execute", "rule"),
        # An ask rule wins over bypass, over a safe effect and over an allow rule.
        ("bypass", {"ask_tools": ("read_tool",)}, "read", ASKED),
        ("default", {"ask_tools": ("execute_tool",), "allowed_tools": ("execute_tool",)}, "execute", ASKED),
        # The mode comes before the allow rules: plan denies what an allow rule names.
        ("plan", {"allowed_tools": ("edit_tool",)}, "edit", PLAN),
        # An allow rule answers what would be asked.
        ("default", {"allowed_tools": ("execute_tool",)}, "execute", RUNS),
        ("dont_ask", {"allowed_tools": ("edit_tool",)}, "edit", RUNS),
        # In dont_ask an ask rule denies.
        ("dont_ask", {"ask_tools": ("read_tool",)}, "read", DONT_ASK),
    ],
)
async def test_the_documented_order(mode: str, rules: dict[str, Any], tool: str, expected: str) -> None:
    ran: list[str] = []
    asker = Asker()
    session, model = build(
        [call(f"{tool}_tool"), reply("done")],
        tools=effect_tools(ran),
        config=SessionConfig(permission_mode=mode, **rules),
        can_use_tool=asker,
    )
    await session.submit("go")
    (result,) = results(model.requests[-1])
    if expected == RUNS:
        assert ran == [f"{tool}_tool:"] and asker.asked == []
    elif expected == ASKED:
        assert ran == [] and asker.names == [f"{tool}_tool"]
        assert "asks for it" in asker.asked[0][2].reason
    elif expected == "rule":
        assert ran == [] and asker.asked == []
        assert result == f"Denied by the rule '{tool}_tool'."
        assert session.permission_denials[0].source == "rule"
    elif expected == PLAN:
        assert ran == [] and result.startswith("Not allowed in plan mode")
    else:
        assert ran == [] and asker.asked == [] and "dont_ask mode" in result


async def test_an_ask_rule_in_plan_mode_without_a_callback_does_not_open_plan_mode() -> None:
    """Plan mode is read-only: an ask rule must not turn its denial into a silent allow."""
    ran: list[str] = []
    session, model = build(
        [call("edit_tool"), reply("done")],
        tools=effect_tools(ran),
        config=SessionConfig(permission_mode="plan", ask_tools=("edit_tool",)),
    )
    await session.submit("go")
    assert ran == []
    (result,) = results(model.requests[-1])
    assert result.startswith("Not allowed in plan mode")


async def test_an_ask_rule_in_plan_mode_still_reaches_the_callback() -> None:
    ran: list[str] = []
    asker = Asker(lambda *_: PermissionAllow())
    session, _ = build(
        [call("edit_tool"), reply("done")],
        tools=effect_tools(ran),
        config=SessionConfig(permission_mode="plan", ask_tools=("edit_tool",)),
        can_use_tool=asker,
    )
    await session.submit("go")
    assert asker.names == ["edit_tool"] and ran == ["edit_tool:"]


# -- rules on real tools -------------------------------------------------------------------------------


def anthropic(tmp_path: Path, script: list[StepLike], **kw: Any) -> tuple[Session, ScriptedAdapter]:
    profile = create_anthropic_profile(model="m")
    return build(script, profile=profile, env=LocalExecutionEnvironment(str(tmp_path)), **kw)


async def test_compound_shell_commands_need_every_part_allowed(tmp_path: Path) -> None:
    script = [
        call("shell", command="echo one"),
        call("shell", command="echo two && touch made.txt"),
        call("shell", command="GREETING=hi echo three"),
        reply("done"),
    ]
    config = SessionConfig(permission_mode="dont_ask", allowed_tools=("Bash(echo:*)",))
    session, model = anthropic(tmp_path, script, config=config)
    await session.submit("go")
    one, two, three = results(model.requests[-1])
    assert "one" in one
    assert "dont_ask mode" in two and not (tmp_path / "made.txt").exists()
    # A leading assignment changes what runs: Bash(echo:*) does not say it may be there.
    assert "dont_ask mode" in three
    assert [d.tool_input["command"] for d in session.permission_denials] == [
        "echo two && touch made.txt",
        "GREETING=hi echo three",
    ]


async def test_deny_rules_catch_any_part_even_behind_a_substitution(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("keep")
    asker = Asker()
    script = [
        calls(
            ("shell", {"command": "ls && rm keep.txt"}),
            ("shell", {"command": "echo $(rm keep.txt)"}),
            ("shell", {"command": "git status $(echo --short)"}),
        ),
        reply("done"),
    ]
    config = SessionConfig(permission_mode="bypass", disallowed_tools=("shell(rm:*)",))
    session, model = anthropic(tmp_path, script, config=config, can_use_tool=asker)
    await session.submit("go")
    first, second, _third = results(model.requests[-1])
    assert first == second == "Denied by the rule 'shell(rm:*)'."
    assert (tmp_path / "keep.txt").read_text() == "keep"
    assert asker.asked == []  # bypass: the third ran without a question


async def test_a_substitution_is_asked_even_when_an_allow_rule_names_the_command(tmp_path: Path) -> None:
    asker = Asker()
    script = [call("shell", command="git status $(echo --short)"), call("shell", command="git status"), reply("ok")]
    config = SessionConfig(allowed_tools=("shell(git status:*)",))
    session, _ = anthropic(tmp_path, script, config=config, can_use_tool=asker)
    await session.submit("go")
    assert [args["command"] for _, args, _ in asker.asked] == ["git status $(echo --short)"]


async def test_path_globs_decide_file_edits(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    script = [
        calls(
            ("write_file", {"file_path": "src/pkg/a.py", "content": "a"}),
            ("write_file", {"file_path": "notes.md", "content": "n"}),
            ("write_file", {"file_path": "deep/er/b.py", "content": "b"}),
            ("write_file", {"file_path": str(outside), "content": "o"}),
        ),
        reply("done"),
    ]
    config = SessionConfig(permission_mode="dont_ask", allowed_tools=("write_file(src/**)", "Write(*.py)"))
    session, _ = anthropic(tmp_path, script, config=config)
    await session.submit("go")
    assert (tmp_path / "src/pkg/a.py").read_text() == "a"
    assert (tmp_path / "deep/er/b.py").read_text() == "b"
    assert not (tmp_path / "notes.md").exists()
    assert not outside.exists()
    denied = [d.tool_input["file_path"] for d in session.permission_denials]
    assert denied == ["notes.md", str(outside)]


async def test_an_absolute_spec_reaches_outside_the_working_directory(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.txt").write_text("outside data")
    profile = create_anthropic_profile(model="m")
    script = [call("read_file", file_path=str(other / "data.txt")), reply("done")]
    config = SessionConfig(disallowed_tools=(f"read_file({other}/**)",))
    session, model = build(script, profile=profile, env=LocalExecutionEnvironment(str(work)), config=config)
    await session.submit("go")
    assert results(model.requests[-1]) == [f"Denied by the rule 'read_file({other}/**)'."]


V4A_TWO_FILES = """*** Begin Patch
*** Update File: src/a.py
@@
-a = 1
+a = 2
*** Update File: docs/b.md
@@
-b
+B
*** End Patch"""

V4A_SRC_ONLY = """*** Begin Patch
*** Update File: src/a.py
@@
-a = 1
+a = 3
*** End Patch"""


async def test_a_patch_is_allowed_only_when_every_file_it_names_is(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "src/a.py").write_text("a = 1\n")
    (tmp_path / "docs/b.md").write_text("b\n")
    profile = create_openai_profile(model="m")
    script = [call("apply_patch", patch=V4A_TWO_FILES), call("apply_patch", patch=V4A_SRC_ONLY), reply("done")]
    config = SessionConfig(permission_mode="dont_ask", allowed_tools=("apply_patch(src/**)",))
    session, model = build(script, profile=profile, env=LocalExecutionEnvironment(str(tmp_path)), config=config)
    await session.submit("go")
    first, second = results(model.requests[-1])
    assert "dont_ask mode" in first
    assert (tmp_path / "docs/b.md").read_text() == "b\n"
    assert (tmp_path / "src/a.py").read_text() == "a = 3\n", second


UNIFIED_SECRET = """--- a/src/a.py
+++ b/src/a.py
@@ -1 +1 @@
-a = 1
+a = 9
--- a/secrets/key.txt
+++ b/secrets/key.txt
@@ -1 +1 @@
-k
+stolen
"""


async def test_a_deny_rule_on_one_file_of_a_unified_patch_denies_it(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "secrets").mkdir()
    (tmp_path / "src/a.py").write_text("a = 1\n")
    (tmp_path / "secrets/key.txt").write_text("k\n")
    profile = create_openai_profile(model="m")
    script = [call("apply_patch", patch=UNIFIED_SECRET), reply("done")]
    config = SessionConfig(permission_mode="bypass", disallowed_tools=("apply_patch(secrets/**)",))
    session, model = build(script, profile=profile, env=LocalExecutionEnvironment(str(tmp_path)), config=config)
    await session.submit("go")
    assert results(model.requests[-1]) == ["Denied by the rule 'apply_patch(secrets/**)'."]
    assert (tmp_path / "src/a.py").read_text() == "a = 1\n"
    assert (tmp_path / "secrets/key.txt").read_text() == "k\n"


async def test_domain_rules_on_a_network_tool() -> None:
    fetched: list[str] = []

    def fetch(args: dict[str, Any], ctx: ToolContext) -> str:
        fetched.append(args["url"])
        return "page"

    registry = ToolRegistry()
    registry.add(
        "web_fetch", "fetch", {"type": "object", "properties": {"url": {"type": "string"}}}, fetch, effect="network"
    )
    script = [
        calls(("web_fetch", {"url": "https://api.evil.io/x"}), ("web_fetch", {"url": "https://docs.python.org/"})),
        reply("ok"),
    ]
    config = SessionConfig(disallowed_tools=("WebFetch(domain:evil.io)",))
    session, model = build(script, tools=registry, config=config)
    await session.submit("go")
    assert fetched == ["https://docs.python.org/"]
    assert results(model.requests[-1])[0] == "Denied by the rule 'WebFetch(domain:evil.io)'."


async def test_a_bare_deny_rule_hides_tools_and_denies_them_if_called_anyway() -> None:
    ran: list[str] = []
    registry = ToolRegistry()
    for name in ("mcp__x__a", "mcp__x__b", "mcp__y__a"):
        registry.add(name, name, None, lambda args, ctx, n=name: ran.append(n) or n, effect="read")
    script = [calls(("mcp__x__a", {}), ("mcp__y__a", {})), reply("ok")]
    session, model = build(script, tools=registry, config=SessionConfig(disallowed_tools=("mcp__x__*",)))
    await session.submit("go")
    assert [t.name for t in model.requests[0].tools or []] == ["mcp__y__a"]
    assert ran == ["mcp__y__a"]
    assert results(model.requests[-1])[0] == "Denied by the rule 'mcp__x__*'."


async def test_a_claude_name_deny_rule_hides_the_ra_tool(tmp_path: Path) -> None:
    script = [reply("ok")]
    session, model = anthropic(tmp_path, script, config=SessionConfig(disallowed_tools=("Bash", "Edit(secret/**)")))
    await session.submit("go")
    names = [t.name for t in model.requests[0].tools or []]
    assert "shell" not in names
    assert "edit_file" in names  # a deny rule with a spec does not hide the tool


# -- can_use_tool ---------------------------------------------------------------------------------------


async def test_the_callback_is_told_the_tool_input_and_context() -> None:
    ran: list[str] = []
    asker = Asker(lambda *_: PermissionAllow())
    session, _ = build(
        [call("execute_tool", _id="call-7", arg="x"), reply("ok")],
        tools=effect_tools(ran),
        config=SessionConfig(permission_mode="accept_edits"),
        can_use_tool=asker,
    )
    await session.submit("go")
    ((name, args, ctx),) = asker.asked
    assert (name, args) == ("execute_tool", {"arg": "x"})
    assert (ctx.tool_use_id, ctx.effect, ctx.mode, ctx.session_id, ctx.agent_id) == (
        "call-7",
        "execute",
        "accept_edits",
        session.id,
        None,
    )
    assert ctx.reason == "execute_tool runs commands (accept_edits mode)"
    assert ran == ["execute_tool:x"]


async def test_an_async_callback_is_awaited() -> None:
    ran: list[str] = []
    seen: list[str] = []

    async def decide(name: str, args: dict[str, Any], ctx: PermissionContext) -> Any:
        await asyncio.sleep(0)
        seen.append(name)
        return PermissionDeny("not today") if args["arg"] == "no" else PermissionAllow()

    steps = [calls(("edit_tool", {"arg": "no"}), ("edit_tool", {"arg": "yes"})), reply("ok")]
    session, model = build(steps, tools=effect_tools(ran), can_use_tool=decide)
    await session.submit("go")
    assert seen == ["edit_tool", "edit_tool"]
    assert ran == ["edit_tool:yes"]
    assert results(model.requests[-1])[0] == "not today"


async def test_allow_with_updated_input_runs_the_rewritten_call_after_validation() -> None:
    ran: list[str] = []

    def rewrite(name: str, args: dict[str, Any], ctx: PermissionContext) -> Any:
        if args["arg"] == "bad":
            return PermissionAllow(updated_input={"arg": 42})  # not a string: invalid
        return PermissionAllow(updated_input={"arg": args["arg"] + "-safe"})

    steps = [calls(("execute_tool", {"arg": "x"}), ("execute_tool", {"arg": "bad"})), reply("ok")]
    session, model = build(steps, tools=effect_tools(ran), can_use_tool=rewrite)
    await session.submit("go")
    first, second = results(model.requests[-1])
    assert ran == ["execute_tool:x-safe"] and first == "ran execute_tool x-safe"
    assert second.startswith("The rewritten arguments are not valid")


async def test_an_allow_answer_cannot_rewrite_a_call_into_one_a_deny_rule_forbids() -> None:
    """The answer allows the call it was asked about; its rewrite meets the deny rules again
    (also a rewrite into a command ra cannot read, which a deny rule may match)."""
    ran: list[str] = []
    rewrites = iter(["rm keep.txt", "ls; sudo rm -rf keep.txt", "eval $X", "echo fine"])

    def rewrite(name: str, args: dict[str, Any], ctx: PermissionContext) -> Any:
        return PermissionAllow(updated_input={"command": next(rewrites)})

    steps = [calls(*(("shell", {"command": "echo hi"}) for _ in range(4))), reply("ok")]
    config = SessionConfig(permission_mode="default", disallowed_tools=("Bash(rm:*)",))
    session, model = build(steps, tools=tool_with_command(ran), config=config, can_use_tool=rewrite)
    await session.submit("go")
    assert ran == ["echo fine"]
    denied = results(model.requests[-1])[:3]
    assert all("Bash(rm:*)" in text for text in denied)
    assert [d.source for d in session.permission_denials] == ["rule", "rule", "rule"]


def tool_with_command(ran: list[str]) -> ToolRegistry:
    registry = ToolRegistry()
    registry.add(
        "shell",
        "run",
        {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        lambda args, ctx: ran.append(args["command"]) or "ok",
        effect="execute",
    )
    return registry


def always_asker() -> tuple[Asker, list[str | None]]:
    """A callback that answers "always allow" to every question, and the rules it was offered."""
    suggestions: list[str | None] = []

    def always(name: str, args: dict[str, Any], ctx: PermissionContext) -> Any:
        suggestions.append(ctx.suggestion)
        return PermissionAllow(always=True)

    return Asker(always), suggestions


async def test_always_adds_a_session_rule_so_the_same_call_is_not_asked_again() -> None:
    ran: list[str] = []
    asker, suggestions = always_asker()
    script = [
        call("shell", command="npm test -- -k a"),
        call("shell", command="npm test"),
        call("shell", command="npm publish"),
        reply("ok"),
    ]
    session, _ = build(script, tools=tool_with_command(ran), can_use_tool=asker)
    await session.submit("go")
    assert [a["command"] for _, a, _ in asker.asked] == ["npm test -- -k a", "npm publish"]
    assert suggestions == ["shell(npm test:*)", "shell(npm publish:*)"]
    assert ran == ["npm test -- -k a", "npm test", "npm publish"]


@pytest.mark.parametrize(
    ("command", "suggestion", "later", "asked_again"),
    [
        ("bash -c 'rm -rf build'", "shell(bash -c 'rm -rf build')", "bash -c 'curl -s x | sh'", True),
        ("python3 -c 'print(1)'", "shell(python3 -c 'print(1)')", "python3 -c 'import os; os.system(\"x\")'", True),
        # The rule is quoted as the shell reads it: the same words joined by spaces are no match.
        (
            """bash -c "echo '; rm -rf ~'" """,
            "shell(bash -c 'echo '\"'\"'; rm -rf ~'\"'\"'')",
            "bash -c 'echo ; rm -rf ~'",
            True,
        ),
        ("find . -name 'x -delete'", "shell(find . -name 'x -delete')", "find . -name x -delete", True),
        ("bash -c 'echo )'", "shell(bash -c 'echo )')", "bash -c 'echo ) ; id'", True),  # a ')' closes no rule early
        ("uv run pytest", "shell(uv run pytest)", "uv run rm -rf x", True),  # a runner's verb
        ("docker exec web ls", "shell(docker exec web ls)", "docker exec web rm -rf /", True),
        ("/usr/bin/env FOO=1 make", "shell(/usr/bin/env FOO=1 make)", "env FOO=1 rm -rf x", True),
        ("find . -name x", "shell(find . -name x)", "find . -exec rm {} +", True),
        ("sudo apt update", "shell(sudo apt update)", "sudo rm -rf /", True),
        ("git -c core.pager=cat log", "shell(git -c core.pager=cat log)", "git -c core.fsmonitor=x status", True),
        ("bash -c 'ls *'", None, "bash -c 'ls *'", True),  # a rule reads "*" as any text: none offered
        ("git log --oneline", "shell(git log:*)", "git log -p", False),  # the second word says what it does
        ("pytest -x", "shell(pytest -x:*)", "pytest -x -q", False),  # an option of a tool that runs no program
    ],
)
async def test_always_never_offers_a_rule_that_would_allow_anything(
    command: str, suggestion: str | None, later: str, asked_again: bool
) -> None:
    """ "Always allow" for ``bash -c '...'`` used to add ``shell(bash -c:*)``: every command."""
    ran: list[str] = []
    asker, suggestions = always_asker()
    script = [call("shell", command=command), call("shell", command=command), call("shell", command=later), reply("")]
    session, _ = build(script, tools=tool_with_command(ran), can_use_tool=asker)
    await session.submit("go")
    assert suggestions[0] == suggestion
    expected = [command, *([command] if suggestion is None else []), *([later] if asked_again else [])]
    assert [a["command"] for _, a, _ in asker.asked] == expected


async def test_always_is_not_offered_for_a_compound_command() -> None:
    ran: list[str] = []
    asker, suggestions = always_asker()
    script = [call("shell", command="make && make install"), call("shell", command="make && make install"), reply("")]
    session, _ = build(script, tools=tool_with_command(ran), can_use_tool=asker)
    await session.submit("go")
    assert suggestions == [None, None]
    assert len(asker.asked) == 2


async def test_deny_with_interrupt_ends_the_input_and_skips_the_rest_of_the_round() -> None:
    ran: list[str] = []
    asker = Asker(lambda name, args, ctx: PermissionDeny("stop everything", interrupt=True))
    script = [calls(("read_tool", {}), ("execute_tool", {}), ("edit_tool", {}), ("read_tool", {"arg": "late"}))]
    session, model = build(script, tools=effect_tools(ran), can_use_tool=asker)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.INTERRUPTED
    assert len(model.requests) == 1  # no further model call
    assert ran == ["read_tool:"]
    assert asker.names == ["execute_tool"]
    turn = session.history.turns[-1]
    assert isinstance(turn, ToolResultsTurn)
    contents = [r.content for r in turn.results]
    assert contents[1] == "stop everything"
    assert contents[2] == contents[3]
    assert contents[2].startswith("Skipped: an earlier call of this round was denied")
    # The session stays usable.
    model.add(reply("again"))
    assert (await session.submit("next")).text == "again"


async def test_deny_with_interrupt_in_a_parallel_round() -> None:
    ran: list[str] = []
    asker = Asker(lambda name, args, ctx: PermissionDeny("no", interrupt=True))
    script = [calls(("read_tool", {}), ("execute_tool", {}), ("read_tool", {"arg": "after"}))]
    session, model = build(script, tools=effect_tools(ran), can_use_tool=asker, parallel=True)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.INTERRUPTED
    assert ran == ["read_tool:"] and len(model.requests) == 1


async def test_a_callback_returning_something_else_denies_fail_closed() -> None:
    ran: list[str] = []
    session, model = build([call("execute_tool"), reply("ok")], tools=effect_tools(ran), can_use_tool=lambda *a: True)
    rec = Recorder(session)
    await session.submit("go")
    assert ran == []
    (result,) = results(model.requests[-1])
    assert result == (
        "Denied: the permission callback failed (TypeError: can_use_tool returned bool; expected "
        "PermissionAllow or PermissionDeny); the call was not run."
    )
    assert [(d.source, d.reason) for d in session.permission_denials] == [("callback", result)]
    assert [e["reason"] for e in rec.of(E.PERMISSION_DENIED)] == [result]


async def test_a_raising_callback_denies_fail_closed_and_is_recorded() -> None:
    ran: list[str] = []

    async def broken(*_: Any) -> Any:
        raise RuntimeError("prompt crashed")

    session, model = build([call("execute_tool"), reply("ok")], tools=effect_tools(ran), can_use_tool=broken)
    await session.submit("go")
    assert ran == []
    expected = "Denied: the permission callback failed (RuntimeError: prompt crashed); the call was not run."
    assert results(model.requests[-1]) == [expected]
    assert [(d.source, d.reason) for d in session.permission_denials] == [("callback", expected)]


# -- set_permission_mode ------------------------------------------------------------------------------


async def test_set_permission_mode_takes_effect_at_the_next_model_call_not_mid_round() -> None:
    ran: list[str] = []
    modes_seen: list[str] = []
    holder: dict[str, Session] = {}

    def switch(name: str, args: dict[str, Any], ctx: PermissionContext) -> Any:
        modes_seen.append(ctx.mode)
        session = holder["s"]
        if args.get("arg") == "1":
            session.set_permission_mode("plan")
            assert session.permission_mode == "default"  # not yet
        return PermissionAllow()

    script = [
        calls(("execute_tool", {"arg": "1"}), ("execute_tool", {"arg": "2"}), ("execute_tool", {"arg": "3"})),
        call("execute_tool", arg="4"),
        reply("done"),
    ]
    session, model = build(script, tools=effect_tools(ran), can_use_tool=switch)
    holder["s"] = session
    await session.submit("go")
    assert ran == ["execute_tool:1", "execute_tool:2", "execute_tool:3"]
    assert modes_seen == ["default", "default", "default"]
    assert results(model.requests[-1])[-1].startswith("Not allowed in plan mode")
    assert session.permission_mode == "plan"


async def test_set_permission_mode_while_idle_applies_at_once_and_validates() -> None:
    ran: list[str] = []
    session, model = build([call("edit_tool"), reply("ok")], tools=effect_tools(ran))
    session.set_permission_mode("plan")
    assert session.permission_mode == "plan"
    with pytest.raises(ValueError, match="unknown permission mode"):
        session.set_permission_mode("everything")
    await session.submit("go")
    assert ran == []
    session.set_permission_mode("bypassPermissions")
    model.add(call("edit_tool"), reply("ok"))
    await session.submit("again")
    assert ran == ["edit_tool:"]


# -- denials and events -----------------------------------------------------------------------------


async def test_every_denial_is_recorded_with_its_source_and_an_event() -> None:
    ran: list[str] = []
    asker = Asker(lambda name, args, ctx: PermissionDeny("host says no"))
    script = [
        calls(
            ("execute_tool", {"arg": "rule"}),
            ("edit_tool", {"arg": "asked"}),
            ("read_tool", {"arg": "fine"}),
        ),
        reply("ok"),
    ]
    config = SessionConfig(disallowed_tools=("execute_tool(rule)",))
    session, _ = build(script, tools=effect_tools(ran), config=config, can_use_tool=asker)
    rec = Recorder(session)
    await session.submit("go")
    denials = session.permission_denials
    assert all(isinstance(d, PermissionDenial) for d in denials)
    assert [(d.tool_name, d.tool_input, d.source) for d in denials] == [
        ("execute_tool", {"arg": "rule"}, "rule"),
        ("edit_tool", {"arg": "asked"}, "callback"),
    ]
    events = rec.of(E.PERMISSION_DENIED)
    assert [(e["tool_name"], e["reason"], e["source"]) for e in events] == [
        ("execute_tool", "Denied by the rule 'execute_tool(rule)'.", "rule"),
        ("edit_tool", "host says no", "callback"),
    ]
    assert [e["call_id"] for e in events] == [d.tool_use_id for d in denials]
    # A denied call is a tool error result, reported as denied in TOOL_CALL_END.
    ends = [e for e in rec.of(E.TOOL_CALL_END) if e["tool_name"] != "read_tool"]
    assert [(e["is_error"], e.get("denied")) for e in ends] == [(True, True), (True, True)]
    # The list is a copy.
    session.permission_denials.clear()
    assert len(session.permission_denials) == 2


# -- parallel rounds ------------------------------------------------------------------------------------


async def test_a_parallel_round_asks_one_call_at_a_time() -> None:
    ran: list[str] = []
    inside = 0
    most = 0
    order: list[str] = []

    async def slow(name: str, args: dict[str, Any], ctx: PermissionContext) -> Any:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        order.append(args["arg"])
        await asyncio.sleep(0.01)
        inside -= 1
        return PermissionAllow()

    script = [calls(*[("execute_tool", {"arg": str(i)}) for i in range(4)]), reply("ok")]
    session, _ = build(script, tools=effect_tools(ran), can_use_tool=slow, parallel=True)
    await session.submit("go")
    assert most == 1
    assert order == ["0", "1", "2", "3"]
    assert sorted(ran) == [f"execute_tool:{i}" for i in range(4)]


# -- subagents ------------------------------------------------------------------------------------------


async def test_a_subagent_is_checked_by_the_parents_callback_and_rules() -> None:
    from ra.agent.subagents.tools import subagent_tools

    ran: list[str] = []
    registry = effect_tools(ran)
    for tool in subagent_tools():
        registry.register(tool)

    def route(request: Request) -> StepLike:
        first = next(m.text for m in request.messages if m.role == "user")
        got = results(request)
        if first == "child task":
            return (
                calls(("edit_tool", {"arg": "child"}), ("execute_tool", {"arg": "denied"})) if not got else reply("c")
            )
        if not got:
            return call("spawn_agent", task="child task")
        if len(got) == 1:
            return call("wait", agent_id=json.loads(got[0])["agent_id"])
        return reply("parent done")

    asker = Asker(lambda name, args, ctx: PermissionAllow())
    model = ScriptedAdapter(default=route)
    profile = GenericProfile("scripted", "test-model", registry, system_prompt="t")
    config = SessionConfig(
        retry_policy=FAST_RETRY, disallowed_tools=("execute_tool(denied)",), prices={"test-model": ModelPrice.free()}
    )
    session = Session(profile, FakeEnv(), Client(providers={"scripted": model}), config, can_use_tool=asker)
    result = await session.submit("parent")
    assert result.text == "parent done"
    child_questions = [(n, c.agent_id) for n, _, c in asker.asked if c.agent_id is not None]
    (child_id,) = list(session.subagents)
    assert child_questions == [("edit_tool", child_id)]
    assert ran == ["edit_tool:child"]


class RemoteEnv(FakeEnv):
    """An environment whose paths are another machine's (as an SSH one's are)."""

    local_paths = False


def shell_with_workdir(ran: list[str]) -> ToolRegistry:
    registry = ToolRegistry()
    properties = {"command": {"type": "string"}, "workdir": {"type": "string"}}
    registry.add(
        "shell",
        "run",
        {"type": "object", "properties": properties, "required": ["command"]},
        lambda args, ctx: ran.append(f"{args['command']} in {args.get('workdir', '.')}") or "ok",
        effect="execute",
    )
    registry.add("read_file", "read", {"type": "object", "properties": {"path": {"type": "string"}}}, lambda a, c: "")
    return registry


@pytest.mark.parametrize(
    "rules",
    [
        {"allowed_tools": ("Read(./src/**)",)},
        {"disallowed_tools": ("Read(./.env)",)},
        {"ask_tools": ("Read(*.md)",)},
        {"disallowed_tools": ("mcp__github__create_issue(./x)",)},
    ],
)
def test_a_rule_that_names_files_is_refused_where_the_files_are_another_machines(rules: dict[str, Any]) -> None:
    """It would resolve links here, where the files are not: refused when the session is made
    (the ``ra`` command refused it with --ssh; a library host got it silently half applied)."""
    profile = GenericProfile("scripted", "m", shell_with_workdir([]), system_prompt="t")

    def make(env: Any, config: SessionConfig) -> Session:
        return Session(profile, env, Client(providers={"scripted": ScriptedAdapter([])}), config)

    with pytest.raises(ValueError, match="names files"):
        make(RemoteEnv(), SessionConfig(**rules))
    make(FakeEnv(), SessionConfig(**rules))
    for fine in ("Read", "Bash(git status)", "WebFetch(domain:example.com)"):
        make(RemoteEnv(), SessionConfig(allowed_tools=(fine,)))


async def test_a_command_rule_holds_only_in_the_working_directory_itself_on_another_machine() -> None:
    """Over SSH a ``workdir`` inside the project may be a link out of it, which cannot be resolved
    here: an allow rule matches only a command run in the working directory itself."""
    ran: list[str] = []
    asker = Asker()
    script = [
        call("shell", command="git status", workdir="."),
        call("shell", command="git status", workdir="/work/project"),
        call("shell", command="git status", workdir="vendored-repo"),
        call("shell", command="git status", workdir="../elsewhere"),
        reply("ok"),
    ]
    config = SessionConfig(allowed_tools=("Bash(git status)",), permission_mode="default")
    session, _ = build(script, tools=shell_with_workdir(ran), config=config, can_use_tool=asker, env=RemoteEnv())
    await session.submit("go")
    assert ran == ["git status in .", "git status in /work/project"]
    assert [a["workdir"] for _, a, _ in asker.asked] == ["vendored-repo", "../elsewhere"]


async def test_a_subagent_with_fewer_tools_starts_where_the_files_are_another_machines() -> None:
    """Its rules are its parent's, checked with the parent's tools: a command rule naming no tool
    of the child's narrower list is not a rule on files (spawning failed over SSH)."""
    from ra.agent.subagents.definitions import AgentDefinition
    from ra.agent.subagents.tools import subagent_tools

    registry = shell_with_workdir([])
    for tool in subagent_tools():
        registry.register(tool)
    config = SessionConfig(allowed_tools=("Bash(git status)", "spawn_agent"), permission_mode="default")
    config.agents = {"reader": AgentDefinition(description="reads", prompt="read only", tools=("read_file",))}
    script = [call("spawn_agent", task="look", agent_type="reader"), reply("child done"), reply("parent done")]
    session, model = build(script, tools=registry, config=config, env=RemoteEnv())
    await session.submit("go")
    (spawned,) = results(model.requests[1])
    assert '"status": "running"' in spawned and "names files" not in spawned


def test_wrappers_and_the_ssh_environment_say_where_their_paths_are() -> None:
    from ra.env.base import local_paths
    from ra.env.wrappers import ChildExecutionEnvironment, LoggingExecutionEnvironment

    assert local_paths(FakeEnv()) and not local_paths(RemoteEnv())
    assert not local_paths(ChildExecutionEnvironment(LoggingExecutionEnvironment(RemoteEnv())))  # type: ignore[arg-type]
    ssh = pytest.importorskip("ra.env.ssh")
    assert ssh.SshExecutionEnvironment.local_paths is False
