"""Many model calls through one adapter: ra queues them, not httpx's pool (issue 19, part C).

Against a real Chat Completions server on 127.0.0.1 (tests/support/chat_server.py, which counts
the requests it has in flight): an adapter never has more than ``max_concurrency`` requests out
(set in code or by ``RA_HTTP_MAX_CONCURRENCY``), the rest go out in arrival order, a caller
cancelled in the queue takes no slot and loses none, a stream holds its slot until it is closed
however it ends (closed, dropped, its session aborted), a wait inside an httpx pool is a local
ConnectionPoolError (never a provider's or model's failure), and hundreds of sessions on one
client all complete. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import httpx
import pytest

from ra.agent import GenericProfile, Session, SessionConfig
from ra.agent.config import StopReason
from ra.agent.events import EventKind
from ra.env import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.errors import ConfigurationError, ConnectionPoolError, ProviderError, RequestTimeoutError
from ra.llm.http import AdapterTimeout
from ra.llm.pricing import ModelPrice
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.llm.retrying import RetryPolicy, transient
from ra.llm.slots import DEFAULT_MAX_CONCURRENCY, ENV_MAX_CONCURRENCY, Slots
from ra.llm.types import Message, Request, StreamEventType
from ra.tools.registry import ToolRegistry
from tests.support.chat_server import FINAL, ChatServer

TIMEOUT = AdapterTimeout(connect=5.0, request=20.0, stream_read=10.0)


def make_adapter(server: ChatServer, **kw: Any) -> OpenAICompatibleAdapter:
    kw.setdefault("timeout", TIMEOUT)
    return OpenAICompatibleAdapter(base_url=server.base_url, **kw)


def request(tag: int) -> Request:
    # Unknown provider options go into the body as they are: the server records the tag.
    return Request("steps-1", [Message.user(f"call {tag}")], provider_options={"openai-compatible": {"tag": tag}})


def slots_of(adapter: OpenAICompatibleAdapter) -> Slots:
    return adapter._on_loop().slots


async def test_requests_in_flight_never_exceed_max_concurrency() -> None:
    async with ChatServer(hold=0.05) as server:
        adapter = make_adapter(server, max_concurrency=4)
        async with asyncio.timeout(20):
            replies = await asyncio.gather(*(adapter.complete(request(i)) for i in range(24)))
        assert [r.text for r in replies] == [FINAL] * 24
        assert server.peak == 4  # reached, never passed
        assert server.connections <= 4  # one kept-alive connection per slot, reused
        assert slots_of(adapter).in_use == 0 and slots_of(adapter).waiting == 0


async def test_environment_sets_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MAX_CONCURRENCY, "3")
    async with ChatServer(hold=0.05) as server:
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", server.base_url)
        adapter = Client.from_env().providers["openai-compatible"]
        assert isinstance(adapter, OpenAICompatibleAdapter) and adapter.max_concurrency == 3
        async with asyncio.timeout(20):
            await asyncio.gather(*(adapter.complete(request(i)) for i in range(12)))
        assert server.peak == 3
        # The constructor's keyword wins over the environment.
        assert make_adapter(server, max_concurrency=7).max_concurrency == 7


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "8"])
def test_a_bad_bound_is_refused(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_concurrency must be a whole number >= 1"):
        OpenAICompatibleAdapter(base_url="http://127.0.0.1:9/v1", max_concurrency=value)


@pytest.mark.parametrize("value", ["0", "-3", "many", "1.5"])
def test_a_bad_environment_bound_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(ENV_MAX_CONCURRENCY, value)
    with pytest.raises(ConfigurationError, match=f"{ENV_MAX_CONCURRENCY} must be a whole number >= 1, got '"):
        OpenAICompatibleAdapter(base_url="http://127.0.0.1:9/v1")


def test_the_default_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MAX_CONCURRENCY, raising=False)
    assert OpenAICompatibleAdapter(base_url="http://127.0.0.1:9/v1").max_concurrency == DEFAULT_MAX_CONCURRENCY


async def test_a_huge_bound_costs_nothing_up_front() -> None:
    """RA_HTTP_MAX_CONCURRENCY=10**12 must not allocate a slot table (or crash the process)."""
    slots = Slots(10**12)
    taken = [await slots.acquire() for _ in range(3)]
    assert taken == [0, 1, 2] and slots.in_use == 3
    slots.release(1)
    assert await slots.acquire() == 1  # the slot released last comes first (its connection is warm)
    async with ChatServer() as server:
        adapter = make_adapter(server, max_concurrency=10**12)
        async with asyncio.timeout(20):
            assert (await adapter.complete(request(0))).text == FINAL


async def test_queued_requests_go_out_in_arrival_order() -> None:
    async with ChatServer(hold=0.02) as server:
        adapter = make_adapter(server, max_concurrency=1)
        tasks = []
        for i in range(10):
            tasks.append(asyncio.create_task(adapter.complete(request(i))))
            await asyncio.sleep(0)  # the task runs up to its place in the queue
        async with asyncio.timeout(20):
            await asyncio.gather(*tasks)
        assert server.seen == list(range(10))
        assert server.peak == 1


async def test_a_freed_slot_goes_to_the_longest_waiter_not_a_newcomer() -> None:
    slots = Slots(1)
    first = await slots.acquire()
    order: list[str] = []

    async def take(name: str) -> None:
        slot = await slots.acquire()
        order.append(name)
        await asyncio.sleep(0)
        slots.release(slot)

    waiter = asyncio.create_task(take("waiter"))
    await asyncio.sleep(0)
    assert slots.waiting == 1
    slots.release(first)
    newcomer = asyncio.create_task(take("newcomer"))  # arrives before the waiter has run again
    async with asyncio.timeout(5):
        await asyncio.gather(waiter, newcomer)
    assert order == ["waiter", "newcomer"]
    assert slots.in_use == 0 and slots.waiting == 0


async def test_cancelled_while_queued_takes_no_slot_and_loses_none() -> None:
    async with ChatServer(hold=0.2) as server:
        adapter = make_adapter(server, max_concurrency=2)
        tasks = {}
        for i in range(8):
            tasks[i] = asyncio.create_task(adapter.complete(request(i)))
            await asyncio.sleep(0)
        slots = slots_of(adapter)
        assert slots.in_use == 2 and slots.waiting == 6
        for i in (3, 5, 7):
            tasks[i].cancel()
        async with asyncio.timeout(20):
            results = await asyncio.gather(*tasks.values(), return_exceptions=True)
        cancelled = [i for i, r in zip(tasks, results, strict=True) if isinstance(r, asyncio.CancelledError)]
        assert cancelled == [3, 5, 7]
        assert sorted(t for t in server.seen) == [0, 1, 2, 4, 6]  # the cancelled never went out
        assert slots.in_use == 0 and slots.waiting == 0
        # Both slots are still there, and no more: a new burst runs two at a time.
        server.peak = 0
        async with asyncio.timeout(20):
            await asyncio.gather(*(adapter.complete(request(10 + i)) for i in range(6)))
        assert server.peak == 2


async def test_a_slot_handed_over_to_a_caller_cancelled_meanwhile_passes_on() -> None:
    slots = Slots(1)
    held = await slots.acquire()
    doomed = asyncio.create_task(slots.acquire())
    heir = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    slots.release(held)  # handed to ``doomed``, which has not run yet...
    doomed.cancel()  # ...and is cancelled before it does
    async with asyncio.timeout(5):
        slot = await heir
    with pytest.raises(asyncio.CancelledError):
        await doomed
    assert slot == held and slots.in_use == 1 and slots.waiting == 0
    slots.release(slot)
    assert slots.in_use == 0
    with pytest.raises(RuntimeError, match="without a matching acquire"):
        slots.release(slot)


async def test_timeout_of_a_request_starts_when_it_leaves_the_queue() -> None:
    """A queue longer than ``request`` is no RequestTimeoutError: the wait is not the provider's."""
    async with ChatServer(hold=0.3) as server:
        adapter = make_adapter(server, max_concurrency=1, timeout=AdapterTimeout(connect=5.0, request=1.0))
        async with asyncio.timeout(20):
            replies = await asyncio.gather(*(adapter.complete(request(i)) for i in range(6)))  # ~1.8 s queued
        assert [r.text for r in replies] == [FINAL] * 6


