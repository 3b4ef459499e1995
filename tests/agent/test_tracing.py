"""OpenTelemetry tracing (ra.agent.tracing, docs/tracing.md): the span tree of a scripted session,
the GenAI attributes, error spans, parallel tools, subagents, content capture with redaction, a
real HTTP adapter, and nothing imported or wrapped when tracing is off."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import ra
from ra.agent import GenericProfile, Session, SessionConfig, StopReason
from ra.agent.controls import Control, Deny, Stop
from ra.agent.errors import SessionError
from ra.agent.tracing import Tracing
from ra.llm.client import Client
from ra.llm.errors import AuthenticationError
from ra.llm.pricing import ModelPrice
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.llm.redaction import MASK
from ra.llm.testing import call, calls, fail, reply
from ra.tools.registry import ToolContext, ToolRegistry
from tests.cli.support import SSE, sse_text
from tests.support.replay import ReplayServer

from .support import FakeEnv, make_session
from .test_subagents import make_parent, wait_for

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-tracing-secret-0123456789"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.clear()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def traced(provider: TracerProvider, script: list[Any], **kwargs: Any) -> Session:
    content = kwargs.pop("capture_content", False)
    session, _ = make_session(script, **kwargs)
    Tracing(provider, capture_content=content).attach(session)
    return session


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def tool_span(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == f"execute_tool {name}"]
    return span


# ------------------------------------------------------------------------------------------------
# the tree and its attributes
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_session_with_tools_makes_one_agent_span_with_chat_and_tool_children(
    provider: TracerProvider, exporter: InMemorySpanExporter, streaming: bool
) -> None:
    session = traced(provider, [calls(("echo", {"text": "hi"}), ("boom", {})), reply("done")], streaming=streaming)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.COMPLETED
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == [
        "chat test-model",
        "chat test-model",
        "execute_tool boom",
        "execute_tool echo",
        "invoke_agent ra",
    ]
    (agent,) = by_name(spans, "invoke_agent")
    assert agent.parent is None and agent.kind is SpanKind.INTERNAL
    assert {(s.instrumentation_scope.name, s.instrumentation_scope.version) for s in spans} == {("ra", ra.__version__)}
    assert dict(agent.attributes or {}) | {} == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "scripted",
        "gen_ai.agent.name": "ra",
        "gen_ai.conversation.id": session.id,
        "gen_ai.request.model": "test-model",
        "gen_ai.usage.input_tokens": session.usage.input_tokens,
        "gen_ai.usage.output_tokens": session.usage.output_tokens,
        "ra.steps": 2,
        "ra.stop_reason": "completed",
    }
    assert agent.status.status_code is StatusCode.UNSET
    for span in spans:
        if span is not agent:
            assert parent_id(span) == agent.context.span_id, span.name
            assert span.context.trace_id == agent.context.trace_id
        assert (span.attributes or {})["gen_ai.conversation.id"] == session.id

    first, second = sorted(by_name(spans, "chat"), key=lambda s: s.start_time or 0)
    assert first.kind is SpanKind.CLIENT
    attrs = dict(first.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "scripted"
    assert attrs["gen_ai.request.model"] == "test-model"
    assert attrs["gen_ai.response.model"] == "test-model"
    assert str(attrs["gen_ai.response.id"]).startswith("scripted-")
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert dict(second.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)
    total_in = sum(int((s.attributes or {})["gen_ai.usage.input_tokens"]) for s in (first, second))
    total_out = sum(int((s.attributes or {})["gen_ai.usage.output_tokens"]) for s in (first, second))
    assert (total_in, total_out) == (session.usage.input_tokens, session.usage.output_tokens) and total_in > 0
    assert "error.type" not in attrs and first.status.status_code is StatusCode.UNSET

    echo = tool_span(spans, "echo")
    assert echo.kind is SpanKind.INTERNAL
    assert dict(echo.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
        "gen_ai.tool.call.id": result_call_id(session, "echo"),
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Echo the text back.",
        "gen_ai.conversation.id": session.id,
        "ra.tool.outcome": "ok",
    }
    boom = tool_span(spans, "boom")
    assert boom.status.status_code is StatusCode.ERROR
    assert boom.status.description == "tool_error"  # the tool's error text is content: not recorded
    assert (boom.attributes or {})["error.type"] == "tool_error"
    # Tools run after the model call that asked for them, and before the next one.
    assert (first.end_time or 0) <= (echo.start_time or 0) and (boom.end_time or 0) <= (second.start_time or 0)
    await session.close()


def result_call_id(session: Session, name: str) -> str:
    for message in session.history.messages:
        for tool_call in message.tool_calls:
            if tool_call.name == name:
                return tool_call.id
    raise AssertionError(f"no call of {name}")


async def test_content_is_off_by_default(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    session = traced(provider, [call("echo", text="the private text"), reply("the private answer")], streaming=True)
    await session.submit("a private prompt")
    spans = exporter.get_finished_spans()
    assert len(spans) == 4
    for span in spans:
        for key, value in (span.attributes or {}).items():
            assert key not in {
                "gen_ai.input.messages",
                "gen_ai.output.messages",
                "gen_ai.system_instructions",
                "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result",
            }
            assert "private" not in str(value) and "test agent" not in str(value), (span.name, key)
    await session.close()


async def test_content_on_request_is_recorded_with_secrets_redacted(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACING_TEST_API_KEY", SECRET)
    session = traced(
        provider,
        [call("echo", text=f"key={SECRET}"), reply(f"the key is {SECRET}")],
        capture_content=True,
    )
    await session.submit(f"use {SECRET} please")
    spans = exporter.get_finished_spans()
    for span in spans:
        for key, value in (span.attributes or {}).items():
            assert SECRET not in str(value), (span.name, key)
    (agent,) = by_name(spans, "invoke_agent")
    assert json.loads(str((agent.attributes or {})["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": f"use {MASK} please"}]}
    ]
    first, second = sorted(by_name(spans, "chat"), key=lambda s: s.start_time or 0)
    system = json.loads(str((first.attributes or {})["gen_ai.system_instructions"]))
    assert system[0]["type"] == "text" and system[0]["content"].startswith("You are a test agent.")
    assert json.loads(str((first.attributes or {})["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": f"use {MASK} please"}]}
    ]
    echo_id = result_call_id(session, "echo")
    assert json.loads(str((first.attributes or {})["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": echo_id, "name": "echo", "arguments": {"text": f"key={MASK}"}}],
            "finish_reason": "tool_calls",
        }
    ]
    later = json.loads(str((second.attributes or {})["gen_ai.input.messages"]))
    assert later[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": echo_id, "response": f"echo: key={MASK}"}],
    }
    assert json.loads(str((second.attributes or {})["gen_ai.output.messages"]))[0]["parts"] == [
        {"type": "text", "content": f"the key is {MASK}"}
    ]
    echo = tool_span(spans, "echo")
    assert json.loads(str((echo.attributes or {})["gen_ai.tool.call.arguments"])) == {"text": f"key={MASK}"}
    assert (echo.attributes or {})["gen_ai.tool.call.result"] == f"echo: key={MASK}"
    await session.close()


async def test_the_system_prompt_and_a_secret_set_later_are_redacted(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret in the system prompt; and one that becomes a secret only after the message holding
    it was first recorded (the encoded messages are reused from call to call: not that one)."""
    later = "tok-set-after-the-first-call-42"
    monkeypatch.setenv("TRACING_TEST_API_KEY", SECRET)
    session = traced(
        provider,
        [reply("first answer"), reply("second answer")],
        capture_content=True,
        system_prompt=f"Deploy with {SECRET}.",
    )
    await session.submit(f"remember {later}")
    monkeypatch.setenv("TRACING_LATER_TOKEN", later)
    await session.submit("and now?")
    first, second = sorted(by_name(exporter.get_finished_spans(), "chat"), key=lambda s: s.start_time or 0)
    system = str((first.attributes or {})["gen_ai.system_instructions"])
    assert f"Deploy with {MASK}." in system and SECRET not in system
    assert later in str((first.attributes or {})["gen_ai.input.messages"])  # not a secret yet then
    again = str((second.attributes or {})["gen_ai.input.messages"])
    assert later not in again and f"remember {MASK}" in again
    await session.close()


