"""Truncation cost on pathological outputs (spec 5.3): a 10 MB single line, 10 MB of short lines.

python bench/bench_truncation.py
"""

from __future__ import annotations

import time

from ra.tools.truncation import truncate_tool_output


def best_ms(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1000


def main() -> None:
    single = "x" * 10_000_000
    lines = "".join(f"{i:09d} some log text here\n" for i in range(333_334))[:10_000_000]
    small = "ok\n" * 100
    cases = [
        ("10 MB single line, shell (head_tail 30k, 256 lines)", single, "shell"),
        ("10 MB single line, grep (tail 20k, 200 lines)", single, "grep"),
        ("10 MB in 333k short lines, shell", lines, "shell"),
        ("10 MB in 333k short lines, read_file (no line limit)", lines, "read_file"),
        ("300 B output, shell (nothing to cut)", small, "shell"),
    ]
    for label, text, tool in cases:
        out = truncate_tool_output(text, tool)
        ms = best_ms(lambda text=text, tool=tool: truncate_tool_output(text, tool))
        print(f"{label}: {ms:.3f} ms -> {len(out):,} chars")


if __name__ == "__main__":
    main()
