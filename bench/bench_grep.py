"""grep with many matches: ``LocalExecutionEnvironment.grep`` against bare ripgrep.

Builds a tree of ``--files`` source-like files (about 40 matching lines each), then times, as the
median of ``--repeat`` runs, bare ripgrep in the same output mode (threaded, unsorted; to
/dev/null - the floor - and read through a pipe by ``cat``, which is how ra gets it: on two cores
the reader competes with ripgrep's threads) and ra's ``grep`` (ripgrep, a path-ordered result with its cap, parsed
into ra's text): content capped at 100 results (the default), content with every result, the
files with matches, and the count per file. The ratio column is ra's time over bare rg's; the
issue's target is <= 1.2x.

    python bench/bench_grep.py [--files 2000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ra.env import LocalExecutionEnvironment
from ra.env.base import GrepOptions
from ra.env.search import find_ripgrep


def build(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / f"pkg{i % 40:02d}" / f"mod{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for j in range(200):
            if j % 5 == 0:
                lines.append(f"def handle_request_{j}(request):  # TODO: validate request {i}")
            else:
                lines.append(f"    value_{j} = compute({i}, {j}) + offset  # plain line")
        (folder / f"file{i:05d}.py").write_text("\n".join(lines) + "\n")


def time_rg(rg: str, flags: list[str], pattern: str, root: Path, repeat: int, *, piped: bool) -> float:
    """Bare ripgrep, its output to /dev/null, or read through a pipe by cat (as ra reads it)."""
    command = shlex.join([rg, "--no-config", *flags, pattern, str(root)])
    command += " | cat > /dev/null" if piped else " > /dev/null"
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, shell=True, check=False)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


async def time_ra(
    env: LocalExecutionEnvironment, pattern: str, mode: str, limit: int, repeat: int
) -> tuple[float, int]:
    runs = []
    size = 0
    for _ in range(repeat):
        started = time.perf_counter()
        out = await env.grep(pattern, ".", GrepOptions(output_mode=mode, max_results=limit))
        runs.append(time.perf_counter() - started)
        size = len(out)
    return statistics.median(runs), size


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rg = find_ripgrep()
    if rg is None:
        raise SystemExit("ripgrep not found")
    pattern = "request"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root, args.files)
        env = LocalExecutionEnvironment(root, grep_backend="ripgrep")
        print(f"{args.files} files, ~{args.files * 40:,} matching lines; median of {args.repeat}")
        print(
            f"{'search':40} {'rg ms':>7} {'rg|cat':>7} {'ra ms':>7} {'ra/rg':>6} {'ra/rg|cat':>9} {'output chars':>13}"
        )
        cases = [
            ("content, first 100 results", "content", 100, ["--json"]),
            ("content, every result (max 1,000,000)", "content", 1_000_000, ["--json"]),
            ("files with matches, all", "files_with_matches", 1_000_000, ["--files-with-matches"]),
            ("count per file, all", "count", 1_000_000, ["--count"]),
        ]
        for label, mode, limit, flags in cases:
            bare = time_rg(rg, flags, pattern, root, args.repeat, piped=False)
            piped = time_rg(rg, flags, pattern, root, args.repeat, piped=True)
            seconds, size = await time_ra(env, pattern, mode, limit, args.repeat)
            print(
                f"{label:40} {bare * 1000:>7.1f} {piped * 1000:>7.1f} {seconds * 1000:>7.1f} "
                f"{seconds / bare:>5.2f}x {seconds / piped:>8.2f}x {size:>13,}"
            )


if __name__ == "__main__":
    asyncio.run(main())
