"""The Go-port spec's AgentConfig (section 3.1) on ``QueryOptions``, end to end with a scripted
model: limits per query, and the options that change what the model is told and offered."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from ra.agent import GenericProfile, SessionConfig
from ra.agent.subagents.definitions import AgentDefinition
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, Step, StepLike, call, reply
from ra.llm.types import Usage
from ra.sdk import AgentClient, QueryOptions, ResultMessage
from ra.tools.registry import ToolEffect

from ..agent.support import FAST_RETRY, FakeEnv, default_tools


def _options(
    script: list[StepLike] | None = None, *, default: StepLike | None = None, **fields: Any
) -> tuple[QueryOptions, ScriptedAdapter]:
    model = ScriptedAdapter(script or [], default=default)
    profile = GenericProfile("scripted", "test-model", default_tools(), system_prompt="You are a test agent.")
    config = fields.pop("config", None) or SessionConfig(enable_loop_detection=False)
    config.retry_policy = FAST_RETRY
    config.prices.setdefault("test-model", ModelPrice.free())
    env = fields.pop("env", None) or FakeEnv()
    options = QueryOptions(
        profile=profile, client=Client(providers={"scripted": model}), env=env, config=config, **fields
    )
    return options, model


async def _queries(options: QueryOptions, *prompts: str) -> list[list[Any]]:
    out: list[list[Any]] = []
    async with AgentClient(options) as client:
        for prompt in prompts:
            await client.query(prompt)
            out.append(await asyncio.wait_for(_response(client), 10))
    return out


async def _response(client: AgentClient) -> list[Any]:
    return [m async for m in client.receive_response()]


def _system(request: Any) -> str:
    return next(m.text for m in request.messages if m.role == "system")


# -- max_turns and max_budget_usd count per query ------------------------------------------------------------


async def test_max_turns_counts_per_query() -> None:
    options, model = _options(default=call("echo", text="again"), max_turns=2)
    first, second = await _queries(options, "one", "two")
    for response in (first, second):
        result = response[-1]
        assert isinstance(result, ResultMessage)
        assert (result.subtype, result.num_turns) == ("error_max_turns", 2)
    assert len(model.requests) == 4  # the second query got its own two calls


async def test_max_budget_counts_per_query() -> None:
    usage = Usage(input_tokens=1_000_000)  # $1 a call
    config = SessionConfig(prices={"test-model": ModelPrice(1.0, 0.0)}, enable_loop_detection=False)
    step = Step(tool_calls=call("echo", text="x").tool_calls, usage=usage)
    options, model = _options(default=step, config=config, max_budget_usd=2.0)
    first, second = await _queries(options, "one", "two")
    for response in (first, second):
        result = response[-1]
        assert (result.subtype, result.num_turns, result.total_cost_usd) == ("error_max_budget_usd", 2, 2.0)
    assert len(model.requests) == 4


async def test_a_follow_up_does_not_get_a_fresh_count() -> None:
    """A prompt queued while a query runs belongs to that query: no way around its limit."""
    options, model = _options(default=call("echo", text="again"), max_turns=3)
    async with AgentClient(options) as client:
        await client.query("one")
        await client.query("two")  # a follow-up of "one"
        response = await asyncio.wait_for(_response(client), 10)
    assert response[-1].subtype == "error_max_turns"
    assert len(model.requests) == 3


async def test_a_per_query_budget_refuses_calls_of_unknown_price() -> None:
    """With unknown_price='error', a model without a price cannot run past a query's budget."""
    config = SessionConfig(unknown_price="error", enable_loop_detection=False)
    options, model = _options(default=call("echo", text="x"), config=config, max_budget_usd=1.0)
    config.prices.clear()  # "test-model" has no price now
    (response,) = await _queries(options, "one")
    result = response[-1]
    assert result.subtype == "error_during_execution" and result.ra_stop_reason == "error"
    assert "no known price" in result.errors[0]
    assert len(model.requests) == 1


