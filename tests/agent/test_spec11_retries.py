"""The Go-port spec's error recovery (section 11) against a real HTTP server on 127.0.0.1: a
5xx is retried up to 3 times, a network timeout is retried with backoff, a caller's own deadline
is not, and a stream that went silent after sending text is retried without doubling the text
for a reader of the message stream."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import ra.llm.retrying as retrying
from ra.agent import GenericProfile, Session, SessionConfig, StopReason
from ra.agent.events import EventKind as E
from ra.llm.client import Client
from ra.llm.errors import RequestTimeoutError, ServerError
from ra.llm.pricing import ModelPrice
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.llm.retrying import RetryPolicy
from ra.llm.timeouts import AdapterTimeout
from ra.sdk import AgentClient, AssistantMessage, QueryOptions, StreamEvent, SystemMessage
from ra.tools.registry import ToolRegistry
from tests.cli.support import SSE, sse_text
from tests.support.replay import ReplayServer

from .support import FakeEnv, Recorder


@pytest.fixture
def delays(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff delays, recorded instead of slept (the real policy's numbers, no waiting)."""
    seen: list[float] = []

    async def no_sleep(seconds: float) -> None:
        seen.append(seconds)

    monkeypatch.setattr(retrying, "_sleep", no_sleep)
    return seen


def _session(server: ReplayServer, timeout: AdapterTimeout | None = None, **config: Any) -> Session:
    adapter = OpenAICompatibleAdapter(api_key="test-key", base_url=f"{server.base_url}/v1", timeout=timeout)
    profile = GenericProfile(
        "openai-compatible", "m", ToolRegistry(), system_prompt="You are a test agent.", supports_streaming=True
    )
    client = Client(providers={"openai-compatible": adapter})
    return Session(profile, FakeEnv(), client, SessionConfig(prices={"m": ModelPrice.free()}, **config))


def _error(server: ReplayServer, status: int) -> None:
    server.enqueue(status, {"error": {"message": "upstream trouble", "type": "server_error"}})


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_a_5xx_is_retried_up_to_3_times(replay_server: ReplayServer, delays: list[float], status: int) -> None:
    for _ in range(3):
        _error(replay_server, status)
    replay_server.enqueue(200, sse_text("back"), SSE, chunking="events")
    session = _session(replay_server)
    result = await asyncio.wait_for(session.submit("go"), 20)
    assert result.stop_reason is StopReason.COMPLETED and result.text == "back"
    assert len(replay_server.requests) == 4 and len(delays) == 3
    assert delays[1] > delays[0] * 1.2 or delays[2] > delays[1] * 1.2  # backoff grows (jitter aside)
    await session.close()


async def test_a_5xx_a_fourth_time_ends_the_input(replay_server: ReplayServer, delays: list[float]) -> None:
    for _ in range(5):
        _error(replay_server, 503)
    session = _session(replay_server)
    result = await asyncio.wait_for(session.submit("go"), 20)
    assert result.stop_reason is StopReason.ERROR and isinstance(result.error, ServerError)
    assert len(replay_server.requests) == 4  # one call and 3 retries, no more
    await session.close()


async def test_a_servers_request_timeout_is_retried(replay_server: ReplayServer, delays: list[float]) -> None:
    """HTTP 408 is the server's clock, not the caller's deadline: retried like a network timeout
    (it ended the input)."""
    body = {"error": {"message": "request timed out upstream", "type": "timeout"}}
    replay_server.enqueue(408, body)
    replay_server.enqueue(408, body, {"retry-after": "7"})  # waited for as asked
    replay_server.enqueue(200, sse_text("answered"), SSE, chunking="events")
    session = _session(replay_server)
    rec = Recorder(session)
    result = await asyncio.wait_for(session.submit("go"), 20)
    assert result.stop_reason is StopReason.COMPLETED and result.text == "answered"
    assert len(replay_server.requests) == 3 and len(delays) == 2 and delays[1] == 7.0
    assert [retry["error_type"] for retry in rec.of(E.RETRY)] == ["RequestTimeoutError"] * 2
    await session.close()


