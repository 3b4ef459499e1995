"""Every shape of hook answer, table-driven, through a Python hook returning the dict AND through a
real command hook printing it: what ra can read takes effect; what it cannot read is a WARNING
naming the hook and the field, and a PreToolUse call is then denied (its decision is unknown).

Before this table, 16 of 26 unreadable shapes were ignored with no warning and the call ran."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from ra.agent import Session, SessionConfig
from ra.agent.events import EventKind as E
from ra.agent.hooks import HookEvent, Hooks
from ra.agent.hooks.command import hooks_from_config
from ra.env.local import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.profiles import create_anthropic_profile

from .support import FAST_RETRY, Recorder

PRE = "PreToolUse"

#: (answer, the field the warning names) - a PreToolUse hook answering this must deny the call.
UNREADABLE: list[tuple[Any, str]] = [
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "reject"}}, "permissionDecision"),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": " deny"}}, "permissionDecision"),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "allow "}}, "permissionDecision"),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "Deny"}}, "permissionDecision"),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "ALLOW"}}, "permissionDecision"),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": ""}}, "permissionDecision"),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": None}}, "permissionDecision"),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": True}}, "permissionDecision"),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": 0}}, "permissionDecision"),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": ["deny"]}}, "permissionDecision"),
    ({"hookSpecificOutput": {"permissionDecision": {"behavior": "allow"}}}, "permissionDecision"),
    ({"hookSpecificOutput": {"hookEventName": "PostToolUse", "permissionDecision": "allow"}}, "hookEventName"),
    ({"hookSpecificOutput": {"hookEventName": 5, "permissionDecision": "allow"}}, "hookEventName"),
    ({"hookSpecificOutput": "deny"}, "hookSpecificOutput"),
    ({"hookSpecificOutput": ["deny"]}, "hookSpecificOutput"),
    ({"hookSpecificOutput": None}, "hookSpecificOutput"),
    ({"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": "rm -rf /"}}, "updatedInput"),
    ({"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": None}}, "updatedInput"),
    ({"continue": "false"}, "continue"),
    ({"continue": 0}, "continue"),
    ({"continue": None}, "continue"),
    ({"decision": "reject"}, "decision"),
    ({"decision": "Block"}, "decision"),
    ({"decision": " approve"}, "decision"),
    ({"decision": "blocked"}, "decision"),
    ({"decision": False}, "decision"),
    ({"decision": {"behavior": "deny"}}, "decision"),
    ({"decision": "approve", "suppressOutput": "yes"}, "suppressOutput"),
    # Two answers that disagree (the later one won: the call ran).
    ({"decision": "block", "hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "allow"}}, "disagree"),
    ({"decision": "approve", "hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "ask"}}, "disagree"),
]

#: (answer, whether the call runs) - read as Claude Code documents it, no warning.
READABLE: list[tuple[Any, bool]] = [
    ({}, True),
    ({"decision": None}, True),  # null is the schema's default for decision
    ({"decision": "approve"}, True),
    ({"decision": "block", "reason": "no"}, False),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "allow"}}, True),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "deny"}}, False),
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "ask"}}, False),  # nobody to ask: denied
    ({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "defer"}}, True),
    ({"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "r"}}, False),
    ({"continue": True, "suppressOutput": True}, True),
    ({"continue": False, "stopReason": "halt"}, False),
    ({"systemMessage": "checked"}, True),
    ({"decision": "block", "hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "deny"}}, False),
    ({"decision": "approve", "hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "allow"}}, True),
]


def _session(tmp_path: Path, hooks: Hooks) -> tuple[Session, ScriptedAdapter]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    model = ScriptedAdapter([call("shell", command="touch made"), reply("done")])
    session = Session(
        create_anthropic_profile(model="m"),
        LocalExecutionEnvironment(str(work)),
        Client(providers={"anthropic": model}),
        SessionConfig(retry_policy=FAST_RETRY, prices={"m": ModelPrice.free()}),
        hooks=hooks,
    )
    return session, model


def _python_hooks(answer: Any, event: str = PRE) -> Hooks:
    hooks = Hooks()
    hooks.on(event, lambda _: answer)
    return hooks


def _command_hooks(tmp_path: Path, answer: Any, event: str = PRE) -> Hooks:
    answer_file = tmp_path / "answer.json"
    answer_file.write_text(json.dumps(answer))
    path = tmp_path / "answer.sh"
    path.write_text(f"#!/bin/bash\ncat >/dev/null\ncat {answer_file}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return hooks_from_config({"hooks": {event: [{"hooks": [{"type": "command", "command": str(path)}]}]}})


@pytest.fixture(params=["python", "command"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _hooks(kind: str, tmp_path: Path, answer: Any, event: str = PRE) -> Hooks:
    return _python_hooks(answer, event) if kind == "python" else _command_hooks(tmp_path, answer, event)


@pytest.mark.parametrize(("answer", "field"), UNREADABLE, ids=[json.dumps(a) for a, _ in UNREADABLE])
async def test_an_unreadable_pre_tool_use_answer_denies_and_warns(
    kind: str, tmp_path: Path, answer: Any, field: str
) -> None:
    session, _ = _session(tmp_path, _hooks(kind, tmp_path, answer))
    rec = Recorder(session)
    await session.submit("go")
    assert not (tmp_path / "work/made").exists()
    (warning,) = rec.of(E.WARNING)
    assert warning["code"] == "hook_unreadable" and warning["event"] == PRE
    assert field in warning["message"] and warning["message"].endswith("the call is denied")
    assert warning["hook"] in warning["message"]
    (denial,) = rec.of(E.PERMISSION_DENIED)
    assert denial["source"] == "hook" and "could not be read" in denial["reason"] and field in denial["reason"]


@pytest.mark.parametrize(("answer", "runs"), READABLE, ids=[json.dumps(a) for a, _ in READABLE])
async def test_a_readable_pre_tool_use_answer_takes_effect_without_a_warning(
    kind: str, tmp_path: Path, answer: Any, runs: bool
) -> None:
    session, _ = _session(tmp_path, _hooks(kind, tmp_path, answer))
    rec = Recorder(session)
    await session.submit("go")
    assert (tmp_path / "work/made").exists() is runs
    assert rec.of(E.WARNING) == []


@pytest.mark.parametrize(
    ("answer", "field"),
    [({"continue": "false"}, "continue"), ({"decision": "blok", "reason": "x"}, "decision")],
)
async def test_an_unreadable_answer_elsewhere_warns_and_the_field_is_ignored(
    kind: str, tmp_path: Path, answer: Any, field: str
) -> None:
    session, _ = _session(tmp_path, _hooks(kind, tmp_path, answer, "PostToolUse"))
    rec = Recorder(session)
    result = await session.submit("go")
    assert result.text == "done" and (tmp_path / "work/made").exists()
    (warning,) = rec.of(E.WARNING)
    assert warning["code"] == "hook_unreadable" and field in warning["message"]
    assert warning["message"].endswith("those fields are ignored")


async def test_plain_text_with_exit_0_is_a_success_and_shown_only_to_the_user(tmp_path: Path) -> None:
    hooks = hooks_from_config({"hooks": {PRE: [{"hooks": [{"type": "command", "command": "echo all good"}]}]}})
    session, model = _session(tmp_path, hooks)
    rec = Recorder(session)
    await session.submit("go")
    assert (tmp_path / "work/made").exists() and rec.of(E.WARNING) == []
    (ran,) = rec.of(E.HOOK)
    assert ran["output"] == "all good"
    assert "all good" not in json.dumps([m.text for r in model.requests for m in r.messages])


@pytest.mark.parametrize("suppress", [True, False])
async def test_suppress_output_keeps_the_hooks_stdout_from_the_user(tmp_path: Path, suppress: bool) -> None:
    answer = {"suppressOutput": suppress, "systemMessage": "for the user"}
    session, _ = _session(tmp_path, _command_hooks(tmp_path, answer))
    rec = Recorder(session)
    await session.submit("go")
    (ran,) = rec.of(E.HOOK)
    assert ran["system_message"] == "for the user"  # systemMessage is always the user's
    assert ran.data.get("output") == (None if suppress else json.dumps(answer))


def test_the_event_names_are_claude_codes() -> None:
    assert {"Notification", "PermissionRequest", "PreCompact", "SubagentStart", "SessionEnd", "PostCompact"} <= {
        e.value for e in HookEvent
    }


@pytest.mark.parametrize("bad", [{"decision": "block"}, {"decision": "Deny"}, {"stop": "yes"}])
async def test_a_python_hook_building_a_result_ra_cannot_act_on_fails_and_denies(tmp_path: Path, bad: Any) -> None:
    from ra.agent.hooks import HookResult

    hooks = Hooks()
    hooks.on(PRE, lambda _: HookResult(**bad))
    session, _ = _session(tmp_path, hooks)
    rec = Recorder(session)
    await session.submit("go")
    assert not (tmp_path / "work/made").exists()
    (denial,) = rec.of(E.PERMISSION_DENIED)
    assert "ValueError" in denial["reason"] and denial["source"] == "hook"


DENY_JSON = json.dumps({"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": "deny"}})


@pytest.mark.parametrize(
    "stdout",
    [
        "\ufeff" + DENY_JSON,  # a byte-order mark before the answer: read (it denies)
        "checking the command...\n" + DENY_JSON,  # the answer after a log line: cannot be read
        DENY_JSON + "\nall done",  # garbage after the answer: cannot be read
    ],
)
async def test_a_pre_tool_use_answer_among_other_text_denies(tmp_path: Path, stdout: str) -> None:
    out = tmp_path / "out.txt"
    out.write_text(stdout, encoding="utf-8")
    hooks = hooks_from_config({"hooks": {PRE: [{"hooks": [{"type": "command", "command": f"cat {out}"}]}]}})
    session, _ = _session(tmp_path, hooks)
    rec = Recorder(session)
    await session.submit("go")
    assert not (tmp_path / "work/made").exists()
    (denial,) = rec.of(E.PERMISSION_DENIED)
    assert denial["source"] == "hook"


async def test_a_huge_or_non_utf8_pre_tool_use_answer_still_denies(tmp_path: Path) -> None:
    # 2 MB of answer: ra keeps 1 MiB, which is not JSON any more - what the hook decided is
    # unknown, so the call is denied. A deny whose reason holds bytes that are not UTF-8 is read.
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"hookSpecificOutput": {"permissionDecision": "allow", "pad": "x" * 2_000_000}}))
    odd = tmp_path / "odd.json"
    odd.write_bytes(b'{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "\xff\xfe"}}')
    for answer in (huge, odd):
        hooks = hooks_from_config({"hooks": {PRE: [{"hooks": [{"type": "command", "command": f"cat {answer}"}]}]}})
        session, _ = _session(tmp_path, hooks)
        rec = Recorder(session)
        await session.submit("go")
        assert not (tmp_path / "work/made").exists()
        (denial,) = rec.of(E.PERMISSION_DENIED)
        assert denial["source"] == "hook"
