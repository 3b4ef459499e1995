"""What ``ra batch`` shows: progress while the tasks run, a summary table at the end.

On a terminal (stdout and stderr both, no NO_COLOR, TERM not dumb) a rich progress bar on
stderr with the finished tasks printed above it; otherwise one plain line per finished task.
The summary goes to stdout either way (``--json``: the report as one JSON object). Error texts
come from models, tools and checks: they are shown through :func:`~ra.cli.terminal_text.printable`.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from .terminal_text import printable

__all__ = ["BatchDisplay", "report_json", "write_summary"]

_STYLE = {"passed": "green", "failed": "red", "error": "red", "timeout": "yellow", "crashed": "magenta"}


def _line(record: dict[str, Any]) -> str:
    parts = [f"{record['id']}: {record['status']}"]
    if record.get("check") is not None:
        parts.append(f"check {record['check']}")
    parts.append(f"{record.get('steps') or 0} steps")
    cost = record.get("cost_usd")
    if cost is not None:
        parts.append(f"${cost:.4f}")
    parts.append(f"{record.get('duration_s') or 0:.1f}s")
    text = " · ".join(parts)
    error = record.get("error")
    if error and record["status"] != "passed":
        first = printable(str(error)).strip().splitlines()[0] if str(error).strip() else ""
        text += f" · {first[:200]}"
    return text


class BatchDisplay:
    """A :class:`ra.batch.BatchListener`: live on a terminal, plain lines otherwise."""

    def __init__(self, *, live: bool, stream: IO[str] | None = None) -> None:
        self.live = live
        self.stream = stream or sys.stderr
        self.report: Any = None
        self._progress: Any = None
        self._bar: Any = None
        self._done = 0
        self._to_run = 0

    def batch_started(self, total: int, skipped: int, to_run: int) -> None:
        self._to_run = to_run
        head = f"ra batch: {total} tasks, {skipped} already done, {to_run} to run"
        if not self.live:
            self._write(head)
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(file=self.stream, highlight=False)
        console.print(head)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[running]}"),
            console=console,
            transient=True,
        )
        self._bar = self._progress.add_task("tasks", total=to_run, running="")
        self._progress.start()
        self._running: list[str] = []

    def task_started(self, task: Any) -> None:
        if self._progress is not None:
            self._running.append(task.id)
            self._refresh()

    def task_finished(self, record: dict[str, Any]) -> None:
        self._done += 1
        text = f"[{self._done}/{self._to_run}] {_line(record)}"
        if self._progress is None:
            self._write(text)
            return
        from rich.text import Text

        if record["id"] in self._running:
            self._running.remove(record["id"])
        self._progress.console.print(Text(text, style=_STYLE.get(record["status"], "")))
        self._progress.advance(self._bar)
        self._refresh()

    def _refresh(self) -> None:
        shown = ", ".join(self._running[:3]) + (f" +{len(self._running) - 3}" if len(self._running) > 3 else "")
        self._progress.update(self._bar, running=f"running: {shown}" if shown else "")

    def batch_finished(self, report: Any) -> None:
        self.report = report
        self.close()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass


def report_json(report: Any) -> dict[str, Any]:
    return {
        "out_dir": report.out_dir,
        "results": f"{report.out_dir}/results.jsonl",
        "total": report.total,
        "ran": report.ran,
        "skipped": report.skipped,
        "interrupted": report.interrupted,
        "counts": report.counts,
        "pass_rate": report.pass_rate,
        "cost_usd": report.cost_usd,
        "unpriced": report.unpriced,
        "input_tokens": report.input_tokens,
        "output_tokens": report.output_tokens,
        "wall_s": report.wall_s,
    }


def write_summary(report: Any, out: IO[str], *, as_json: bool = False) -> None:
    """The summary table (or ``--json``'s object) on ``out``."""
    data = report_json(report)
    if as_json:
        out.write(json.dumps(data) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold", show_header=False)
    table.add_column("", no_wrap=True)
    table.add_column("", overflow="fold")
    counts = data["counts"]
    shown = ", ".join(f"{counts[s]} {s}" for s in counts if counts[s])
    table.add_row("tasks", f"{data['total']} ({shown or 'none run'})")
    rate = data["pass_rate"]
    table.add_row("pass rate", "-" if rate is None else f"{rate:.1%}")
    cost = f"${data['cost_usd']:.4f}"
    if data["unpriced"]:
        cost += f" (+ {data['unpriced']} task(s) of unknown price)"
    table.add_row("cost", cost)
    table.add_row("tokens", f"{data['input_tokens']:,} in / {data['output_tokens']:,} out")
    run = f"{data['wall_s']:.1f}s ({data['ran']} run, {data['skipped']} skipped"
    table.add_row("wall time", run + (", interrupted)" if data["interrupted"] else ")"))
    table.add_row("results", data["results"])
    width = None if out.isatty() else 4096
    Console(file=out, width=width, soft_wrap=False, highlight=False).print(table)
