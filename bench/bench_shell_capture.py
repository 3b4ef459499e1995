"""How fast LocalExecutionEnvironment captures a command's output, and what it costs in memory.

A command prints 200 MB of 100-byte lines. For each configuration the script reports wall time and
capture throughput, and how far the Python process's resident memory rose above where it started
(peak RSS, from VmHWM after resetting it, cross-checked by sampling VmRSS every 10 ms). The same
command redirected to /dev/null inside the shell shows how fast the producer itself is; piped into
``cat > /dev/null``, how fast a reader written in C drains it; piped into ``cat > FILE``, how fast
one that keeps every byte on disk does, which is what ra does past its memory cap (the spill
file). Rounds are interleaved: each configuration runs right after both yardsticks, and the
``vs cat`` / ``vs cat>file`` columns are the median over rounds of the yardstick's time over the
configuration's in the same round (1.0x: as fast as cat), so other jobs on a shared machine
weigh on both sides alike. Times are medians; RSS is the largest rise seen.

    python bench/bench_shell_capture.py [--mb 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
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


async def _shell_seconds(env: LocalExecutionEnvironment, command: str) -> float:
    result = await env.exec_command(command, timeout_ms=600_000)
    if result.exit_code != 0:
        raise SystemExit(f"command failed: {result.exit_code} {result.stderr[:500]}")
    return result.duration_ms / 1000 or 1e-3


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200, help="megabytes the command prints")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (median time and ratio, max RSS)")
    args = parser.parse_args()
    size = args.mb * 1_000_000
    line = "x" * 99
    producer = f"yes {line} | head -c {size}"

    with tempfile.TemporaryDirectory() as tmp:
        print(f"command prints {size / 1e6:.0f} MB in 100-byte lines; python {sys.version.split()[0]}")
        print(f"median of {args.repeat} interleaved rounds")
        env = LocalExecutionEnvironment(tmp)
        configs = [
            ("default cap 8 MiB", LocalExecutionEnvironment(tmp), False),
            ("default cap 8 MiB + on_output callback", LocalExecutionEnvironment(tmp), True),
            ("cap 1 MiB", LocalExecutionEnvironment(tmp, output_memory_cap=1 << 20), False),
            ("cap 64 MiB", LocalExecutionEnvironment(tmp, output_memory_cap=64 << 20), False),
        ]
        # Every configuration runs right after the yardsticks, round after round, and its ratio is
        # taken against the yardstick of its own round: other jobs on the machine slow both alike.
        # The yardsticks: the same bytes read through a pipe by cat, a reader written in C, and
        # thrown away; and kept in a file (what a reader that keeps the whole output must do - ra
        # past its memory cap writes every byte to the spill file).
        alone: list[float] = []
        cats: list[float] = []
        cat_files: list[float] = []
        runs: dict[str, list[tuple[float, float, float, dict[str, float]]]] = {label: [] for label, _, _ in configs}
        kept = os.path.join(tmp, "cat.out")
        for _ in range(args.repeat):
            alone.append(await _shell_seconds(env, f"{producer} > /dev/null"))
            for label, config_env, callback in configs:
                cat_s = await _shell_seconds(env, f"{producer} | cat > /dev/null")
                cat_file_s = await _shell_seconds(env, f"{producer} | cat > {kept}; rm {kept}")
                cats.append(cat_s)
                cat_files.append(cat_file_s)
                figures = await _measure(config_env, producer, callback)
                assert figures["bytes"] == size
                runs[label].append((figures["seconds"], cat_s, cat_file_s, figures))
                await config_env.cleanup()  # drop the spill file: the next round starts clean

        def median(values: list[float]) -> float:
            return statistics.median(values) or 1e-3

        print(
            f"{'configuration':<44} {'time s':>7} {'MB/s':>6} {'vs cat':>7} {'vs cat>file':>11} "
            f"{'RSS +MiB':>9} {'kept chars':>11}"
        )
        alone_s = median(alone)
        print(f"{'producer alone (> /dev/null in the shell)':<44} {alone_s:>7.2f} {size / 1e6 / alone_s:>6.0f}")
        print(f"{'producer | cat > /dev/null':<44} {median(cats):>7.2f} {size / 1e6 / median(cats):>6.0f} {1.0:>6.2f}x")
        print(
            f"{'producer | cat > file':<44} {median(cat_files):>7.2f} {size / 1e6 / median(cat_files):>6.0f} "
            f"{median([c / f for c, f in zip(cats, cat_files, strict=True)]):>6.2f}x {1.0:>10.2f}x"
        )
        for label, _, _ in configs:
            rows = runs[label]
            seconds = median([r[0] for r in rows])
            vs_cat = median([r[1] / r[0] for r in rows])
            vs_file = median([r[2] / r[0] for r in rows])
            rss = max(r[3]["rss_growth_mib"] for r in rows)
            kept_chars = int(rows[-1][3]["kept_chars"])
            print(
                f"{label:<44} {seconds:>7.2f} {size / 1e6 / seconds:>6.0f} {vs_cat:>6.2f}x {vs_file:>10.2f}x "
                f"{rss:>9.1f} {kept_chars:>11}"
            )


if __name__ == "__main__":
    asyncio.run(main())
