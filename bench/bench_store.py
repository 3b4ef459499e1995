"""Session records: what persistence costs.

Prints three figures, with the issue's targets:

* appending one step's entries to a record of 10 entries and of 10,000 (it must not depend on
  the record's size: append mode, no rewrite);
* resuming a 10,000-turn session: ``Session.open(resume=...)`` - read the file, decode, walk the
  path, rebuild turns, history and totals (target < 1 s);
* the time per step of a 300-step session with a ``FileSessionStore`` and without one (target:
  persistence adds < 5 %; the line says whether it is met), twice: against the local Chat
  Completions server of ``bench_vs_httpx.py`` (a real HTTP round trip per step, as in use), and with the in-process
  scripted model, where a step is nothing but the loop's own ~75 µs, so the recorder's fixed
  cost per step (serialising the step, two locked appends) shows undiluted.

Both run without and with a store in turns (``--repeat`` of each, interleaved, so drift on a
shared machine hits both alike) and report medians.

On a shared two-core VM a 300-step run's median step moves by up to +-25 % from one run to the
next, five times the effect to measure. ``--parts instructions`` therefore also counts, under
valgrind (``cachegrind``, no cache simulation; hash seed fixed), the instructions the client
process executes in a session of 100 and of 300 steps over HTTP, without and with a store: the
difference of the two lengths divided by 200 is a step's count with the session's start and end
taken out, the same to a few parts in a million from run to run. With ``strace`` it also counts
the system calls per step the same way (valgrind counts user space only: the store's calls are
an ``fstat`` and a ``write`` per entry).

    python bench/bench_store.py [--turns 10000] [--steps 300] [--repeat 5]
        [--parts append,resume,scripted,http,instructions]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _nullenv import NullEnv

from ra.agent import GenericProfile, Session, SessionConfig
from ra.agent.events import EventKind
from ra.agent.history import AssistantTurn, ToolResultsTurn, UserTurn
from ra.agent.store import FileSessionStore
from ra.agent.store.format import header, turn_to_entry
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.retrying import RetryPolicy
from ra.llm.testing import ScriptedAdapter, Step, reply
from ra.llm.types import ToolCall, ToolResult, Usage
from ra.tools.registry import ToolRegistry

USAGE = Usage(input_tokens=100, output_tokens=10, total_tokens=110)
#: The issue's target: persistence adds less than this to a step over HTTP at 300 steps.
TARGET_PERCENT = 5.0


def step_turns(i: int) -> list:
    call = ToolCall(f"c{i}", "read_file", {"path": f"src/module_{i}.py"})
    return [
        AssistantTurn("Reading the next file.", [call], usage=USAGE),
        ToolResultsTurn([ToolResult(f"c{i}", "x = 1\n" * 40)], names=["read_file"]),
    ]


def record_entries(turns: int) -> list[dict]:
    """A record of ``turns`` turns: a user message, then tool-calling steps."""
    head = header(
        "bench",
        cwd="/bench/project",
        model="bench",
        provider="scripted",
        profile="scripted",
        ra_version="bench",
        timestamp=time.time(),
    )
    entries, parent, i = [head], None, 0
    all_turns = [UserTurn("Fix every module.")]
    while len(all_turns) < turns:
        all_turns.extend(step_turns(i))
        i += 1
    for n, turn in enumerate(all_turns[:turns]):
        extra = (
            {"model": "bench", "provider": "scripted", "cost_usd": 0.0, "total_cost_usd": 0.0}
            if isinstance(turn, AssistantTurn)
            else {}
        )
        entry = turn_to_entry(turn, f"{n:08x}", parent, **extra)
        entries.append(entry)
        parent = entry["id"]
    return entries


async def bench_append(root: Path, repeat: int) -> dict[int, float]:
    """Median µs to append one step (assistant + tool results) to a record of N entries."""
    out = {}
    for size in (10, 10_000):
        store = FileSessionStore(root / f"append-{size}")
        entries = record_entries(size)
        await store.append("bench", entries)
        batch = [turn_to_entry(t, f"f{n:07x}", None) for n, t in enumerate(step_turns(0))]
        times = []
        for _ in range(200 * repeat):
            t0 = time.perf_counter()
            await store.append("bench", batch)
            times.append(time.perf_counter() - t0)
        out[size] = statistics.median(times) * 1e6
    return out


def profile_and_client(steps: int) -> tuple[GenericProfile, Client]:
    registry = ToolRegistry()
    registry.add(
        "noop", "Does nothing.", {"type": "object", "properties": {"i": {"type": "integer"}}}, lambda args, ctx: "ok"
    )
    count = 0

    def answer(request):  # type: ignore[no-untyped-def]
        nonlocal count
        count += 1
        if count % steps == 0:
            return reply("done", usage=USAGE)
        return Step(tool_calls=[ToolCall(f"c{count}", "noop", {"i": count})], usage=USAGE)

    model = ScriptedAdapter(default=answer)
    model.requests = _Discard()  # type: ignore[assignment]
    profile = GenericProfile("scripted", "bench", registry, context_window_size=10**9, include_environment=False)
    return profile, Client(providers={"scripted": model})


def config() -> SessionConfig:
    return SessionConfig(
        retry_policy=RetryPolicy(max_retries=0), prices={"bench": ModelPrice.free()}, max_tool_rounds_per_input=0
    )


class _Discard(list):
    def append(self, item) -> None:  # type: ignore[override]
        return None


async def bench_resume(root: Path, turns: int, repeat: int) -> tuple[float, int]:
    store = FileSessionStore(root / "resume")
    await store.append("bench", record_entries(turns))
    profile, client = profile_and_client(10)
    best, size = float("inf"), 0
    for _ in range(repeat):
        fresh = FileSessionStore(store.root)  # no cached path: find the file as a new process would
        gc.collect()
        t0 = time.perf_counter()
        session = await Session.open(profile, NullEnv(), client, config(), store=fresh, resume="bench")  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - t0)
        size = len(session.history)
        await session.close()  # lets the record go (one live session per record)
    return best, size


async def one_run(steps: int, store: FileSessionStore | None) -> float:
    profile, client = profile_and_client(steps)
    session = Session(profile, NullEnv(), client, config(), store=store)  # type: ignore[arg-type]
    gc.collect()
    t0 = time.perf_counter()
    result = await session.submit("go")
    elapsed = time.perf_counter() - t0
    assert result.text == "done", result
    await session.close()
    return elapsed / steps


async def bench_overhead(root: Path, steps: int, repeat: int) -> tuple[float, float]:
    """Median seconds per step without and with a store, runs interleaved."""
    bare, stored = [], []
    for n in range(repeat):  # alternate, so drift on a shared machine hits both
        bare.append(await one_run(steps, None))
        stored.append(await one_run(steps, FileSessionStore(root / f"overhead-{n}")))
    return statistics.median(bare), statistics.median(stored)


def http_overhead(root: Path, steps: int, repeat: int) -> tuple[float, float, float, float, float, float, list[float]]:
    """Over HTTP, without and with a store (runs interleaved: bare, stored, bare, ...): the median
    seconds per step of a whole run (session start included), the median CPU seconds per run, and
    the median of every single step's time pooled over the runs (TURN_START to the next: what a
    step costs, without what happens once per session, and robust to a slow moment of the
    machine, which spoils a whole run's mean)."""
    import bench_vs_httpx as vs

    from ra.llm.providers.openai_chat import OpenAICompatibleAdapter

    server = vs.ServerProcess()
    try:

        def make(store: FileSessionStore | None) -> Session:
            registry = ToolRegistry()
            registry.add("noop", "Does nothing.", vs.NOOP_SCHEMA, lambda args, ctx: "ok")
            profile = GenericProfile(
                "bench",
                f"bench-{steps}",
                registry,
                system_prompt=vs.SYSTEM,
                include_environment=False,
                context_window_size=10**9,
            )
            client = Client(providers={"bench": OpenAICompatibleAdapter(base_url=server.base_url)})
            config = SessionConfig(max_tool_rounds_per_input=steps + 10)
            return Session(profile, NullEnv(), client, config, store=store)  # type: ignore[arg-type]

        async def run(store: FileSessionStore | None, into: list[float]) -> tuple[float, float]:
            session = make(store)
            marks: list[float] = []
            start = EventKind.TURN_START
            session.add_listener(lambda e: marks.append(time.perf_counter()) if e.kind is start else None)
            cpu, t0 = time.process_time(), time.perf_counter()
            result = await session.submit(vs.TASK)
            end = time.perf_counter()
            wall, cpu = end - t0, time.process_time() - cpu
            assert result.steps == steps and result.error is None, result
            await session.close()
            marks.append(end)
            into.extend(b - a for a, b in itertools.pairwise(marks))
            return wall / steps, cpu

        bare, stored, bare_cpu, stored_cpu = [], [], [], []
        bare_steps: list[float] = []
        stored_steps: list[float] = []
        med = statistics.median
        pairs: list[float] = []
        for n in range(repeat):
            start = len(bare_steps), len(stored_steps)
            # Which of the pair goes first alternates too: the second run of a pair meets a
            # machine the first has warmed (or heated).
            order = (None, FileSessionStore(root / f"http-{n}"))
            for store in order if n % 2 == 0 else order[::-1]:
                wall, cpu = asyncio.run(run(store, stored_steps if store is not None else bare_steps))
                (stored if store is not None else bare).append(wall)
                (stored_cpu if store is not None else bare_cpu).append(cpu)
            pairs.append(med(stored_steps[start[1] :]) / med(bare_steps[start[0] :]))
        return (
            med(bare),
            med(stored),
            med(bare_cpu),
            med(stored_cpu),
            med(bare_steps),
            med(stored_steps),
            pairs,
        )
    finally:
        server.close()


