"""``ra batch TASKS.jsonl``: run a file of tasks through :mod:`ra.batch` (docs/batch.md).

The model settings resolve as for ``ra`` itself (flags, environment, the config file), once, in
this process; each task builds its own client from a :class:`ClientRecipe` - also in a Ray worker,
where the recipe arrives pickled. Ctrl-C (or SIGTERM/SIGHUP) stops starting tasks, stops the
running ones and records them as ``interrupted``; a second one exits at once.

Exit codes: 0 every task passed, 1 a task did not pass, 2 usage (a bad flag or tasks file, an
output directory in use), 3 provider setup, 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from .errors import ExitCode, RunError, UsageError

__all__ = ["ClientRecipe", "recipe_for", "run_batch"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"ra batch: {message}")


def _parser() -> argparse.ArgumentParser:
    from .argtypes import float_number as _float
    from .argtypes import positive_float as _positive_float
    from .argtypes import positive_int as _positive_int
    from .config import PROFILES, PROVIDERS, REASONING_EFFORTS
    from .policy import _budget

    p = _Parser(
        prog="ra batch",
        usage="ra batch TASKS.jsonl [--out DIR] [--concurrency N] [--backend local|ray [--address ADDR]] "
        "[--retry-failed] [--keep-worktrees] [model flags]",
        description="Run every task of TASKS.jsonl (one JSON object per line: id, repo or directory, "
        "instruction, ...; see docs/batch.md), each in its own working copy, and append a result line per "
        "task to OUT/results.jsonl. Running it again skips the tasks that have a result.",
    )
    p.add_argument("tasks", metavar="TASKS.jsonl")
    p.add_argument("--out", metavar="DIR", help="output directory (default: ./ra-batch-<tasks file name>)")
    p.add_argument("--concurrency", type=_positive_int, default=4, metavar="N", help="tasks at once (default 4)")
    p.add_argument("--backend", choices=("local", "ray"), default="local", help="where tasks run (default: local)")
    p.add_argument("--address", metavar="ADDR", help="--backend ray: the cluster (ray.init(address=...))")
    p.add_argument("--retry-failed", action="store_true", help="run again the tasks whose result is not 'passed'")
    p.add_argument("--keep-worktrees", action="store_true", help="keep each task's working copy (OUT/work/ID)")
    p.add_argument("--json", action="store_true", help="the summary as one JSON object on stdout")
    g = p.add_argument_group("model (as for `ra`; a task's own model or profile wins)")
    g.add_argument("--provider", choices=PROVIDERS)
    g.add_argument("--model")
    g.add_argument("--base-url", metavar="URL")
    g.add_argument("--profile", choices=PROFILES)
    g.add_argument("--temperature", type=_float, metavar="T")
    g.add_argument("--top-p", type=_float, metavar="P")
    g.add_argument("--max-tokens", type=_positive_int, metavar="N")
    g.add_argument("--reasoning-effort", choices=REASONING_EFFORTS)
    g = p.add_argument_group("limits (defaults for tasks that set none)")
    g.add_argument("--max-steps", type=_positive_int, metavar="N", help="model calls per task (max_turns)")
    g.add_argument("--max-budget-usd", type=_budget, metavar="USD", help="spend per task (its models need a price)")
    g.add_argument("--timeout", type=_positive_float, metavar="SECONDS", help="seconds per task, check included")
    return p


@dataclass(frozen=True, slots=True)
class ClientRecipe:
    """How a task's model client is built (picklable, for Ray workers; the key is never shown).

    ``key_env`` names the environment variable the key is read from where the client is built,
    instead of carrying the key (``api_key`` None): what :func:`recipe_for` does for a Ray this
    command starts on this machine, whose workers inherit this process's environment - so the
    key never passes through Ray's object store."""

    provider: str
    base_url: str | None
    api_key: str | None = field(default=None, repr=False)
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    key_env: str | None = None

    def __call__(self, task: Any) -> Any:
        from .config import Settings
        from .providers import build_client

        api_key = self.api_key
        if api_key is None and self.key_env is not None:
            api_key = os.environ.get(self.key_env) or None
            if api_key is None:
                raise RunError(
                    f"ra batch: {self.key_env} is not set where the task runs (a Ray worker reads the key "
                    "from its own environment)",
                    ExitCode.PROVIDER,
                )
        settings = Settings(
            provider=self.provider,
            model=None,
            base_url=self.base_url,
            api_key=api_key,
            key_source="",
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
        )
        return build_client(settings)


