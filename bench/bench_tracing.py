"""What tracing costs per step: off (the default), on, and on with message content.

Runs a scripted session of N steps, each one model call and one tool call, through a real
``Session`` and prints the time per step:

* ``off``     - no ``tracing=``: nothing of OpenTelemetry is imported (checked here);
* ``on``      - ``Tracing(provider)`` with an SDK ``TracerProvider`` and a span processor that
  drops the spans (creating, filling and ending three spans per step is what is measured, not
  an exporter);
* ``content`` - as ``on`` with ``capture_content=True`` (each chat span serializes the whole
  request, so this one grows with the history: it is opt-in).

``off`` runs first, in a process that has not imported opentelemetry yet.

    python bench/bench_tracing.py [--steps 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any

from _nullenv import NullEnv

from ra.agent import GenericProfile, Session, SessionConfig
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.retrying import RetryPolicy
from ra.llm.testing import ScriptedAdapter, Step, reply
from ra.llm.types import ToolCall, Usage
from ra.tools.registry import ToolRegistry


def build(steps: int, tracing: Any = None) -> Session:
    registry = ToolRegistry()
    registry.add(
        "lookup",
        "Looks a word up.",
        {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
        lambda args, ctx: f"{args['word']}: a word",
    )
    usage = Usage(input_tokens=100, output_tokens=10)
    count = 0

    def answer(request):  # type: ignore[no-untyped-def]
        nonlocal count
        count += 1
        if count > steps:
            return reply("done", usage=usage)
        return Step(tool_calls=[ToolCall(f"c{count}", "lookup", {"word": f"w{count}"})], usage=usage)

    model = ScriptedAdapter([], default=answer)
    profile = GenericProfile("bench", "bench-model", registry, system_prompt="bench", context_window_size=10**9)
    config = SessionConfig(
        retry_policy=RetryPolicy(max_retries=0),
        max_tool_rounds_per_input=0,
        enable_loop_detection=False,
        prices={"bench-model": ModelPrice.free()},
        permission_mode="bypass",
    )
    return Session(profile, NullEnv(), Client(providers={"bench": model}), config, tracing=tracing)


async def run_once(steps: int, tracing: Any = None) -> float:
    session = build(steps, tracing)
    started = time.perf_counter()
    result = await session.submit("go")
    elapsed = time.perf_counter() - started
    assert result.tool_calls == steps, result
    await session.close()
    return elapsed / (steps + 1) * 1e6


def tracings() -> dict[str, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from ra.agent.tracing import Tracing

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    return {"on": Tracing(provider), "content": Tracing(provider, capture_content=True)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"off": [], "on": [], "content": []}
    for _ in range(args.repeat):
        results["off"].append(await run_once(args.steps))
    loaded = [m for m in sys.modules if m.startswith("opentelemetry")]
    assert not loaded, f"an untraced session imported {loaded[:3]}"
    modes = tracings()
    for _ in range(args.repeat):  # interleaved rounds: machine noise hits both alike
        for name, tracing in modes.items():
            results[name].append(await run_once(args.steps, tracing))
    base = min(results["off"])
    print(f"{args.steps} steps per run (a model call and a tool call each), best of {args.repeat}; us per step")
    print(f"{'mode':8} {'best':>8} {'median':>8} {'added':>8}")
    for name, values in results.items():
        best = min(values)
        print(f"{name:8} {best:8.1f} {statistics.median(values):8.1f} {best - base:+8.1f}")


if __name__ == "__main__":
    asyncio.run(main())
