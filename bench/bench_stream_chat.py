"""Throughput of the Chat Completions adapter (``ra``'s hot path).

1. Streaming: a synthetic 20,000-event Chat Completions text stream served over real HTTP from
   127.0.0.1 (the test suite's ReplayServer, run in a separate process so the server does not
   share the client's GIL). Compares events/s of ``OpenAICompatibleAdapter.stream()`` with a raw
   httpx + httpx-sse loop (SSE parse only, and SSE parse + ``json.loads`` per event, the least
   any client must do), plus the adapter's own bytes-level SSE splitter alone.
2. Request building: ``build_body`` for a conversation grown step by step to 300 messages (an
   agent loop: assistant text + tool call, then a tool result of a few KB), with the translation
   cache (one adapter for the whole run) and without it (a fresh adapter each step).

Run: ``python bench/bench_stream_chat.py [--events N] [--repeat R]``. Figures are printed; nothing
is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

SSE_HEADERS = {"content-type": "text/event-stream"}


def synthetic_stream(n: int) -> bytes:
    """``n`` content-delta chunks shaped like OpenAI's, then finish, usage and [DONE]."""
    head = '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench-model",'
    parts = [
        "data: "
        + head
        + '"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
    ]
    for i in range(n - 3):
        token = json.dumps(f" tok{i % 997}")
        parts.append(
            "data: "
            + head
            + '"choices":[{"index":0,"delta":{"content":'
            + token
            + '},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        )
    parts.append("data: " + head + '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}\n\n')
    parts.append(
        "data: " + head + '"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":'
        f'{n},"total_tokens":{n + 10}}}}}\n\n'
    )
    parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def serve(conn: Any, body: bytes, copies: int, chunking: str | int) -> None:
    """Child process: a ReplayServer answering ``copies`` times with ``body``."""
    from tests.support.replay import ReplayServer

    server = ReplayServer().start()
    for _ in range(copies):
        server.enqueue(200, body, SSE_HEADERS, chunking=chunking)
    conn.send(server.base_url)
    conn.recv()
    server.close()


async def run_stream_bench(base_url: str, runs: int, n_events: int) -> dict[str, list[float]]:
    import httpx
    from httpx_sse import EventSource

    from ra.llm.http import AdapterTimeout
    from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
    from ra.llm.providers.openai_chat_reply import sse_records
    from ra.llm.types import Message, Request

    url = base_url + "/v1/chat/completions"
    payload = {"model": "bench-model", "messages": [{"role": "user", "content": "go"}], "stream": True}
    times: dict[str, list[float]] = {}

    async with httpx.AsyncClient(timeout=30) as client:

        async def sse_only() -> int:
            count = 0
            async with client.stream("POST", url, json=payload) as response:
                async for _ in EventSource(response).aiter_sse():
                    count += 1
            return count

        async def sse_json() -> int:
            count = 0
            async with client.stream("POST", url, json=payload) as response:
                async for sse in EventSource(response).aiter_sse():
                    if sse.data != "[DONE]":
                        json.loads(sse.data)
                    count += 1
            return count

        adapter = OpenAICompatibleAdapter(base_url=base_url + "/v1", timeout=AdapterTimeout(stream_read=30))
        request = Request("bench-model", [Message.user("go")])

        async def adapter_stream() -> int:
            count = 0
            async for event in adapter.stream(request):
                count += 1
                last = event
            assert last.response is not None and last.response.usage.output_tokens == n_events
            return count

        async def adapter_sse_only() -> int:
            count = 0
            body = adapter.build_body(request, stream=True)
            async with adapter.open_stream(adapter.url, body, adapter.headers()) as response:
                async for _ in sse_records(adapter.iter_bytes(response)):
                    count += 1
            return count

        cases = [
            ("httpx-sse parse only", sse_only),
            ("httpx-sse parse + json.loads", sse_json),
            ("adapter SSE splitter only", adapter_sse_only),
            ("OpenAICompatibleAdapter.stream()", adapter_stream),
        ]
        for _ in range(runs):
            for label, fn in cases:
                t0 = time.perf_counter()
                count = await fn()
                times.setdefault(label, []).append(time.perf_counter() - t0)
                times.setdefault(label + " #", [count])
        await adapter.close()
    return times


def stream_bench(n_events: int, runs: int, chunking: str | int) -> None:
    body = synthetic_stream(n_events)
    parent, child = mp.Pipe()
    proc = mp.Process(target=serve, args=(child, body, runs * 4, chunking), daemon=True)
    proc.start()
    base_url = parent.recv()
    try:
        times = asyncio.run(run_stream_bench(base_url, runs, n_events))
    finally:
        parent.send("stop")
        proc.join(5)
    print(f"\nstream: {n_events} SSE events, {len(body) / 1e6:.2f} MB, server chunking={chunking!r}, best of {runs}")
    for label, values in times.items():
        if label.endswith(" #"):
            continue
        best = min(values)
        events = times[label + " #"][0]
        print(
            f"  {label:36s} {n_events / best:>10,.0f} SSE events/s  ({best * 1000:7.1f} ms best, "
            f"{statistics.median(values) * 1000:7.1f} ms median, {events} items yielded)"
        )


def build_body_bench(steps: int, repeat: int) -> None:
    from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
    from ra.llm.types import ContentPart, Message, Request, ToolCallData, ToolDefinition

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
    cached = OpenAICompatibleAdapter(base_url="http://127.0.0.1:1/v1")
    rows: list[tuple[int, float, float, float]] = []
    from ra.llm.http import _dumps

    for step in range(steps):
        call = ToolCallData(f"call_{step}", "read_file", {"path": f"src/mod{step}.py", "n": step})
        messages.append(
            Message.assistant([ContentPart.of_text(f"Looking at module {step}."), ContentPart.of_tool_call(call)])
        )
        messages.append(Message.tool_result(f"call_{step}", file_text))
        request = Request("local-model", list(messages), tools=tools, temperature=0.2, max_tokens=4096)

        def timed(fn: Any) -> float:
            best = float("inf")
            for _ in range(repeat):
                t0 = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - t0)
            return best

        t_cached = timed(lambda r=request: cached.build_body(r, stream=True))
        t_fresh = timed(lambda r=request: OpenAICompatibleAdapter(base_url="http://x/v1").build_body(r, stream=True))
        body = cached.build_body(request, stream=True)
        t_dump = timed(lambda b=body: _dumps(b))
        rows.append((len(request.messages), t_cached, t_fresh, t_dump))

    print(f"\nbuild_body, conversation grown step by step (best of {repeat} per step)")
    print(f"  {'messages':>8}  {'cached':>10}  {'per msg':>9}  {'uncached':>10}  {'per msg':>9}  {'json encode':>11}")
    for n, c, f, d in rows:
        if n in (12, 52, 102, 152, 202, 252, 302) or n == rows[-1][0]:
            print(
                f"  {n:>8}  {c * 1e6:>8.1f}µs  {c / n * 1e9:>7.0f}ns  {f * 1e6:>8.1f}µs  {f / n * 1e9:>7.0f}ns"
                f"  {d * 1e6:>9.1f}µs"
            )
    # Work that is new each step: the cached build minus the assembly of the previous step's list.
    deltas = [rows[i][1] - rows[i - 1][1] for i in range(1, len(rows))]
    print(
        f"  cached per-step growth: median {statistics.median(deltas) * 1e6:.2f}µs per 2 new messages; "
        f"uncached/cached at {rows[-1][0]} messages: {rows[-1][2] / rows[-1][1]:.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=150, help="agent steps (2 messages each)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}")
    stream_bench(args.events, args.repeat, "events")
    stream_bench(args.events, args.repeat, 16384)
    build_body_bench(args.steps, args.repeat)


if __name__ == "__main__":
    main()
