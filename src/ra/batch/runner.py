"""One task, start to end: working copy, session, check, diff, clean-up -> its result line.

The same code runs in the coordinator's process (the local backend) and in a Ray worker, so
everything it needs travels in :class:`RunSpec` (picklable) and everything it produces is the
returned dict. It never raises for what a task can do wrong - a working copy that cannot be made,
a model error, a failing or hanging check, a timeout - those are results. An exception it does
not expect (a bug, a client factory that raises) becomes a ``crashed`` result. Cancelling it (Ctrl-C,
``ray.cancel``) stops the session and its commands and removes the working copy before the
cancellation goes on: nothing of the task is left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .tasks import Task
from .workcopy import WorkingCopy, WorkingCopyError, create_working_copy

if TYPE_CHECKING:
    from ra.agent.session import Session
    from ra.llm.client import Client

__all__ = ["ClientFactory", "RunSpec", "SandboxUnavailableError", "run_task"]

#: Builds the model client for a task (called once per task, in the process that runs it).
ClientFactory = Callable[[Task], "Client"]

#: Characters of the check's output kept in the result (its end: where test runners summarise).
CHECK_TAIL = 4000
#: Bounds on the steps that are not the task's own work: git, closing a session.
GIT_TIMEOUT = 300.0
DIFF_TIMEOUT = 120.0
CLOSE_TIMEOUT = 30.0
#: A check's bound when the task has no timeout.
DEFAULT_CHECK_TIMEOUT = 3600.0
#: How long a session past its time limit may take to stop before it is aborted.
STOP_GRACE = 15.0


class SandboxUnavailableError(RuntimeError):
    """A task asked for a sandbox this installation of ra cannot provide."""


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What every task of a batch shares (it travels to Ray workers: keep it picklable)."""

    out_dir: str
    client_factory: ClientFactory | None = None
    #: The adapter name in the client; None: the client's default provider.
    provider: str | None = None
    #: Defaults for tasks that do not set their own.
    model: str | None = None
    profile: str | None = None
    max_turns: int | None = None
    max_budget_usd: float | None = None
    timeout: float | None = None
    reasoning_effort: str | None = None
    keep_worktrees: bool = False
    #: Bytes of diff kept in the result line; a longer diff goes whole to ``diffs/ID.diff``.
    max_diff_bytes: int = 1_000_000

    def __repr__(self) -> str:  # the factory may hold a key: never show it
        return f"RunSpec(out_dir={self.out_dir!r}, provider={self.provider!r}, model={self.model!r})"


def default_client_factory(task: Task) -> Client:
    """``ra.llm.Client.from_env()``: every provider whose key is in the environment."""
    from ra.llm.client import Client

    return Client.from_env()


def base_record(task: Task, session_id: str | None) -> dict[str, Any]:
    """A result line's fields, empty: what every status has."""
    return {
        "id": task.id,
        "status": "error",
        "stop_reason": None,
        "steps": 0,
        "tool_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": None,
        "duration_s": 0.0,
        "check": None,
        "check_exit_code": None,
        "check_output": None,
        "diff": None,
        "diff_truncated": False,
        "base": None,
        "session_id": session_id,
        "model": None,
        "error": None,
        "started_at": time.time(),
        "working_copy": None,
    }


