"""How fast the OpenAI Responses adapter turns SSE into unified events.

Two figures, both from the largest recording (o3-mini, 383 reasoning-summary deltas and 271 text
deltas, ~200 KB):

* translator only: SSE events already parsed, fed straight into the adapter's translator (the
  per-event cost the adapter adds on top of the network and SSE parsing);
* end to end: the same body served by the local replay server over a real socket, per SSE event
  and in 64-byte pieces, through httpx, httpx-sse and the adapter.

Run: ``python bench/bench_openai_responses.py [repeats]``
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.support.replay import ReplayServer, cassette_path, load_cassette  # noqa: E402

from ra.llm.http import SSEEvent  # noqa: E402
from ra.llm.providers.openai_responses import OpenAIAdapter, _StreamTranslator  # noqa: E402
from ra.llm.types import Message, Request  # noqa: E402

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


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    [interaction] = load_cassette(CASSETTE)
    body = interaction.response.body
    events = parsed_events(body)
    print(f"recording: {len(body) / 1024:.0f} KiB, {len(events)} SSE events, {repeats} repeats")
    report("translator only", bench_translator(events, repeats), len(events), len(body))
    for chunking in ("events", 64):
        times = asyncio.run(bench_end_to_end(interaction.response, repeats, chunking))
        report(f"end to end (chunking={chunking})", times, len(events), len(body))


if __name__ == "__main__":
    main()