def test_limits_are_checked_when_set() -> None:
    from ra.sdk.limits import QueryLimits

    for bad in ({"max_turns": 0}, {"max_turns": True}, {"max_budget_usd": -1}):
        with pytest.raises(ValueError):
            QueryLimits(**bad)
    # A per-query budget is held to what a session's is: infinity, NaN and bools are no budget.
    for no_budget in (math.inf, math.nan, True):
        with pytest.raises(ValueError, match="finite number"):
            QueryLimits(max_budget_usd=no_budget)


# -- tools, system_prompt, additional_directories, max_thinking_tokens ---------------------------------------


async def test_tools_narrow_what_the_model_is_offered() -> None:
    options, model = _options([reply("ok")], tools=["echo"])
    ((init, *_),) = await _queries(options, "go")
    assert [t.name for t in model.requests[0].tools or []] == ["echo"] == init.data["tools"]


async def test_tools_with_an_unknown_name_are_refused() -> None:
    options, _ = _options([reply("ok")], tools=["echo", "no_such_tool"])
    with pytest.raises(ValueError, match="no_such_tool"):
        await AgentClient(options).connect()


async def test_a_denied_tool_stays_denied_when_tools_lists_it() -> None:
    """``tools`` offers tools; it is not a permission: a deny rule still hides the tool."""
    options, model = _options([reply("ok")], tools=["echo", "boom"], disallowed_tools=["boom"])
    ((init, *_),) = await _queries(options, "go")
    assert [t.name for t in model.requests[0].tools or []] == ["echo"] == init.data["tools"]


async def test_system_prompt_replaces_the_profile_prompt() -> None:
    options, model = _options([reply("ok")], system_prompt="Only this.")
    await _queries(options, "go")
    assert _system(model.requests[0]) == "Only this."


async def test_additional_directories_are_named_and_must_exist(tmp_path: Path) -> None:
    extra = tmp_path / "shared"
    extra.mkdir()
    options, model = _options([reply("ok")], additional_directories=[str(extra)])
    await _queries(options, "go")
    prompt = _system(model.requests[0])
    assert prompt.startswith("You are a test agent.") and str(extra) in prompt
    missing, _ = _options([reply("ok")], additional_directories=[str(tmp_path / "nope")])
    with pytest.raises(ValueError, match="not a directory"):
        await AgentClient(missing).connect()


async def test_max_thinking_tokens_sets_the_thinking_budget(tmp_path: Path) -> None:
    from ra.profiles import create_anthropic_profile

    model = ScriptedAdapter([reply("ok")])
    options = QueryOptions(
        profile=create_anthropic_profile("claude-x", provider="scripted"),
        client=Client(providers={"scripted": model}),
        cwd=tmp_path,
        config=SessionConfig(prices={"claude-x": ModelPrice.free()}),
        max_thinking_tokens=2048,
    )
    await _queries(options, "go")
    options_sent = model.requests[0].provider_options or {}
    assert options_sent["scripted"]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert options.profile.thinking is None  # type: ignore[union-attr]  # the host's profile is not changed


async def test_set_max_thinking_tokens_changes_the_budget_of_the_next_call(tmp_path: Path) -> None:
    """The Go-port spec's ``set_max_thinking_tokens`` at run time: 0 turns thinking off, None goes
    back to the profile's own setting; a budget the API refuses is refused here."""
    from ra.profiles import create_anthropic_profile

    model = ScriptedAdapter([reply("a"), reply("b"), reply("c"), reply("d")])
    budget = {"type": "enabled", "budget_tokens": 4096}
    profile = create_anthropic_profile("claude-x", provider="scripted", thinking=budget)
    options = QueryOptions(
        profile=profile,
        client=Client(providers={"scripted": model}),
        cwd=tmp_path,
        config=SessionConfig(prices={"claude-x": ModelPrice.free()}),
    )
    async with AgentClient(options) as client:
        for tokens in ("keep", 2048, 0, None):
            if tokens != "keep":
                client.set_max_thinking_tokens(tokens)  # type: ignore[arg-type]
            await client.query("go")
            [m async for m in client.receive_response()]
        with pytest.raises(ValueError, match="at least 1024"):
            client.set_max_thinking_tokens(100)
    sent = [(r.provider_options or {})["scripted"]["thinking"] for r in model.requests]
    assert sent == [
        {"type": "enabled", "budget_tokens": 4096},
        {"type": "enabled", "budget_tokens": 2048},
        {"type": "disabled"},
        {"type": "enabled", "budget_tokens": 4096},
    ]
    assert profile.thinking == {"type": "enabled", "budget_tokens": 4096}  # the host's profile is not changed