def http_session(base_url: str, steps: int, stored: bool) -> None:
    """One session of ``steps`` steps against the server at ``base_url``, with a FileSessionStore
    in a fresh directory or without one (a child process of ``--parts instructions``)."""
    import bench_vs_httpx as vs

    from ra.llm.providers.openai_chat import OpenAICompatibleAdapter

    registry = ToolRegistry()
    registry.add("noop", "Does nothing.", vs.NOOP_SCHEMA, lambda args, ctx: "ok")
    model = f"bench-{steps}"
    profile = GenericProfile(
        "bench", model, registry, system_prompt=vs.SYSTEM, include_environment=False, context_window_size=10**9
    )
    client = Client(providers={"bench": OpenAICompatibleAdapter(base_url=base_url)})
    config = SessionConfig(max_tool_rounds_per_input=steps + 10)

    async def run() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            store = FileSessionStore(Path(tmp)) if stored else None
            session = Session(profile, NullEnv(), client, config, store=store)  # type: ignore[arg-type]
            result = await session.submit(vs.TASK)
            await session.close()
            assert result.steps == steps and result.error is None, result

    asyncio.run(run())


def _count(tool: list[str], pattern: str, base_url: str, steps: int, stored: bool) -> int:
    """What ``tool`` (valgrind or strace, writing its report to stderr) counts for one session."""
    command = [*tool, sys.executable, __file__, "--session", base_url, str(steps), "store" if stored else "bare"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800, check=True)
    found = re.findall(pattern, done.stderr, re.M)
    if not found:
        raise SystemExit(f"no count in the output of {tool[0]}:\n{done.stderr[-2000:]}")
    return int(found[-1].replace(",", ""))