def recipe_for(settings: Any, environ: Mapping[str, str], *, backend: str, address: str | None) -> ClientRecipe:
    """The recipe for ``settings``. On a Ray this command starts here (no ``--address``) the
    workers are this process's children and inherit its environment: a key that came from an
    environment variable is read there again and not put in the recipe, which Ray carries through
    its object store. A cluster's workers (``--address``) do not have this environment: the key
    travels in the recipe (docs/batch.md)."""
    from .config import PROVIDER_ENV

    key_env = None
    if backend == "ray" and address is None and settings.api_key:
        names = [*PROVIDER_ENV.get(settings.provider, ((), None))[0], "OPENAI_API_KEY"]
        key_env = next((name for name in names if environ.get(name) == settings.api_key), None)
    return ClientRecipe(
        settings.provider,
        settings.base_url,
        None if key_env else settings.api_key,
        settings.temperature,
        settings.top_p,
        settings.max_tokens,
        key_env,
    )


def run_batch(argv: list[str]) -> int:
    """``ra batch ...``; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.address and args.backend != "ray":
        raise UsageError("ra batch: --address is for --backend ray")
    import ra.batch
    from ra.batch import TasksFileError

    from .config import Flags, resolve
    from .render import use_live_output

    try:
        tasks = ra.batch.load_tasks(args.tasks)  # checked before any provider is asked anything
    except TasksFileError as exc:
        raise RunError(f"ra batch: {exc}", ExitCode.USAGE) from None
    settings = resolve(
        Flags(
            provider=args.provider,
            model=args.model,
            base_url=args.base_url,
            profile=args.profile,
            temperature=args.temperature,
            top_p=args.top_p,
            max_tokens=args.max_tokens,
            reasoning_effort=args.reasoning_effort,
        ),
        os.environ,
    )
    out = args.out or f"ra-batch-{Path(args.tasks).stem}"
    display = _display(use_live_output(sys.stdout, sys.stderr))
    recipe = recipe_for(settings, os.environ, backend=args.backend, address=args.address)
    options: dict[str, Any] = {
        "out_dir": out,
        "concurrency": args.concurrency,
        "backend": args.backend,
        "ray_address": args.address,
        "client_factory": recipe,
        "provider": settings.provider,
        "profile": settings.profile,
        "max_turns": args.max_steps,
        "max_budget_usd": args.max_budget_usd,
        "timeout": args.timeout,
        "retry_failed": args.retry_failed,
        "keep_worktrees": args.keep_worktrees,
        "listener": display,
    }
    try:
        code = asyncio.run(_main(tasks, settings, options))
    finally:
        display.close()
    report = display.report
    if report is not None:
        from .batch_display import write_summary

        write_summary(report, sys.stdout, as_json=args.json)
    return code


def _check_budget_prices(tasks: list[Any], model: str, budget: float | None, provider: str) -> None:
    """A task with a budget whose model has no price is refused before anything runs (the session
    would refuse it only after its first, paid, call)."""
    from ra.llm.pricing import find_price

    for task in tasks:
        if (task.max_budget_usd if task.max_budget_usd is not None else budget) is None:
            continue
        name = task.model or model
        price, _ = find_price(name, provider=provider or None)
        if price is None:
            raise RunError(
                f"ra batch: {task.source}: a budget cannot be kept on model {name!r}: no price is known for it "
                f"({provider}); drop the budget or use a model ra can price",
                ExitCode.USAGE,
            )


def _display(live: bool) -> Any:
    from .batch_display import BatchDisplay

    return BatchDisplay(live=live)


async def _main(tasks: list[Any], settings: Any, options: dict[str, Any]) -> int:
    from ra.batch import OutDirError, RayUnavailableError, ResultsFormatError, run_async

    from .providers import build_adapter, resolve_model

    adapter = build_adapter(settings)
    try:
        options["model"] = await resolve_model(settings, adapter)  # once, not per task
    finally:
        await adapter.close()
    _check_budget_prices(tasks, options["model"], options["max_budget_usd"], settings.provider)
    options["reasoning_effort"] = settings.reasoning_effort
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    signals: list[int] = []

    def stop(signum: int) -> None:
        if signals:
            os._exit(128 + signum)  # a second signal: the user means it
        signals.append(signum)
        main.cancel()

    handled = []
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue
        loop.add_signal_handler(signum, stop, signum)
        handled.append(signum)
    try:
        report = await run_async(tasks, **options)
    except asyncio.CancelledError:
        if not signals:
            raise
        return ExitCode.INTERRUPTED if signals[0] == signal.SIGINT else 128 + signals[0]
    except (OutDirError, ResultsFormatError, RayUnavailableError) as exc:
        raise RunError(f"ra batch: {exc}", ExitCode.USAGE) from None
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
    return ExitCode.DONE if report.all_passed else ExitCode.FAILED
