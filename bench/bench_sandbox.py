"""Per-command cost of the bubblewrap sandbox: ``true`` through the environment, unconfined vs
each sandbox mode, and the same for a bare ``bwrap ... true`` (without ra).

    python bench/bench_sandbox.py [--runs 200]

Prints, per variant, the median and p95 wall time of one ``exec_command`` and the overhead of the
median over the unconfined one (the goal: under 15 ms). Also the file tools' cost: a write through
the sandbox's descriptor walk against the local environment's write.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable

from ra.env.local import LocalExecutionEnvironment
from ra.env.sandbox import SandboxedExecutionEnvironment, SandboxPolicy


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(runs: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    for _ in range(5):  # warm-up
        await call()
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def row(name: str, times: list[float], base: float | None) -> None:
    median = statistics.median(times)
    extra = "" if base is None else f"   overhead {median - base:+6.2f} ms"
    print(f"{name:<34} median {median:6.2f} ms   p95 {percentile(times, 0.95):6.2f} ms{extra}")


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        variants: list[tuple[str, object]] = [("unconfined", LocalExecutionEnvironment(root))]
        for mode, network in (("read-only", False), ("workspace-write", False), ("workspace-write", True)):
            env = SandboxedExecutionEnvironment(LocalExecutionEnvironment(root), SandboxPolicy(mode, network=network))
            variants.append((f"{mode}{' +network' if network else ''}", env))
        base = None
        print(f"exec_command('true'), {runs} runs each")
        for name, env in variants:
            times = await timed(runs, lambda env=env: env.exec_command("true"))  # type: ignore[attr-defined]
            row(name, times, base)
            base = statistics.median(times) if base is None else base
        bwrap = shutil.which("bwrap")
        if bwrap:
            argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--cap-drop", "ALL"]
            argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"]

            async def bare(argv: list[str]) -> None:
                await asyncio.to_thread(subprocess.run, argv, check=True)

            row("bare bwrap ... true (no ra)", await timed(runs, lambda: bare(argv)), None)
            row("bare true (no ra)", await timed(runs, lambda: bare(["true"])), None)
        print(f"\nwrite_file of 4 KiB, {runs} runs each")
        data = b"x" * 4096
        local, sandboxed = variants[0][1], variants[2][1]
        base_write = await timed(runs, lambda: local.write_file("f.txt", data))  # type: ignore[attr-defined]
        row("unconfined", base_write, None)
        confined = await timed(runs, lambda: sandboxed.write_file("deep/er/f.txt", data))  # type: ignore[attr-defined]
        row("workspace-write", confined, statistics.median(base_write))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    asyncio.run(main(parser.parse_args().runs))
