"""How fast the OpenAI Responses adapter turns SSE into unified events.

Two figures, both from the largest recording (o3-mini, 383 reasoning-summary deltas and 271 text
deltas, ~200 KB):

* translator only: SSE events already parsed, fed straight into the adapter's translator (the
  per-event cost the adapter adds on top of the network and SSE parsing);
* end to end: the same body served by the local replay server over a real socket, per SSE event
  and in 64-byte pieces, through httpx, httpx-sse and the adapter.

Then the request side: the body of an agent conversation grown step by step (encrypted reasoning,
a function call, a ~3 KB function output a step) at 10, 100, 300 and ``--messages`` messages,
encoded three ways: translating and JSON-encoding everything (``build_body`` + the HTTP layer's
encoding, what every request cost before the translation cache), ``encode_body`` from the cache
with the checks of the earlier messages, and ``encode_body`` with the agent loop's vouched prefix
(the last two are skipped on code that has no ``encode_body``).

Run: ``python bench/bench_openai_responses.py [REPEATS] [--messages N] [--body-only]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.support.replay import ReplayServer, cassette_path, load_cassette  # noqa: E402

from ra.llm.http import SSEEvent  # noqa: E402
from ra.llm.providers.openai_responses import OpenAIAdapter, _StreamTranslator  # noqa: E402
from ra.llm.types import (  # noqa: E402
    ContentPart,
    Message,
    Request,
    ThinkingData,
    ToolCallData,
    ToolDefinition,
)

CASSETTE = cassette_path("openai-responses", "test_openai_responses_thinking_part_iter.yaml")


def parsed_events(body: bytes) -> list[SSEEvent]:
    out = []
    for block in body.decode("utf-8").split("\n\n"):
        lines = block.splitlines()
        data = "\n".join(line[5:].lstrip() for line in lines if line.startswith("data:"))
        name = next((line[6:].strip() for line in lines if line.startswith("event:")), "")
        if data:
            out.append(SSEEvent(name, data))
    return out


def bench_translator(events: list[SSEEvent], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        translator = _StreamTranslator("openai", "o3-mini", [], None)
        for sse in events:
            translator.feed(sse)
        assert translator.finished
        times.append(time.perf_counter() - start)
    return times


async def bench_end_to_end(body_response: object, repeats: int, chunking: str | int) -> list[float]:
    server = ReplayServer().start()
    adapter = OpenAIAdapter(api_key="bench", base_url=server.base_url)
    request = Request(model="o3-mini", messages=[Message.user("How do I cross the street?")])
    times = []
    try:
        for _ in range(repeats):
            server.enqueue_response(body_response, chunking=chunking)  # type: ignore[arg-type]
            start = time.perf_counter()
            count = 0
            async for _event in adapter.stream(request):
                count += 1
            times.append(time.perf_counter() - start)
    finally:
        await adapter.close()
        server.close()
    return times


def report(label: str, times: list[float], n_events: int, n_bytes: int) -> None:
    best, median = min(times), statistics.median(times)
    print(
        f"{label:<34} median {median * 1000:8.2f} ms  best {best * 1000:8.2f} ms  "
        f"{n_events / median:10.0f} events/s  {n_bytes / median / 1e6:7.2f} MB/s"
    )


def body_bench(max_messages: int, repeat: int) -> None:
    from ra.llm.http import _dumps

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
    checked = OpenAIAdapter(api_key="k")
    vouched = OpenAIAdapter(api_key="k")
    encodes = hasattr(checked, "encode_body")
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
        data = {
            "type": "reasoning",
            "id": f"rs_{step:04d}",
            "encrypted_content": f"gAAAAB{step:04d}" * 100,  # ~1 KB, as the API sends it
            "summary": [{"type": "summary_text", "text": f"Module {step} may hold the bug."}],
        }
        thinking = ThinkingData(f"Module {step} may hold the bug.", provider_data=data)
        call = ToolCallData(f"call_{step:04d}", "read_file", {"path": f"src/mod{step}.py", "n": step})
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
        request = Request("gpt-5", list(messages), tools=tools, reasoning_effort="medium")
        own = Request("gpt-5", list(messages), tools=tools, reasoning_effort="medium", conversation=conversation)
        if encodes:  # what an agent step does: one request per step, the cache warm from the previous one
            checked.encode_body(request, stream=True)
            own.unchanged = sent
            vouched.encode_body(own, stream=True)
        sent = len(messages)
        n = len(messages)
        if any(n - 1 <= m <= n for m in marks):
            # Repeats see the same list again: the vouched prefix covers all of it.
            own.unchanged = n
            t_full = timed(lambda r=request: _dumps(OpenAIAdapter(api_key="k").build_body(r, stream=True)))
            t_checked = t_vouched = float("nan")
            if encodes:
                t_checked = timed(lambda r=request: checked.encode_body(r, stream=True))
                t_vouched = timed(lambda r=own: vouched.encode_body(r, stream=True))
            rows.append((n, t_full, t_checked, t_vouched))

    print(f"\nOpenAI Responses request body, conversation grown step by step (best of {repeat})")
    heads = ("translate+encode all", "encode_body, checked", "encode_body, vouched")
    print(f"  {'messages':>8}" + "".join(f"  {h:>20}" for h in heads))
    for n, *times in rows:
        print(f"  {n:>8}" + "".join(f"  {t * 1e6:>18.1f}µs" if t == t else f"  {'-':>20}" for t in times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repeats", nargs="?", type=int, default=20)
    parser.add_argument("--messages", type=int, default=600)
    parser.add_argument("--body-only", action="store_true", help="only the request-body figures")
    args = parser.parse_args()
    repeats = args.repeats
    if args.body_only:
        body_bench(args.messages, min(repeats, 5))
        return
    [interaction] = load_cassette(CASSETTE)
    body = interaction.response.body
    events = parsed_events(body)
    print(f"recording: {len(body) / 1024:.0f} KiB, {len(events)} SSE events, {repeats} repeats")
    report("translator only", bench_translator(events, repeats), len(events), len(body))
    for chunking in ("events", 64):
        times = asyncio.run(bench_end_to_end(interaction.response, repeats, chunking))
        report(f"end to end (chunking={chunking})", times, len(events), len(body))
    body_bench(args.messages, min(repeats, 5))


if __name__ == "__main__":
    main()
