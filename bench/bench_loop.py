"""Agent loop overhead: a 1,000-step session with a trivial tool and the scripted model.

Prints steps/s and the per-step overhead (complete() and streaming), the per-step time early vs
late in the session (it must not grow with the history), and the memory of an idle session and of
the session after 1,000 steps (tracemalloc).

    python bench/bench_loop.py [--steps 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import statistics
import time
import tracemalloc

from _nullenv import NullEnv

from ra.agent import GenericProfile, Session, SessionConfig
from ra.agent.events import EventKind
from ra.llm.client import Client
from ra.llm.retrying import RetryPolicy
from ra.llm.testing import ScriptedAdapter, Step, reply
from ra.llm.types import ToolCall, Usage
from ra.tools.registry import ToolRegistry


def build(steps: int, streaming: bool) -> Session:
    registry = ToolRegistry()
    registry.add(
        "noop",
        "Does nothing.",
        {"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]},
        lambda args, ctx: "ok",
    )
    usage = Usage(input_tokens=100, output_tokens=10, total_tokens=110)  # fixed: no per-step estimate
    count = 0

    def answer(request):
        nonlocal count
        count += 1
        if count >= steps:
            return reply("done", usage=usage)
        return Step(tool_calls=[ToolCall(f"c{count}", "noop", {"i": count})], usage=usage)

    model = ScriptedAdapter(default=answer)
    model.requests = _Discard()  # type: ignore[assignment]  # do not keep 1,000 requests alive
    profile = GenericProfile("scripted", "bench", registry, supports_streaming=streaming, context_window_size=10**9)
    config = SessionConfig(
        max_tool_rounds_per_input=0, enable_loop_detection=True, retry_policy=RetryPolicy(max_retries=0)
    )
    return Session(profile, NullEnv(), Client(providers={"scripted": model}), config)  # type: ignore[arg-type]


class _Discard(list):
    def append(self, item) -> None:  # type: ignore[override]
        return None


async def run(steps: int, streaming: bool) -> dict[str, float]:
    session = build(steps, streaming)
    starts: list[float] = []
    session.add_listener(lambda e: starts.append(time.perf_counter()) if e.kind is EventKind.TURN_START else None)
    gc.collect()
    t0 = time.perf_counter()
    result = await session.submit("go")
    elapsed = time.perf_counter() - t0
    assert result.steps == steps, result
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    window = max(1, min(100, len(gaps) // 4))
    await session.close()
    return {
        "elapsed": elapsed,
        "steps_per_s": steps / elapsed,
        "per_step_us": elapsed / steps * 1e6,
        "early_us": statistics.median(gaps[:window]) * 1e6,
        "late_us": statistics.median(gaps[-window:]) * 1e6,
    }


async def memory(steps: int) -> tuple[int, int]:
    build(1, False)  # warm imports and caches outside the measurement
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.take_snapshot()
    session = build(steps, False)
    idle = tracemalloc.take_snapshot()
    # A host consumes events (here: a listener that drops them), so no backlog is kept.
    session.add_listener(lambda event: None, replay=False)
    await session.submit("go")
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    idle_bytes = sum(s.size_diff for s in idle.compare_to(base, "filename"))
    after_bytes = sum(s.size_diff for s in after.compare_to(base, "filename"))
    await session.close()
    return idle_bytes, after_bytes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for streaming in (False, True):
        best = min((asyncio.run(run(args.steps, streaming)) for _ in range(args.repeat)), key=lambda r: r["elapsed"])
        mode = "stream  " if streaming else "complete"
        print(
            f"{mode}: {args.steps} steps in {best['elapsed'] * 1000:.0f} ms = {best['steps_per_s']:.0f} steps/s, "
            f"{best['per_step_us']:.0f} us/step (model + tool + loop); "
            f"median step early {best['early_us']:.0f} us vs late {best['late_us']:.0f} us"
        )
    idle, after = asyncio.run(memory(args.steps))
    print(
        f"memory: idle session {idle / 1024:.1f} KiB; after {args.steps} steps (history + context) "
        f"{after / 1024:.0f} KiB"
    )


if __name__ == "__main__":
    main()
