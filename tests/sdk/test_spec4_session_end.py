"""The Go-port spec, section 4: SessionEnd gets the exit reason of the loop that ran.

``reason`` still says how the session closed (``closed``, ``aborted``, ``error``, ...);
``exit_reason`` is why the last input stopped, in the spec's words - a one-shot ``ra.query()``
always closes its session, so ``reason`` alone was ``closed`` whatever happened.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import ra
from ra.agent import SessionConfig
from ra.agent.hooks import HookEvent, Hooks
from ra.agent.hooks.command import CommandHook
from ra.env.local import LocalExecutionEnvironment
from ra.llm.errors import AuthenticationError
from ra.llm.pricing import ModelPrice
from ra.llm.testing import Step, StepLike, call, fail, reply
from ra.llm.types import Usage

from .test_spec_options import _options


async def _ends(script: list[StepLike], *, default: StepLike | None = None, **fields: Any) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []
    hooks = Hooks()
    hooks.on(HookEvent.SESSION_END, lambda e: seen.append((e.reason, e.exit_reason)))
    options, _ = _options(script, default=default, hooks=hooks, **fields)
    async for _message in ra.query("go", options=options):
        pass
    return seen


async def test_a_completed_query_ends_with_end_turn() -> None:
    assert await _ends([reply("done")]) == [("closed", "end_turn")]


async def test_a_query_stopped_by_max_turns_says_so() -> None:
    assert await _ends([], default=call("echo", text="x"), max_turns=1) == [("closed", "max_turns")]


async def test_a_query_stopped_by_the_budget_says_so() -> None:
    config = SessionConfig(prices={"test-model": ModelPrice(1.0, 0.0)}, enable_loop_detection=False)
    step = Step(tool_calls=call("echo", text="x").tool_calls, usage=Usage(input_tokens=1_000_000))
    assert await _ends([], default=step, config=config, max_budget_usd=1.0) == [("closed", "error_max_budget_usd")]


async def test_a_reply_cut_at_max_tokens_says_so() -> None:
    from ra.agent.output_limit import MAX_CUT_RESPONSES

    cut = [Step(text="cut", finish_reason="length")] * (MAX_CUT_RESPONSES + 1)
    assert await _ends(cut) == [("closed", "max_tokens")]


async def test_a_fatal_error_ends_the_session_with_error() -> None:
    error = AuthenticationError("bad key", provider="scripted", status_code=401)
    assert await _ends([fail(error)]) == [("error", "error")]


async def test_an_abort_mid_input_ends_with_aborted() -> None:
    seen: list[tuple[str, Any]] = []
    hooks = Hooks()
    hooks.on(HookEvent.SESSION_END, lambda e: seen.append((e.reason, e.exit_reason)))
    options, _ = _options([Step(text="slow", delay=5.0)], hooks=hooks)
    client = ra.AgentClient(options)
    await client.connect()
    await client.query("go")
    await asyncio.sleep(0.05)
    client.session.abort()
    await asyncio.wait_for(client.session.wait_closed(), 5)
    await client.disconnect()
    assert seen == [("aborted", "aborted")]


async def test_a_command_hook_reads_the_exit_reason(tmp_path: Path) -> None:
    out = tmp_path / "session_end.json"
    script = tmp_path / "hook.py"
    script.write_text(f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())\n")
    hooks = Hooks()
    hooks.on(HookEvent.SESSION_END, CommandHook(f"{sys.executable} {script}", timeout=10))
    env = LocalExecutionEnvironment(str(tmp_path))
    options, _ = _options([], default=call("echo", text="x"), hooks=hooks, max_turns=2, env=env)
    async for _message in ra.query("go", options=options):
        pass
    data = json.loads(out.read_text())
    assert data["hook_event_name"] == "SessionEnd"
    assert (data["reason"], data["exit_reason"]) == ("closed", "max_turns")
