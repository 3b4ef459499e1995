"""How fast ``AnthropicAdapter.stream()`` turns a Messages API event stream into StreamEvents.

A synthetic text stream of ``--events`` SSE events (message_start, one text block of
``text_delta`` events, a ping every 500 events, message_delta, message_stop - the API's own
grammar and padding-free JSON) is served over real HTTP from 127.0.0.1 by the test suite's
ReplayServer, running in a child process so the server does not compete for the client's GIL.

Three consumers read the same bytes, each ``--repeat`` times:

* ``httpx + httpx-sse``: SSE parsing only, the floor for any Python client on this stack;
* ``httpx + httpx-sse + json``: the same plus ``json.loads`` of every event, the least a real
  client must do;
* ``AnthropicAdapter.stream()``: full translation - unified events, the accumulator, the final
  Response with usage.

Then the request side: the body of an agent conversation grown step by step (a tool call with
thinking, a ~3 KB tool result) at 10 to ``--messages`` messages, encoded three ways: translating
and JSON-encoding everything (``build_body`` + the HTTP layer's encoding, what every request
cost before the translation cache), ``encode_body`` from the cache with the checks of the
earlier messages, and ``encode_body`` with the agent loop's vouched prefix.

Run: ``python bench/bench_stream_anthropic.py [--events N] [--repeat R] [--chunking events|SIZE]
[--messages N] [--body-only]``. Figures are printed (best and median of the repeats); nothing is
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8"}


def make_stream(n_events: int) -> tuple[bytes, int, str]:
    """Return (body, number of SSE events, the text the deltas add up to)."""

    def event(payload: dict[str, Any]) -> str:
        return f"event: {payload['type']}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n"

    out = [
        event(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_bench",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-bench",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 12, "cache_read_input_tokens": 0, "output_tokens": 1},
                },
            }
        ),
        event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ]
    text: list[str] = []
    budget = n_events - 5  # start, block start, block stop, message_delta, message_stop
    i = 0
    while budget > 0:
        if i and i % 500 == 0:
            out.append(event({"type": "ping"}))
        else:
            piece = f" word{i % 1009}"
            text.append(piece)
            out.append(
                event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
            )
        budget -= 1
        i += 1
    out.append(event({"type": "content_block_stop", "index": 0}))
    out.append(
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": len(text)},
            }
        )
    )
    out.append(event({"type": "message_stop"}))
    return "".join(out).encode(), len(out), "".join(text)


def serve(conn: Any, body: bytes, copies: int, chunking: str | int) -> None:
    """Child process: answer ``copies`` requests with ``body``."""
    from tests.support.replay import ReplayServer

    server = ReplayServer().start()
    for _ in range(copies):
        server.enqueue(200, body, SSE_HEADERS, chunking=chunking)
    conn.send(server.base_url)
    conn.recv()  # wait for the parent to finish
    server.close()


async def measure(base_url: str, repeat: int, n_sse: int, text: str) -> dict[str, list[float]]:
    import httpx
    from httpx_sse import EventSource

    from ra.llm.http import AdapterTimeout
    from ra.llm.providers.anthropic import AnthropicAdapter
    from ra.llm.types import Message, Request, StreamEventType

    url = base_url + "/v1/messages"
    payload = {"model": "claude-bench", "max_tokens": 4096, "messages": [], "stream": True}
    times: dict[str, list[float]] = {}

    async with httpx.AsyncClient(timeout=60) as client:

        async def raw_sse() -> None:
            count = 0
            async with client.stream("POST", url, json=payload) as response:
                async for _ in EventSource(response).aiter_sse():
                    count += 1
            assert count == n_sse, count

        async def raw_sse_json() -> None:
            count = 0
            async with client.stream("POST", url, json=payload) as response:
                async for sse in EventSource(response).aiter_sse():
                    json.loads(sse.data)
                    count += 1
            assert count == n_sse, count

        adapter = AnthropicAdapter(api_key="bench", base_url=base_url, timeout=AdapterTimeout(stream_read=60))
        request = Request("claude-bench", [Message.user("go")])
        yielded: list[int] = []

        async def adapter_stream() -> None:
            count = 0
            last = None
            async for event in adapter.stream(request):
                count += 1
                last = event
            assert last is not None and last.type == StreamEventType.FINISH and last.response is not None
            assert last.response.text == text
            yielded.append(count)

        cases: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("httpx + httpx-sse", raw_sse),
            ("httpx + httpx-sse + json", raw_sse_json),
            ("AnthropicAdapter.stream()", adapter_stream),
        ]
        for _ in range(repeat):  # interleaved, so drift hits every case alike
            for label, fn in cases:
                start = time.perf_counter()
                await fn()
                times.setdefault(label, []).append(time.perf_counter() - start)
        await adapter.close()
    times["_yielded"] = [float(yielded[-1])]
    return times


def body_bench(max_messages: int, repeat: int) -> None:
    from ra.llm.http import _dumps
    from ra.llm.providers.anthropic import AnthropicAdapter
    from ra.llm.types import ContentPart, Message, Request, ThinkingData, ToolCallData, ToolDefinition

    tools = [
        ToolDefinition(
            name,
            f"{name} tool",
            {"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "integer"}}},
        )
        for name in ("read_file", "write_file", "shell", "grep", "glob")
    ]
    file_text = "".join(f"line {i}: some source code that a tool returned\n" for i in range(60))  # ~3 KB
    messages = [Message.system("You are a coding agent. " * 40), Message.user("Fix the failing test.")]
    checked = AnthropicAdapter(api_key="k")
    vouched = AnthropicAdapter(api_key="k")
    conversation = object()
    marks = sorted({10, 100, 300, max_messages} & set(range(max_messages + 1)))
    rows: list[tuple[int, float, float, float]] = []
    sent = 0

    def timed(fn: Any) -> float:
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        return best

    step = 0
    while len(messages) < max_messages:
        thinking = ThinkingData(f"Module {step} may hold the bug.", f"sig{step:04d}" * 20)
        call = ToolCallData(f"toolu_{step:04d}", "read_file", {"path": f"src/mod{step}.py", "n": step})
        messages.append(
            Message.assistant(
                [
                    ContentPart.of_thinking(thinking),
                    ContentPart.of_text(f"Looking at module {step}."),
                    ContentPart.of_tool_call(call),
                ]
            )
        )
        messages.append(Message.tool_result(call.id, file_text))
        step += 1
        request = Request("claude-bench", list(messages), tools=tools, max_tokens=4096)
        own = Request("claude-bench", list(messages), tools=tools, max_tokens=4096, conversation=conversation)
        # What an agent step does: one request per step, the cache warm from the previous one.
        checked.encode_body(request, stream=True)
        own.unchanged = sent
        vouched.encode_body(own, stream=True)
        sent = len(messages)
        n = len(messages)
        if any(n - 1 <= m <= n for m in marks):
            # Repeats see the same list again: the vouched prefix covers all of it.
            own.unchanged = n
            t_full = timed(lambda r=request: _dumps(AnthropicAdapter(api_key="k").build_body(r, stream=True)))
            t_checked = timed(lambda r=request: checked.encode_body(r, stream=True))
            t_vouched = timed(lambda r=own: vouched.encode_body(r, stream=True))
            rows.append((n, t_full, t_checked, t_vouched))

    print(f"\nAnthropic request body, conversation grown step by step (best of {repeat})")
    heads = ("translate+encode all", "encode_body, checked", "encode_body, vouched")
    print(f"  {'messages':>8}" + "".join(f"  {h:>20}" for h in heads))
    for n, full, chk, vch in rows:
        print(f"  {n:>8}  {full * 1e6:>18.1f}µs  {chk * 1e6:>18.1f}µs  {vch * 1e6:>18.1f}µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chunking", default="events", help="'events' (one write per event) or a byte size")
    parser.add_argument("--messages", type=int, default=600, help="request body: the longest conversation")
    parser.add_argument("--body-only", action="store_true", help="only the request-body figures")
    args = parser.parse_args()
    if args.body_only:
        body_bench(args.messages, args.repeat)
        return
    chunking: str | int = args.chunking if args.chunking == "events" else int(args.chunking)

    body, n_sse, text = make_stream(args.events)
    parent, child = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=serve, args=(child, body, 3 * args.repeat, chunking), daemon=True)
    proc.start()
    base_url = parent.recv()
    try:
        times = asyncio.run(measure(base_url, args.repeat, n_sse, text))
    finally:
        parent.send("stop")
        proc.join(5)

    yielded = int(times.pop("_yielded")[0])
    print(f"Anthropic stream: {n_sse:,} SSE events, {len(body) / 1e6:.2f} MB, chunking={chunking}, {args.repeat} runs")
    print(f"  the adapter yields {yielded:,} unified events for them")
    print(f"  {'consumer':28} {'best ev/s':>12} {'median ev/s':>12} {'median ms':>10}")
    base = None
    for label, samples in times.items():
        best, median = min(samples), statistics.median(samples)
        base = base or median
        print(f"  {label:28} {n_sse / best:12,.0f} {n_sse / median:12,.0f} {median * 1e3:10.1f}  x{median / base:.2f}")
    body_bench(args.messages, args.repeat)


if __name__ == "__main__":
    main()
