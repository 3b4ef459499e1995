"""How fast LocalExecutionEnvironment captures a command's output, and what it costs in memory.

A command prints 200 MB of 100-byte lines. For each configuration the script reports wall time and
capture throughput (median of --repeat runs), and how far the Python process's resident memory rose
above where it started (peak RSS, from VmHWM after resetting it, cross-checked by sampling VmRSS every 10 ms). The same
command redirected to /dev/null inside the shell shows how fast the producer itself is, and piped
into ``cat > /dev/null`` how fast a reader written in C drains it: the ``vs cat`` column is each
configuration's throughput relative to cat's (1.0x: as fast as cat).

    python bench/bench_shell_capture.py [--mb 200]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time

from ra.env import LocalExecutionEnvironment


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


async def _measure(env: LocalExecutionEnvironment, command: str, callback: bool) -> dict[str, float]:
    received = 0

    def on_output(stream: str, text: str) -> None:
        nonlocal received
        received += len(text)

    peak_sampled = 0
    done = asyncio.Event()

    async def sampler() -> None:
        nonlocal peak_sampled
        while not done.is_set():
            peak_sampled = max(peak_sampled, _status_kib("VmRSS"))
            await asyncio.sleep(0.01)

    reset = _reset_peak_rss()
    base = _status_kib("VmRSS")
    task = asyncio.create_task(sampler())
    started = time.perf_counter()
    result = await env.exec_command(command, timeout_ms=600_000, on_output=on_output if callback else None)
    elapsed = time.perf_counter() - started
    done.set()
    await task
    peak = max(_status_kib("VmHWM") if reset else 0, peak_sampled)
    if result.exit_code != 0:
        raise SystemExit(f"command failed: {result.exit_code} {result.stderr[:500]}")
    return {
        "seconds": elapsed,
        "bytes": result.total_bytes,
        "rss_growth_mib": (peak - base) / 1024,
        "kept_chars": len(result.stdout) + len(result.stderr),
        "spilled": 1.0 if result.full_output_path else 0.0,
        "callback_chars": received,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200, help="megabytes the command prints")
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration (median time, max RSS)")
    args = parser.parse_args()
    size = args.mb * 1_000_000
    line = "x" * 99
    producer = f"yes {line} | head -c {size}"

    with tempfile.TemporaryDirectory() as tmp:
        print(f"command prints {size / 1e6:.0f} MB in 100-byte lines; python {sys.version.split()[0]}")
        print(f"{'configuration':<44} {'time s':>7} {'MB/s':>8} {'vs cat':>7} {'RSS +MiB':>9} {'kept chars':>11}")

        env = LocalExecutionEnvironment(tmp)
        raw = await env.exec_command(f"{producer} > /dev/null", timeout_ms=600_000)
        print(
            f"{'producer alone (> /dev/null in the shell)':<44} {raw.duration_ms / 1000:>7.2f} "
            f"{size / 1e6 / (raw.duration_ms / 1000 or 1e-3):>8.0f}"
        )
        # The yardstick: the same bytes read through a pipe by cat, a reader written in C.
        cat_runs = sorted(
            [
                (await env.exec_command(f"{producer} | cat > /dev/null", timeout_ms=600_000)).duration_ms / 1000
                for _ in range(args.repeat)
            ]
        )
        cat_s = cat_runs[len(cat_runs) // 2] or 1e-3
        print(f"{'producer | cat > /dev/null':<44} {cat_s:>7.2f} {size / 1e6 / cat_s:>8.0f} {1.0:>6.2f}x")

        configs = [
            ("default cap 8 MiB", LocalExecutionEnvironment(tmp), False),
            ("default cap 8 MiB + on_output callback", LocalExecutionEnvironment(tmp), True),
            ("cap 1 MiB", LocalExecutionEnvironment(tmp, output_memory_cap=1 << 20), False),
            ("cap 64 MiB", LocalExecutionEnvironment(tmp, output_memory_cap=64 << 20), False),
        ]
        for label, config_env, callback in configs:
            runs = [await _measure(config_env, producer, callback) for _ in range(args.repeat)]
            assert all(r["bytes"] == size for r in runs)
            figures = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]  # the median run
            figures["rss_growth_mib"] = max(r["rss_growth_mib"] for r in runs)
            print(
                f"{label:<44} {figures['seconds']:>7.2f} {size / 1e6 / figures['seconds']:>8.0f} "
                f"{cat_s / figures['seconds']:>6.2f}x {figures['rss_growth_mib']:>9.1f} "
                f"{int(figures['kept_chars']):>11}"
            )
            await config_env.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
