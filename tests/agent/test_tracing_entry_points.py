"""Tracing from the SDK (``QueryOptions(tracing=...)``) and the command (``ra --otel`` with the
standard OTEL_* variables), against a scripted model and the real ``ra`` command."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ra.agent.errors import SessionError
from ra.agent.tracing import Tracing
from ra.cli.config import ConfigError
from ra.cli.otel import cli_tracing
from ra.llm import Client
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.sdk import AgentClient, QueryOptions, ResultMessage, query
from tests.cli.support import clean_env, enqueue_text, enqueue_tools, run_ra
from tests.support.replay import ReplayServer

SECRET = "sk-cli-trace-secret-987654321"


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _options(model: ScriptedAdapter, tmp_path: Path, **more: Any) -> QueryOptions:
    client = Client({"scripted": model}, default_provider="scripted")
    return QueryOptions(profile="anthropic", provider="scripted", model="m", client=client, cwd=tmp_path, **more)


async def test_query_with_tracing_option_traces_the_session(tmp_path: Path) -> None:
    provider, exporter = _provider()
    model = ScriptedAdapter([call("shell", command="echo hi"), reply("done")])
    messages = [m async for m in query("go", options=_options(model, tmp_path, tracing=Tracing(provider)))]
    (result,) = [m for m in messages if isinstance(m, ResultMessage)]
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names == ["chat m", "chat m", "execute_tool shell", "invoke_agent ra"]
    (agent,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent ra"]
    assert (agent.attributes or {})["gen_ai.conversation.id"] == result.session_id


async def test_query_without_tracing_makes_no_spans_and_a_client_session_can_be_traced(tmp_path: Path) -> None:
    provider, exporter = _provider()
    model = ScriptedAdapter([reply("one"), reply("two")])
    messages = [m async for m in query("go", options=_options(model, tmp_path))]
    assert any(isinstance(m, ResultMessage) for m in messages)
    assert exporter.get_finished_spans() == ()
    # AgentClient(session=...) with tracing: the host's session is traced from then on, once.
    async with AgentClient(_options(model, tmp_path)) as first:
        session = first.session
        tracing = Tracing(provider)
        async with AgentClient(QueryOptions(tracing=tracing), session=session) as second:
            await second.query("again")
            _ = [m async for m in second.receive_response()]
            assert session.tracing is tracing
        with pytest.raises(SessionError, match="already traced"):
            async with AgentClient(QueryOptions(tracing=Tracing(provider)), session=session):
                pass
    assert [s.name for s in exporter.get_finished_spans()][-1] == "invoke_agent ra"


def _console_spans(stdout: str) -> list[dict[str, Any]]:
    """The spans the console exporter printed (indented JSON objects) among the answer's lines."""
    decoder = json.JSONDecoder()
    spans, index = [], 0
    while (start := stdout.find("{\n", index)) != -1:
        obj, index = decoder.raw_decode(stdout, start)
        spans.append(obj)
    return spans


def test_ra_otel_sends_spans_to_the_exporter_the_environment_names(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": f"echo {SECRET}"}), text="Checking.")
    enqueue_text(replay_server, "All done.")
    env = clean_env(
        tmp_path,
        OTEL_TRACES_EXPORTER="console",
        OTEL_SERVICE_NAME="ra-under-test",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
        CLI_TRACE_TEST_TOKEN=SECRET,
    )
    args = ["--base-url", f"{replay_server.base_url}/v1", "--model", "gpt-4o", "--otel", "-q", "check it"]
    result = run_ra(args, env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "All done.\n" in result.stdout  # the spans are printed around it, as the batches go out
    spans = _console_spans(result.stdout)
    names = sorted(s["name"] for s in spans)
    assert names == ["chat gpt-4o", "chat gpt-4o", "execute_tool shell_command", "invoke_agent ra"]
    assert {s["resource"]["attributes"]["service.name"] for s in spans} == {"ra-under-test"}
    (chat, _) = [s for s in spans if s["name"] == "chat gpt-4o"]
    assert chat["kind"] == "SpanKind.CLIENT" and chat["attributes"]["server.address"] == "127.0.0.1"
    tool = next(s for s in spans if s["name"] == "execute_tool shell_command")
    assert "[REDACTED]" in tool["attributes"]["gen_ai.tool.call.arguments"]
    assert SECRET not in result.stdout and SECRET not in result.stderr


def test_ra_otel_names_a_missing_exporter(tmp_path: Path) -> None:
    env = clean_env(tmp_path, OTEL_TRACES_EXPORTER="no-such-exporter")
    result = run_ra(["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--otel", "hi"], env, cwd=tmp_path)
    assert result.returncode == 2
    assert "OTEL_TRACES_EXPORTER names 'no-such-exporter', which is not installed" in result.stderr
    assert "console" in result.stderr  # what is installed


def test_ra_otel_refuses_a_content_setting_it_cannot_read(tmp_path: Path) -> None:
    content = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "maybe"}
    env = clean_env(tmp_path, OTEL_TRACES_EXPORTER="console", **content)
    result = run_ra(["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--otel", "hi"], env, cwd=tmp_path)
    assert result.returncode == 2
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is true or false, got 'maybe'" in result.stderr


def test_ra_otel_without_the_sdk_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if it were not installed
    with pytest.raises(ConfigError, match="--otel needs the OpenTelemetry SDK: pip install opentelemetry-sdk"):
        cli_tracing({"OTEL_TRACES_EXPORTER": "console"})
