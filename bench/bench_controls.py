"""What the decision seam costs per tool call: permissions, hooks and rules on the hot path.

Runs N tool calls through the real ``ToolPipeline`` of a real ``Session`` (scripted model, a
trivial in-memory tool) under four policies, and prints the time per tool call and the added
cost over a session with nothing configured:

* ``bypass``   - permission mode bypass, no hooks, no rules: the unattended default of ``ra``;
* ``default``  - permission mode default and no callback: every call is "asked" and, with nobody to
  ask, denied (the denial path: a record, an event and an error result per call);
* ``governed`` - default mode, 10 hooks (PreToolUse and PostToolUse, none matching the tool),
  20 allow/deny/ask rules (none matching), and a ``can_use_tool`` callback that allows;
* ``matching`` - as governed, but one PreToolUse hook and one allow rule match every call.

The issue's target: checks add < 50 us per tool call when nothing matches.

    python bench/bench_controls.py [--calls 3000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time

from _nullenv import NullEnv

from ra.agent import GenericProfile, Session, SessionConfig
from ra.agent.hooks import HookEvent, Hooks
from ra.agent.permissions import PermissionAllow
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.retrying import RetryPolicy
from ra.llm.testing import ScriptedAdapter, Step, reply
from ra.llm.types import ToolCall, Usage
from ra.tools.registry import ToolEffect, ToolRegistry

CALLS_PER_STEP = 10


def build(policy: str, calls: int) -> Session:
    registry = ToolRegistry()
    registry.add(
        "run_tests",
        "Runs the tests.",
        {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        lambda args, ctx: "ok",
        effect=ToolEffect.EXECUTE,
    )
    usage = Usage(input_tokens=100, output_tokens=10)
    steps = calls // CALLS_PER_STEP
    count = 0

    def answer(request):  # type: ignore[no-untyped-def]
        nonlocal count
        count += 1
        if count > steps:
            return reply("done", usage=usage)
        batch = [
            ToolCall(f"c{count}-{i}", "run_tests", {"command": "pytest -q tests/unit"}) for i in range(CALLS_PER_STEP)
        ]
        return Step(tool_calls=batch, usage=usage)

    model = ScriptedAdapter([], default=answer)
    profile = GenericProfile("bench", "bench-model", registry, system_prompt="bench", context_window_size=10**9)
    config = SessionConfig(
        retry_policy=RetryPolicy(max_retries=0),
        max_tool_rounds_per_input=0,
        enable_loop_detection=False,
        prices={"bench-model": ModelPrice.free()},
        permission_mode="bypass" if policy == "bypass" else "default",
    )
    hooks = Hooks()
    can_use_tool = None
    if policy in ("governed", "matching"):
        for i in range(5):
            hooks.on(HookEvent.PRE_TOOL_USE, lambda e: None, matcher=f"deploy_{i}|publish_{i}")
            hooks.on(HookEvent.POST_TOOL_USE, lambda e: None, matcher=f"deploy_{i}")
        config.allowed_tools = tuple(f"shell(make target{i}:*)" for i in range(7))
        config.disallowed_tools = tuple(f"edit_file(secrets/{i}/**)" for i in range(7))
        config.ask_tools = tuple(f"web_fetch(domain:site{i}.example)" for i in range(6))
        can_use_tool = lambda name, args, ctx: PermissionAllow()  # noqa: E731
    if policy == "matching":
        hooks.on(HookEvent.PRE_TOOL_USE, lambda e: None, matcher="run_tests")
        config.allowed_tools = (*config.allowed_tools, "run_tests(pytest:*)")
    return Session(
        profile, NullEnv(), Client(providers={"bench": model}), config, hooks=hooks, can_use_tool=can_use_tool
    )


async def run_once(policy: str, calls: int) -> float:
    session = build(policy, calls)
    started = time.perf_counter()
    result = await session.submit("go")
    elapsed = time.perf_counter() - started
    assert result.tool_calls == calls, (policy, result.tool_calls)
    await session.close()
    return elapsed / calls * 1e6


async def main() -> None:
    # The governed policies' rules name tools this session lacks (nothing matching is what is
    # measured); the session's one WARNING per such rule is not what is measured either.
    logging.getLogger("ra.agent.permissions").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    policies = ("bypass", "default", "governed", "matching")
    results: dict[str, list[float]] = {p: [] for p in policies}
    for _ in range(args.repeat):  # interleaved rounds: machine noise hits every policy alike
        for policy in policies:
            results[policy].append(await run_once(policy, args.calls))
    base = min(results["bypass"])
    print(f"{args.calls} tool calls per run ({CALLS_PER_STEP} per step), best of {args.repeat}; us per tool call")
    print(f"{'policy':10} {'best':>8} {'median':>8} {'added':>8}")
    for policy in policies:
        best = min(results[policy])
        print(f"{policy:10} {best:8.1f} {statistics.median(results[policy]):8.1f} {best - base:+8.1f}")


if __name__ == "__main__":
    asyncio.run(main())