async def test_a_streamed_call_queued_longer_than_its_stream_bounds_is_not_timed_out() -> None:
    """stream_idle and stream_total count from the moment the call goes out, not while it queues."""
    async with ChatServer() as server:
        timeout = AdapterTimeout(connect=5.0, request=10.0, stream_read=5.0, stream_idle=0.4, stream_total=0.8)
        adapter = make_adapter(server, max_concurrency=1, timeout=timeout)
        client = Client(providers={"chat": adapter})
        slow = Request("steps-1", [Message.user("slow")], provider_options={"openai-compatible": {"hold": 1.2}})
        async with asyncio.timeout(20):
            first = asyncio.create_task(adapter.complete(slow))  # holds the only slot for 1.2 s
            await asyncio.sleep(0.05)
            events = [e async for e in client.stream(request(1))]
            assert (await first).text == FINAL
        assert events[-1].type is StreamEventType.FINISH
        assert "".join(e.delta or "" for e in events if e.type is StreamEventType.TEXT_DELTA) == FINAL


async def test_the_stream_bounds_still_hold_once_the_call_is_out() -> None:
    async with ChatServer(stall=30) as server:
        timeout = AdapterTimeout(connect=5.0, request=10.0, stream_read=5.0, stream_idle=0.3, stream_total=None)
        adapter = make_adapter(server, max_concurrency=1, timeout=timeout)
        client = Client(providers={"chat": adapter})
        slow = Request("steps-1", [Message.user("slow")], provider_options={"openai-compatible": {"hold": 0.6}})
        async with asyncio.timeout(20):
            first = asyncio.create_task(adapter.complete(slow))
            await asyncio.sleep(0.05)
            with pytest.raises(RequestTimeoutError, match="stream_idle"):
                async for _ in client.stream(request(1)):  # queued 0.6 s, then silent for 30 s
                    pass
            await first
        assert slots_of(adapter).in_use == 0


