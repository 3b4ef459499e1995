"""``ra.batch.run``: many tasks, each in its own working copy, results in one file.

The coordinator (this module) reads the tasks (all checked before anything starts), skips the
ids that already have a result in ``out_dir/results.jsonl``, hands the rest to a backend - the
local one runs them as asyncio tasks in this process, at most ``concurrency`` at a time; the Ray
one as Ray tasks (:mod:`ra.batch.ray_backend`) - and writes each result line as it comes back.
It is the only writer of the results file.

Cancelling :func:`run_async` (Ctrl-C under :func:`run`) starts nothing new, stops the running
tasks (their sessions, commands and working copies), records them as ``interrupted`` and
re-raises: a re-run picks them up again.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .attempts import Attempt, crashed_record, interrupted_record
from .results import FINAL_STATUSES, STATUSES, ResultsFile
from .runner import ClientFactory, RunSpec, run_task
from .tasks import Task, load_tasks, parse_tasks

__all__ = ["BACKENDS", "BatchListener", "BatchReport", "run", "run_async"]

BACKENDS = ("local", "ray")


class BatchListener(Protocol):
    """What a display is told (every method optional)."""

    def batch_started(self, total: int, skipped: int, to_run: int) -> None: ...
    def task_started(self, task: Task) -> None: ...
    def task_finished(self, record: dict[str, Any]) -> None: ...
    def batch_finished(self, report: BatchReport) -> None: ...


@dataclass(slots=True)
class BatchReport:
    """A batch's outcome: the latest result of every task of the batch, and totals."""

    out_dir: str
    #: The latest result line of each task (in the tasks' order); tasks without one are missing.
    results: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    #: Tasks this run started, and tasks skipped because they already had a result.
    ran: int = 0
    skipped: int = 0
    wall_s: float = 0.0
    interrupted: bool = False

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for record in self.results:
            counts[record["status"]] = counts.get(record["status"], 0) + 1
        counts["pending"] = self.total - len(self.results)
        return counts

    @property
    def pass_rate(self) -> float | None:
        """Passed tasks over finished ones (interrupted and never-run tasks are not finished)."""
        finished = [r for r in self.results if r["status"] in FINAL_STATUSES]
        return None if not finished else sum(r["status"] == "passed" for r in finished) / len(finished)

    @property
    def cost_usd(self) -> float:
        return round(sum(r.get("cost_usd") or 0.0 for r in self.results), 6)

    @property
    def unpriced(self) -> int:
        """Results whose cost is unknown (a model without a price): the total leaves them out."""
        return sum(1 for r in self.results if r.get("cost_usd") is None and r.get("steps"))

    @property
    def input_tokens(self) -> int:
        return sum(r.get("input_tokens") or 0 for r in self.results)

    @property
    def output_tokens(self) -> int:
        return sum(r.get("output_tokens") or 0 for r in self.results)

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and len(self.results) == self.total and all(r["status"] == "passed" for r in self.results)


def run(tasks: str | os.PathLike[str] | Iterable[Task | Mapping[str, Any]], **options: Any) -> BatchReport:
    """:func:`run_async` in a new event loop (Ctrl-C records the running tasks as interrupted,
    then raises KeyboardInterrupt)."""
    return asyncio.run(run_async(tasks, **options))


async def run_async(
    tasks: str | os.PathLike[str] | Iterable[Task | Mapping[str, Any]],
    *,
    out_dir: str | os.PathLike[str],
    concurrency: int = 4,
    backend: str = "local",
    ray_address: str | None = None,
    client_factory: ClientFactory | None = None,
    provider: str | None = None,
    model: str | None = None,
    profile: str | None = None,
    max_turns: int | None = None,
    max_budget_usd: float | None = None,
    timeout: float | None = None,
    reasoning_effort: str | None = None,
    retry_failed: bool = False,
    keep_worktrees: bool = False,
    listener: BatchListener | None = None,
    ray_options: Mapping[str, Any] | None = None,
) -> BatchReport:
    """Run ``tasks`` (a JSONL file, or task objects/dicts) and record them in ``out_dir``.

    ``client_factory(task)`` builds each task's model client (default: ``Client.from_env()``);
    with the Ray backend it is pickled to the workers. ``provider``, ``model``, ``profile``,
    ``max_turns``, ``max_budget_usd`` and ``timeout`` are the defaults of tasks that do not set
    their own (``reasoning_effort`` applies to every task). Ids that already have a final result
    are skipped (``retry_failed``: all but the passed ones run again). ``ray_options`` go to the
    Ray tasks' ``.options()`` (default ``num_cpus=1``). Returns the :class:`BatchReport`.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a whole number >= 1, got {concurrency!r}")
    checked = load_tasks(tasks) if isinstance(tasks, str | os.PathLike) else parse_tasks(tasks)
    spec = RunSpec(
        out_dir=_absolute(out_dir),
        client_factory=client_factory,
        provider=provider,
        model=model,
        profile=profile,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
        timeout=timeout,
        reasoning_effort=reasoning_effort,
        keep_worktrees=keep_worktrees,
    )
    if backend == "ray":
        from .ray_backend import connect

        connect()  # ray imported (or a clear error) before anything is locked or run
    report = BatchReport(out_dir=spec.out_dir, total=len(checked))
    started = time.monotonic()
    with ResultsFile(spec.out_dir) as results:
        latest = results.open()
        todo = [t for t in checked if not _done(latest.get(t.id), retry_failed)]
        report.skipped = len(checked) - len(todo)
        _call(listener, "batch_started", len(checked), report.skipped, len(todo))

        def record(result: dict[str, Any]) -> None:
            results.append(result)
            latest[result["id"]] = result
            _call(listener, "task_finished", result)

        try:
            if todo:
                if backend == "ray":
                    from .ray_backend import run_on_ray

                    await run_on_ray(todo, spec, concurrency, record, listener, ray_address, ray_options)
                else:
                    await _run_local(todo, spec, concurrency, record, listener)
            report.ran = len(todo)
        except (asyncio.CancelledError, KeyboardInterrupt):
            report.interrupted = True
            raise
        finally:
            report.results = [latest[t.id] for t in checked if t.id in latest]
            report.wall_s = round(time.monotonic() - started, 3)
            _call(listener, "batch_finished", report)
    return report


def _absolute(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def _done(record: dict[str, Any] | None, retry_failed: bool) -> bool:
    if record is None or record.get("status") not in FINAL_STATUSES:
        return False
    return record["status"] == "passed" or not retry_failed


def _call(listener: Any, name: str, *args: Any) -> None:
    method = getattr(listener, name, None)
    if method is not None:
        method(*args)


async def _run_local(
    todo: list[Task], spec: RunSpec, concurrency: int, record: Any, listener: BatchListener | None
) -> None:
    queue = list(reversed(todo))
    running: dict[str, Attempt] = {}

    async def worker() -> None:
        while queue:
            attempt = Attempt(queue.pop())
            running[attempt.task.id] = attempt
            _call(listener, "task_started", attempt.task)
            try:
                result = await run_task(attempt.task, spec, session_id=attempt.session_id)
            except Exception as exc:  # run_task records its own failures; this is a bug in it
                result = crashed_record(attempt, f"{type(exc).__name__}: {exc}")
            del running[attempt.task.id]
            record(result)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(concurrency, len(todo))):
                group.create_task(worker())
    except BaseException:
        # Cancelled (Ctrl-C): the TaskGroup has waited for every task's clean-up.
        for attempt in list(running.values()):
            record(interrupted_record(attempt, "the batch was interrupted while the task ran"))
        raise
