"""High-level API (spec 4.3-4.7, 5.2-5.9, 6.6): generate, stream, objects, tools, retries, abort, timeouts.

Everything runs against ``ScriptedAdapter`` (or a small purpose-built adapter when a test needs to
watch a call being cancelled), through a real ``Client``.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from ra.llm import client as client_module
from ra.llm.client import Client, set_default_client
from ra.llm.errors import (
    AbortError,
    AuthenticationError,
    ConfigurationError,
    InvalidToolCallError,
    NoObjectGeneratedError,
    RequestTimeoutError,
    ServerError,
    StreamError,
)
from ra.llm.generation import (
    AbortController,
    GenerateResult,
    StreamResult,
    TimeoutConfig,
    generate,
    generate_object,
    generate_object_sync,
    generate_sync,
    has_tool_call,
    step_count_is,
    stream,
    stream_object,
)
from ra.llm.retrying import RetryPolicy
from ra.llm.testing import ScriptedAdapter, Step, call, calls, fail, reply
from ra.llm.types import (
    FinishReason,
    Message,
    Request,
    Response,
    ResponseFormat,
    Role,
    StreamEvent,
    StreamEventType,
    Tool,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    ToolResult,
    Usage,
)

retry_module = importlib.import_module("ra.llm.retrying")
T = StreamEventType

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def scripted(*steps: Any, name: str = "scripted") -> tuple[Client, ScriptedAdapter]:
    adapter = ScriptedAdapter(steps, name=name)
    return Client(providers={name: adapter}), adapter


def add_tool(log: list[tuple[int, int]] | None = None) -> Tool:
    def add(a: int, b: int) -> int:
        if log is not None:
            log.append((a, b))
        return a + b

    return Tool("add", "Add two integers", ADD_SCHEMA, execute=add)


def tool_messages(request: Request) -> list[Message]:
    return [m for m in request.messages if m.role == Role.TOOL]


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []

    async def fake_sleep(delay: float) -> None:
        slept.append(delay)

    monkeypatch.setattr(retry_module, "_sleep", fake_sleep)
    return slept


@pytest.fixture
def default_client() -> Iterator[None]:
    saved = client_module._default_client
    try:
        yield
    finally:
        set_default_client(saved)


class HangingAdapter:
    """Answers nothing until cancelled; records that the call was torn down."""

    name = "hang"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = 0
        self.closed = 0

    async def complete(self, request: Request) -> Response:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("unreachable")

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        try:
            yield StreamEvent(T.STREAM_START)
            yield StreamEvent(T.TEXT_DELTA, delta="partial", text_id="0")
            self.started.set()
            await asyncio.Event().wait()
        finally:
            self.closed += 1


# ==================================================================================================
# generate(): prompt handling and request construction
# ==================================================================================================


async def test_prompt_becomes_a_user_message_and_system_is_prepended() -> None:
    client, adapter = scripted(reply("Hello there"))
    result = await generate("m", "Say hello", system="Be brief", client=client)
    assert isinstance(result, GenerateResult)
    assert result.text == "Hello there"
    assert result.finish_reason.reason == "stop"
    (request,) = adapter.requests
    assert [m.role for m in request.messages] == [Role.SYSTEM, Role.USER]
    assert [m.text for m in request.messages] == ["Be brief", "Say hello"]
    assert len(result.steps) == 1 and result.response.text == "Hello there"
    assert result.messages[-1].role == Role.ASSISTANT


async def test_messages_are_used_as_given_and_not_mutated() -> None:
    client, adapter = scripted(reply("4"))
    history = [Message.user("2+2?"), Message.assistant("thinking"), Message.user("answer")]
    snapshot = list(history)
    await generate("m", messages=history, system="math", client=client)
    assert history == snapshot
    assert [m.text for m in adapter.requests[0].messages] == ["math", "2+2?", "thinking", "answer"]


async def test_prompt_and_messages_are_exclusive() -> None:
    client, _ = scripted()
    with pytest.raises(ValueError, match="not both"):
        await generate("m", "x", messages=[Message.user("y")], client=client)
    with pytest.raises(ValueError, match="prompt or a list"):
        await generate("m", client=client)
    with pytest.raises(ValueError, match="max_tool_rounds"):
        await generate("m", "x", max_tool_rounds=-1, client=client)
    with pytest.raises(TypeError):
        await generate("m", messages=["not a message"], client=client)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="two tools"):
        await generate("m", "x", tools=[add_tool(), add_tool()], client=client)


async def test_request_parameters_pass_through() -> None:
    client, adapter = scripted(reply("ok"))
    fmt = ResponseFormat("json")
    await generate(
        "gpt-5.2",
        "q",
        tools=[add_tool(), ToolDefinition("lookup", "passive lookup")],
        tool_choice="required",
        response_format=fmt,
        temperature=0.2,
        top_p=0.9,
        max_tokens=77,
        stop_sequences=["END"],
        reasoning_effort="high",
        provider="scripted",
        provider_options={"scripted": {"x": 1}},
        metadata={"user": "u1"},
        client=client,
    )
    (req,) = adapter.requests
    assert (req.model, req.provider, req.temperature, req.top_p, req.max_tokens) == (
        "gpt-5.2",
        "scripted",
        0.2,
        0.9,
        77,
    )
    assert req.stop_sequences == ["END"] and req.reasoning_effort == "high"
    assert req.provider_options == {"scripted": {"x": 1}} and req.metadata == {"user": "u1"}
    assert req.response_format is fmt
    assert req.tool_choice == ToolChoice("required")
    assert req.tools is not None and [t.name for t in req.tools] == ["add", "lookup"]
    assert all(type(t) is ToolDefinition for t in req.tools)  # handlers never leave the process


async def test_named_tool_choice_from_a_string() -> None:
    client, adapter = scripted(reply("ok"))
    await generate("m", "q", tools=[add_tool()], tool_choice="add", max_tool_rounds=0, client=client)
    assert adapter.requests[0].tool_choice == ToolChoice.named("add")


async def test_model_defaults_to_the_catalogs_latest(default_client: None) -> None:
    adapter = ScriptedAdapter([reply("hi")], name="anthropic")
    set_default_client(Client(providers={"anthropic": adapter}))
    result = await generate(prompt="hi")  # default client, default model
    assert result.text == "hi"
    assert adapter.requests[0].model == "claude-opus-4-6"
    odd = Client(providers={"local": ScriptedAdapter([])})
    with pytest.raises(ConfigurationError, match="pass model="):
        await generate(prompt="hi", client=odd)


async def test_no_provider_configured(default_client: None) -> None:
    set_default_client(Client())
    with pytest.raises(ConfigurationError):
        await generate("m", "hi")


# ==================================================================================================
# The tool loop
# ==================================================================================================


async def test_tool_loop_runs_tools_and_feeds_results_back() -> None:
    log: list[tuple[int, int]] = []
    client, adapter = scripted(call("add", a=2, b=3), reply("The sum is 5."))
    result = await generate("m", "add 2 and 3", tools=[add_tool(log)], client=client)
    assert log == [(2, 3)]
    assert result.text == "The sum is 5."
    assert len(result.steps) == 2 and len(adapter.requests) == 2
    first = result.steps[0]
    assert first.finish_reason.reason == "tool_calls"
    assert [r.content for r in first.tool_results] == ["5"]
    assert first.tool_results[0].tool_call_id == first.tool_calls[0].id
    # The continuation carries the assistant turn and the result, correlated by id and name.
    follow_up = adapter.requests[1].messages
    assert [m.role for m in follow_up] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert follow_up[1].tool_calls[0].id == first.tool_calls[0].id
    assert follow_up[2].tool_call_id == first.tool_calls[0].id and follow_up[2].name == "add"
    assert result.tool_results == [] and result.tool_calls == []
    assert [m.role for m in result.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]


async def test_total_usage_sums_every_step() -> None:
    client, _ = scripted(
        Step(tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 1})], usage=Usage(10, 5, 15, reasoning_tokens=2)),
        Step(text="done", usage=Usage(20, 3, 23, cache_read_tokens=8)),
    )
    result = await generate("m", "q", tools=[add_tool()], client=client)
    assert result.usage == Usage(20, 3, 23, cache_read_tokens=8)
    assert result.total_usage == Usage(30, 8, 38, reasoning_tokens=2, cache_read_tokens=8)


async def test_max_tool_rounds_zero_returns_the_calls() -> None:
    log: list[tuple[int, int]] = []
    client, adapter = scripted(call("add", a=1, b=2))
    result = await generate("m", "q", tools=[add_tool(log)], max_tool_rounds=0, client=client)
    assert log == [] and len(adapter.requests) == 1
    assert len(result.steps) == 1
    assert [c.name for c in result.tool_calls] == ["add"] and result.tool_results == []
    assert result.finish_reason.reason == "tool_calls"


async def test_max_tool_rounds_one_allows_one_execution() -> None:
    log: list[tuple[int, int]] = []
    client, adapter = scripted(call("add", a=1, b=1), call("add", a=2, b=2), reply("never reached"))
    result = await generate("m", "q", tools=[add_tool(log)], max_tool_rounds=1, client=client)
    assert log == [(1, 1)]
    assert len(adapter.requests) == 2  # max_tool_rounds + 1 model calls
    assert [c.arguments for c in result.tool_calls] == [{"a": 2, "b": 2}]  # handed back, not run
    assert result.tool_results == []
    assert adapter.remaining == 1


@pytest.mark.parametrize("rounds", [2, 3, 5])
async def test_max_tool_rounds_n(rounds: int) -> None:
    log: list[tuple[int, int]] = []
    adapter = ScriptedAdapter([], default=call("add", a=1, b=2))
    client = Client(providers={"s": adapter})
    result = await generate("m", "q", tools=[add_tool(log)], max_tool_rounds=rounds, client=client)
    assert len(log) == rounds
    assert len(adapter.requests) == rounds + 1 == len(result.steps)


async def test_loop_ends_at_natural_completion() -> None:
    client, adapter = scripted(call("add", a=1, b=2), reply("done"))
    result = await generate("m", "q", tools=[add_tool()], max_tool_rounds=10, client=client)
    assert len(adapter.requests) == 2 and result.text == "done"


async def test_tool_calls_are_not_run_unless_the_model_finished_for_them() -> None:
    log: list[tuple[int, int]] = []
    truncated = Step(tool_calls=[ToolCall("c", "add", {"a": 1, "b": 2})], finish_reason="length")
    client, adapter = scripted(truncated)
    result = await generate("m", "q", tools=[add_tool(log)], max_tool_rounds=3, client=client)
    assert log == [] and len(adapter.requests) == 1
    assert result.finish_reason.reason == "length"


async def test_stop_when_ends_the_loop_after_running_that_steps_tools() -> None:
    log: list[tuple[int, int]] = []
    client, adapter = scripted(call("add", a=1, b=1), call("add", a=2, b=2), reply("x"))
    seen: list[int] = []

    def stop(steps: list[Any]) -> bool:
        seen.append(len(steps))
        return True

    result = await generate("m", "q", tools=[add_tool(log)], max_tool_rounds=5, stop_when=stop, client=client)
    assert seen == [1] and log == [(1, 1)] and len(adapter.requests) == 1
    assert [r.content for r in result.tool_results] == ["2"]
    assert result.messages[-1].role == Role.TOOL  # the history stays answerable


async def test_async_stop_when_and_helpers() -> None:
    client, adapter = scripted(call("add", a=1, b=1), call("add", a=2, b=2), call("add", a=3, b=3), reply("x"))

    async def after_two(steps: list[Any]) -> bool:
        await asyncio.sleep(0)
        return len(steps) >= 2

    await generate("m", "q", tools=[add_tool()], max_tool_rounds=5, stop_when=after_two, client=client)
    assert len(adapter.requests) == 2

    client, adapter = scripted(call("add", a=1, b=1), call("add", a=2, b=2), reply("x"))
    await generate("m", "q", tools=[add_tool()], max_tool_rounds=5, stop_when=step_count_is(1), client=client)
    assert len(adapter.requests) == 1

    client, adapter = scripted(call("add", a=1, b=1), reply("x"))
    await generate("m", "q", tools=[add_tool()], max_tool_rounds=5, stop_when=has_tool_call("add"), client=client)
    assert len(adapter.requests) == 1


async def test_passive_tools_are_handed_back() -> None:
    client, adapter = scripted(call("lookup", key="k"))
    passive = ToolDefinition("lookup", "ask the host", {"type": "object", "properties": {"key": {"type": "string"}}})
    result = await generate("m", "q", tools=[passive], max_tool_rounds=3, client=client)
    assert len(adapter.requests) == 1 and result.tool_results == []
    assert result.tool_calls[0].name == "lookup"


async def test_a_passive_call_among_active_ones_stops_the_loop() -> None:
    log: list[tuple[int, int]] = []
    client, adapter = scripted(calls(("add", {"a": 1, "b": 2}), ("lookup", {"key": "k"})))
    passive = ToolDefinition("lookup", "ask the host")
    result = await generate("m", "q", tools=[add_tool(log), passive], max_tool_rounds=3, client=client)
    assert log == [] and len(adapter.requests) == 1
    assert [c.name for c in result.tool_calls] == ["add", "lookup"]


# ==================================================================================================
# Tool execution: concurrency, ordering, failures, validation, injection
# ==================================================================================================


async def test_async_tool_calls_run_concurrently_and_results_keep_call_order() -> None:
    running = 0
    peak = 0
    all_started = asyncio.Event()
    finished: list[int] = []

    async def work(i: int) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), 5)  # only returns if all three run at once
        await asyncio.sleep(0.005 * (3 - i))  # finish in reverse order
        finished.append(i)
        running -= 1
        return f"result {i}"

    tool = Tool("work", "w", {"type": "object", "properties": {"i": {"type": "integer"}}}, execute=work)
    client, adapter = scripted(calls(("work", {"i": 0}), ("work", {"i": 1}), ("work", {"i": 2})), reply("ok"))
    result = await generate("m", "q", tools=[tool], client=client)
    assert peak == 3 and finished == [2, 1, 0]
    step = result.steps[0]
    assert [r.content for r in step.tool_results] == ["result 0", "result 1", "result 2"]
    assert [r.tool_call_id for r in step.tool_results] == [c.id for c in step.tool_calls]
    # One continuation request carrying every result, in order.
    assert len(adapter.requests) == 2
    assert [m.tool_call_id for m in tool_messages(adapter.requests[1])] == [c.id for c in step.tool_calls]


async def test_sync_handlers_run_in_threads_concurrently() -> None:
    barrier = threading.Barrier(3, timeout=5)
    threads: set[int] = set()

    def blocking(i: int) -> str:
        threads.add(threading.get_ident())
        barrier.wait()  # raises BrokenBarrierError unless all three are in flight together
        return f"done {i}"

    tool = Tool("blocking", "b", {"type": "object", "properties": {"i": {"type": "integer"}}}, execute=blocking)
    client, _ = scripted(calls(("blocking", {"i": 0}), ("blocking", {"i": 1}), ("blocking", {"i": 2})), reply("ok"))
    result = await generate("m", "q", tools=[tool], client=client)
    assert [r.content for r in result.steps[0].tool_results] == ["done 0", "done 1", "done 2"]
    assert not any(r.is_error for r in result.steps[0].tool_results)
    assert threading.get_ident() not in threads and len(threads) == 3


async def test_partial_failures_become_error_results() -> None:
    def explode(a: int, b: int) -> int:
        raise RuntimeError("disk on fire")

    boom = Tool("boom", "fails", ADD_SCHEMA, execute=explode)
    client, adapter = scripted(
        calls(("add", {"a": 1, "b": 2}), ("boom", {"a": 1, "b": 2}), ("nope", {})),
        reply("recovered"),
    )
    result = await generate("m", "q", tools=[add_tool(), boom], client=client)
    ok, failed, unknown = result.steps[0].tool_results
    assert (ok.content, ok.is_error) == ("3", False)
    assert failed.is_error and "disk on fire" in str(failed.content) and "RuntimeError" in str(failed.content)
    assert unknown.is_error and "Unknown tool 'nope'" in str(unknown.content) and "add" in str(unknown.content)
    assert result.text == "recovered"
    sent = tool_messages(adapter.requests[1])
    assert [m.content[0].tool_result.is_error for m in sent] == [False, True, True]  # type: ignore[union-attr]


async def test_malformed_json_arguments_become_an_error_result() -> None:
    log: list[tuple[int, int]] = []
    bad = ToolCall("bad", "add", {}, raw_arguments='{"a": 1', arguments_error="arguments are not valid JSON")
    client, _ = scripted(calls(bad), reply("sorry"))
    result = await generate("m", "q", tools=[add_tool(log)], client=client)
    (res,) = result.steps[0].tool_results
    assert res.is_error and "not valid JSON" in str(res.content) and log == []


async def test_schema_validation_of_arguments() -> None:
    log: list[tuple[int, int]] = []
    client, _ = scripted(call("add", a="one", b=2), reply("sorry"))
    result = await generate("m", "q", tools=[add_tool(log)], client=client)
    (res,) = result.steps[0].tool_results
    assert res.is_error and "a: 'one' is not of type 'integer'" in str(res.content)
    assert log == []

    client, _ = scripted(call("add", a=1), reply("sorry"))
    result = await generate("m", "q", tools=[add_tool(log)], client=client)
    assert "'b' is a required property" in str(result.steps[0].tool_results[0].content)


async def test_validation_can_be_turned_off() -> None:
    seen: list[Any] = []
    tool = Tool(
        "echo", "e", {"type": "object", "properties": {"x": {"type": "integer"}}}, execute=lambda x: seen.append(x)
    )
    client, _ = scripted(call("echo", x="not an int"), reply("ok"))
    await generate("m", "q", tools=[tool], validate_tool_arguments=False, client=client)
    assert seen == ["not an int"]


async def test_unexpected_arguments_are_reported_not_raised() -> None:
    tool = Tool("one", "o", {"type": "object", "properties": {"x": {"type": "integer"}}}, execute=lambda x: x)
    client, _ = scripted(call("one", x=1, y=2), reply("ok"))
    result = await generate("m", "q", tools=[tool], client=client)
    (res,) = result.steps[0].tool_results
    assert res.is_error and "unexpected keyword argument 'y'" in str(res.content)


async def test_invalid_tool_schema_is_reported() -> None:
    tool = Tool("odd", "o", {"type": "object", "properties": {"x": {"type": 12}}}, execute=lambda x: x)
    client, _ = scripted(call("odd", x=1), reply("ok"))
    result = await generate("m", "q", tools=[tool], client=client)
    assert "invalid JSON schema" in str(result.steps[0].tool_results[0].content)


async def test_repair_tool_call_fixes_arguments() -> None:
    log: list[tuple[int, int]] = []
    seen: list[tuple[str, str]] = []

    def repair(tc: ToolCall, error: InvalidToolCallError, tool: ToolDefinition) -> ToolCall:
        seen.append((tc.id, error.message))
        return ToolCall("ignored-id", "ignored-name", {"a": int(tc.arguments["a"]), "b": 0})

    client, _ = scripted(calls(ToolCall("c1", "add", {"a": "7"})), reply("ok"))
    result = await generate("m", "q", tools=[add_tool(log)], repair_tool_call=repair, client=client)
    assert log == [(7, 0)]
    (res,) = result.steps[0].tool_results
    assert res.tool_call_id == "c1" and res.content == "7" and not res.is_error
    assert seen[0][0] == "c1" and "Invalid arguments for tool 'add'" in seen[0][1]


async def test_repair_tool_call_async_none_and_failure() -> None:
    async def give_up(tc: ToolCall, error: InvalidToolCallError, tool: ToolDefinition) -> None:
        return None

    client, _ = scripted(call("add", a="x", b=1), reply("ok"))
    result = await generate("m", "q", tools=[add_tool()], repair_tool_call=give_up, client=client)
    assert result.steps[0].tool_results[0].is_error

    def broken(tc: ToolCall, error: InvalidToolCallError, tool: ToolDefinition) -> ToolCall:
        raise KeyError("no idea")

    client, _ = scripted(call("add", a="x", b=1), reply("ok"))
    result = await generate("m", "q", tools=[add_tool()], repair_tool_call=broken, client=client)
    assert "repair failed" in str(result.steps[0].tool_results[0].content)

    def still_wrong(tc: ToolCall, error: InvalidToolCallError, tool: ToolDefinition) -> ToolCall:
        return ToolCall(tc.id, tc.name, {"a": "still text", "b": 1})

    client, _ = scripted(call("add", a="x", b=1), reply("ok"))
    result = await generate("m", "q", tools=[add_tool()], repair_tool_call=still_wrong, client=client)
    assert "is not of type 'integer'" in str(result.steps[0].tool_results[0].content)


async def test_context_injection_by_signature() -> None:
    got: dict[str, Any] = {}

    async def handler(query: str, messages: list[Message], abort_signal: Any, tool_call_id: str) -> str:
        got.update(query=query, messages=messages, signal=abort_signal, id=tool_call_id)
        return "found"

    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    tool = Tool("search", "s", schema, execute=handler)
    client, _ = scripted(call("search", _id="call-42", query="cats"), reply("ok"))
    await generate("m", "find cats", tools=[tool], client=client)
    assert got["query"] == "cats" and got["id"] == "call-42"
    assert [m.role for m in got["messages"]] == [Role.USER, Role.ASSISTANT]
    assert got["signal"].aborted is False


async def test_schema_property_wins_over_injection() -> None:
    got: list[Any] = []
    schema = {"type": "object", "properties": {"messages": {"type": "array"}}}
    tool = Tool("count", "c", schema, execute=lambda messages: got.append(messages) or len(messages))
    client, _ = scripted(call("count", messages=["a", "b"]), reply("ok"))
    result = await generate("m", "q", tools=[tool], client=client)
    assert got == [["a", "b"]] and result.steps[0].tool_results[0].content == "2"


async def test_handler_taking_one_dict_and_handlers_without_parameters() -> None:
    received: list[Any] = []

    def takes_dict(args: dict[str, Any], tool_call_id: str) -> str:
        received.append((args, tool_call_id))
        return "ok"

    tool = Tool("d", "d", {"type": "object", "properties": {"x": {"type": "integer"}}}, execute=takes_dict)
    ping = Tool("ping", "p", execute=lambda: "pong")
    client, _ = scripted(calls(ToolCall("i1", "d", {"x": 5}), ToolCall("i2", "ping", {})), reply("ok"))
    result = await generate("m", "q", tools=[tool, ping], client=client)
    assert received == [({"x": 5}, "i1")]
    assert [r.content for r in result.steps[0].tool_results] == ["ok", "pong"]


async def test_handler_return_values_are_normalised() -> None:
    values: dict[str, Any] = {
        "d": {"k": [1, 2]},
        "l": ["a", 1],
        "t": ("x", 2),
        "i": 42,
        "n": None,
        "b": True,
        "s": "plain",
        "r": ToolResult("whatever", "custom failure", is_error=True),
        "o": object(),
    }
    tools = [Tool(name, name, execute=(lambda v=v: v)) for name, v in values.items()]
    client, _ = scripted(calls(*[(name, {}) for name in values]), reply("ok"))
    result = await generate("m", "q", tools=tools, client=client)
    contents = {c.name: r for c, r in zip(result.steps[0].tool_calls, result.steps[0].tool_results, strict=True)}
    assert contents["d"].content == {"k": [1, 2]}
    assert contents["l"].content == ["a", 1]
    assert contents["t"].content == ["x", 2]
    assert contents["i"].content == "42"
    assert contents["n"].content == "null"
    assert contents["b"].content == "true"
    assert contents["s"].content == "plain"
    assert contents["r"].is_error and contents["r"].content == "custom failure"
    assert contents["r"].tool_call_id == result.steps[0].tool_calls[7].id
    assert str(contents["o"].content).startswith("<object object")


async def test_sync_handler_returning_an_awaitable() -> None:
    async def later() -> str:
        return "awaited"

    tool = Tool("lazy", "l", execute=lambda: later())
    client, _ = scripted(call("lazy"), reply("ok"))
    result = await generate("m", "q", tools=[tool], client=client)
    assert result.steps[0].tool_results[0].content == "awaited"


# ==================================================================================================
# Retries
# ==================================================================================================


async def test_transient_errors_are_retried_per_call(no_sleep: list[float]) -> None:
    log: list[tuple[int, int]] = []
    server = ServerError("overloaded", provider="scripted", status_code=503)
    client, adapter = scripted(call("add", a=1, b=1), fail(server), fail(server), reply("done"))
    result = await generate("m", "q", tools=[add_tool(log)], client=client)
    assert result.text == "done"
    assert log == [(1, 1)]  # the first step's tool ran once; only step 2's call was retried
    assert len(adapter.requests) == 4 and len(no_sleep) == 2


async def test_max_retries_zero_and_non_retryable(no_sleep: list[float]) -> None:
    server = ServerError("overloaded", provider="scripted", status_code=503)
    client, adapter = scripted(fail(server), reply("never"))
    with pytest.raises(ServerError):
        await generate("m", "q", max_retries=0, client=client)
    assert len(adapter.requests) == 1

    client, adapter = scripted(fail(AuthenticationError("bad key", provider="p", status_code=401)), reply("never"))
    with pytest.raises(AuthenticationError):
        await generate("m", "q", client=client)
    assert len(adapter.requests) == 1 and no_sleep == []


async def test_custom_retry_policy(no_sleep: list[float]) -> None:
    attempts: list[int] = []
    server = ServerError("x", provider="p", status_code=500)
    policy = RetryPolicy(max_retries=3, jitter=False, on_retry=lambda e, n, d: attempts.append(n))
    client, _ = scripted(fail(server), fail(server), fail(server), reply("ok"))
    assert (await generate("m", "q", retry_policy=policy, client=client)).text == "ok"
    assert attempts == [1, 2, 3] and no_sleep == [1.0, 2.0, 4.0]


# ==================================================================================================
# Cancellation and timeouts
# ==================================================================================================


async def test_abort_before_the_call() -> None:
    client, adapter = scripted(reply("x"))
    controller = AbortController()
    controller.abort("user pressed stop")
    with pytest.raises(AbortError, match="user pressed stop"):
        await generate("m", "q", abort_signal=controller.signal, client=client)
    assert adapter.requests == []


async def test_abort_cancels_the_call_in_flight() -> None:
    adapter = HangingAdapter()
    client = Client(providers={"hang": adapter})
    controller = AbortController()
    task = asyncio.create_task(generate("m", "q", abort_signal=controller.signal, client=client))
    await asyncio.wait_for(adapter.started.wait(), 5)
    controller.abort()
    with pytest.raises(AbortError):
        await asyncio.wait_for(task, 5)
    assert adapter.cancelled == 1
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    await asyncio.sleep(0)  # the abort left no stray cancellation behind


async def test_abort_from_another_thread() -> None:
    adapter = HangingAdapter()
    client = Client(providers={"hang": adapter})
    controller = AbortController()
    timer = threading.Timer(0.05, controller.abort)
    timer.start()
    try:
        with pytest.raises(AbortError):
            await asyncio.wait_for(generate("m", "q", abort_signal=controller.signal, client=client), 5)
    finally:
        timer.cancel()
    assert adapter.cancelled == 1


async def test_abort_during_tool_execution_reaches_handlers() -> None:
    controller = AbortController()
    started = threading.Event()
    stopped = threading.Event()

    def long_job(abort_signal: Any) -> str:
        started.set()
        deadline = time.monotonic() + 5
        while not abort_signal.aborted and time.monotonic() < deadline:
            time.sleep(0.005)
        stopped.set()
        return "stopped"

    tool = Tool("job", "j", execute=long_job)
    client, adapter = scripted(call("job"), reply("never"))
    task = asyncio.create_task(generate("m", "q", tools=[tool], abort_signal=controller.signal, client=client))
    await asyncio.to_thread(started.wait, 5)
    controller.abort()
    with pytest.raises(AbortError):
        await asyncio.wait_for(task, 5)
    assert await asyncio.to_thread(stopped.wait, 5)
    assert len(adapter.requests) == 1


async def test_outside_cancellation_stays_a_cancellation() -> None:
    adapter = HangingAdapter()
    client = Client(providers={"hang": adapter})
    task = asyncio.create_task(generate("m", "q", abort_signal=AbortController().signal, client=client))
    await asyncio.wait_for(adapter.started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_abort_signal_listeners_and_wait() -> None:
    controller = AbortController()
    signal = controller.signal
    fired: list[str] = []
    remove = signal.add_listener(lambda: fired.append("a"))
    signal.add_listener(lambda: fired.append("b"))
    remove()
    waiter = asyncio.create_task(signal.wait())
    await asyncio.sleep(0)
    controller.abort("why")
    await asyncio.wait_for(waiter, 5)
    controller.abort("again")  # idempotent
    assert fired == ["b"] and signal.aborted and signal.reason == "why"
    signal.add_listener(lambda: fired.append("late"))  # fires at once when already aborted
    assert fired == ["b", "late"]
    with pytest.raises(AbortError, match="why"):
        signal.throw_if_aborted()


async def test_total_timeout() -> None:
    client, _ = scripted(reply("slow", delay=10))
    with pytest.raises(RequestTimeoutError, match=r"total timeout of 0\.05s"):
        await asyncio.wait_for(generate("m", "q", timeout=0.05, client=client), 5)


async def test_total_timeout_spans_steps() -> None:
    adapter = ScriptedAdapter([], default=Step(tool_calls=[ToolCall("c", "add", {"a": 1, "b": 1})], delay=0.03))
    client = Client(providers={"s": adapter})
    with pytest.raises(RequestTimeoutError, match="total"):
        await generate(
            "m", "q", tools=[add_tool()], max_tool_rounds=50, timeout=TimeoutConfig(total=0.1), client=client
        )
    assert 2 <= len(adapter.requests) < 50


async def test_per_step_timeout_is_not_retried() -> None:
    client, adapter = scripted(call("add", a=1, b=1), reply("slow", delay=10))
    with pytest.raises(RequestTimeoutError, match="per-step timeout"):
        await asyncio.wait_for(
            generate("m", "q", tools=[add_tool()], timeout=TimeoutConfig(per_step=0.05), client=client), 5
        )
    assert len(adapter.requests) == 2


def test_timeout_config() -> None:
    assert TimeoutConfig.coerce(None) == TimeoutConfig()
    assert TimeoutConfig.coerce(3) == TimeoutConfig(total=3.0)
    config = TimeoutConfig(per_step=1)
    assert TimeoutConfig.coerce(config) is config
    with pytest.raises(ValueError):
        TimeoutConfig(total=0)


# ==================================================================================================
# stream()
# ==================================================================================================


async def test_stream_text() -> None:
    client, _ = scripted(reply("Streaming is fun to watch.", chunk_size=4))
    result = stream("m", "q", client=client)
    assert isinstance(result, StreamResult)
    events = [e async for e in result]
    assert events[0].type == T.STREAM_START and events[-1].type == T.FINISH
    deltas = [e.delta for e in events if e.type == T.TEXT_DELTA]
    assert len(deltas) > 1
    response = await result.response()
    assert "".join(d or "" for d in deltas) == response.text == "Streaming is fun to watch."
    assert [e.type for e in events].count(T.STEP_FINISH) == 0
    assert result.partial_response is response


async def test_stream_nothing_is_sent_until_iterated() -> None:
    client, adapter = scripted(reply("x"))
    result = stream("m", "q", client=client)
    assert adapter.requests == []
    assert (await result.response()).text == "x"  # response() consumes the stream
    with pytest.raises(ValueError):
        stream("m", "q", messages=[Message.user("x")], client=client)  # arguments are checked at once


async def test_stream_with_tool_loop() -> None:
    log: list[tuple[int, int]] = []
    client, adapter = scripted(call("add", a=4, b=5), reply("Nine.", chunk_size=2))
    result = stream("m", "q", tools=[add_tool(log)], client=client)
    events = [e async for e in result]
    types = [e.type for e in events]
    assert types.count(T.STREAM_START) == 2 and types.count(T.FINISH) == 2
    boundary = types.index(T.STEP_FINISH)
    assert T.TOOL_CALL_END in types[:boundary] and T.TEXT_DELTA in types[boundary:]
    step_finish = events[boundary]
    assert step_finish.raw == {"step": 0} and step_finish.response is not None
    assert step_finish.finish_reason is not None and step_finish.finish_reason.reason == "tool_calls"
    assert log == [(4, 5)]
    assert [r.content for r in result.steps[0].tool_results] == ["9"]
    assert (await result.response()).text == "Nine."
    assert len(tool_messages(adapter.requests[1])) == 1
    whole = await result.result()
    assert len(whole.steps) == 2 and whole.text == "Nine." and whole.total_usage.total_tokens > 0


async def test_stream_max_tool_rounds_zero() -> None:
    client, adapter = scripted(call("add", a=1, b=1))
    result = stream("m", "q", tools=[add_tool()], max_tool_rounds=0, client=client)
    types = [e.type async for e in result]
    assert T.STEP_FINISH not in types and len(adapter.requests) == 1
    assert (await result.response()).tool_calls[0].name == "add"


async def test_text_stream_and_partial_response() -> None:
    client, _ = scripted(reply("abcdefgh", chunk_size=2))
    result = stream("m", "q", client=client)
    assert result.partial_response is None
    seen: list[str] = []
    async for chunk in result.text_stream:
        seen.append(chunk)
        partial = result.partial_response
        assert partial is not None and partial.text == "".join(seen)
    assert seen == ["ab", "cd", "ef", "gh"]


async def test_stream_is_iterable_once() -> None:
    client, _ = scripted(reply("x"))
    result = stream("m", "q", client=client)
    [e async for e in result]
    with pytest.raises(RuntimeError, match="only once"):
        [e async for e in result]


async def test_stream_error_mid_way_yields_error_event_then_raises(no_sleep: list[float]) -> None:
    broken = StreamError("connection dropped")
    client, adapter = scripted(reply("partial text", stream_error=broken), reply("never"))
    result = stream("m", "q", client=client)
    events: list[StreamEvent] = []
    with pytest.raises(StreamError, match="dropped"):
        async for event in result:
            events.append(event)  # noqa: PERF401 - the list must survive the exception
    assert events[-1].type == T.ERROR and events[-1].error is broken
    assert any(e.type == T.TEXT_DELTA for e in events)
    assert len(adapter.requests) == 1 and no_sleep == []  # never retried after data arrived
    with pytest.raises(StreamError):
        await result.response()


async def test_stream_opening_is_retried(no_sleep: list[float]) -> None:
    client, adapter = scripted(fail(ServerError("busy", provider="p", status_code=503)), reply("second try"))
    result = stream("m", "q", client=client)
    events = [e async for e in result]
    assert T.ERROR not in [e.type for e in events]
    assert (await result.response()).text == "second try"
    assert len(adapter.requests) == 2 and len(no_sleep) == 1


async def test_stream_abort_closes_the_connection() -> None:
    adapter = HangingAdapter()
    client = Client(providers={"hang": adapter})
    controller = AbortController()
    result = stream("m", "q", abort_signal=controller.signal, client=client)
    events: list[StreamEvent] = []

    async def consume() -> None:
        async for event in result:
            events.append(event)  # noqa: PERF401 - the list must survive the exception

    task = asyncio.create_task(consume())
    await asyncio.wait_for(adapter.started.wait(), 5)
    controller.abort()
    with pytest.raises(AbortError):
        await asyncio.wait_for(task, 5)
    assert adapter.closed == 1
    assert [e.type for e in events] == [T.STREAM_START, T.TEXT_DELTA, T.ERROR]
    assert isinstance(events[-1].error, AbortError)


async def test_stream_abort_between_events() -> None:
    client, _ = scripted(reply("a long answer in many chunks", chunk_size=1))
    controller = AbortController()
    result = stream("m", "q", abort_signal=controller.signal, client=client)
    seen: list[StreamEvent] = []
    with pytest.raises(AbortError):
        async for event in result:
            seen.append(event)
            if event.type == T.TEXT_DELTA:
                controller.abort()
    assert seen[-1].type == T.ERROR
    assert sum(e.type == T.TEXT_DELTA for e in seen) == 1


async def test_stream_per_step_timeout_on_a_stall() -> None:
    adapter = HangingAdapter()
    client = Client(providers={"hang": adapter})
    result = stream("m", "q", timeout=TimeoutConfig(per_step=0.05), client=client)
    with pytest.raises(RequestTimeoutError, match="per-step"):
        await asyncio.wait_for(result.response(), 5)
    assert adapter.closed == 1


async def test_stream_aclose_early_closes_the_provider_stream() -> None:
    adapter = HangingAdapter()
    client = Client(providers={"hang": adapter})
    async with stream("m", "q", client=client) as result:
        async for event in result:
            if event.type == T.TEXT_DELTA:
                break
    assert adapter.closed == 1
    with pytest.raises(Exception, match="closed before it finished"):
        await result.response()


# ==================================================================================================
# Structured output
# ==================================================================================================

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


async def test_generate_object() -> None:
    client, adapter = scripted(reply('{"name": "Alice", "age": 30}'))
    result = await generate_object("m", "Extract: Alice is 30", schema=PERSON, client=client)
    assert result.output == {"name": "Alice", "age": 30}
    assert result.text == '{"name": "Alice", "age": 30}'
    fmt = adapter.requests[0].response_format
    assert fmt is not None and (fmt.type, fmt.json_schema, fmt.strict) == ("json_schema", PERSON, True)


async def test_generate_object_tolerates_a_code_fence() -> None:
    client, _ = scripted(reply('```json\n{"name": "Bo", "age": 4}\n```'))
    assert (await generate_object("m", "q", schema=PERSON, client=client)).output == {"name": "Bo", "age": 4}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("Alice is 30", "not valid JSON"),
        ('{"name": "Alice"}', "'age' is a required property"),
        ('{"name": "Alice", "age": "thirty"}', "is not of type 'integer'"),
        ("", "no text"),
    ],
)
async def test_generate_object_failures_are_not_retried(text: str, fragment: str, no_sleep: list[float]) -> None:
    client, adapter = scripted(reply(text), reply('{"name": "x", "age": 1}'))
    with pytest.raises(NoObjectGeneratedError, match=fragment) as info:
        await generate_object("m", "q", schema=PERSON, client=client)
    assert info.value.text == text
    assert len(adapter.requests) == 1 and no_sleep == []


async def test_generate_object_without_schema_and_options() -> None:
    client, adapter = scripted(reply("[1, 2, 3]"))
    result = await generate_object("m", "q", schema=None, temperature=0, client=client)
    assert result.output == [1, 2, 3]
    req = adapter.requests[0]
    assert req.response_format == ResponseFormat("json") and req.temperature == 0
    with pytest.raises(TypeError):
        await generate_object("m", "q", schema="not a schema", client=client)  # type: ignore[arg-type]


async def test_stream_object_yields_growing_partials() -> None:
    document = '{"name": "Alice Wonderland", "age": 30}'
    client, _ = scripted(reply(document, chunk_size=3))
    result = stream_object("m", "q", schema=PERSON, client=client)
    partials = [p async for p in result]
    assert len(partials) >= 5
    assert partials[0] == {} or set(partials[0]) <= {"name"}
    names = [p.get("name", "") for p in partials]
    assert all("Alice Wonderland".startswith(n) for n in names)
    assert names == sorted(names, key=len)  # the string only grows
    assert all(a != b for a, b in itertools.pairwise(partials))  # only changes are yielded
    assert partials[-1] == {"name": "Alice Wonderland", "age": 30}
    assert await result.object() == {"name": "Alice Wonderland", "age": 30}
    assert result.partial_object == partials[-1]
    assert (await result.response()).text == document


async def test_stream_object_invalid_final_and_object_without_iterating() -> None:
    client, _ = scripted(reply('{"name": "Alice"}', chunk_size=4))
    result = stream_object("m", "q", schema=PERSON, client=client)
    partials = [p async for p in result]
    assert partials[-1] == {"name": "Alice"}
    with pytest.raises(NoObjectGeneratedError, match="required"):
        await result.object()

    client, _ = scripted(reply('```json\n{"name": "Z", "age": 1}\n```', chunk_size=5))
    assert await stream_object("m", "q", schema=PERSON, client=client).object() == {"name": "Z", "age": 1}

    client, _ = scripted(reply("not json at all"))
    broken = stream_object("m", "q", schema=PERSON, client=client)
    assert [p async for p in broken] == []
    assert broken.parse_error is not None
    with pytest.raises(NoObjectGeneratedError):
        await broken.object()


# ==================================================================================================
# Sync wrappers
# ==================================================================================================


def test_generate_sync() -> None:
    client, _ = scripted(reply("sync hello"), reply('{"name": "S", "age": 2}'))
    assert generate_sync("m", "q", client=client).text == "sync hello"
    assert generate_object_sync("m", "q", schema=PERSON, client=client).output == {"name": "S", "age": 2}
    assert generate_sync.__name__ == "generate_sync"


async def test_sync_wrappers_refuse_a_running_loop() -> None:
    client, _ = scripted(reply("x"))
    with pytest.raises(RuntimeError, match="await generate"):
        generate_sync("m", "q", client=client)
    with pytest.raises(RuntimeError, match="await generate_object"):
        generate_object_sync("m", "q", schema=PERSON, client=client)


def test_warnings_and_finish_reason_helpers() -> None:
    from ra.llm.types import Warning

    message = Message.assistant("x")
    response = Response("r", "m", "p", message, FinishReason("stop"), warnings=[Warning("w1")])
    from ra.llm.generation import StepResult

    step = StepResult.of(response, [])
    result = GenerateResult.from_steps([step, step], [message])
    assert result.warnings == [Warning("w1"), Warning("w1")]


# ==================================================================================================
# Over real HTTP (a local server speaking Chat Completions)
# ==================================================================================================


def _chat_adapter(base_url: str) -> Any:
    mod = pytest.importorskip("ra.llm.providers.openai_chat")
    return mod.OpenAICompatibleAdapter(api_key="test-key", base_url=base_url + "/v1")


def _completion(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "local-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }


def _sse(texts: list[str]) -> bytes:
    import json as _json

    def chunk(delta: dict[str, Any], finish: str | None) -> bytes:
        body = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "local-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + _json.dumps(body).encode() + b"\n\n"

    out = [chunk({"role": "assistant", "content": ""}, None)]
    out += [chunk({"content": t}, None) for t in texts]
    out.append(chunk({}, "stop"))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def test_generate_sync_over_http(replay_server: Any) -> None:
    replay_server.enqueue(200, _completion("hello over http"))
    replay_server.enqueue(200, _completion('{"name": "H", "age": 7}'))
    client = Client(providers={"local": _chat_adapter(replay_server.base_url)})
    assert generate_sync("local-model", "hi", client=client).text == "hello over http"
    assert generate_object_sync("local-model", "q", schema=PERSON, strict=False, client=client).output == {
        "name": "H",
        "age": 7,
    }
    assert replay_server.requests[0].json()["messages"][-1]["content"] == "hi"


async def test_retry_over_http(replay_server: Any, no_sleep: list[float]) -> None:
    replay_server.enqueue(503, {"error": {"message": "overloaded"}}, {"retry-after": "0.25"})
    replay_server.enqueue(200, _completion("after retry"))
    client = Client(providers={"local": _chat_adapter(replay_server.base_url)})
    result = await generate("local-model", "hi", client=client)
    assert result.text == "after retry" and no_sleep == [0.25]
    assert len(replay_server.requests) == 2
    await client.close()


async def test_stream_over_http_and_abort_of_a_stalled_stream(replay_server: Any) -> None:
    replay_server.enqueue(200, _sse(["Hel", "lo"]), {"content-type": "text/event-stream"}, chunking="events")
    body = _sse(["never", " finished"])
    replay_server.enqueue(200, body, {"content-type": "text/event-stream"}, chunking="events", stall_after=2)
    client = Client(providers={"local": _chat_adapter(replay_server.base_url)})
    first = stream("local-model", "hi", client=client)
    assert "".join([t async for t in first.text_stream]) == "Hello" == (await first.response()).text

    controller = AbortController()
    second = stream("local-model", "hi", abort_signal=controller.signal, client=client)
    got: list[StreamEvent] = []
    started = time.monotonic()
    with pytest.raises(AbortError):
        async for event in second:
            got.append(event)
            if event.type == T.TEXT_DELTA:
                asyncio.get_running_loop().call_later(0.05, controller.abort)
    assert time.monotonic() - started < 3  # did not wait for the server's 5 s stall
    assert got[-1].type == T.ERROR
    await client.close()