def per_step_counts(short: int = 100, long: int = 300) -> dict[str, tuple[float, float]]:
    """Per tool: (count per step without a store, with one), from sessions of ``short`` and
    ``long`` steps: (count(long) - count(short)) / (long - short)."""
    import bench_vs_httpx as vs

    tools = {}
    if shutil.which("valgrind"):
        cachegrind = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
        tools["instructions"] = (cachegrind, r"I\s+refs:\s+([\d,]+)")
    if shutil.which("strace"):
        tools["system calls"] = (["strace", "-f", "-c", "-o", "/dev/stderr"], r"^100\.00\s+\S+\s+\d+\s+(\d+)")
    server = vs.ServerProcess()
    try:
        out = {}
        for name, (tool, pattern) in tools.items():
            figures = []
            for stored in (False, True):
                counts = [_count(tool, pattern, server.base_url, steps, stored) for steps in (short, long)]
                figures.append((counts[1] - counts[0]) / (long - short))
            out[name] = (figures[0], figures[1])
        return out
    finally:
        server.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--parts", default="append,resume,scripted,http,instructions", help="which figures to print")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "append" in parts:
            appends = await bench_append(root, args.repeat)
            print(
                f"append one step: {appends[10]:.0f} µs at 10 entries, {appends[10_000]:.0f} µs at 10,000 entries "
                f"(ratio {appends[10_000] / appends[10]:.2f})"
            )
        if "resume" in parts:
            seconds, size = await bench_resume(root, args.turns, args.repeat)
            print(
                f"resume a {args.turns:,}-turn session: {seconds * 1000:.0f} ms (best of {args.repeat}; "
                f"{size:,} turns rebuilt; target < 1,000 ms)"
            )
        if "scripted" in parts:
            bare, stored = await bench_overhead(root, args.steps, args.repeat)
            print(
                f"scripted model, per step at {args.steps} steps: {bare * 1e6:.0f} µs without a store, "
                f"{stored * 1e6:.0f} µs with one: the recorder costs {(stored - bare) * 1e6:+.0f} µs a step "
                f"({(stored / bare - 1) * 100:+.0f} % of a loop that does nothing else; median of {args.repeat})"
            )
        if "http" in parts:
            figures = await asyncio.to_thread(http_overhead, root, args.steps, args.repeat)
            bare, stored, bare_cpu, stored_cpu, bare_step, stored_step, pairs = figures
            wall, cpu = (stored / bare - 1) * 100, (stored_cpu / bare_cpu - 1) * 100
            step = (stored_step / bare_step - 1) * 100
            paired = sorted((ratio - 1) * 100 for ratio in pairs)
            q1, mid, q3 = statistics.quantiles(paired, n=4) if len(paired) > 1 else (paired[0],) * 3
            verdict = "met" if mid < TARGET_PERCENT else "NOT met"
            print(
                f"HTTP server, {args.steps} steps, {args.repeat} interleaved runs each:\n"
                f"  a step, run against run (the median step of a run with a store over that of the run "
                f"paired with it): median {mid:+.1f} % (quartiles {q1:+.1f} % .. {q3:+.1f} %; "
                f"target < {TARGET_PERCENT:g} %: {verdict})\n"
                f"  a step (median of every step): {bare_step * 1e3:.3f} ms without a store, "
                f"{stored_step * 1e3:.3f} ms with one: {step:+.1f} % ({(stored_step - bare_step) * 1e6:+.0f} µs)\n"
                f"  a run's mean per step (session start included; median of runs): {bare * 1e3:.3f} ms without, "
                f"{stored * 1e3:.3f} ms with: {wall:+.1f} % ({(stored - bare) * 1e6:+.0f} µs); client CPU {cpu:+.1f} %"
            )
        if "instructions" in parts:
            counts = await asyncio.to_thread(per_step_counts)
            if not counts:
                print("instructions: neither valgrind nor strace is installed")
            for name, (bare_count, stored_count) in counts.items():
                extra = (stored_count / bare_count - 1) * 100
                verdict = "met" if extra < TARGET_PERCENT else "NOT met"
                print(
                    f"{name} per step over HTTP (the client process; sessions of 300 less 100 steps): "
                    f"{bare_count:,.0f} without a store, {stored_count:,.0f} with one: {extra:+.1f} % "
                    f"({stored_count - bare_count:+,.0f})"
                    + (f"; target < {TARGET_PERCENT:g} %: {verdict}" if name == "instructions" else "")
                )


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--session":  # a child of --parts instructions
        http_session(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "store")
    else:
        asyncio.run(main())
