"""ra.batch: run many agent tasks - each in its own working copy - and record their results.

``ra.batch.run(tasks, out_dir=..., concurrency=..., backend="local" | "ray")`` (and
:func:`run_async`), and the ``ra batch TASKS.jsonl`` command. See docs/batch.md. A layer above
:mod:`ra.sdk` and below :mod:`ra.cli`; names load lazily, and ``ray`` only when chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "run": ".core",
    "run_async": ".core",
    "BatchReport": ".core",
    "BatchListener": ".core",
    "BACKENDS": ".core",
    "Task": ".tasks",
    "TasksFileError": ".tasks",
    "load_tasks": ".tasks",
    "parse_tasks": ".tasks",
    "OutDirError": ".results",
    "OutDirInUseError": ".results",
    "ResultsFormatError": ".results",
    "STATUSES": ".results",
    "RunSpec": ".runner",
    "run_task": ".runner",
    "RayUnavailableError": ".ray_backend",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from .core import BACKENDS, BatchListener, BatchReport, run, run_async
    from .ray_backend import RayUnavailableError
    from .results import STATUSES, OutDirError, OutDirInUseError, ResultsFormatError
    from .runner import RunSpec, run_task
    from .tasks import Task, TasksFileError, load_tasks, parse_tasks
