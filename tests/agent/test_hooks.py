"""Python hooks (ra.agent.hooks) through real sessions: every event, what each result does, the
order hooks run in, and what happens when a hook fails."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ra.agent import GenericProfile, Session, SessionConfig, StopReason
from ra.agent.events import EventKind as E
from ra.agent.history import ContextTurn, UserTurn
from ra.agent.hooks import (
    HookEvent,
    HookInput,
    HookResult,
    Hooks,
    PostToolUseFailureInput,
    PostToolUseInput,
    PreCompactInput,
    PreToolUseInput,
    SessionEndInput,
    SessionStartInput,
    StopInput,
    SubagentStopInput,
    UserPromptSubmitInput,
)
from ra.agent.permissions import PermissionAllow, PermissionContext, PermissionDeny
from ra.agent.subagents.tools import subagent_tools
from ra.llm.client import Client
from ra.llm.errors import ContextLengthError
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, StepLike, call, calls, reply
from ra.llm.types import Request
from ra.tools.registry import ToolContext, ToolRegistry

from .support import FAST_RETRY, FakeEnv, Recorder, default_tools

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def tools(ran: list[str] | None = None) -> ToolRegistry:
    """echo (undeclared effect), boom (fails), and shell/read_file/edit_file look-alikes."""
    ran = ran if ran is not None else []
    registry = default_tools()

    def record(name: str) -> Any:
        def run(args: dict[str, Any], ctx: ToolContext) -> str:
            ran.append(f"{name}:{args.get('text', '')}")
            return f"{name} ran {args.get('text', '')}"

        return run

    registry.add("shell", "run", TEXT, record("shell"), effect="execute")
    registry.add("read_file", "read", TEXT, record("read_file"), effect="read")
    registry.add("edit_file", "edit", TEXT, record("edit_file"), effect="edit")
    registry.add("write_file", "write", TEXT, record("write_file"), effect="edit")
    return registry


def build(
    script: list[StepLike] | None = None,
    *,
    hooks: Hooks | None = None,
    ran: list[str] | None = None,
    config: SessionConfig | None = None,
    can_use_tool: Any = None,
    registry: ToolRegistry | None = None,
    default: StepLike | None = None,
) -> tuple[Session, ScriptedAdapter]:
    model = ScriptedAdapter(script or [], default=default)
    profile = GenericProfile("scripted", "test-model", registry or tools(ran), system_prompt="sys")
    config = config if config is not None else SessionConfig()
    config.retry_policy = FAST_RETRY
    config.prices.setdefault("test-model", ModelPrice.free())
    session = Session(
        profile, FakeEnv(), Client(providers={"scripted": model}), config, hooks=hooks, can_use_tool=can_use_tool
    )
    return session, model


def results(request: Request) -> list[str]:
    return [str(p.tool_result.content) for m in request.messages for p in m.content if p.tool_result is not None]


def user_texts(request: Request) -> list[str]:
    return [m.text for m in request.messages if m.role == "user"]


# -- registration --------------------------------------------------------------------------------


def test_registration_checks_event_matcher_timeout_and_callable() -> None:
    hooks = Hooks()
    assert not hooks and len(hooks) == 0

    @hooks.on("PreToolUse", matcher="Bash")
    def by_decorator(event: PreToolUseInput) -> None:
        return None

    hooks.on(HookEvent.STOP, lambda e: None)
    assert by_decorator.__name__ == "by_decorator"  # the decorator returns the function
    assert hooks and len(hooks) == 2
    assert [h.name for h in hooks.for_event(HookEvent.PRE_TOOL_USE)] == ["by_decorator"]
    with pytest.raises(ValueError, match="'NoSuchEvent' is not a valid HookEvent"):
        hooks.on("NoSuchEvent", lambda e: None)
    with pytest.raises(ValueError, match="not a valid regular expression"):
        hooks.on("PreToolUse", lambda e: None, matcher="(")
    with pytest.raises(ValueError, match="timeout must be > 0"):
        hooks.on("PreToolUse", lambda e: None, timeout=0)
    with pytest.raises(TypeError, match="must be callable"):
        hooks.on("PreToolUse", "not callable")  # type: ignore[arg-type]
    assert len(hooks) == 2


# -- PreToolUse -------------------------------------------------------------------------------------


async def test_pre_tool_use_hooks_run_in_order_one_at_a_time_and_the_first_deny_wins() -> None:
    ran: list[str] = []
    log: list[str] = []
    hooks = Hooks()
    active = 0

    async def first(event: PreToolUseInput) -> None:
        nonlocal active
        active += 1
        log.append(f"first:{active}")
        await asyncio.sleep(0.005)
        active -= 1

    def second(event: PreToolUseInput) -> HookResult:
        log.append(f"second:{active}")
        return HookResult.deny("second says no")

    def third(event: PreToolUseInput) -> None:
        log.append("third")

    for hook in (first, second, third):
        hooks.on(HookEvent.PRE_TOOL_USE, hook)
    session, model = build([call("echo", text="hi"), reply("ok")], hooks=hooks, ran=ran)
    rec = Recorder(session)
    await session.submit("go")
    assert log == ["first:1", "second:0"]
    assert results(model.requests[-1]) == ["second says no"]
    (denial,) = session.permission_denials
    assert (denial.source, denial.reason) == ("hook", "second says no")
    (hook_event,) = rec.of(E.HOOK)
    assert (hook_event["event"], hook_event["hook"], hook_event["decision"], hook_event["reason"]) == (
        "PreToolUse",
        "second",
        "deny",
        "second says no",
    )
    assert hook_event["duration_ms"] >= 0


async def test_matchers_are_full_regex_matches_on_ra_or_claude_names() -> None:
    seen: dict[str, list[str]] = {}
    hooks = Hooks()
    for matcher in ("shell", "Bash", "sh", "Edit|Write", "read_.*", "*", "", None, "Read"):

        def hook(event: PreToolUseInput, key: str = str(matcher)) -> None:
            seen.setdefault(key, []).append(event.tool_name)

        hooks.on(HookEvent.PRE_TOOL_USE, hook, matcher=matcher)
    script = [
        calls(
            ("shell", {"text": "1"}),
            ("read_file", {"text": "2"}),
            ("edit_file", {"text": "3"}),
            ("write_file", {"text": "4"}),
            ("echo", {"text": "5"}),
        ),
        reply("ok"),
    ]
    session, _ = build(script, hooks=hooks)
    await session.submit("go")
    everything = ["shell", "read_file", "edit_file", "write_file", "echo"]
    assert seen == {
        "shell": ["shell"],
        "Bash": ["shell"],
        "Edit|Write": ["edit_file", "write_file"],
        "read_.*": ["read_file"],
        "*": everything,
        "": everything,
        "None": everything,
        "Read": ["read_file"],
    }


async def test_the_hook_input_is_typed_and_complete() -> None:
    got: list[PreToolUseInput] = []
    hooks = Hooks()
    hooks.on(HookEvent.PRE_TOOL_USE, got.append)
    session, _ = build([call("echo", _id="call-1", text="hi"), reply("ok")], hooks=hooks)
    await session.submit("go")
    (event,) = got
    assert isinstance(event, PreToolUseInput)
    # No mode, no rules, no callback: nothing asks for checks, so the mode is bypass.
    assert (event.session_id, event.cwd, event.permission_mode) == (session.id, "/work/project", "bypass")
    assert (event.tool_name, event.tool_input, event.tool_use_id) == ("echo", {"text": "hi"}, "call-1")
    assert (event.agent_id, event.agent_type) == (None, None)
    as_json = event.to_json()
    assert as_json["hook_event_name"] == "PreToolUse"
    assert as_json["tool_name"] == "echo" and as_json["ra_tool_name"] == "echo"
    assert "agent_id" not in as_json


async def test_updated_input_passes_from_hook_to_hook_and_is_revalidated() -> None:
    ran: list[str] = []
    seen: list[dict[str, Any]] = []
    asked: list[dict[str, Any]] = []
    hooks = Hooks()

    def first(event: PreToolUseInput) -> HookResult:
        seen.append(dict(event.tool_input))
        if event.tool_input["text"] == "bad":
            return HookResult(updated_input={"text": 5})
        return HookResult(updated_input={"text": event.tool_input["text"] + "-1"})

    async def second(event: PreToolUseInput) -> HookResult | None:
        seen.append(dict(event.tool_input))
        if event.tool_input["text"] == 5:
            return None
        return HookResult(updated_input={"text": event.tool_input["text"] + "-2"})

    def ask(name: str, args: dict[str, Any], ctx: PermissionContext) -> PermissionAllow:
        asked.append(args)
        return PermissionAllow()

    hooks.on(HookEvent.PRE_TOOL_USE, first)
    hooks.on(HookEvent.PRE_TOOL_USE, second)
    script = [calls(("shell", {"text": "a"}), ("shell", {"text": "bad"})), reply("ok")]
    session, model = build(script, hooks=hooks, ran=ran, can_use_tool=ask)
    await session.submit("go")
    assert seen == [{"text": "a"}, {"text": "a-1"}, {"text": "bad"}, {"text": 5}]
    # The callback is asked about the rewritten input (the schema is checked after the checks).
    assert asked == [{"text": "a-1-2"}, {"text": 5}]
    assert ran == ["shell:a-1-2"]
    ok, invalid = results(model.requests[-1])
    assert ok == "shell ran a-1-2"
    assert invalid.startswith("The rewritten arguments are not valid")


async def test_a_hook_that_changes_its_input_in_place_changes_nothing() -> None:
    ran: list[str] = []
    hooks = Hooks()

    def meddle(event: PreToolUseInput) -> None:
        event.tool_input["text"] = 12345  # not how to rewrite; and not valid for the schema

    hooks.on(HookEvent.PRE_TOOL_USE, meddle)
    hooks.on(HookEvent.POST_TOOL_USE, meddle)
    session, model = build([call("echo", text="original"), reply("ok")], hooks=hooks, ran=ran)
    await session.submit("go")
    assert results(model.requests[-1]) == ["echo: original"]
    assert model.requests[-1].messages[-2].tool_calls[0].arguments == {"text": "original"}


async def test_a_pre_tool_use_allow_skips_the_callback_and_the_mode_but_never_deny_or_ask_rules() -> None:
    ran: list[str] = []
    asked: list[str] = []
    hooks = Hooks()
    hooks.on(HookEvent.PRE_TOOL_USE, lambda e: HookResult.allow("trusted"))

    def ask(name: str, args: dict[str, Any], ctx: PermissionContext) -> PermissionDeny:
        asked.append(f"{name}:{args['text']}")
        return PermissionDeny("asked and refused")

    config = SessionConfig(permission_mode="plan", disallowed_tools=("shell(rm*)",), ask_tools=("edit_file(secret*)",))
    script = [
        calls(
            ("shell", {"text": "ls"}),
            ("shell", {"text": "rm -rf x"}),
            ("edit_file", {"text": "secret.txt"}),
            ("edit_file", {"text": "notes.txt"}),
        ),
        reply("ok"),
    ]
    session, model = build(script, hooks=hooks, ran=ran, config=config, can_use_tool=ask)
    await session.submit("go")
    assert ran == ["shell:ls", "edit_file:notes.txt"]
    assert asked == ["edit_file:secret.txt"]
    assert results(model.requests[-1])[1:3] == ["Denied by the rule 'shell(rm*)'.", "asked and refused"]


async def test_ask_always_reaches_the_callback_even_in_bypass_and_is_denied_in_dont_ask() -> None:
    ran: list[str] = []
    contexts: list[PermissionContext] = []
    hooks = Hooks()
    hooks.on(HookEvent.PRE_TOOL_USE, lambda e: HookResult.ask("reads a private file"), matcher="Read")

    def ask(name: str, args: dict[str, Any], ctx: PermissionContext) -> PermissionAllow:
        contexts.append(ctx)
        return PermissionAllow()

    session, _ = build(
        [call("read_file", text="a"), reply("ok")],
        hooks=hooks,
        ran=ran,
        config=SessionConfig(permission_mode="bypass"),
        can_use_tool=ask,
    )
    await session.submit("go")
    assert [c.reason for c in contexts] == ["reads a private file"] and ran == ["read_file:a"]

    session, model = build(
        [call("read_file", text="b"), reply("ok")],
        hooks=hooks,
        ran=ran,
        config=SessionConfig(permission_mode="dont_ask"),
        can_use_tool=ask,
    )
    await session.submit("go")
    assert len(contexts) == 1 and ran == ["read_file:a"]
    assert "dont_ask mode" in results(model.requests[-1])[0]


async def test_an_ask_from_an_earlier_hook_is_not_overridden_by_a_later_allow() -> None:
    ran: list[str] = []
    asked: list[str] = []
    hooks = Hooks()
    hooks.on(HookEvent.PRE_TOOL_USE, lambda e: HookResult.ask("security review"))
    hooks.on(HookEvent.PRE_TOOL_USE, lambda e: HookResult.allow("convenience"))

    def ask(name: str, args: dict[str, Any], ctx: PermissionContext) -> PermissionDeny:
        asked.append(ctx.reason)
        return PermissionDeny("refused")

    session, _ = build([call("shell", text="x"), reply("ok")], hooks=hooks, ran=ran, can_use_tool=ask)
    await session.submit("go")
    assert asked == ["security review"] and ran == []


async def test_a_hook_may_answer_with_claude_code_json() -> None:
    hooks = Hooks()

    def as_json(event: PreToolUseInput) -> dict[str, Any]:
        if event.tool_input["text"] == "no":
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": "json says no",
                }
            }
        return {"hookSpecificOutput": {"updatedInput": {"text": "rewritten"}}}

    hooks.on(HookEvent.PRE_TOOL_USE, as_json)
    session, model = build([calls(("echo", {"text": "no"}), ("echo", {"text": "yes"})), reply("ok")], hooks=hooks)
    await session.submit("go")
    assert results(model.requests[-1]) == ["json says no", "echo: rewritten"]


async def test_continue_false_in_pre_tool_use_denies_and_ends_the_input() -> None:
    hooks = Hooks()
    hooks.on(HookEvent.PRE_TOOL_USE, lambda e: {"continue": False, "stopReason": "maintenance window"})
    session, model = build([calls(("echo", {"text": "a"}), ("echo", {"text": "b"}))], hooks=hooks)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.INTERRUPTED
    assert len(model.requests) == 1
    assert session.permission_denials[0].reason == "maintenance window"


# -- failures ------------------------------------------------------------------------------------------


async def test_a_raising_pre_tool_use_hook_denies_the_call() -> None:
    ran: list[str] = []
    hooks = Hooks()

    def broken(event: PreToolUseInput) -> None:
        raise RuntimeError("policy server down")

    hooks.on(HookEvent.PRE_TOOL_USE, broken)
    session, model = build([call("shell", text="x"), reply("ok")], hooks=hooks, ran=ran)
    rec = Recorder(session)
    await session.submit("go")
    assert ran == []
    (result,) = results(model.requests[-1])
    assert result == "Denied: hook broken (PreToolUse) failed: RuntimeError: policy server down; the call was not run."
    (hook_event,) = rec.of(E.HOOK)
    assert hook_event["error"] == "hook broken (PreToolUse) failed: RuntimeError: policy server down"
    assert session.permission_denials[0].source == "hook"
    assert rec.of(E.WARNING) == []


async def test_a_hook_returning_a_wrong_type_fails() -> None:
    hooks = Hooks()
    hooks.on(HookEvent.PRE_TOOL_USE, lambda e: "allow")
    session, model = build([call("echo", text="x"), reply("ok")], hooks=hooks)
    await session.submit("go")
    assert "a hook returns None, a HookResult or a dict, got str" in results(model.requests[-1])[0]


async def test_a_python_hook_that_times_out_denies_with_a_message_that_says_so() -> None:
    ran: list[str] = []
    hooks = Hooks()

    async def slow(event: PreToolUseInput) -> None:
        await asyncio.sleep(10)

    hooks.on(HookEvent.PRE_TOOL_USE, slow, timeout=0.05)
    session, model = build([call("shell", text="x"), reply("ok")], hooks=hooks, ran=ran)
    await session.submit("go")
    assert ran == []
    assert results(model.requests[-1]) == [
        "Denied: hook slow (PreToolUse) timed out after 0.05s; the call was not run."
    ]


async def test_failing_hooks_of_other_events_warn_and_are_ignored() -> None:
    hooks = Hooks()

    def broken(event: HookInput) -> None:
        raise ValueError(f"bad {event.event.value}")

    async def slow(event: HookInput) -> None:
        await asyncio.sleep(10)

    for event in (HookEvent.USER_PROMPT_SUBMIT, HookEvent.POST_TOOL_USE, HookEvent.STOP):
        hooks.on(event, broken)
    hooks.on(HookEvent.POST_TOOL_USE, slow, timeout=0.05)
    hooks.on(HookEvent.POST_TOOL_USE, lambda e: HookResult(additional_context="still asked"))
    session, model = build([call("echo", text="x"), reply("done")], hooks=hooks)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.text == "done" and result.stop_reason is StopReason.COMPLETED
    assert results(model.requests[-1]) == ["echo: x\n\nstill asked"]
    warnings = rec.of(E.WARNING)
    assert [w["code"] for w in warnings] == ["hook_failed"] * 4
    assert [w["event"] for w in warnings] == ["UserPromptSubmit", "PostToolUse", "PostToolUse", "Stop"]
    assert warnings[0]["message"] == "hook broken (UserPromptSubmit) failed: ValueError: bad UserPromptSubmit"
    assert warnings[2]["message"] == "hook slow (PostToolUse) timed out after 0.05s"


# -- UserPromptSubmit and SessionStart ------------------------------------------------------------------


async def test_user_prompt_submit_deny_refuses_the_input_before_any_model_call() -> None:
    prompts: list[str] = []
    hooks = Hooks()

    def guard(event: UserPromptSubmitInput) -> HookResult | None:
        prompts.append(event.prompt)
        return HookResult.deny("prompts may not contain secrets") if "secret" in event.prompt else None

    hooks.on(HookEvent.USER_PROMPT_SUBMIT, guard)
    session, model = build([reply("fine")], hooks=hooks)
    rec = Recorder(session)
    result = await session.submit("the secret is 1234")
    assert result.stop_reason is StopReason.INTERRUPTED
    assert model.requests == []
    assert [(e["event"], e["decision"], e["reason"]) for e in rec.of(E.HOOK)] == [
        ("UserPromptSubmit", "deny", "prompts may not contain secrets")
    ]
    assert (await session.submit("hello")).text == "fine"
    assert prompts == ["the secret is 1234", "hello"]


async def test_a_refused_prompt_never_reaches_the_model() -> None:
    hooks = Hooks()
    hooks.on(
        HookEvent.USER_PROMPT_SUBMIT,
        lambda e: HookResult.deny("no secrets") if "secret" in e.prompt else None,
    )
    session, model = build([reply("fine")], hooks=hooks)
    await session.submit("the secret is 1234")
    await session.submit("hello")
    assert user_texts(model.requests[0]) == ["hello"]


async def test_user_prompt_submit_context_is_added_after_the_prompt() -> None:
    hooks = Hooks()
    hooks.on(HookEvent.USER_PROMPT_SUBMIT, lambda e: HookResult(additional_context="Branch: main"))
    hooks.on(HookEvent.USER_PROMPT_SUBMIT, lambda e: {"hookSpecificOutput": {"additionalContext": "Tests: green"}})
    session, model = build([reply("ok")], hooks=hooks)
    await session.submit("what now?")
    assert user_texts(model.requests[0]) == ["what now?", "Branch: main\n\nTests: green"]
    turn = session.history.turns[1]
    assert isinstance(turn, ContextTurn) and turn.source == "UserPromptSubmit"


async def test_session_start_context_comes_once_before_the_first_input() -> None:
    starts: list[SessionStartInput] = []
    hooks = Hooks()

    def start(event: SessionStartInput) -> HookResult:
        starts.append(event)
        return HookResult(additional_context="Project rules: be brief.")

    hooks.on(HookEvent.SESSION_START, start, matcher="startup")
    hooks.on(HookEvent.SESSION_START, lambda e: HookResult(additional_context="never"), matcher="resume")
    session, model = build([reply("one"), reply("two")], hooks=hooks)
    await session.submit("first")
    await session.submit("second")
    assert [(s.source, s.session_id) for s in starts] == [("startup", session.id)]
    assert user_texts(model.requests[0]) == ["Project rules: be brief.", "first"]
    assert user_texts(model.requests[1]) == ["Project rules: be brief.", "first", "second"]
    first, second = session.history.turns[:2]
    assert isinstance(first, ContextTurn) and first.source == "SessionStart"
    assert isinstance(second, UserTurn)


# -- PostToolUse and PostToolUseFailure ------------------------------------------------------------------


async def test_post_tool_use_rewrites_the_output_and_adds_context() -> None:
    seen: list[PostToolUseInput] = []
    hooks = Hooks()

    def redact(event: PostToolUseInput) -> HookResult:
        seen.append(event)
        return HookResult(updated_output=event.tool_response.replace("hunter2", "[redacted]"))

    def note(event: PostToolUseInput) -> HookResult:
        seen.append(event)
        return HookResult(additional_context="Remember to rotate the password.")

    hooks.on(HookEvent.POST_TOOL_USE, redact, matcher="echo")
    hooks.on(HookEvent.POST_TOOL_USE, note)
    session, model = build([call("echo", _id="c9", text="pw=hunter2"), reply("ok")], hooks=hooks)
    rec = Recorder(session)
    await session.submit("go")
    assert [(s.tool_name, s.tool_input, s.tool_use_id) for s in seen] == [("echo", {"text": "pw=hunter2"}, "c9")] * 2
    assert seen[0].tool_response == "echo: pw=hunter2"
    assert seen[1].tool_response == "echo: pw=[redacted]"  # the rewrite passes on
    assert results(model.requests[-1]) == ["echo: pw=[redacted]\n\nRemember to rotate the password."]
    (end,) = rec.of(E.TOOL_CALL_END)
    assert end["output"] == "echo: pw=[redacted]"


async def test_a_post_tool_use_deny_reason_is_shown_to_the_model() -> None:
    hooks = Hooks()
    hooks.on(HookEvent.POST_TOOL_USE, lambda e: {"decision": "block", "reason": "lint failed: E501"})
    session, model = build([call("echo", text="x"), reply("ok")], hooks=hooks)
    await session.submit("go")
    assert results(model.requests[-1]) == ["echo: x\n\nlint failed: E501"]


async def test_post_tool_use_failure_fires_for_a_failing_tool_and_post_tool_use_does_not() -> None:
    log: list[tuple[str, str]] = []
    hooks = Hooks()
    hooks.on(HookEvent.POST_TOOL_USE, lambda e: log.append(("post", e.tool_name)))

    def failure(event: PostToolUseFailureInput) -> HookResult:
        log.append(("failure", event.error))
        return HookResult(additional_context="The disk is known to be flaky; retry once.")

    hooks.on(HookEvent.POST_TOOL_USE_FAILURE, failure)
    hooks.on(HookEvent.PRE_TOOL_USE, lambda e: HookResult.deny("not nap") if e.tool_name == "nap" else None)
    session, model = build([calls(("boom", {}), ("echo", {"text": "x"}), ("nap", {})), reply("ok")], hooks=hooks)
    await session.submit("go")
    assert log == [("failure", "Tool error (boom): disk on fire"), ("post", "echo")]
    boom, echo, nap = results(model.requests[-1])
    assert boom == "Tool error (boom): disk on fire\n\nThe disk is known to be flaky; retry once."
    assert (echo, nap) == ("echo: x", "not nap")  # a denied call fires neither


async def test_continue_false_after_a_tool_ends_the_input_after_the_round() -> None:
    hooks = Hooks()
    hooks.on(HookEvent.POST_TOOL_USE, lambda e: HookResult(stop=True, stop_reason="enough"), matcher="echo")
    session, model = build([calls(("echo", {"text": "a"}), ("nap", {}))], hooks=hooks)
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.INTERRUPTED
    assert len(model.requests) == 1
    assert [t.name for t in session.history.turns[-2].tool_calls] == ["echo", "nap"]  # both answered
    # Why it stopped is reported to the host.
    assert [(e["event"], e["reason"]) for e in rec.of(E.HOOK)] == [("PostToolUse", "enough")]


# -- Stop -----------------------------------------------------------------------------------------------


async def test_a_stop_hook_deny_makes_the_model_continue_once() -> None:
    inputs: list[StopInput] = []
    hooks = Hooks()

    def not_yet(event: StopInput) -> HookResult | None:
        inputs.append(event)
        return None if event.stop_hook_active else HookResult.deny("run the tests first")

    hooks.on(HookEvent.STOP, not_yet)
    session, model = build([reply("all done"), call("echo", text="tests"), reply("really done")], hooks=hooks)
    result = await session.submit("fix it")
    assert result.text == "really done" and result.stop_reason is StopReason.COMPLETED
    assert [(i.stop_hook_active, i.last_assistant_message) for i in inputs] == [
        (False, "all done"),
        (True, "really done"),
    ]
    assert user_texts(model.requests[1])[-1] == "You are not done yet: run the tests first"
    # A new input starts with stop_hook_active False again.
    model.add(reply("bye"), reply("bye again"))
    await session.submit("next")
    assert [i.stop_hook_active for i in inputs[2:]] == [False, True]


async def test_a_stop_hook_deny_without_a_reason_does_not_continue() -> None:
    hooks = Hooks()
    hooks.on(HookEvent.STOP, lambda e: HookResult("deny"))
    session, model = build([reply("done")], hooks=hooks)
    assert (await session.submit("go")).text == "done"
    assert len(model.requests) == 1


# -- subagents --------------------------------------------------------------------------------------------


class Router:
    """Answers each request from the script of the agent that sent it (by its first user text)."""

    def __init__(self, scripts: dict[str, list[StepLike]]) -> None:
        self.scripts = scripts

    def __call__(self, request: Request) -> Any:
        first = next(m.text for m in request.messages if m.role == "user" and m.text in self.scripts)
        item = self.scripts[first].pop(0)
        return item(request) if callable(item) else item


def wait_for_child(request: Request) -> StepLike:
    return call("wait", agent_id=json.loads(results(request)[-1])["agent_id"])


def parent_with_subagents(scripts: dict[str, list[StepLike]], hooks: Hooks, **kw: Any) -> Session:
    registry = tools()
    for tool in subagent_tools():
        registry.register(tool)
    session, _ = build(registry=registry, hooks=hooks, default=Router(scripts), **kw)
    return session


async def test_subagent_start_and_stop_hooks_fire_and_stop_hooks_do_not_fire_for_the_child() -> None:
    log: list[tuple[str, Any]] = []
    hooks = Hooks()
    hooks.on(HookEvent.SUBAGENT_START, lambda e: log.append(("start", (e.agent_id, e.prompt))))

    def sub_stop(event: SubagentStopInput) -> HookResult | None:
        log.append(("substop", (event.agent_id, event.output, event.stop_hook_active)))
        return None if event.stop_hook_active else HookResult.deny("double-check the numbers")

    hooks.on(HookEvent.SUBAGENT_STOP, sub_stop)
    hooks.on(HookEvent.STOP, lambda e: log.append(("stop", e.last_assistant_message)))
    scripts: dict[str, list[StepLike]] = {
        "parent task": [call("spawn_agent", task="child task"), wait_for_child, reply("parent done")],
        "child task": [reply("42"), reply("42, checked")],
    }
    session = parent_with_subagents(scripts, hooks)
    result = await session.submit("parent task")
    assert result.text == "parent done"
    (child_id,) = list(session.subagents)
    assert log == [
        ("start", (child_id, "child task")),
        ("substop", (child_id, "42", False)),
        ("substop", (child_id, "42, checked", True)),
        ("stop", "parent done"),
    ]


async def test_a_parents_pre_tool_use_hook_applies_to_a_childs_tool_calls() -> None:
    ran: list[str] = []
    seen: list[tuple[str, str | None]] = []
    hooks = Hooks()

    def no_shell(event: PreToolUseInput) -> HookResult | None:
        seen.append((event.tool_name, event.agent_id))
        return HookResult.deny("no shell for anyone") if event.tool_name == "shell" else None

    hooks.on(HookEvent.PRE_TOOL_USE, no_shell)
    scripts: dict[str, list[StepLike]] = {
        "parent task": [call("spawn_agent", task="child task"), wait_for_child, reply("parent done")],
        "child task": [call("shell", text="rm -rf /"), lambda r: reply(f"child saw: {results(r)[-1]}")],
    }
    registry = tools(ran)
    for tool in subagent_tools():
        registry.register(tool)
    session, _ = build(registry=registry, hooks=hooks, default=Router(scripts))
    rec = Recorder(session)
    await session.submit("parent task")
    (child_id,) = list(session.subagents)
    assert ran == []
    assert ("shell", child_id) in seen
    wait_result = next(e for e in rec.of(E.TOOL_CALL_END) if e["tool_name"] == "wait")
    assert json.loads(wait_result["output"])["output"] == "child saw: no shell for anyone"


# -- PreCompact and SessionEnd ------------------------------------------------------------------------


async def test_pre_compact_fires_before_old_context_is_pruned() -> None:
    seen: list[tuple[str, int]] = []
    hooks = Hooks()
    holder: dict[str, Session] = {}

    def before(event: PreCompactInput) -> HookResult:
        seen.append((event.trigger, len(holder["s"].history.messages)))
        return HookResult(system_message="compacting")

    hooks.on(HookEvent.PRE_COMPACT, before, matcher="auto")
    attempts: list[int] = []

    def final(request: Request) -> Any:
        attempts.append(len(request.messages))
        if len(attempts) == 1:
            return ContextLengthError("prompt is too long", provider="scripted", status_code=400)
        return reply("recovered")

    script: list[StepLike] = [call("echo", text="x" * 2000) for _ in range(6)]
    session, _ = build(
        script, hooks=hooks, default=final, config=SessionConfig(context_overflow="prune", enable_loop_detection=False)
    )
    holder["s"] = session
    rec = Recorder(session)
    assert (await session.submit("task")).text == "recovered"
    ((trigger, size),) = seen
    assert trigger == "auto"
    assert size == attempts[0] - 1  # everything but the system message, before pruning
    kinds = rec.kinds(E.HOOK, E.CONTEXT_PRUNED)
    assert kinds == [E.HOOK, E.CONTEXT_PRUNED]
    assert rec.of(E.HOOK)[0]["system_message"] == "compacting"


async def test_session_end_fires_once_on_close_with_the_reason() -> None:
    ends: list[SessionEndInput] = []
    hooks = Hooks()
    hooks.on(HookEvent.SESSION_END, ends.append)
    session, _ = build([reply("ok")], hooks=hooks)
    await session.submit("go")
    assert ends == []
    await session.close()
    await session.close()
    assert [(e.reason, e.session_id) for e in ends] == [("closed", session.id)]


async def test_system_messages_are_reported_and_never_sent_to_the_model() -> None:
    hooks = Hooks()
    hooks.on(HookEvent.PRE_TOOL_USE, lambda e: {"systemMessage": "checked by policy v2"})
    session, model = build([call("echo", text="x"), reply("ok")], hooks=hooks)
    rec = Recorder(session)
    await session.submit("go")
    assert [e["system_message"] for e in rec.of(E.HOOK)] == ["checked by policy v2"]
    sent = json.dumps([m.text for r in model.requests for m in r.messages] + results(model.requests[-1]))
    assert "policy v2" not in sent


# -- HookResult.from_json ------------------------------------------------------------------------------


def test_from_json_reads_claude_codes_output_fields() -> None:
    pre = HookEvent.PRE_TOOL_USE
    assert HookResult.from_json(pre, {}) == HookResult()
    assert HookResult.from_json(pre, {"decision": "block", "reason": "r"}) == HookResult("deny", "r")
    assert HookResult.from_json(pre, {"decision": "approve"}).decision == "allow"
    full = HookResult.from_json(
        pre,
        {
            "continue": False,
            "stopReason": "halt",
            "systemMessage": "hi user",
            "hookSpecificOutput": {
                "permissionDecision": "ask",
                "permissionDecisionReason": "check",
                "updatedInput": {"a": 1},
                "additionalContext": "ctx",
            },
        },
    )
    assert full == HookResult("ask", "check", {"a": 1}, None, "ctx", True, "halt", "hi user")
    assert HookResult.from_json(pre, {"suppressOutput": True}).suppress_output is True
    post = HookResult.from_json(HookEvent.POST_TOOL_USE, {"hookSpecificOutput": {"updatedMCPToolOutput": {"k": 1}}})
    assert post.updated_output == '{"k": 1}'
    assert HookResult.from_json(HookEvent.STOP, {"decision": "maybe"}).decision is None
    assert HookResult.from_json(pre, {"decision": "maybe"}).decision == "deny"  # unreadable: fail closed
    with pytest.raises(TypeError, match="must be a JSON object"):
        HookResult.from_json(pre, ["deny"])  # type: ignore[arg-type]