async def test_a_non_provider_error_is_redacted_in_the_chat_status(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACING_TEST_API_KEY", SECRET)
    session = traced(provider, [fail(RuntimeError(f"middleware broke on {SECRET}\nsecond line"))])
    await session.submit("go")
    (chat,) = by_name(exporter.get_finished_spans(), "chat")
    assert chat.status.description == f"middleware broke on {MASK}"
    assert (chat.attributes or {})["error.type"] == "RuntimeError"
    await session.close()


async def test_error_text_is_content_and_a_made_up_tool_name_stays_out_of_span_names(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACING_TEST_API_KEY", SECRET)
    made_up = f"leak_{SECRET}_" + "x" * 200
    script = [calls(("boom", {}), (made_up, {})), reply("ok"), calls(("boom", {}), (made_up, {})), reply("ok")]
    session = traced(provider, script)
    await session.submit("without content")
    session2 = traced(provider, script[2:], capture_content=True)
    await session2.submit("with content")
    spans = exporter.get_finished_spans()
    for span in spans:
        assert SECRET not in span.name and SECRET not in (span.status.description or "")
        assert all(SECRET not in str(v) for v in (span.attributes or {}).values())
    off, on = sorted([s for s in spans if s.name == "execute_tool boom"], key=lambda s: s.start_time or 0)
    assert off.status.description == "tool_error"
    assert on.status.description == "Tool error (boom): disk on fire"
    unknown = [s for s in spans if s.name == "execute_tool"]
    assert len(unknown) == 2
    for span in unknown:
        name = str((span.attributes or {})["gen_ai.tool.name"])
        assert name.startswith(f"leak_{MASK}_") and len(name) == 64
    await session.close()
    await session2.close()


# ------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------


async def test_a_model_error_fails_the_chat_span_and_the_agent_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACING_TEST_API_KEY", SECRET)
    session = traced(provider, [fail(AuthenticationError(f"bad key {SECRET}", provider="scripted"))])
    result = await session.submit("go")
    assert result.stop_reason is StopReason.ERROR
    await session.close()
    spans = exporter.get_finished_spans()
    (chat,) = by_name(spans, "chat")
    assert (chat.attributes or {})["error.type"] == "AuthenticationError"
    assert chat.status.status_code is StatusCode.ERROR
    assert "bad key" in (chat.status.description or "") and SECRET not in (chat.status.description or "")
    assert "gen_ai.response.id" not in (chat.attributes or {})
    (agent,) = by_name(spans, "invoke_agent")
    assert agent.status.status_code is StatusCode.ERROR
    assert (agent.attributes or {})["error.type"] == "AuthenticationError"
    assert (agent.attributes or {})["ra.stop_reason"] == "error"


async def test_a_retried_call_shows_each_attempt(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    from ra.llm.errors import ServerError

    down = ServerError("upstream down", provider="scripted", status_code=503)
    session = traced(provider, [fail(down), reply("back")])
    result = await session.submit("go")
    assert result.text == "back"
    chats = sorted(by_name(exporter.get_finished_spans(), "chat"), key=lambda s: s.start_time or 0)
    assert [(s.attributes or {}).get("error.type") for s in chats] == ["ServerError", None]
    assert chats[1].status.status_code is StatusCode.UNSET
    await session.close()


class DenyEcho(Control):
    def __init__(self) -> None:
        self.current: list[int] = []

    async def before_tool(self, run: Any, call: Any, tool: Any) -> Deny | None:
        self.current.append(trace.get_current_span().get_span_context().span_id)
        return Deny("echo is not allowed here") if call.name == "echo" else None


async def test_a_denied_tool_call_is_an_error_span(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    session = traced(provider, [calls(("echo", {"text": "x"}), ("nap", {"seconds": 0})), reply("ok")])
    deny = session.controls.add(DenyEcho())
    await session.submit("go")
    spans = exporter.get_finished_spans()
    (agent,) = by_name(spans, "invoke_agent")
    assert deny.current == [agent.context.span_id] * 2  # the input's span is current for its checks
    echo = tool_span(spans, "echo")
    assert echo.status.status_code is StatusCode.ERROR and echo.status.description == "denied"
    assert (echo.attributes or {})["error.type"] == "denied" and (echo.attributes or {})["ra.tool.outcome"] == "denied"
    nap = tool_span(spans, "nap")
    assert nap.status.status_code is StatusCode.UNSET and (nap.attributes or {})["ra.tool.outcome"] == "ok"
    await session.close()


class RefuseInputs(Control):
    async def input_start(self, run: Any, text: str) -> Stop | None:
        return Stop(StopReason.INTERRUPTED, "not today")


async def test_an_input_a_control_refuses_still_has_its_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The tracing control is asked first: a control added before tracing refusing the input
    does not hide it."""
    session, _ = make_session([reply("never")])
    session.controls.add(RefuseInputs())
    Tracing(provider).attach(session)
    result = await session.submit("go")
    assert result.stop_reason is StopReason.INTERRUPTED
    (agent,) = exporter.get_finished_spans()
    assert agent.name == "invoke_agent ra" and (agent.attributes or {})["ra.stop_reason"] == "interrupted"
    assert (agent.attributes or {})["ra.steps"] == 0
    await session.close()


async def test_an_abort_during_a_tool_ends_every_span(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    entered = asyncio.Event()

    async def hang(args: dict[str, Any], ctx: ToolContext) -> str:
        entered.set()
        await asyncio.sleep(30)
        return "never"

    registry = ToolRegistry()
    registry.add("hang", "Hangs.", {"type": "object", "properties": {}}, hang)
    session = traced(provider, [call("hang")], tools=registry)
    task = asyncio.create_task(session.submit("go"))
    await asyncio.wait_for(entered.wait(), 5)
    session.abort()
    result = await asyncio.wait_for(task, 10)
    assert result.stop_reason is StopReason.ABORTED
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == ["chat test-model", "execute_tool hang", "invoke_agent ra"]
    hang_span = tool_span(spans, "hang")
    assert (hang_span.attributes or {})["error.type"] == "cancelled"
    (agent,) = by_name(spans, "invoke_agent")
    assert (agent.attributes or {})["ra.stop_reason"] == "aborted"


# ------------------------------------------------------------------------------------------------
# context: what is current where
# ------------------------------------------------------------------------------------------------


async def test_parallel_tool_calls_each_get_their_own_current_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    inside: dict[str, int] = {}
    started = 0
    all_started = asyncio.Event()

    async def probe(args: dict[str, Any], ctx: ToolContext) -> str:
        nonlocal started
        started += 1
        if started == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), 5)  # all three run at once
        inside[ctx.call_id] = trace.get_current_span().get_span_context().span_id
        return "seen"

    registry = ToolRegistry()
    registry.add("probe", "Records its span.", {"type": "object", "properties": {"n": {"type": "integer"}}}, probe)
    session = traced(
        provider,
        [calls(("probe", {"n": 1}), ("probe", {"n": 2}), ("probe", {"n": 3})), reply("ok")],
        tools=registry,
        parallel=True,
    )
    await session.submit("go")
    spans = exporter.get_finished_spans()
    probes = [s for s in spans if s.name == "execute_tool probe"]
    assert len(probes) == 3
    (agent,) = by_name(spans, "invoke_agent")
    assert {parent_id(s) for s in probes} == {agent.context.span_id}
    assert inside == {str((s.attributes or {})["gen_ai.tool.call.id"]): s.context.span_id for s in probes}
    await session.close()


async def test_a_blocking_tool_sees_its_span_in_its_worker_thread(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    seen: list[tuple[int, int]] = []

    def blocking(args: dict[str, Any], ctx: ToolContext) -> str:
        seen.append((threading.get_ident(), trace.get_current_span().get_span_context().span_id))
        return "done"

    registry = ToolRegistry()
    registry.add("block", "Blocks a worker thread.", {"type": "object", "properties": {}}, blocking, blocking=True)
    session = traced(provider, [call("block"), reply("ok")], tools=registry)
    await session.submit("go")
    ((thread, span_id),) = seen
    assert thread != threading.get_ident()
    assert span_id == tool_span(exporter.get_finished_spans(), "block").context.span_id
    await session.close()


async def test_the_chat_span_is_current_while_the_request_is_sent(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    seen: list[int] = []

    async def middleware(request: Any, call_next: Any) -> Any:
        seen.append(trace.get_current_span().get_span_context().span_id)
        return await call_next(request)

    session = traced(provider, [reply("one")])
    session.llm_client.use(middleware)
    await session.submit("go")
    (chat,) = by_name(exporter.get_finished_spans(), "chat")
    assert seen == [chat.context.span_id]
    assert trace.get_current_span().get_span_context().is_valid is False  # nothing leaked into the caller
    await session.close()


async def test_the_chat_span_is_current_at_every_step_of_a_stream(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A streamed call: the adapter runs inside each ``__anext__`` (where it sends the request
    and reads the wire), and the span is current there, and only there."""
    inside: list[int] = []
    between: list[bool] = []

    async def middleware(request: Any, call_next: Any) -> Any:
        async for event in call_next(request):
            inside.append(trace.get_current_span().get_span_context().span_id)
            yield event

    session = traced(provider, [reply("a streamed answer")], streaming=True)
    session.llm_client.use(middleware)
    session.add_listener(lambda e: between.append(getattr(trace.get_current_span(), "name", None)), replay=False)
    await session.submit("go")
    (chat,) = by_name(exporter.get_finished_spans(), "chat")
    assert len(inside) > 3 and set(inside) == {chat.context.span_id}
    assert "invoke_agent ra" in between and "chat test-model" not in between  # the loop's work between events
    await session.close()


async def test_the_agent_span_nests_under_the_callers_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    session = traced(provider, [reply("one"), reply("two")])
    with provider.get_tracer("host").start_as_current_span("host request") as host:
        await session.submit("first")
    await session.submit("second")
    spans = exporter.get_finished_spans()
    agents = sorted(by_name(spans, "invoke_agent"), key=lambda s: s.start_time or 0)
    assert parent_id(agents[0]) == host.get_span_context().span_id
    assert agents[1].parent is None  # one span per input; the conversation id links them
    assert {(s.attributes or {})["gen_ai.conversation.id"] for s in agents} == {session.id}
    await session.close()


async def test_a_follow_up_is_an_agent_span_of_its_own_with_its_own_tokens(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    session = traced(provider, [reply("one"), reply("two")])
    session.follow_up("and then this")
    result = await session.submit("first")
    assert result.inputs == 2
    spans = exporter.get_finished_spans()
    agents = sorted(by_name(spans, "invoke_agent"), key=lambda s: s.start_time or 0)
    assert len(agents) == 2
    for agent in agents:
        (chat,) = [s for s in spans if parent_id(s) == agent.context.span_id]
        for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
            assert (agent.attributes or {})[key] == (chat.attributes or {})[key], key
    await session.close()


async def test_a_compaction_between_inputs_is_a_chat_span_under_the_callers_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    script = [reply("a" * 50), reply("b" * 50), reply("c" * 50), reply("d"), reply("the summary")]
    session = traced(provider, script)
    for text in ("one", "two", "three", "four"):
        await session.submit(text * 20)
    exporter.clear()
    with provider.get_tracer("host").start_as_current_span("maintenance") as host:
        turn = await session.compact()
    assert turn is not None and turn.summary == "the summary"
    assert sorted(s.name for s in exporter.get_finished_spans()) == ["chat test-model", "maintenance"]
    (chat,) = by_name(exporter.get_finished_spans(), "chat")
    assert parent_id(chat) == host.get_span_context().span_id
    await session.close()


async def test_a_subagent_nests_under_the_tool_call_that_started_it(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    parent_input = "parent input"
    task = "summarise the notes"
    session, _, _ = make_parent(
        {
            parent_input: [call("spawn_agent", task=task), wait_for(), reply("parent done")],
            task: [call("echo", text="reading"), reply("the notes say hi")],
        }
    )
    Tracing(provider).attach(session)
    result = await session.submit(parent_input)
    assert result.text == "parent done"
    await session.close()
    spans = exporter.get_finished_spans()
    agents = by_name(spans, "invoke_agent")
    (top,) = [s for s in agents if s.parent is None]
    (child,) = [s for s in agents if s.parent is not None]
    spawn = tool_span(spans, "spawn_agent")
    assert parent_id(spawn) == top.context.span_id
    assert parent_id(child) == spawn.context.span_id
    assert child.name == "invoke_agent ra"  # a subagent without a type is named like its parent
    child_attrs = child.attributes or {}
    assert str(child_attrs["gen_ai.agent.id"]).startswith("agent-")
    assert child_attrs["gen_ai.conversation.id"] != session.id  # the child's own session
    children = [s for s in spans if parent_id(s) == child.context.span_id]
    assert sorted(s.name for s in children) == ["chat test-model", "chat test-model", "execute_tool echo"]
    assert {s.context.trace_id for s in spans} == {top.context.trace_id}


# ------------------------------------------------------------------------------------------------
# a real HTTP adapter
# ------------------------------------------------------------------------------------------------


async def test_an_http_call_reports_the_server_and_the_response(
    provider: TracerProvider, exporter: InMemorySpanExporter, replay_server: ReplayServer
) -> None:
    replay_server.enqueue(200, sse_text("hello"), SSE, chunking="events")
    adapter = OpenAICompatibleAdapter(api_key="test-key", base_url=f"{replay_server.base_url}/v1")
    profile = GenericProfile(
        "openai-compatible", "asked-model", ToolRegistry(), system_prompt="You are a test.", supports_streaming=True
    )
    client = Client(providers={"openai-compatible": adapter})
    config = SessionConfig(prices={"asked-model": ModelPrice.free(), "test-model": ModelPrice.free()})
    session = Session(profile, FakeEnv(), client, config, tracing=Tracing(provider))
    result = await asyncio.wait_for(session.submit("go"), 20)
    assert result.text == "hello"
    await session.close()
    await adapter.close()
    (chat,) = by_name(exporter.get_finished_spans(), "chat")
    attrs = dict(chat.attributes or {})
    port = int(replay_server.base_url.rsplit(":", 1)[1])
    assert chat.name == "chat asked-model"
    assert attrs["server.address"] == "127.0.0.1" and attrs["server.port"] == port
    assert attrs["gen_ai.provider.name"] == "openai-compatible"
    assert attrs["gen_ai.request.model"] == "asked-model"
    assert attrs["gen_ai.response.model"] == "test-model"  # what the server said it used
    assert attrs["gen_ai.response.id"] == "chatcmpl-test"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (100, 10)
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)


# ------------------------------------------------------------------------------------------------
# off unless asked
# ------------------------------------------------------------------------------------------------


def test_a_session_without_tracing_never_imports_opentelemetry() -> None:
    """In a fresh interpreter: ``import ra``, a whole scripted session with tool calls, no span
    machinery in the session's seams, and no ``opentelemetry`` module loaded."""
    code = """
import asyncio, sys
import ra
from tests.agent.support import make_session
from ra.llm.testing import calls, reply

async def main():
    session, _ = make_session([calls(("echo", {"text": "hi"}), ("boom", {})), reply("done")])
    result = await session.submit("go")
    assert result.text == "done", result
    assert session.tracing is None and session._run.pipeline.execution_scope is None
    assert type(session._run.pipeline.sink).__name__ == "_ToolEvents"
    assert not any(type(c).__name__ == "_SessionSpans" for c in session.controls)
    await session.close()

asyncio.run(main())
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry") or m == "ra.agent.tracing")
print("loaded:", loaded)
assert not loaded, loaded
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "loaded: []" in done.stdout


async def test_a_session_is_traced_once(provider: TracerProvider) -> None:
    session = traced(provider, [reply("x")])
    with pytest.raises(SessionError, match="already traced"):
        Tracing(provider).attach(session)
    await session.close()


def test_without_opentelemetry_the_import_says_what_to_install() -> None:
    code = """
import sys
sys.modules["opentelemetry"] = None  # as if it were not installed
try:
    import ra.agent.tracing
except ImportError as exc:
    print(exc)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert "pip install 'ra-agent[otel]'" in done.stdout, done.stdout + done.stderr


def test_bad_options_are_refused() -> None:
    with pytest.raises(TypeError, match="capture_content"):
        Tracing(capture_content="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="agent_name"):
        Tracing(agent_name=" ")
