"""Orphans after a stop: N trials per stop path, every common way to escape a process group.

Each trial runs one command through ``LocalExecutionEnvironment`` that leaves behind children
started with ``setsid``, ``nohup``, a double fork, ``disown``, and two that ignore SIGTERM (one
in a new session, one in the group), then stops it by its timeout, by ``terminate_all`` and by
cancelling the call. It prints, per path, how many of the 6 x N children were still alive
afterwards (the goal: 0) and the time a stop took.

    python bench/bench_orphans.py [--trials 100] [--grace-ms 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import random
import signal
import statistics
import tempfile
import time

from ra.env.local import LocalExecutionEnvironment

CHILDREN = 6


def command(tag: int) -> str:
    return "\n".join(
        [
            f"setsid sleep {tag}1 &",
            f"nohup sleep {tag}2 >/dev/null 2>&1 &",
            f"( (sleep {tag}3 &) & )",
            f"sleep {tag}4 & disown",
            f"setsid bash -c 'trap \"\" TERM; sleep {tag}5' &",
            f"bash -c 'trap \"\" TERM; sleep {tag}6' &",
            "sleep 0.2",
            "sleep 60",
        ]
    )


def survivors(tag: int) -> list[int]:
    needle = str(tag).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rpartition(b")")[2].split()[0]
        except OSError:
            continue
        if state not in (b"Z", b"X") and any(a.startswith(needle) and len(a) == len(needle) + 1 for a in argv):
            found.append(int(name))
    return found


async def started(tag: int) -> None:
    deadline = time.monotonic() + 10
    while len(survivors(tag)) < CHILDREN and time.monotonic() < deadline:  # noqa: ASYNC110 - polling /proc
        await asyncio.sleep(0.02)


async def trial(env: LocalExecutionEnvironment, path: str, tag: int) -> float:
    if path == "timeout":
        began = time.perf_counter()
        await env.exec_command(command(tag), timeout_ms=1000)
        return time.perf_counter() - began - 1.0
    task = asyncio.create_task(env.exec_command(command(tag), timeout_ms=60_000))
    await started(tag)
    began = time.perf_counter()
    if path == "terminate_all":
        await env.terminate_all()
        await task
    else:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return time.perf_counter() - began


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--grace-ms", type=int, default=300)
    args = parser.parse_args()
    tags = itertools.count(random.randrange(10_000, 90_000) * 1000)
    with tempfile.TemporaryDirectory() as tmp:
        env = LocalExecutionEnvironment(tmp, kill_grace_ms=args.grace_ms)
        print(f"{args.trials} trials per path, {CHILDREN} escaping children each, grace {args.grace_ms} ms")
        print(f"{'path':14} {'orphans':>8} {'stop ms (median)':>17}")
        for path in ("timeout", "terminate_all", "cancel"):
            orphans = 0
            times = []
            for _ in range(args.trials):
                tag = next(tags)
                times.append(await trial(env, path, tag))
                await asyncio.sleep(0.05)
                left = survivors(tag)
                orphans += len(left)
                for pid in left:  # keep the machine clean even when the goal is missed
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            print(f"{path:14} {orphans:>8} {statistics.median(times) * 1000:>17.0f}")


if __name__ == "__main__":
    asyncio.run(main())
