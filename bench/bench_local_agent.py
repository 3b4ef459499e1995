"""ra's own cost per agent step on top of the local model.

Runs the real agent (``Session``, ra profile, real tools in a scratch directory) on
``LocalLlamaAdapter`` with Gemma 3 270M for ``--steps`` model steps, and splits each step's wall
time into:

* **llama.cpp**: time inside llama-cpp-python's ``Llama.eval`` (forward passes), ``Llama.sample``
  (sampling, grammar included) and sampler set-up, measured by wrapping those methods of the
  loaded model;
* **adapter**: the rest of ``LocalLlamaAdapter.stream()`` from the call to its FINISH event:
  prompt rendering and tokenisation, grammar lookup, the worker-thread hand-off, event building;
* **tools**: TOOL_CALL_START to TOOL_CALL_END (the command or file access itself);
* **agent**: what is left of the step (TURN_START to TURN_END): request building, history,
  events, the tool pipeline's bookkeeping, middleware.

"ra overhead" is adapter + agent: what ra adds to the model and the tools. Steps come from
several short inputs (a fresh session each, same working directory, so the prompt cache is
reused the way it is in a real session).

A second part reuses ``bench_local_model.py``: time to first token and tokens/s of the same model
through ra (``LocalLlamaAdapter.stream()`` and the ``Client`` on top of it) against llama-cpp-python
called directly.

Run: ``python bench/bench_local_agent.py [--steps 12] [--repeat 5] [--tokens 64] [--model PATH]``
Nothing is asserted; figures move by ±20% between runs on a shared 2-core VM.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import bench_local_model as direct  # noqa: E402

from ra.agent import EventKind, Session  # noqa: E402
from ra.cli.providers import SamplingMiddleware  # noqa: E402
from ra.env.local import LocalExecutionEnvironment  # noqa: E402
from ra.llm.client import Client  # noqa: E402
from ra.llm.providers.local_llama import LocalLlamaAdapter  # noqa: E402
from ra.llm.types import Message, Request  # noqa: E402
from ra.profiles.ra import create_ra_profile, ra_session_config  # noqa: E402

TASKS = [
    "List the files in this directory, then read notes.txt.",
    "Run `wc -l notes.txt` and tell me how many lines notes.txt has.",
    "Find which file mentions 'alpha' and show its first line.",
]
STEPS_PER_INPUT = 4


class LlamaClock:
    """Wraps the loaded model's ``eval``, ``sample`` and ``_init_sampler`` (instance attributes
    shadow the class's methods, and ``Llama.generate`` calls them through ``self``) and adds up the
    time spent in them. They run on the adapter's worker thread."""

    def __init__(self, llm: Any) -> None:
        self.seconds = 0.0
        self._lock = threading.Lock()
        for name in ("eval", "sample", "_init_sampler"):
            setattr(llm, name, self._timed(getattr(llm, name)))

    def _timed(self, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                with self._lock:
                    self.seconds += elapsed

        return timed

    def read(self) -> float:
        with self._lock:
            return self.seconds


@dataclass
class StepTimes:
    total: float = 0.0
    model_call: float = 0.0  # adapter.stream(): call to FINISH
    llama: float = 0.0  # inside llama-cpp-python
    tools: float = 0.0
    tool_calls: int = 0
    output_tokens: int = 0

    @property
    def adapter(self) -> float:
        return max(0.0, self.model_call - self.llama)

    @property
    def agent(self) -> float:
        return max(0.0, self.total - self.model_call - self.tools)


@dataclass
class Timing:
    """Collects per-step times from session events and from the timed adapter."""

    clock: LlamaClock
    steps: list[StepTimes] = field(default_factory=list)
    _step_start: float = 0.0
    _tool_start: dict[str, float] = field(default_factory=dict)
    _current: StepTimes | None = None

    def on_event(self, event: Any) -> None:
        now = time.perf_counter()
        kind = event.kind
        if kind is EventKind.TURN_START:
            self._current = StepTimes()
            self._step_start = now
        elif kind is EventKind.TOOL_CALL_START:
            self._tool_start[event.data["call_id"]] = now
        elif kind is EventKind.TOOL_CALL_END and self._current is not None:
            started = self._tool_start.pop(event.data["call_id"], now)
            self._current.tools += now - started
            self._current.tool_calls += 1
        elif kind is EventKind.USAGE and self._current is not None:
            self._current.output_tokens = event.data["usage"].output_tokens
        elif kind is EventKind.TURN_END and self._current is not None:
            self._current.total = now - self._step_start
            self.steps.append(self._current)
            self._current = None

    def model_call(self, seconds: float, llama_seconds: float) -> None:
        if self._current is not None:
            self._current.model_call += seconds
            self._current.llama += llama_seconds


class TimedAdapter:
    """The adapter as the client sees it, with each ``stream()`` timed from the call to its end."""

    def __init__(self, inner: LocalLlamaAdapter, timing: Timing) -> None:
        self.inner = inner
        self.timing = timing
        self.name = inner.name

    def supports_tool_choice(self, mode: str) -> bool:
        return self.inner.supports_tool_choice(mode)

    async def complete(self, request: Request) -> Any:
        started, llama = time.perf_counter(), self.timing.clock.read()
        try:
            return await self.inner.complete(request)
        finally:
            self.timing.model_call(time.perf_counter() - started, self.timing.clock.read() - llama)

    async def stream(self, request: Request) -> AsyncIterator[Any]:
        started, llama = time.perf_counter(), self.timing.clock.read()
        try:
            async for event in self.inner.stream(request):
                yield event
        finally:
            self.timing.model_call(time.perf_counter() - started, self.timing.clock.read() - llama)

    async def close(self) -> None:
        return None


def workspace() -> Path:
    root = Path(tempfile.mkdtemp(prefix="ra-bench-agent-"))
    (root / "notes.txt").write_text("".join(f"note {n}: alpha beta gamma\n" for n in range(1, 41)))
    (root / "main.py").write_text("print('hello')\n")
    return root


async def agent_steps(adapter: LocalLlamaAdapter, steps: int, max_tokens: int) -> Timing:
    timing = Timing(LlamaClock(adapter.llama))
    client = Client(providers={adapter.name: TimedAdapter(adapter, timing)})  # type: ignore[dict-item]
    client.use(SamplingMiddleware({"temperature": 0.0, "max_tokens": max_tokens}))
    profile = create_ra_profile("gemma-3-270m", provider=adapter.name)
    env = LocalExecutionEnvironment(workspace())
    outputs = {"read_file": 2000, "shell_command": 2000, "list_dir": 2000, "grep_files": 2000}
    task = 0
    while len(timing.steps) < steps:
        budget = min(STEPS_PER_INPUT, steps - len(timing.steps))
        config = ra_session_config(max_turns=budget, tool_output_limits=outputs, detect_questions=False)
        session = Session(profile, env, llm_client=client, config=config)
        session.add_listener(timing.on_event)
        await session.submit(TASKS[task % len(TASKS)])
        await session.close()
        task += 1
    return timing


def ms(values: list[float]) -> str:
    return f"{1000 * statistics.median(values):8.1f} ms (mean {1000 * statistics.fmean(values):7.1f})"


def report_steps(timing: Timing) -> None:
    steps = timing.steps
    calls = sum(s.tool_calls for s in steps)
    print(f"\nagent steps on the local model: {len(steps)} steps, {calls} tool calls; per step, median (mean):")
    print(f"  whole step          {ms([s.total for s in steps])}")
    print(f"  llama.cpp           {ms([s.llama for s in steps])}   eval + sample inside llama-cpp-python")
    print(f"  adapter             {ms([s.adapter for s in steps])}   rest of LocalLlamaAdapter.stream()")
    print(f"  tools               {ms([s.tools for s in steps])}   tool execution")
    print(f"  agent               {ms([s.agent for s in steps])}   Session loop, history, events, client")
    overhead = [s.adapter + s.agent for s in steps]
    share = sum(overhead) / sum(s.total for s in steps)
    print(f"  ra overhead         {ms(overhead)}   adapter + agent: {100 * share:.1f}% of step time")


async def stream_figures(adapter: LocalLlamaAdapter, repeat: int, tokens: int) -> None:
    """TTFT and tok/s: llama-cpp-python directly vs through ra, on the same loaded model."""
    llm = adapter.llama
    request = Request("bench", [Message.user(direct.PROMPT)], temperature=0, max_tokens=tokens)
    prompt = llm.tokenize((await adapter.render(request)).encode(), add_bos=True)
    stops = [f"\n{label}:" for label in ("User", "System", "Tool", "Assistant")]
    lc = direct.local_llama.import_llama_cpp()
    vocab = lc.llama_model_get_vocab(llm.model)

    client = Client(providers={adapter.name: adapter})

    class ThroughClient:
        """``via_adapter`` takes anything with ``llama`` and ``stream``: here, the Client."""

        llama = llm

        @staticmethod
        def stream(req: Request) -> AsyncIterator[Any]:
            return client.stream(req)

    await direct.via_adapter(adapter, request)  # warm-up
    generate, completion, through_adapter, through_client = [], [], [], []
    for _ in range(repeat):
        generate.append(direct.via_generate(llm, prompt, tokens, lambda t: lc.llama_vocab_is_eog(vocab, t)))
        completion.append(direct.via_create_completion(llm, prompt, tokens, stops))
        through_adapter.append(await direct.via_adapter(adapter, request))
        through_client.append(await direct.via_adapter(ThroughClient, request))  # type: ignore[arg-type]
    print(f"\ntext, {len(prompt)} prompt tokens, up to {tokens} new tokens, greedy, median of {repeat}:")
    floor = direct.summary("generate()", generate)
    direct.summary("create_completion", completion, floor)
    direct.summary("adapter.stream()", through_adapter, floor)
    direct.summary("Client.stream()", through_client, floor)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12, help="agent steps to time")
    parser.add_argument("--max-tokens", type=int, default=128, help="reply cap per step")
    parser.add_argument("--repeat", type=int, default=5, help="runs per TTFT/tok/s figure")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per TTFT/tok/s run")
    parser.add_argument("--model", default=None, help="GGUF path (default: Gemma 3 270M from its package)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--skip-stream", action="store_true", help="only the agent steps")
    args = parser.parse_args()

    adapter = LocalLlamaAdapter(args.model, n_threads=args.threads)
    started = time.perf_counter()
    await adapter.load()
    print(f"model {adapter.model_path}, loaded in {time.perf_counter() - started:.2f} s")
    print(f"n_ctx {adapter.n_ctx}, threads {adapter.n_threads}, format {adapter.active_format}")

    if not args.skip_stream:
        await stream_figures(adapter, args.repeat, args.tokens)
    timing = await agent_steps(adapter, args.steps, args.max_tokens)
    report_steps(timing)
    await adapter.close()


if __name__ == "__main__":
    asyncio.run(main())