async def test_a_read_timeout_is_retried(replay_server: ReplayServer, delays: list[float]) -> None:
    replay_server.enqueue(200, sse_text("never"), SSE, chunking="events", stall_after=0, stall_seconds=3)
    replay_server.enqueue(200, sse_text("answered"), SSE, chunking="events")
    session = _session(replay_server, AdapterTimeout(stream_read=0.3))
    rec = Recorder(session)
    result = await asyncio.wait_for(session.submit("go"), 20)
    assert result.stop_reason is StopReason.COMPLETED and result.text == "answered"
    assert len(replay_server.requests) == 2
    (retry,) = rec.of(E.RETRY)
    assert retry["error_type"] == "RequestTimeoutError" and "timed out" in retry["message"]
    await session.close()


async def test_a_stream_that_goes_silent_after_text_is_retried_without_doubling_it(
    replay_server: ReplayServer, delays: list[float]
) -> None:
    # Three text pieces are sent, then nothing: the idle guard gives up on the attempt.
    replay_server.enqueue(200, sse_text("abandoned text"), SSE, chunking="events", stall_after=3, stall_seconds=3)
    replay_server.enqueue(200, sse_text("the whole answer"), SSE, chunking="events")
    session = _session(replay_server, AdapterTimeout(stream_read=5, stream_idle=0.3))
    rec = Recorder(session)
    client = AgentClient(QueryOptions(include_partial_messages=True), session=session)
    await client.connect()
    try:
        await client.query("go")
        messages = await asyncio.wait_for(_response(client), 20)
    finally:
        await client.disconnect()
    assert len(replay_server.requests) == 2
    (retry,) = rec.of(E.RETRY)
    assert retry["discard_partial"] is True and "stream_idle" in retry["message"]
    (notice,) = [m for m in messages if isinstance(m, SystemMessage) and m.subtype == "api_retry"]
    after = messages[messages.index(notice) + 1 :]
    streamed = "".join(
        m.event["delta"].get("text", "")
        for m in after
        if isinstance(m, StreamEvent) and m.event["type"] == "content_block_delta"
    )
    assert streamed == "the whole answer"  # the new attempt, from its message_start
    (assistant,) = [m for m in messages if isinstance(m, AssistantMessage)]
    assert assistant.content[0].text == "the whole answer"  # type: ignore[union-attr]
    assert messages[-1].result == "the whole answer"


async def _response(client: AgentClient) -> list[Any]:
    return [m async for m in client.receive_response()]


async def test_a_deadline_of_the_caller_is_not_retried(replay_server: ReplayServer, delays: list[float]) -> None:
    """stream_total bounds one call: retrying would multiply the bound the host set."""
    replay_server.enqueue(200, sse_text("slow"), SSE, chunking="events", stall_after=1, stall_seconds=3)
    replay_server.enqueue(200, sse_text("never asked"), SSE, chunking="events")
    session = _session(replay_server, AdapterTimeout(stream_read=5, stream_idle=None, stream_total=0.3))
    result = await asyncio.wait_for(session.submit("go"), 20)
    assert result.stop_reason is StopReason.ERROR and isinstance(result.error, RequestTimeoutError)
    assert "stream_total" in str(result.error) and len(replay_server.requests) == 1
    await session.close()


async def test_a_host_policy_keeps_its_numbers_and_gets_timeouts_retried(
    replay_server: ReplayServer, delays: list[float]
) -> None:
    replay_server.enqueue(200, sse_text("never"), SSE, chunking="events", stall_after=0, stall_seconds=3)
    replay_server.enqueue(200, sse_text("never"), SSE, chunking="events", stall_after=0, stall_seconds=3)
    session = _session(replay_server, AdapterTimeout(stream_read=0.3), retry_policy=RetryPolicy(max_retries=1))
    result = await asyncio.wait_for(session.submit("go"), 20)
    assert result.stop_reason is StopReason.ERROR and isinstance(result.error, RequestTimeoutError)
    assert len(replay_server.requests) == 2  # retried once, as the host's policy says
    await session.close()


def test_ra_llm_alone_still_does_not_retry_timeouts() -> None:
    """``ra.llm``'s own flag follows its spec (unified-llm-spec 6.4); only the loop adds timeouts."""
    assert RequestTimeoutError("x").retryable is False and RetryPolicy().max_retries == 2
    assert retrying.transient(RequestTimeoutError("read timed out", network=True))
    assert not retrying.transient(RequestTimeoutError("total timeout of 5s exceeded"))
    assert retrying.transient(ServerError("down", provider="p", status_code=503))
    assert not retrying.transient(asyncio.CancelledError())
