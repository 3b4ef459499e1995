"""Batch throughput: N small scripted tasks through ``ra.batch`` on the local backend and on Ray.

Each task is a copied directory (a 200-line file), an agent session of ``--steps`` model calls
(``read_file`` calls, then a final text) against the local Chat Completions server of
``bench_vs_httpx.py`` (a separate process, answering at once), a check command (``test -f``), the
diff and the clean-up: the whole per-task path, with a model that costs nothing, so the figures
are ra's and the backend's own overhead per task.

Backends:

* ``local``: asyncio tasks in this process, ``--concurrency`` at a time;
* ``ray``: a local Ray started by the bench (``ray.init(num_cpus=--ray-cpus)``; its start is
  timed apart and not in the batch's figures), each task a Ray task (``num_cpus`` =
  ``--ray-task-cpus``), at most ``--concurrency`` in flight.

Printed per backend: wall time, tasks/s, and the median task duration (``duration_s`` of the
result lines: the time inside the task). The first round of each backend is a warm-up (imports,
Ray's worker processes) and not shown unless ``--repeat 1``.

Run: ``python bench/bench_batch.py [--tasks 40] [--steps 4] [--concurrency 8] [--repeat 2]
[--backends local,ray]``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "bench")]


def _tasks(root: Path, count: int) -> Path:
    source = root / "project"
    source.mkdir()
    (source / "notes.txt").write_text("".join(f"line {i}\n" for i in range(200)))
    lines = [
        {
            "id": f"t{i:04d}",
            "directory": str(source),
            "instruction": f"Read the notes ({i}).",
            "check": "test -f notes.txt",
        }
        for i in range(count)
    ]
    path = root / "tasks.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _round(backend: str, tasks: Path, root: Path, args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    import ra.batch
    from ra.cli.batch_command import ClientRecipe

    out = Path(tempfile.mkdtemp(dir=root, prefix=f"out-{backend}-"))
    began = time.perf_counter()
    report = ra.batch.run(
        tasks,
        out_dir=out,
        concurrency=args.concurrency,
        backend=backend,
        client_factory=ClientRecipe("openai-compatible", base_url, None),
        provider="openai-compatible",
        model=f"bench-{args.steps}",
        ray_options={"num_cpus": args.ray_task_cpus},
    )
    wall = time.perf_counter() - began
    durations = [r["duration_s"] for r in report.results]
    shutil.rmtree(out, ignore_errors=True)
    return {
        "wall": wall,
        "per_s": len(report.results) / wall,
        "median_task": statistics.median(durations),
        "passed": report.counts["passed"],
        "total": report.total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--steps", type=int, default=4, help="model calls per task (the last one answers)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2, help="rounds per backend; the first is a warm-up")
    parser.add_argument("--backends", default="local,ray")
    parser.add_argument("--ray-cpus", type=int, default=os.cpu_count() or 2, help="num_cpus of the local Ray")
    parser.add_argument("--ray-task-cpus", type=float, default=0.25, help="num_cpus of each Ray task")
    args = parser.parse_args()
    from bench_vs_httpx import ServerProcess

    backends = [b for b in args.backends.split(",") if b]
    server = ServerProcess()
    root = Path(tempfile.mkdtemp(prefix="ra-bench-batch-"))
    rows: list[tuple[str, dict[str, Any]]] = []
    try:
        tasks = _tasks(root, args.tasks)
        for backend in backends:
            ray_start = None
            if backend == "ray":
                import ray

                began = time.perf_counter()
                env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
                ray.init(
                    num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env}
                )
                ray_start = time.perf_counter() - began
            try:
                rounds = [_round(backend, tasks, root, args, server.base_url) for _ in range(max(1, args.repeat))]
            finally:
                if backend == "ray":
                    import ray

                    ray.shutdown()
            shown = rounds[1:] if len(rounds) > 1 else rounds
            best = min(shown, key=lambda r: r["wall"])
            if ray_start is not None:
                best["ray_start"] = ray_start
            best["first"] = rounds[0]["wall"]
            rows.append((backend, best))
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"{args.tasks} tasks x {args.steps} model calls, concurrency {args.concurrency}, "
        f"{os.cpu_count()} CPUs; best of {max(1, args.repeat - 1)} round(s) after a warm-up"
    )
    print(
        f"{'backend':<8} {'wall s':>8} {'tasks/s':>8} {'median task s':>14} {'passed':>8} {'first round s':>14}  notes"
    )
    for backend, row in rows:
        note = f"ray.init {row['ray_start']:.1f}s (not counted)" if "ray_start" in row else ""
        print(
            f"{backend:<8} {row['wall']:>8.2f} {row['per_s']:>8.2f} {row['median_task']:>14.3f} "
            f"{row['passed']:>4}/{row['total']:<3} {row['first']:>14.2f}  {note}"
        )


if __name__ == "__main__":
    main()
