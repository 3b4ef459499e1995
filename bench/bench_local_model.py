"""Time to first token and tokens/s of the local model: ``LocalLlamaAdapter.stream()`` against
llama-cpp-python called directly, on the same loaded ``Llama`` (same weights, threads, context,
prompt tokens, sampling and stop sequences).

Three ways to generate the same greedy continuation:

* ``adapter``: ``LocalLlamaAdapter.stream()`` (worker thread, queue hand-off, event building,
  text filtering).
* ``create_completion``: ``Llama.create_completion(stream=True)``, the usual direct API.
* ``generate``: a bare ``Llama.generate()`` token loop, the floor both of the others sit on.

"TTFT" is the time to the first *visible* text (the adapter drops a reply's leading blanks, so
all three are timed to the first token that is not blank); "tok/s" is the decode rate from there
to the end. Each run starts from an empty KV cache (``Llama.reset()``), so the first token
includes prompt evaluation. A second section times a grammar-constrained tool call (tool_choice required) the same
two ways. Figures are medians over ``--repeat`` runs; nothing is asserted.

Run: ``python bench/bench_local_model.py [--tokens N] [--repeat R] [--model PATH] [--threads T]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ra.llm.providers import local_llama  # noqa: E402
from ra.llm.providers.local.grammar import calls_grammar  # noqa: E402
from ra.llm.providers.local_llama import LocalLlamaAdapter  # noqa: E402
from ra.llm.types import Message, Request, StreamEventType, ToolChoice, ToolDefinition  # noqa: E402

PROMPT = "Count from 1 to 200: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"
SAMPLING = {"top_k": 40, "top_p": 0.95, "min_p": 0.05, "typical_p": 1.0, "repeat_penalty": 1.0}
TOOL = ToolDefinition(
    "get_weather",
    "Get the current weather for a city",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
    },
)


class Run:
    __slots__ = ("first", "last", "start", "tokens")

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.first = 0.0
        self.last = 0.0
        self.tokens = 0

    @property
    def ttft_ms(self) -> float:
        return (self.first - self.start) * 1000

    @property
    def total_ms(self) -> float:
        return (self.last - self.start) * 1000

    @property
    def tok_s(self) -> float:
        span = self.last - self.first
        return (self.tokens - 1) / span if span > 0 and self.tokens > 1 else 0.0


async def via_adapter(adapter: LocalLlamaAdapter, request: Request) -> Run:
    adapter.llama.reset()
    run = Run()
    async for event in adapter.stream(request):
        if event.type in (StreamEventType.TEXT_DELTA, StreamEventType.TOOL_CALL_START) and not run.first:
            run.first = time.perf_counter()
        elif event.type == StreamEventType.FINISH:
            run.last = time.perf_counter()
            assert event.usage is not None
            run.tokens = event.usage.output_tokens
    return run


def via_create_completion(llm: Any, prompt: list[int], n: int, stops: list[str], grammar: Any = None) -> Run:
    llm.reset()
    run = Run()
    for chunk in llm.create_completion(
        prompt, max_tokens=n, temperature=0, stream=True, stop=stops, grammar=grammar, **SAMPLING
    ):
        if not run.first and chunk["choices"][0]["text"].strip():
            run.first = time.perf_counter()
    run.last = time.perf_counter()
    run.tokens = llm.n_tokens - len(prompt) + 1  # the last sampled token is never evaluated
    return run


def via_generate(llm: Any, prompt: list[int], n: int, is_eog: Callable[[int], bool]) -> Run:
    llm.reset()
    run = Run()
    for token in llm.generate(prompt, temp=0, **SAMPLING):
        if is_eog(token):
            break
        run.tokens += 1
        if not run.first and llm.detokenize([token]).strip():
            run.first = time.perf_counter()
        if run.tokens >= n:
            break
    run.last = time.perf_counter()
    return run


def summary(name: str, runs: list[Run], base: tuple[float, float] | None = None) -> tuple[float, float]:
    ttft = statistics.median(r.ttft_ms for r in runs)
    tps = statistics.median(r.tok_s for r in runs)
    tokens = statistics.median(r.tokens for r in runs)
    extra = ""
    if base is not None:
        extra = f"   overhead: TTFT {ttft - base[0]:+7.1f} ms, decode {100 * (base[1] - tps) / base[1]:+5.1f}% slower"
    print(f"  {name:<18} TTFT {ttft:7.1f} ms   {tps:6.1f} tok/s   ({tokens:.0f} tokens){extra}")
    return ttft, tps


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--model", default=None, help="GGUF path (default: Gemma 3 270M from its package)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--n-ctx", type=int, default=4096)
    args = parser.parse_args()

    adapter = LocalLlamaAdapter(args.model, n_ctx=args.n_ctx, n_threads=args.threads)
    started = time.perf_counter()
    await adapter.load()
    llm = adapter.llama
    print(
        f"model {adapter.model_path} (format {adapter.active_format}), loaded in {time.perf_counter() - started:.2f} s"
    )
    print(f"n_ctx {adapter.n_ctx}, threads {adapter.n_threads}, extra buffers {local_llama.extra_buffers_enabled()}")

    request = Request("bench", [Message.user(PROMPT)], temperature=0, max_tokens=args.tokens)
    prompt = llm.tokenize((await adapter.render(request)).encode(), add_bos=True)
    stops = [f"\n{label}:" for label in ("User", "System", "Tool", "Assistant")]
    vocab = local_llama.import_llama_cpp().llama_model_get_vocab(llm.model)
    is_eog = local_llama.import_llama_cpp().llama_vocab_is_eog

    await via_adapter(adapter, request)  # warm-up: first-touch of weights, thread pools
    adapter_runs, completion_runs, generate_runs = [], [], []
    for _ in range(args.repeat):
        generate_runs.append(via_generate(llm, prompt, args.tokens, lambda t: is_eog(vocab, t)))
        completion_runs.append(via_create_completion(llm, prompt, args.tokens, stops))
        adapter_runs.append(await via_adapter(adapter, request))
    print(f"\ntext, {len(prompt)} prompt tokens, up to {args.tokens} new tokens, greedy, median of {args.repeat}:")
    floor = summary("generate()", generate_runs)
    summary("create_completion", completion_runs, floor)
    summary("adapter.stream()", adapter_runs, floor)

    tool_request = Request(
        "bench",
        [Message.user("What's the weather in Oslo?")],
        tools=[TOOL],
        tool_choice=ToolChoice.required(),
        temperature=0,
        max_tokens=args.tokens,
    )
    tool_prompt = llm.tokenize((await adapter.render(tool_request)).encode(), add_bos=True)
    grammar = local_llama.import_llama_cpp().LlamaGrammar.from_string(calls_grammar([TOOL], 1, []), verbose=False)
    tool_adapter, tool_direct = [], []
    for _ in range(args.repeat):
        tool_direct.append(via_create_completion(llm, tool_prompt, args.tokens, [], grammar))
        tool_adapter.append(await via_adapter(adapter, tool_request))
    print(f"\ngrammar-constrained tool call, {len(tool_prompt)} prompt tokens, median of {args.repeat}:")
    for name, runs in (("create_completion", tool_direct), ("adapter.stream()", tool_adapter)):
        total = statistics.median(r.total_ms for r in runs)
        tokens = statistics.median(r.tokens for r in runs)
        rate = 1000 * tokens / total
        print(f"  {name:<18} whole call {total:7.1f} ms for {tokens:.0f} tokens ({rate:.1f} tok/s overall)")
    await adapter.close()


if __name__ == "__main__":
    asyncio.run(main())
