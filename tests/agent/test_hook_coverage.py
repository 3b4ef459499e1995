"""A Claude Code hook whose matcher names what a tool does but not the tool: ``Edit|Write`` (a
guard for protected files) does not run for ``apply_patch``, ``Read`` not for
``read_many_files``. Before, the session said nothing and the guard silently never saw those
calls; now it warns once (``hook_misses_tool``) naming the hook, the matcher and the tools."""

from __future__ import annotations

from pathlib import Path

from ra.agent import Session, SessionConfig
from ra.agent.events import EventKind as E
from ra.agent.hooks.command import hooks_from_config
from ra.env.local import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.profiles import create_anthropic_profile, create_gemini_profile, create_openai_profile

from .support import Recorder


def _session(tmp_path: Path, profile: object, matcher: str) -> tuple[Session, ScriptedAdapter]:
    hooks = hooks_from_config(
        {"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": "exit 2"}]}]}}
    )
    model = ScriptedAdapter(
        [call("apply_patch", patch="*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch"), reply("done")]
    )
    session = Session(
        profile,  # type: ignore[arg-type]
        LocalExecutionEnvironment(str(tmp_path)),
        Client(providers={"scripted": model}, default_provider="scripted"),
        SessionConfig(prices={"m": ModelPrice.free()}),
        hooks=hooks,
    )
    return session, model


async def test_an_edit_guard_that_misses_apply_patch_is_warned_about(tmp_path: Path) -> None:
    session, _ = _session(tmp_path, create_openai_profile(model="m"), "Edit|MultiEdit|Write")
    rec = Recorder(session)
    await session.submit("go")
    (warning,) = [w for w in rec.of(E.WARNING) if w["code"] == "hook_misses_tool"]
    assert "'Edit|MultiEdit|Write'" in warning["message"] and "apply_patch" in warning["message"]
    assert "write_file" not in warning["message"]  # write_file is Write: the hook runs for it


async def test_a_read_guard_that_misses_read_many_files_is_warned_about(tmp_path: Path) -> None:
    session, _ = _session(tmp_path, create_gemini_profile(model="m"), "Read")
    rec = Recorder(session)
    await session.submit("go")
    (warning,) = [w for w in rec.of(E.WARNING) if w["code"] == "hook_misses_tool"]
    assert "read_many_files" in warning["message"]


async def test_a_matcher_that_covers_every_tool_is_not_warned_about(tmp_path: Path) -> None:
    for profile, matcher in [
        (create_openai_profile(model="m"), "Edit|Write|apply_patch"),
        (create_anthropic_profile(model="m"), "Edit|Write"),
        (create_openai_profile(model="m"), "Bash"),
    ]:
        session, _ = _session(tmp_path, profile, matcher)
        rec = Recorder(session)
        await session.submit("go")
        assert [w for w in rec.of(E.WARNING) if w["code"] == "hook_misses_tool"] == []
