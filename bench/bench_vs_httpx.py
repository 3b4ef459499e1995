"""ra's agent loop against a raw httpx loop: 300 tool-calling steps on a local Chat Completions server.

The server runs in a separate process (``--serve``), so its CPU time never lands in the client's
figures: an asyncio HTTP/1.1 server with keep-alive that parses each request's JSON, as a real
server would, and then does constant work. The model name ``bench-N`` sets the session length:
while the request holds fewer than N-1 assistant messages the answer is one tool call (the first
tool it knows from the request: ``noop`` with ``{"i": step}``, or ``read_file`` with a moving
offset), after that a final text. ``"stream": true`` gets SSE in chunked encoding: a role chunk,
the call's head, its arguments, the finish reason, the usage chunk and ``[DONE]``.

Clients (each runs the same N steps; the tool does nothing heavy):

* ``raw-sync`` / ``raw-async``: an ``httpx.Client`` / ``httpx.AsyncClient`` POSTing the growing
  messages list with ``json=``, appending the assistant message and a tool result per step. This
  is the baseline.
* ``raw-stream``: the sync loop with ``stream: true``, reading SSE lines and joining the call.
* ``ra`` / ``ra-stream``: ``ra.agent.Session`` + ``OpenAICompatibleAdapter``, one custom tool that
  returns a constant string, non-streaming and streaming.
* ``ra-governed``: ``ra`` with a governed session - 10 hooks and 20 permission rules (none
  matching the tool), a ``can_use_tool`` callback, prices and a budget - to show that the
  controls do no per-step work that grows with the history.
* ``ra-tools`` / ``ra-tools-stream``: the ra profile (``create_ra_profile``: its system prompt,
  its five tools and ``ra_session_config``) with ``read_file`` on a small file; compared with
  ``raw-tools``, the sync raw loop sending the same system prompt and tool definitions and
  reading the same lines.

Figures: the first step's time (a fresh process's first call with ``--repeat 1``), the median
time per step over steps 1-50, 100-150 and the last 50 (a per-step cost
that grows with the history shows as a rising row), the wall time of all N steps and per step,
its ratio to the raw baseline (``raw-sync``; ``raw-tools`` for the ra-tools variants), and the
client process's CPU time for the run (``time.process_time``, setup included) with its ratio:
the CPU figure leaves out the server and most of the noise of a shared machine. The variants run
in ``--repeat`` interleaved rounds and each shows its round with the smallest total. Then the
cold ``import httpx`` and ``import ra`` times (``bench_import.time_once``: fresh interpreters,
best and median of ``--import-repeat``).

Part of every step grows with the history whatever the client does: the request carries the
whole conversation, and the server parses all of it (about 0.7 ms at 300 steps here).

``--profile VARIANT`` runs one variant (after a warm-up run) under cProfile and prints the top
functions by own and by cumulative time instead of the table. ``--src DIR`` benchmarks the ra
package found under DIR (say, an older tree from ``git archive``) instead of ./src.

Run: ``python bench/bench_vs_httpx.py [--steps 300] [--repeat 5] [--output-chars 100]
[--variants raw-sync,ra,...] [--profile ra] [--src DIR]``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import itertools
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "bench")]

from _nullenv import NullEnv  # noqa: E402

SYSTEM = "You are a coding agent. Use the tools to inspect and change the project."
TASK = "Call the noop tool until the server says you are done."
NOOP_SCHEMA = {"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]}
NOOP_TOOLS = [
    {"type": "function", "function": {"name": "noop", "description": "Does nothing.", "parameters": NOOP_SCHEMA}}
]
FINAL_TEXT = "All done: every step ran."
READ_LINES = 3


# --------------------------------------------------------------------------------------------------
# the server (separate process)
# --------------------------------------------------------------------------------------------------


def _tool_call(tools: list[Any], step: int) -> tuple[str, str]:
    """(name, arguments JSON) of the call the server makes at ``step``."""
    names = [t.get("function", {}).get("name") for t in tools[:8]]
    if "noop" in names:
        return "noop", json.dumps({"i": step})
    if "read_file" in names:
        return "read_file", json.dumps({"file_path": "notes.txt", "offset": step % 200 + 1, "limit": READ_LINES})
    return names[0], "{}"


def _answer(body: bytes) -> tuple[bytes, str]:
    """(payload, content type) for one request: constant work after the JSON parse."""
    request = json.loads(body)
    model = request.get("model", "bench-2")
    total = int(model.rsplit("-", 1)[-1])
    messages = request["messages"]
    # The step number comes from the request itself (as a real model's answer does), so a client
    # that loses or duplicates history gets a different answer; the parse above touched every
    # message anyway, this pass costs less than it.
    step = sum(1 for m in messages if m.get("role") == "assistant") + 1
    usage = {"prompt_tokens": len(body) // 4, "completion_tokens": 12, "total_tokens": len(body) // 4 + 12}
    call_id = f"call_{step:06d}"
    head = {"id": f"chatcmpl-{step}", "created": 1700000000, "model": model}
    final = step >= total or not request.get("tools")
    name, args = ("", "") if final else _tool_call(request["tools"], step)
    if not request.get("stream"):
        if final:
            message: dict[str, Any] = {"role": "assistant", "content": FINAL_TEXT}
        else:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}],
            }
        reply = {
            **head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop" if final else "tool_calls"}],
            "usage": usage,
        }
        return json.dumps(reply).encode(), "application/json"
    chunk = {**head, "object": "chat.completion.chunk"}

    def event(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [event({"role": "assistant", "content": None})]
    if final:
        events += [event({"content": "All done: "}), event({"content": "every step ran."}), event({}, "stop")]
    else:
        events += [
            event(
                {
                    "tool_calls": [
                        {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
                    ]
                }
            ),
            event({"tool_calls": [{"index": 0, "function": {"arguments": args}}]}),
            event({}, "tool_calls"),
        ]
    if (request.get("stream_options") or {}).get("include_usage"):
        events.append({**chunk, "choices": [], "usage": usage})
    pieces = [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
    # One chunk of the chunked encoding per SSE event, as a server that flushes each event sends.
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n", "text/event-stream"


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            length = 0
            close = False
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                key = name.strip().lower()
                if key == b"content-length":
                    length = int(value)
                elif key == b"connection" and value.strip().lower() == b"close":
                    close = True
            body = await reader.readexactly(length)
            payload, ctype = _answer(body)
            if ctype == "text/event-stream":
                headers = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            else:
                headers = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(
                    payload
                )
            writer.write(headers + payload)
            await writer.drain()
            if close:
                break
    finally:
        writer.close()


async def _serve() -> None:
    server = await asyncio.start_server(_handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    async with server:
        await server.serve_forever()


class ServerProcess:
    """The server in a child process; ``url`` is its ``/v1`` base. With ``base_url``, a server
    another process started (``--memory``'s children share their parent's)."""

    def __init__(self, base_url: str | None = None) -> None:
        self.proc: subprocess.Popen[str] | None = None
        if base_url is not None:
            self.base_url = base_url
            self.url = f"{base_url}/chat/completions"
            return
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True, env={**os.environ}
        )
        assert self.proc.stdout is not None
        port = int(self.proc.stdout.readline())
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.url = f"{self.base_url}/chat/completions"

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(5)


def memory_table(args: argparse.Namespace) -> None:
    """Peak RSS (``ru_maxrss``) of each variant: a fresh interpreter per run (imports included,
    as a user's process has them), ``--repeat`` runs each, the median shown with its ratio to
    ``raw-sync`` (``raw-tools`` for the tools variants)."""
    chosen = [v.strip() for v in args.variants.split(",") if v.strip()]
    server = ServerProcess()
    peaks: dict[str, list[int]] = {name: [] for name in chosen}
    try:
        for _ in range(args.repeat):
            for name in chosen:
                command = [sys.executable, __file__, "--one", name, "--base-url", server.base_url]
                command += ["--steps", str(args.steps), "--output-chars", str(args.output_chars)]
                if args.src:
                    command += ["--src", args.src]
                done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
                peaks[name].append(int(done.stdout.split()[-1]))
    finally:
        server.close()
    print(f"peak RSS at {args.steps} steps, fresh process per run, median of {args.repeat} (MiB)")
    medians = {name: statistics.median(found) / 1024 for name, found in peaks.items()}
    for name in chosen:
        base = medians.get("raw-tools" if "tools" in name else "raw-sync")
        ratio = f"{medians[name] / base:5.2f}x" if base else "    -"
        print(f"  {name:17} {medians[name]:7.1f} {ratio}")


# --------------------------------------------------------------------------------------------------
# raw httpx clients
# --------------------------------------------------------------------------------------------------


class Work:
    """What one variant sends and runs: system prompt, tool definitions, the tool itself."""

    def __init__(
        self,
        system: str,
        tools: list[dict[str, Any]],
        run_tool: Callable[[str, dict[str, Any]], str],
        extra: dict[str, Any],
    ) -> None:
        self.system = system
        self.tools = tools
        self.run_tool = run_tool
        self.extra = extra


def _start(work: Work) -> list[dict[str, Any]]:
    return [{"role": "system", "content": work.system}, {"role": "user", "content": TASK}]


def _tool_messages(work: Work, message: dict[str, Any], messages: list[dict[str, Any]]) -> bool:
    messages.append(message)
    calls = message.get("tool_calls")
    if not calls:
        return False
    for call in calls:
        fn = call["function"]
        output = work.run_tool(fn["name"], json.loads(fn["arguments"] or "{}"))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    return True


def raw_sync(url: str, steps: int, work: Work) -> list[float]:
    import httpx

    marks: list[float] = []
    with httpx.Client(timeout=30) as client:
        messages = _start(work)
        while True:
            marks.append(time.perf_counter())
            body = {
                "model": f"bench-{steps}",
                "messages": messages,
                "tools": work.tools,
                "tool_choice": "auto",
                **work.extra,
            }
            response = client.post(url, json=body)
            response.raise_for_status()
            if not _tool_messages(work, response.json()["choices"][0]["message"], messages):
                break
    marks.append(time.perf_counter())
    return marks


def raw_async(url: str, steps: int, work: Work) -> list[float]:
    import httpx

    async def go() -> list[float]:
        marks: list[float] = []
        async with httpx.AsyncClient(timeout=30) as client:
            messages = _start(work)
            while True:
                marks.append(time.perf_counter())
                body = {
                    "model": f"bench-{steps}",
                    "messages": messages,
                    "tools": work.tools,
                    "tool_choice": "auto",
                    **work.extra,
                }
                response = await client.post(url, json=body)
                response.raise_for_status()
                if not _tool_messages(work, response.json()["choices"][0]["message"], messages):
                    break
        marks.append(time.perf_counter())
        return marks

    return asyncio.run(go())


def raw_stream(url: str, steps: int, work: Work) -> list[float]:
    import httpx

    marks: list[float] = []
    with httpx.Client(timeout=30) as client:
        messages = _start(work)
        while True:
            marks.append(time.perf_counter())
            body = {
                "model": f"bench-{steps}",
                "messages": messages,
                "tools": work.tools,
                "tool_choice": "auto",
                "stream": True,
                "stream_options": {"include_usage": True},
                **work.extra,
            }
            text: list[str] = []
            calls: dict[int, dict[str, Any]] = {}
            with client.stream("POST", url, json=body) as response:
                response.raise_for_status()
                for line in response.iter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[6:])
                    for choice in chunk["choices"]:
                        delta = choice["delta"]
                        if delta.get("content"):
                            text.append(delta["content"])
                        for tc in delta.get("tool_calls") or ():
                            call = calls.setdefault(
                                tc["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                            )
                            call["id"] = tc.get("id") or call["id"]
                            fn = tc.get("function") or {}
                            call["function"]["name"] += fn.get("name") or ""
                            call["function"]["arguments"] += fn.get("arguments") or ""
            message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
            if calls:
                message["tool_calls"] = list(calls.values())
            if not _tool_messages(work, message, messages):
                break
    marks.append(time.perf_counter())
    return marks


# --------------------------------------------------------------------------------------------------
# ra clients
# --------------------------------------------------------------------------------------------------


def _noop_output(chars: int) -> str:
    return ("ok " * (chars // 3 + 1))[:chars] if chars > 0 else ""


def _governance(config: Any, model: str) -> dict[str, Any]:
    """The ``ra-governed`` variant's policy: 10 hooks and 20 rules (none matching the bench's
    tool), a can_use_tool callback, a budget and prices - what a governed session pays per step."""
    from ra.agent.hooks import HookEvent, Hooks
    from ra.agent.permissions import PermissionAllow
    from ra.llm.pricing import ModelPrice

    hooks = Hooks()
    for i in range(5):
        hooks.on(HookEvent.PRE_TOOL_USE, lambda e: None, matcher=f"deploy_{i}|publish_{i}")
        hooks.on(HookEvent.POST_TOOL_USE, lambda e: None, matcher=f"deploy_{i}")
    config.allowed_tools = tuple(f"shell(make target{i}:*)" for i in range(7))
    config.disallowed_tools = tuple(f"edit_file(secrets/{i}/**)" for i in range(7))
    config.ask_tools = tuple(f"web_fetch(domain:site{i}.example)" for i in range(6))
    config.permission_mode = "default"
    config.max_budget_usd = 1000.0
    config.prices = {model: ModelPrice(1.0, 2.0)}
    return {"hooks": hooks, "can_use_tool": lambda name, args, ctx: PermissionAllow()}


def _ra_noop_session(base_url: str, steps: int, stream: bool, output: str, governed: bool = False) -> Any:
    from ra.agent import GenericProfile, Session, SessionConfig
    from ra.llm.client import Client
    from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
    from ra.tools.registry import ToolRegistry

    registry = ToolRegistry()
    registry.add("noop", "Does nothing.", NOOP_SCHEMA, lambda args, ctx: output)
    adapter = OpenAICompatibleAdapter(base_url=base_url)
    profile = GenericProfile(
        "bench",
        f"bench-{steps}",
        registry,
        system_prompt=SYSTEM,
        include_environment=False,
        supports_streaming=stream,
        context_window_size=10**9,
    )
    config = SessionConfig(max_tool_rounds_per_input=steps + 10)
    extra = _governance(config, profile.model) if governed else {}
    return Session(profile, NullEnv(), Client(providers={"bench": adapter}), config, **extra)  # type: ignore[arg-type]


class ToolsSetup:
    """The ra profile in a temporary working directory with a 400-line notes.txt."""

    def __init__(self, base_url: str, steps: int) -> None:
        from ra.env import LocalExecutionEnvironment
        from ra.profiles.ra import create_ra_profile

        self.dir = tempfile.TemporaryDirectory(prefix="ra-bench-")
        self.lines = [f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(1, 401)]
        Path(self.dir.name, "notes.txt").write_text("\n".join(self.lines) + "\n")
        self.base_url = base_url
        self.steps = steps
        self.env = LocalExecutionEnvironment(self.dir.name)
        self.profile = create_ra_profile(f"bench-{steps}", context_window_size=10**9)
        docs = asyncio.run(self.profile.discover_project_docs(self.env))
        self.system = asyncio.run(self.profile.build_system_prompt(self.env, docs))
        self.tool_defs = [
            {"type": "function", "function": {"name": d.name, "description": d.description, "parameters": d.parameters}}
            for d in self.profile.tools()
        ]

    def session(self, stream: bool) -> Any:
        from ra.agent import Session
        from ra.llm.client import Client
        from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
        from ra.profiles.ra import ra_session_config

        self.profile.supports_streaming = stream
        adapter = OpenAICompatibleAdapter(base_url=self.base_url)
        config = ra_session_config(max_tool_rounds_per_input=self.steps + 10)
        return Session(self.profile, self.env, Client(providers={"openai-compatible": adapter}), config)

    def raw_work(self) -> Work:
        lines = self.lines

        def read(name: str, args: dict[str, Any]) -> str:
            start = args.get("offset", 1)
            chunk = lines[start - 1 : start - 1 + args.get("limit", 2000)]
            return "\n".join(f"{start + i:6d} | {text}" for i, text in enumerate(chunk))

        return Work(self.system, self.tool_defs, read, {"parallel_tool_calls": False})


def ra_run(make_session: Callable[[], Any], steps: int) -> list[float]:
    from ra.agent.events import EventKind

    async def go() -> list[float]:
        session = make_session()
        marks: list[float] = []
        turn_start = EventKind.TURN_START
        session.add_listener(lambda e: marks.append(time.perf_counter()) if e.kind is turn_start else None)
        result = await session.submit(TASK)
        marks.append(time.perf_counter())
        if result.steps != steps or result.error is not None:
            raise RuntimeError(f"ra run ended early: {result}")
        await session.close()
        return marks

    return asyncio.run(go())


# --------------------------------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------------------------------


def _figures(marks: list[float]) -> dict[str, float]:
    gaps = [b - a for a, b in itertools.pairwise(marks)]

    def window(lo: int, hi: int) -> float:
        part = gaps[lo - 1 : hi]
        return statistics.median(part) * 1000 if part else float("nan")

    n = len(gaps)
    return {
        "first": gaps[0] * 1000,
        "early": window(1, min(50, n)),
        "middle": window(min(100, n), min(150, n)),
        "late": window(max(1, n - 49), n),
        "total": (marks[-1] - marks[0]) * 1000,
        "steps": n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--output-chars", type=int, default=100, help="size of the noop tool's constant output")
    parser.add_argument(
        "--variants",
        default="raw-sync,raw-async,raw-stream,ra,ra-stream,raw-tools,ra-tools,ra-tools-stream",
        help="comma-separated subset to run",
    )
    parser.add_argument("--profile", metavar="VARIANT", help="cProfile one variant and print the hot spots")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--import-repeat", type=int, default=7)
    parser.add_argument(
        "--src", metavar="DIR", help="benchmark the ra package under DIR instead of ./src (e.g. an older tree)"
    )
    parser.add_argument(
        "--memory", action="store_true", help="peak RSS of each variant, each run once in a fresh process"
    )
    parser.add_argument("--one", metavar="VARIANT", help=argparse.SUPPRESS)  # --memory's child
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return
    if args.memory:
        memory_table(args)
        return
    if args.src:
        sys.path.insert(0, str(Path(args.src).resolve()))

    steps = args.steps
    output = _noop_output(args.output_chars)
    noop_work = Work(SYSTEM, NOOP_TOOLS, lambda name, a: output, {})
    server = ServerProcess(args.base_url) if args.one else ServerProcess()
    tools: ToolsSetup | None = None
    try:

        def get_tools() -> ToolsSetup:
            nonlocal tools
            if tools is None:
                tools = ToolsSetup(server.base_url, steps)
            return tools

        variants: dict[str, Callable[[], list[float]]] = {
            "raw-sync": lambda: raw_sync(server.url, steps, noop_work),
            "raw-async": lambda: raw_async(server.url, steps, noop_work),
            "raw-stream": lambda: raw_stream(server.url, steps, noop_work),
            "ra": lambda: ra_run(lambda: _ra_noop_session(server.base_url, steps, False, output), steps),
            "ra-stream": lambda: ra_run(lambda: _ra_noop_session(server.base_url, steps, True, output), steps),
            "ra-governed": lambda: ra_run(
                lambda: _ra_noop_session(server.base_url, steps, False, output, governed=True), steps
            ),
            "raw-tools": lambda: raw_sync(server.url, steps, get_tools().raw_work()),
            "ra-tools": lambda: ra_run(lambda: get_tools().session(False), steps),
            "ra-tools-stream": lambda: ra_run(lambda: get_tools().session(True), steps),
        }
        if args.one:  # --memory's child: one run, then this process's peak RSS in KiB
            if "tools" in args.one:
                get_tools()
            variants[args.one]()
            print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)
            return
        chosen = [args.profile] if args.profile else [v.strip() for v in args.variants.split(",") if v.strip()]
        unknown = [v for v in chosen if v not in variants]
        if unknown:
            parser.error(f"unknown variants: {', '.join(unknown)} (known: {', '.join(variants)})")
        if any("tools" in name for name in chosen):
            get_tools()  # set up (temp dir, system prompt) outside the measured runs and their loops
        if args.profile:
            run = variants[args.profile]
            run()  # warm caches and imports
            profiler = cProfile.Profile()
            profiler.enable()
            run()
            profiler.disable()
            for key in ("tottime", "cumulative"):
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(args.top)
                print(out.getvalue())
            return

        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {steps} steps, noop output {args.output_chars} "
            f"chars; best total of {args.repeat} interleaved runs; per-step figures are medians (ms)\n"
        )
        # Rounds, each running every variant once, so that drift in the machine's load (2 shared
        # cores) hits all variants alike; the best round of each variant is shown.
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in chosen}
        for _ in range(args.repeat):
            for name in chosen:
                gc.collect()
                cpu = time.process_time()
                marks = variants[name]()
                figures = _figures(marks)
                figures["cpu"] = (time.process_time() - cpu) * 1000
                runs[name].append(figures)
        print(
            f"{'variant':17} {'first':>7} {'1-50':>7} {'100-150':>8} {'last 50':>8} {'total ms':>9} {'ms/step':>8}"
            f" {'vs raw':>7} {'CPU ms':>8} {'CPU vs raw':>10}"
        )
        best = {name: min(found, key=lambda r: r["total"]) for name, found in runs.items()}
        for name in chosen:
            row = best[name]
            base = best.get("raw-tools" if "tools" in name else "raw-sync")
            ratio = f"{row['total'] / base['total']:6.2f}x" if base is not None else "      -"
            cpu_ratio = f"{row['cpu'] / base['cpu']:6.2f}x" if base is not None else "      -"
            print(
                f"{name:17} {row['first']:7.2f} {row['early']:7.2f} {row['middle']:8.2f} {row['late']:8.2f} "
                f"{row['total']:9.1f} {row['total'] / row['steps']:8.2f} {ratio:>7} {row['cpu']:8.1f} {cpu_ratio:>10}"
            )
    finally:
        server.close()
        if tools is not None:
            tools.dir.cleanup()

    from bench_import import time_once

    print(f"\ncold import, fresh interpreters, best of {args.import_repeat} (ms):")
    for stmt in ("import httpx", "import ra"):
        runs = sorted(time_once("", stmt) * 1000 for _ in range(args.import_repeat))
        print(f"  {stmt:14} best {runs[0]:6.2f}   median {runs[len(runs) // 2]:6.2f}")


if __name__ == "__main__":
    main()