async def _first_text(events: Any) -> None:
    async for event in events:
        if event.type is StreamEventType.TEXT_DELTA:
            return
    raise AssertionError("the stream ended before any text")


async def test_a_stream_closed_mid_way_frees_its_slot() -> None:
    async with ChatServer(stall=30) as server:
        adapter = make_adapter(server, max_concurrency=1)
        events = adapter.stream(request(0))
        async with asyncio.timeout(10):
            await _first_text(events)
            assert slots_of(adapter).in_use == 1
            await events.aclose()  # type: ignore[attr-defined]
            assert slots_of(adapter).in_use == 0
            server.stall = 0
            assert (await adapter.complete(request(1))).text == FINAL


async def test_a_stream_dropped_without_closing_frees_its_slot() -> None:
    async with ChatServer(stall=30) as server:
        adapter = make_adapter(server, max_concurrency=1)
        events = adapter.stream(request(0))
        async with asyncio.timeout(10):
            await _first_text(events)
            del events
            gc.collect()  # the event loop closes the abandoned generator (its asyncgen hooks)
            server.stall = 0
            assert (await adapter.complete(request(1))).text == FINAL
        assert slots_of(adapter).in_use == 0


def _session(client: Client, tmp_path: Path, *, steps: int, stream: bool) -> Session:
    registry = ToolRegistry()
    registry.add(
        "noop", "Does nothing.", {"type": "object", "properties": {"i": {"type": "integer"}}}, lambda a, c: "ok"
    )
    profile = GenericProfile(
        "chat",
        f"steps-{steps}",
        registry,
        system_prompt="test",
        include_environment=False,
        supports_streaming=stream,
        context_window_size=10**9,
    )
    config = SessionConfig(
        max_tool_rounds_per_input=steps + 5,
        retry_policy=RetryPolicy(max_retries=0),
        prices={f"steps-{steps}": ModelPrice.free()},
    )
    return Session(profile, LocalExecutionEnvironment(str(tmp_path)), client, config)


async def test_an_abort_from_a_listener_mid_stream_ends_the_call(tmp_path: Path) -> None:
    """abort() from a listener of the session's own text deltas (called inside the processing
    task) closes the stream at once; it used to leave the stalled stream running, and submit()
    waited for the server."""
    async with ChatServer(stall=30) as server:
        adapter = make_adapter(server, max_concurrency=1)
        session = _session(Client(providers={"chat": adapter}), tmp_path, steps=1, stream=True)
        session.add_listener(lambda e: session.abort() if e.kind is EventKind.ASSISTANT_TEXT_DELTA else None)
        async with asyncio.timeout(10):
            result = await session.submit("go")
        assert result.stop_reason is StopReason.ABORTED
        assert slots_of(adapter).in_use == 0


