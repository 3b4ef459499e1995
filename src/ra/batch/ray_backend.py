"""The Ray backend: each task a Ray task running :func:`ra.batch.runner.run_task` in a worker.

``ray`` is imported only here, when the backend is chosen. The coordinator connects
(``ray.init(address=...)``, or a local Ray when no address is given and none is running), keeps
at most ``concurrency`` tasks in flight, and takes results back as they finish (``ray.wait``);
it alone writes ``results.jsonl``. A worker that dies (killed, out of memory) is a ``crashed``
result; Ray does not retry a task (``max_retries=0``: a task is not idempotent - its model calls
cost money). On cancellation the in-flight tasks are cancelled (a KeyboardInterrupt in the worker
stops the session and its commands), waited for within a bound, then killed, and a Ray this module
started is shut down.

A cluster of several machines needs ``out_dir`` (working copies, session records) and the tasks'
local repositories and directories on a filesystem every node sees, or repositories given as URLs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from .attempts import Attempt, crashed_record, interrupted_record
from .runner import RunSpec, run_task
from .tasks import Task

__all__ = ["RayUnavailableError", "connect", "run_on_ray"]

#: Seconds a cancelled Ray task has to clean up before it is killed.
CANCEL_GRACE = 20.0
#: Seconds each ``ray.wait`` blocks (a thread), so that cancellation is noticed promptly.
_POLL = 0.5
#: Seconds ``ray.init`` may take.
INIT_TIMEOUT = 120.0


class RayUnavailableError(RuntimeError):
    """The Ray backend was chosen but ray is not installed (or cannot connect)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailableError("the Ray backend needs the ray package: pip install 'ra-agent[ray]'") from None
    return ray


def connect() -> Any:
    """``ray``, imported (the check that it is installed, before anything runs)."""
    return _ray()


def _task_in_worker(task: Task, spec: RunSpec, session_id: str) -> dict[str, Any]:
    """What a Ray worker runs: the same per-task code as the local backend, in its own loop."""
    return asyncio.run(run_task(task, spec, session_id=session_id))


async def run_on_ray(
    todo: list[Task],
    spec: RunSpec,
    concurrency: int,
    record: Callable[[dict[str, Any]], None],
    listener: Any,
    address: str | None,
    options: Mapping[str, Any] | None,
) -> None:
    ray = _ray()
    started_here = False
    if not ray.is_initialized():
        init: dict[str, Any] = {"address": address} if address else {"include_dashboard": False}
        try:
            await asyncio.wait_for(asyncio.to_thread(ray.init, **init, log_to_driver=False), INIT_TIMEOUT)
        except TimeoutError:
            raise RayUnavailableError(f"ray.init({address or ''}) did not finish within {INIT_TIMEOUT:g}s") from None
        except ConnectionError as exc:
            raise RayUnavailableError(f"cannot connect to the Ray cluster at {address}: {exc}") from None
        started_here = True
    remote = ray.remote(max_retries=0)(_task_in_worker).options(**{"num_cpus": 1, **dict(options or {})})
    queue = list(reversed(todo))
    running: dict[Any, Attempt] = {}
    try:
        while queue or running:
            while queue and len(running) < concurrency:
                attempt = Attempt(queue.pop())
                running[remote.remote(attempt.task, spec, attempt.session_id)] = attempt
                if listener is not None and hasattr(listener, "task_started"):
                    listener.task_started(attempt.task)
            ready, _ = await asyncio.to_thread(ray.wait, list(running), num_returns=1, timeout=_POLL)
            for ref in ready:
                attempt = running.pop(ref)
                try:
                    result = await asyncio.to_thread(ray.get, ref, timeout=60)
                except Exception as exc:
                    result = crashed_record(attempt, _describe(exc))
                record(result)
    except BaseException:
        await asyncio.shield(_cancel(ray, running))
        for attempt in running.values():
            record(interrupted_record(attempt, "the batch was interrupted while the task ran"))
        raise
    finally:
        if started_here:
            await asyncio.shield(asyncio.to_thread(ray.shutdown))


async def _cancel(ray: Any, running: dict[Any, Any]) -> None:
    """Cancel the in-flight tasks (their clean-up runs), wait for them within a bound, then kill."""
    refs = list(running)
    if not refs:
        return
    for ref in refs:
        ray.cancel(ref, force=False)
    deadline = time.monotonic() + CANCEL_GRACE
    pending = refs
    while pending and time.monotonic() < deadline:
        _, pending = await asyncio.to_thread(ray.wait, pending, num_returns=len(pending), timeout=_POLL)
    for ref in pending:
        try:
            ray.cancel(ref, force=True)
        except Exception:
            continue


def _describe(exc: BaseException) -> str:
    """A Ray error in one line: a worker that died says so; a task's own exception by its cause."""
    name = type(exc).__name__
    cause = getattr(exc, "cause", None)
    if cause is not None and not isinstance(cause, BaseException):
        cause = None
    if name in ("WorkerCrashedError", "NodeDiedError", "OutOfMemoryError", "LocalRayletDiedError"):
        return f"the Ray worker running the task died ({name}): {str(exc).strip().splitlines()[0]}"
    if cause is not None:
        return f"{type(cause).__name__}: {cause}"
    text = str(exc).strip().splitlines()
    return f"{name}: {text[0] if text else ''}"