async def run_task(task: Task, spec: RunSpec, *, session_id: str | None = None) -> dict[str, Any]:
    """Run ``task``; return its result line (see docs/batch.md)."""
    record = base_record(task, session_id)
    started = time.monotonic()
    timeout = task.timeout if task.timeout is not None else spec.timeout
    deadline = None if timeout is None else started + timeout

    def left(cap: float) -> float:
        return cap if deadline is None else max(0.01, min(cap, deadline - time.monotonic()))

    copy: WorkingCopy | None = None
    env: Any = None
    client: Client | None = None
    session: Session | None = None
    try:
        try:
            copy = await create_working_copy(task, Path(spec.out_dir), timeout=left(GIT_TIMEOUT))
        except WorkingCopyError as exc:
            expired = deadline is not None and time.monotonic() >= deadline
            record.update(status="timeout" if expired else "error", error=f"working copy: {exc}")
            return record
        record["base"] = copy.base
        env = _environment(task, str(copy.path))
        await env.initialize()
        client = (spec.client_factory or default_client_factory)(task)
        session = _session(task, spec, env, client, session_id, left)
        record["session_id"] = session.id
        record["model"] = session.model
        await _agent(task, session, record, deadline, left)
        await _close(session)
        if record["status"] == "pending" and task.check is not None:
            await _check(task, env, record, deadline, left)
        if record["status"] == "pending":
            record["status"] = "passed" if record["stop_reason"] == "completed" else "failed"
    except (SandboxUnavailableError, ValueError, OSError) as exc:
        record.update(status="error", error=f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        lines = traceback.format_exception(exc)
        record.update(status="crashed", error=f"{type(exc).__name__}: {exc}", traceback="".join(lines)[-4000:])
    except BaseException:
        # Cancelled: the coordinator records the task as interrupted; no diff is taken (the
        # batch is stopping), but the session, its commands and the working copy still go.
        record["cancelled"] = True
        raise
    finally:
        await _finish(task, spec, record, copy, env, client, session)
        record["duration_s"] = round(time.monotonic() - started, 3)
    return record


def _environment(task: Task, path: str) -> Any:
    from ra.env.local import LocalExecutionEnvironment

    local = LocalExecutionEnvironment(working_dir=path)
    if task.sandbox is None:
        return local
    try:
        from ra.env.sandbox import SandboxedExecutionEnvironment, SandboxPolicy
    except ImportError as exc:
        raise SandboxUnavailableError(
            f"the task asks for sandbox {task.sandbox!r} but this ra has no sandbox (ra.env.sandbox: {exc})"
        ) from None
    try:
        return SandboxedExecutionEnvironment(local, SandboxPolicy(task.sandbox))
    except Exception as exc:  # SandboxUnavailable: bwrap missing, user namespaces off
        raise SandboxUnavailableError(f"sandbox {task.sandbox!r}: {exc}") from None


def _session(
    task: Task, spec: RunSpec, env: Any, client: Client, session_id: str | None, left: Callable[[float], float]
) -> Session:
    import dataclasses

    from ra.agent.session import Session
    from ra.agent.store import FileSessionStore
    from ra.sdk import QueryOptions

    options = QueryOptions(
        model=task.model or spec.model,
        provider=spec.provider,
        profile=task.profile or spec.profile,
        env=env,
        client=client,
    )
    profile = options.build_profile()
    config = options.build_config(profile)
    max_turns = task.max_turns if task.max_turns is not None else spec.max_turns
    budget = task.max_budget_usd if task.max_budget_usd is not None else spec.max_budget_usd
    changes: dict[str, Any] = {"max_budget_usd": budget, "max_turns_per_input": max_turns or 0}
    if spec.reasoning_effort is not None:
        changes["reasoning_effort"] = spec.reasoning_effort
    limit = left(float("inf"))
    if limit != float("inf"):
        changes["time_limit_s"] = limit
    config = dataclasses.replace(config, **changes)
    store = FileSessionStore(Path(spec.out_dir) / "sessions")
    return Session(profile, env, client, config, store=store, session_id=session_id)


async def _agent(
    task: Task, session: Session, record: dict[str, Any], deadline: float | None, left: Callable[[float], float]
) -> None:
    from ra.agent.config import StopReason

    submit = asyncio.ensure_future(session.submit(task.instruction))
    try:
        # The session stops itself at its time limit; this bounds a session that does not.
        bound = None if deadline is None else left(float("inf")) + STOP_GRACE
        done, _ = await asyncio.wait([submit], timeout=bound)
    except BaseException:
        submit.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait([submit], timeout=CLOSE_TIMEOUT)
        raise
    if not done:
        submit.cancel()  # aborts the session (its commands are killed)
        await asyncio.wait([submit], timeout=CLOSE_TIMEOUT)
        _tally(session, record, None)
        record.update(
            status="timeout", stop_reason="time_limit", error=f"the task did not stop at its {task.timeout}s limit"
        )
        return
    result = submit.result()
    _tally(session, record, result)
    reason = result.stop_reason
    record["stop_reason"] = str(reason)
    if reason is StopReason.TIME_LIMIT:
        limit = task.timeout if task.timeout is not None else None
        record.update(status="timeout", error=f"the agent was stopped at the task's time limit ({limit or ''}s)")
    elif reason is StopReason.ERROR:
        error = result.error
        record.update(
            status="error", error=f"{type(error).__name__}: {error}" if error else "the agent stopped on an error"
        )
    else:
        record["status"] = "pending"


def _tally(session: Session, record: dict[str, Any], result: Any) -> None:
    usage = session.usage
    record.update(
        steps=result.steps if result is not None else session.turn_count,
        tool_calls=result.tool_calls if result is not None else record["tool_calls"],
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=None if session.unpriced_calls else round(session.total_cost_usd, 6),
    )


async def _check(
    task: Task, env: Any, record: dict[str, Any], deadline: float | None, left: Callable[[float], float]
) -> None:
    assert task.check is not None
    bound = left(DEFAULT_CHECK_TIMEOUT)
    result = await env.exec_command(task.check, timeout_ms=max(1, int(bound * 1000)))
    output = result.output
    record.update(check_exit_code=result.exit_code, check_output=output[-CHECK_TAIL:])
    if result.timed_out:
        record.update(
            status="timeout",
            check="failed",
            check_exit_code=None,
            error=f"the check did not finish within {bound:.1f}s",
        )
        return
    passed = result.exit_code == 0
    record.update(check="passed" if passed else "failed", status="passed" if passed else "failed")


async def _close(session: Session) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(session.close(), CLOSE_TIMEOUT)


async def _finish(
    task: Task,
    spec: RunSpec,
    record: dict[str, Any],
    copy: WorkingCopy | None,
    env: Any,
    client: Client | None,
    session: Session | None,
) -> None:
    """Stop what runs, take the diff, remove the working copy: each step bounded, none may skip the next."""
    if session is not None:
        await _close(session)
    if env is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(env.cleanup(), CLOSE_TIMEOUT)
    if client is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(), CLOSE_TIMEOUT)
    if copy is None:
        return
    if record.get("cancelled"):
        if not spec.keep_worktrees:
            await asyncio.wait_for(copy.remove(timeout=GIT_TIMEOUT), GIT_TIMEOUT)
        return
    try:
        diff = await copy.diff(timeout=DIFF_TIMEOUT)
    except WorkingCopyError as exc:
        record["diff_error"] = str(exc)
    else:
        _store_diff(task, spec, record, diff)
    if spec.keep_worktrees:
        record["working_copy"] = str(copy.path)
    else:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(copy.remove(timeout=GIT_TIMEOUT), GIT_TIMEOUT)


def _store_diff(task: Task, spec: RunSpec, record: dict[str, Any], diff: str) -> None:
    data = diff.encode()
    if len(data) <= spec.max_diff_bytes:
        record["diff"] = diff
        return
    path = Path(spec.out_dir) / "diffs" / f"{task.id}.diff"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    record.update(diff=data[: spec.max_diff_bytes].decode("utf-8", "ignore"), diff_truncated=True, diff_file=str(path))
