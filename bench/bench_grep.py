"""grep with many matches: ``LocalExecutionEnvironment.grep`` against bare ripgrep.

Builds a tree of ``--files`` source-like files (about 40 matching lines each), then, round after
round, times bare ripgrep giving the result ra gives, in path order: one sorted ripgrep
(``--sort path``, the layout ra reads: grouped by file for content), to /dev/null (``rg``, the
floor) and read through a pipe by ``cat`` (``rg|cat``); the same search threaded and unsorted for
content (``rg -j``: what path order costs a single ripgrep); and ra's ``grep`` (ripgrep in a part
a core for a directory, ``ra.env.ripgrep_parts``, its output parsed into ra's text, capped):
content capped at 100 results (the default), content with every result, content where each file
has one match (the search must read the whole tree), the files with matches, and the count per
file. Times are medians over rounds; each ratio is the median of ra's time over ripgrep's in the
same round. The issue's target is ra/rg <= 1.2x.

Wall time on two shared cores swings by a quarter from round to round, so the CPU each side
spends is shown too: ripgrep's own (to /dev/null) against ra's process plus its ripgreps - the
work ra adds, which the machine's load does not move much.

    python bench/bench_grep.py [--files 2000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
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


def rg_args(rg: str, mode: str, pattern: str, root: Path, *, sort: bool = True) -> list[str]:
    """The command ra's grep runs for ``mode`` (see ``ra.env.search.grep_ripgrep``)."""
    args = [rg, "--no-config", "--color", "never", "--no-messages", "--with-filename"]
    if mode == "content":
        args += (["--sort", "path"] if sort else []) + ["--null", "--line-number", "--heading"]
    else:
        args += ["--null", "--count" if mode == "count" else "--files-with-matches"]
    return [*args, "--regexp", pattern, "--", str(root)]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_shell(command: list[str], *, piped: bool) -> tuple[float, float]:
    """One run of ripgrep, its output to /dev/null (no shell: the CPU is ripgrep's alone), or
    read through a pipe by cat; (wall, CPU of the children) in seconds."""
    cpu = children_cpu()
    started = time.perf_counter()
    if piped:
        subprocess.run(shlex.join(command) + " | cat > /dev/null", shell=True, check=False)
    else:
        subprocess.run(command, stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started, children_cpu() - cpu


async def time_ra(env: LocalExecutionEnvironment, pattern: str, mode: str, limit: int) -> tuple[float, float, int]:
    """One ra grep: (wall, CPU of this process and its ripgrep, output length)."""
    cpu = time.process_time() + children_cpu()
    started = time.perf_counter()
    out = await env.grep(pattern, ".", GrepOptions(output_mode=mode, max_results=limit))
    return time.perf_counter() - started, time.process_time() + children_cpu() - cpu, len(out)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    rg = find_ripgrep()
    if rg is None:
        raise SystemExit("ripgrep not found")
    common = "request"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root, args.files)
        env = LocalExecutionEnvironment(root, grep_backend="ripgrep")
        cases = [
            ("content, first 100 results", "content", 100, common),
            ("content, every result (max 1,000,000)", "content", 1_000_000, common),
            ("content, one match a file", "content", 100_000, "request_195[(]"),
            ("files with matches, all", "files_with_matches", 1_000_000, common),
            ("count per file, all", "count", 1_000_000, common),
        ]
        # Rounds: each case's commands run back to back, and each ratio is taken within its round.
        rows: dict[str, list[dict[str, float]]] = {label: [] for label, _, _, _ in cases}
        await time_ra(env, common, "count", 10)  # the first subprocess of the event loop
        for _ in range(args.repeat):
            for label, mode, limit, pattern in cases:
                command = rg_args(rg, mode, pattern, root)
                run: dict[str, float] = {}
                run["rg"], run["rg cpu"] = time_shell(command, piped=False)
                run["rg|cat"], _ = time_shell(command, piped=True)
                run["unsorted"], _ = time_shell(rg_args(rg, mode, pattern, root, sort=False), piped=False)
                run["ra"], run["ra cpu"], run["size"] = await time_ra(env, pattern, mode, limit)
                rows[label].append(run)
        print(f"{args.files} files, ~{args.files * 40:,} matching lines; median of {args.repeat} rounds")
        print(
            f"{'search':40} {'rg ms':>7} {'rg|cat':>7} {'rg -j':>7} {'ra ms':>7} {'ra/rg':>6} {'ra/rg|cat':>9} "
            f"{'rg cpu':>7} {'ra cpu':>7} {'cpu':>6} {'output chars':>13}"
        )
        for label, mode, _, _ in cases:
            runs = rows[label]

            def median(key: str, runs: list[dict[str, float]] = runs) -> float:
                return statistics.median(r[key] for r in runs)

            ratio = statistics.median(r["ra"] / r["rg"] for r in runs)
            ratio_piped = statistics.median(r["ra"] / r["rg|cat"] for r in runs)
            cpu_ratio = statistics.median(r["ra cpu"] / r["rg cpu"] for r in runs)
            threaded = f"{median('unsorted') * 1000:>7.1f}" if mode == "content" else f"{'':>7}"
            print(
                f"{label:40} {median('rg') * 1000:>7.1f} {median('rg|cat') * 1000:>7.1f} {threaded} "
                f"{median('ra') * 1000:>7.1f} {ratio:>5.2f}x {ratio_piped:>8.2f}x "
                f"{median('rg cpu') * 1000:>7.1f} {median('ra cpu') * 1000:>7.1f} {cpu_ratio:>5.2f}x "
                f"{int(runs[-1]['size']):>13,}"
            )


if __name__ == "__main__":
    asyncio.run(main())