async def test_a_session_aborted_mid_stream_frees_its_slot(tmp_path: Path) -> None:
    async with ChatServer(stall=30) as server:
        adapter = make_adapter(server, max_concurrency=1)
        client = Client(providers={"chat": adapter})
        session = _session(client, tmp_path, steps=1, stream=True)
        streaming = asyncio.Event()
        session.add_listener(lambda e: streaming.set() if e.kind is EventKind.ASSISTANT_TEXT_DELTA else None)

        async def host_aborts() -> None:
            await streaming.wait()
            session.abort()

        async with asyncio.timeout(10):
            aborter = asyncio.create_task(host_aborts())
            result = await session.submit("go")
            await aborter
            assert result.stop_reason is StopReason.ABORTED
            assert slots_of(adapter).in_use == 0
            await asyncio.sleep(0.1)  # the dropped client is closed in a task of its own
            # No connection is left marked busy in a pool (httpcore's close, cut short by the
            # pending cancellation, used to leave one so for good: a leak per abort).
            pools = [c._transport._pool for c in adapter._on_loop().owned()]  # type: ignore[attr-defined]
            assert not [conn for pool in pools for conn in pool.connections if not conn.is_idle()]
            server.stall = 0
            after = await _session(client, tmp_path, steps=2, stream=True).submit("go")
        assert after.error is None and after.steps == 2


async def test_a_wait_in_the_pool_is_a_local_transient_error_not_the_models() -> None:
    async with (
        ChatServer(hold=1.0) as server,
        httpx.AsyncClient(limits=httpx.Limits(max_connections=1), timeout=httpx.Timeout(10.0, pool=0.1)) as http,
    ):
        adapter = make_adapter(server, http_client=http)  # its own bound is larger than the client's pool
        async with asyncio.timeout(20):
            results = await asyncio.gather(
                adapter.complete(request(0)), adapter.complete(request(1)), return_exceptions=True
            )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1, results
        error = errors[0]
        assert isinstance(error, ConnectionPoolError), repr(error)
        assert not isinstance(error, (ProviderError, RequestTimeoutError))
        assert error.retryable and transient(error)
        assert "PoolTimeout" in str(error) and "not sent" in str(error)
        assert server.requests == 1  # the provider never saw the second request


async def _run_sessions(n: int, tmp_path: Path, *, steps: int, stream: bool = False) -> tuple[ChatServer, Any]:
    async with ChatServer() as server:
        adapter = make_adapter(server)
        client = Client(providers={"chat": adapter})
        sessions = [_session(client, tmp_path, steps=steps, stream=stream) for _ in range(n)]
        async with asyncio.timeout(120):
            results = await asyncio.gather(*(s.submit("go") for s in sessions))
        slots = slots_of(adapter)
        assert slots.in_use == 0 and slots.waiting == 0
        await client.close()
    problems = [(r.stop_reason, r.error, r.steps) for r in results if r.error is not None or r.steps != steps]
    assert not problems, problems[:5]
    assert all(r.text == FINAL for r in results)
    return server, results


async def test_200_concurrent_sessions_on_one_client_all_complete(tmp_path: Path) -> None:
    server, _ = await _run_sessions(200, tmp_path, steps=3)
    assert server.requests == 600
    assert server.peak <= DEFAULT_MAX_CONCURRENCY
    assert server.connections <= DEFAULT_MAX_CONCURRENCY  # kept alive and reused, never churned


@pytest.mark.slow
async def test_1000_concurrent_sessions_on_one_client_all_complete(tmp_path: Path) -> None:
    server, _ = await _run_sessions(1000, tmp_path, steps=3)
    assert server.requests == 3000
    assert server.peak <= DEFAULT_MAX_CONCURRENCY


@pytest.mark.slow
async def test_1000_concurrent_streamed_sessions_on_one_client_all_complete(tmp_path: Path) -> None:
    server, _ = await _run_sessions(1000, tmp_path, steps=3, stream=True)
    assert server.requests == 3000
    assert server.peak <= DEFAULT_MAX_CONCURRENCY
