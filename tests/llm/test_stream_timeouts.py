"""Streams that only keep alive never end a call: stream_idle and stream_total (hardening item 3).

A real HTTP/1.1 server on 127.0.0.1 answers every streamed request with SSE that is only
keep-alive - ``: keepalive`` comments, or Anthropic ``ping`` events - at a steady beat that
resets httpx's read timeout. Each adapter must give up with RequestTimeoutError after
``stream_idle`` seconds; a stream that trickles real content slowly but steadily must not; and
``stream_total`` bounds even a lively stream. Each test is bounded itself, so old code fails
rather than hangs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest

from ra.llm.client import Client
from ra.llm.errors import RequestTimeoutError
from ra.llm.http import AdapterTimeout
from ra.llm.types import Message, Request, StreamEventType

Writer = Callable[[asyncio.StreamWriter], Awaitable[None]]


class SSEServer:
    """Answers every request with ``200 text/event-stream`` and then runs ``script(writer)``."""

    def __init__(self, script: Writer) -> None:
        self.script = script
        self.server: asyncio.AbstractServer | None = None
        self.closed_connections = 0

    async def __aenter__(self) -> SSEServer:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            await writer.drain()
            await self.script(writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed_connections += 1
            writer.close()


def keepalive_comments(beat: float) -> Writer:
    async def script(writer: asyncio.StreamWriter) -> None:
        while True:
            writer.write(b": keepalive\n\n")
            await writer.drain()
            await asyncio.sleep(beat)

    return script


def anthropic_pings(beat: float) -> Writer:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 1, "output_tokens": 0},
        },
    }

    async def script(writer: asyncio.StreamWriter) -> None:
        writer.write(f"event: message_start\ndata: {json.dumps(start)}\n\n".encode())
        while True:
            writer.write(b'event: ping\ndata: {"type": "ping"}\n\n')
            await writer.drain()
            await asyncio.sleep(beat)

    return script


def chat_trickle(pieces: int, beat: float) -> Writer:
    """Real content - one text delta every ``beat`` seconds - then a proper end."""

    async def script(writer: asyncio.StreamWriter) -> None:
        for i in range(pieces):
            chunk = {
                "id": "c",
                "object": "chat.completion.chunk",
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}],
            }
            writer.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await writer.drain()
            await asyncio.sleep(beat)
        end = {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
        writer.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
        await writer.drain()

    return script


def adapter(kind: str, url: str, timeout: AdapterTimeout):  # type: ignore[no-untyped-def]
    if kind == "openai-compatible":
        from ra.llm.providers.openai_chat import OpenAICompatibleAdapter

        return OpenAICompatibleAdapter(base_url=f"{url}/v1", timeout=timeout)
    if kind == "anthropic":
        from ra.llm.providers.anthropic import AnthropicAdapter

        return AnthropicAdapter(api_key="k", base_url=url, timeout=timeout)
    if kind == "openai":
        from ra.llm.providers.openai_responses import OpenAIAdapter

        return OpenAIAdapter(api_key="k", base_url=f"{url}/v1", timeout=timeout)
    from ra.llm.providers.gemini import GeminiAdapter

    return GeminiAdapter(api_key="k", base_url=url, timeout=timeout)


async def consume(kind: str, url: str, timeout: AdapterTimeout) -> list[str]:
    client = Client(providers={kind: adapter(kind, url, timeout)})
    try:
        request = Request(model="m", messages=[Message.user("hi")], provider=kind)
        return [e.delta async for e in client.stream(request) if e.type == StreamEventType.TEXT_DELTA and e.delta]
    finally:
        await client.close()


IDLE = AdapterTimeout(stream_read=5.0, stream_idle=0.6, stream_total=20.0)


@pytest.mark.parametrize("kind", ["openai-compatible", "anthropic", "openai", "gemini"])
async def test_a_stream_of_keepalive_comments_times_out(kind: str) -> None:
    async with SSEServer(keepalive_comments(0.05)) as server:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(RequestTimeoutError, match="stream_idle"):
            await asyncio.wait_for(consume(kind, server.url, IDLE), 10)
        assert 0.5 < loop.time() - started < 3


async def test_anthropic_pings_do_not_count_as_content() -> None:
    async with SSEServer(anthropic_pings(0.05)) as server:
        with pytest.raises(RequestTimeoutError, match=r"no content for 0\.6s"):
            await asyncio.wait_for(consume("anthropic", server.url, IDLE), 10)


async def test_slow_but_steady_content_is_not_cut() -> None:
    async with SSEServer(chat_trickle(pieces=6, beat=0.3)) as server:
        words = await asyncio.wait_for(consume("openai-compatible", server.url, IDLE), 10)
    assert "".join(words) == "w0 w1 w2 w3 w4 w5 "  # 1.8 s in all, never 0.6 s without content


async def test_stream_total_bounds_a_lively_stream() -> None:
    limits = AdapterTimeout(stream_read=5.0, stream_idle=0.6, stream_total=1.0)
    async with SSEServer(chat_trickle(pieces=100, beat=0.1)) as server:
        with pytest.raises(RequestTimeoutError, match="stream_total"):
            await asyncio.wait_for(consume("openai-compatible", server.url, limits), 10)


async def test_a_slow_consumer_is_not_blamed_on_the_server() -> None:
    """The idle clock runs only while waiting on the stream."""
    async with SSEServer(chat_trickle(pieces=3, beat=0.05)) as server:
        client = Client(providers={"openai-compatible": adapter("openai-compatible", server.url, IDLE)})
        seen = []
        async for event in client.stream(
            Request(model="m", messages=[Message.user("hi")], provider="openai-compatible")
        ):
            if event.type == StreamEventType.TEXT_DELTA:
                seen.append(event.delta)
                await asyncio.sleep(0.8)  # longer than stream_idle, on the consumer's side
        await client.close()
    assert seen == ["w0 ", "w1 ", "w2 "]


def test_the_defaults_are_documented_values() -> None:
    limits = AdapterTimeout()
    assert (limits.stream_idle, limits.stream_total) == (300.0, 1800.0)
