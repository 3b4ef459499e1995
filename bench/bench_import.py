"""Cold import cost of ``ra`` and ``ra.llm`` (and of ``httpx``, for scale).

``import ra`` and ``import ra.llm`` must stay light: the HTTP stack, the adapters and the
high-level layer load only when first used. Each figure is measured in a fresh interpreter
(``python -c``), timing the import statement alone with ``perf_counter``; the best of ``--repeat``
runs is reported, since the minimum is the least disturbed by other work on the machine. The
``-X importtime`` self-time sum is printed too, as a cross-check, together with the heaviest
modules each import pulls in.

Also measured: first use of ``ra.llm.generate`` (resolving the lazy name loads the high-level
layer, without the HTTP stack) and of ``ra.llm.Client.from_env`` with an adapter (which brings
in httpx). Run: ``python bench/bench_import.py [--repeat N] [--top K]``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES: list[tuple[str, str, str]] = [
    # (label, setup statement, timed statement)
    ("import httpx", "", "import httpx"),
    ("import ra", "", "import ra"),
    ("import ra.llm", "", "import ra.llm"),
    ("ra.llm: resolve generate", "import ra.llm", "ra.llm.generate"),
    ("ra.llm: resolve get_model_info + lookup", "import ra.llm", "ra.llm.get_model_info('sonnet')"),
    (
        "ra.llm: Client.from_env(OPENAI_API_KEY)",
        "import ra.llm",
        "ra.llm.Client.from_env({'OPENAI_API_KEY': 'x'})",
    ),
]

_SNIPPET = """
import time
{setup}
t0 = time.perf_counter()
{stmt}
print(time.perf_counter() - t0)
"""

_IMPORTTIME = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    return env


def time_once(setup: str, stmt: str) -> float:
    code = _SNIPPET.format(setup=setup, stmt=stmt)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=True)
    return float(out.stdout.strip().splitlines()[-1])


def importtime(stmt: str) -> tuple[float, list[tuple[int, str]]]:
    """(sum of self times in ms, heaviest modules by cumulative time) from ``-X importtime``."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", stmt], capture_output=True, text=True, env=_env(), check=True
    )
    total_us = 0
    rows: list[tuple[int, str]] = []
    for line in out.stderr.splitlines():
        match = _IMPORTTIME.match(line)
        if match is None:
            continue
        self_us, cumulative_us, indent, name = match.groups()
        total_us += int(self_us)
        if len(indent) <= 3:  # top-level imports of the statement only
            rows.append((int(cumulative_us), name))
    rows.sort(reverse=True)
    return total_us / 1000, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()

    print(f"python {sys.version.split()[0]}, best of {args.repeat} fresh interpreters\n")
    print(f"{'case':45} {'best ms':>9} {'median ms':>10}")
    for label, setup, stmt in CASES:
        runs = sorted(time_once(setup, stmt) * 1000 for _ in range(args.repeat))
        print(f"{label:45} {runs[0]:9.2f} {runs[len(runs) // 2]:10.2f}")

    print("\n-X importtime (self-time sum; heaviest direct imports by cumulative time)")
    for stmt in ("import httpx", "import ra", "import ra.llm"):
        total, rows = importtime(stmt)
        heavy = ", ".join(f"{name} {us / 1000:.1f}ms" for us, name in rows[: args.top])
        print(f"  {stmt:16} {total:8.2f} ms   {heavy}")

    probe = (
        "import sys, ra.llm; "
        "print(sorted(m for m in ('httpx', 'jsonschema', 'ra.llm.generation', 'ra.llm.http') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), check=True
    ).stdout.strip()
    print(f"\nheavy modules present after 'import ra.llm': {loaded}")


if __name__ == "__main__":
    main()