async def test_set_max_thinking_tokens_without_extended_thinking_says_what_to_use() -> None:
    options, _ = _options([reply("ok")])
    async with AgentClient(options) as client:
        with pytest.raises(ValueError, match="reasoning_effort"):
            client.set_max_thinking_tokens(2048)


@pytest.mark.parametrize(("tokens", "message"), [(500, "at least 1024"), (-1, ">= 0")])
async def test_max_thinking_tokens_out_of_range_is_refused(tokens: int, message: str) -> None:
    from ra.profiles import create_anthropic_profile

    options = QueryOptions(profile=create_anthropic_profile("claude-x"), env=FakeEnv(), max_thinking_tokens=tokens)
    with pytest.raises(ValueError, match=message):
        await AgentClient(options).connect()


async def test_max_thinking_tokens_on_a_profile_without_thinking_is_refused() -> None:
    options, _ = _options([reply("ok")], max_thinking_tokens=2048)
    with pytest.raises(ValueError, match="reasoning_effort"):
        await AgentClient(options).connect()


# -- agent_name -------------------------------------------------------------------------------------------------

_REVIEWER = AgentDefinition(
    description="Reviews", prompt="You review code.", tools=("echo",), permission_mode="plan", max_turns=1
)


async def test_agent_name_runs_the_main_conversation_as_that_agent() -> None:
    options, model = _options(default=call("echo", text="x"), agents={"reviewer": _REVIEWER}, agent_name="reviewer")
    # echo changes nothing: declared so, it is offered in the agent's plan mode (undeclared tools are not).
    options.profile.tool_registry.get("echo").effect = ToolEffect.NONE  # type: ignore[union-attr]
    ((init, *rest),) = await _queries(options, "go")
    assert "You review code." in _system(model.requests[0])
    assert [t.name for t in model.requests[0].tools or []] == ["echo"] == init.data["tools"]
    assert init.data["permissionMode"] == "plan"
    assert rest[-1].subtype == "error_max_turns" and len(model.requests) == 1  # the agent's max_turns, per query


async def test_options_set_here_win_over_the_agent() -> None:
    options, _ = _options(
        [reply("ok")], agents={"reviewer": _REVIEWER}, agent_name="reviewer", permission_mode="accept_edits"
    )
    ((init, *_),) = await _queries(options, "go")
    assert init.data["permissionMode"] == "acceptEdits"


async def test_an_unknown_agent_name_is_refused() -> None:
    options, _ = _options([reply("ok")], agents={"reviewer": _REVIEWER}, agent_name="writer")
    with pytest.raises(ValueError, match=r"unknown agent_name 'writer'.*reviewer"):
        await AgentClient(options).connect()


# -- debug_file -------------------------------------------------------------------------------------------------


async def test_debug_file_gets_the_events_without_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-0123456789abcdefghijklmnop"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    log = tmp_path / "debug.jsonl"
    options, _ = _options([reply(f"the key is {secret}")], debug_file=str(log))
    await _queries(options, "go")
    text = log.read_text()
    assert secret not in text
    lines = [json.loads(line) for line in text.splitlines()]
    kinds = [line.get("kind") for line in lines]
    assert "user_input" in kinds and "assistant_text_end" in kinds and kinds[-1] == "session_end"


async def test_debug_file_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    options, _ = _options([reply("ok")], debug_file=str(tmp_path / "no" / "such" / "dir" / "debug.jsonl"))
    with pytest.raises(ValueError, match="cannot be opened"):
        await AgentClient(options).connect()
