"""The ``ra`` command end to end: how long a one-step task takes, and how long after its answer.

Starts ``bench_vs_httpx.py``'s Chat Completions server (a separate process), then runs the real
``ra`` command ``--repeat`` times with a one-step task against it (``--model bench-1``: the answer
is a text, no tool call), each in a fresh process with its session recorded to a temporary
directory, as a user's run would be (with bytecode caching on, as Python has it by default:
``PYTHONDONTWRITEBYTECODE`` is dropped, so the warm-up run writes the ``.pyc`` files). Reported,
median and best: the whole run, and the time from the summary line on stderr (the last thing
``ra`` prints) to the process's exit - what a user waits for between the answer and the shell
prompt. Nothing is asserted.

    python bench/bench_cli.py [--repeat 9]
"""

from __future__ import annotations

import argparse
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_vs_httpx as vs


def one_run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(whole run, summary line to exit) in seconds."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    summary = None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    selector.register(proc.stderr, selectors.EVENT_READ)
    stderr = b""
    open_streams = 2
    deadline = started + 60
    while open_streams:
        if time.perf_counter() > deadline:
            proc.kill()
            raise SystemExit("ra did not finish within 60 s")
        for key, _ in selector.select(timeout=1):
            data = os.read(key.fd, 65536)
            if not data:
                selector.unregister(key.fileobj)
                open_streams -= 1
            elif key.fileobj is proc.stderr:
                stderr += data
                if b"ra: 1 step" in stderr and summary is None:
                    summary = time.perf_counter()
    proc.wait(10)
    ended = time.perf_counter()
    if proc.returncode != 0 or summary is None:
        raise SystemExit(f"ra failed (exit {proc.returncode}):\n{stderr.decode(errors='replace')[-2000:]}")
    return ended - started, ended - summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    ra = shutil.which("ra")
    if ra is None:
        raise SystemExit("the ra command is not on PATH (pip install -e .)")
    server = vs.ServerProcess()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "RA_SESSIONS_DIR": tmp, "NO_COLOR": "1"}
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            command = [ra, "--provider", "openai-compatible", "--base-url", server.base_url, "--model", "bench-1"]
            command.append("Say done.")
            one_run(command, env)  # warm the file system caches
            runs = [one_run(command, env) for _ in range(args.repeat)]
    finally:
        server.close()
    whole = sorted(r[0] * 1000 for r in runs)
    tail = sorted(r[1] * 1000 for r in runs)
    print(f"ra, a one-step task, {args.repeat} runs (ms): median / best")
    print(f"  whole run               {statistics.median(whole):7.1f} / {whole[0]:7.1f}")
    print(f"  summary line to exit    {statistics.median(tail):7.1f} / {tail[0]:7.1f}")


if __name__ == "__main__":
    main()
