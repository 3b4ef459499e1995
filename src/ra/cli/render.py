"""What ``ra`` shows while it works: live (rich), plain text, JSON lines, or nothing.

* :class:`LiveRenderer` — a terminal: streamed assistant text, one line per tool call with a
  spinner while it runs, a short preview of its output, tokens and cost at the end. Progress goes
  to stderr; the final answer to stdout.
* :class:`PlainRenderer` — stdout is not a terminal, or ``NO_COLOR`` is set: the same information
  as plain lines on stderr, no colour, no cursor movement; the answer alone on stdout, so
  ``ra "task" > answer.txt`` captures exactly the answer.
* :class:`JsonRenderer` — ``--json``: one JSON record per event on stdout, then a ``result`` record.
* :class:`QuietRenderer` — ``--quiet``: only the answer (and one-line errors).

A failed tool call shows the first lines of its error (why it failed: the model reads the same
text); ``--verbose`` shows all of it. On a terminal, every successful edit (``apply_patch``,
``edit_file``, ``write_file``) is followed by a compact diff (:mod:`ra.cli.diffs`), and the closing
lines say which files the run changed (plain output says that too, without diffs; ``--json``
carries the diff records in the events' metadata).

Text from the model and from tools is shown without its terminal control sequences
(:mod:`ra.cli.terminal_text`): a file or a command's output cannot clear the screen, retitle the
window or write the clipboard through ``ra``.

A renderer is a session listener (``__call__(event)``) plus a few calls from the runner. Text-only
replies are final answers unless submit mode is on (then the model is told to continue), so
renderers show them as progress only in submit mode and otherwise leave them to :meth:`answer`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import IO, TYPE_CHECKING, Any

from .diffs import ChangeTally, diff_renderable, file_diffs, rows_for, short_path
from .records import JsonlWriter, event_record, jsonable
from .terminal_text import printable, visible

if TYPE_CHECKING:
    from ra.agent.events import SessionEvent

__all__ = [
    "JsonRenderer",
    "LiveRenderer",
    "PlainRenderer",
    "QuietRenderer",
    "Renderer",
    "RunSummary",
    "choose_renderer",
    "error_preview",
    "output_preview",
    "summarize_arguments",
]

_PREVIEW_LINES = 3
_SUMMARY_CHARS = 100
#: Lines of a failed call's result shown without --verbose, and the longest line shown whole.
_ERROR_LINES = 3
_ERROR_LINE_CHARS = 300


# -- summaries -------------------------------------------------------------------------------------


def _one_line(text: str, limit: int = _SUMMARY_CHARS) -> str:
    lines = [line for line in printable(str(text)).strip().splitlines() if line.strip()]
    first = " ".join(lines[0].split()) if lines else ""
    more = len(lines) > 1
    if len(first) > limit:
        first, more = first[: limit - 1].rstrip(), True
    return first + (" …" if more else "")


def _patch_files(patch: str) -> str:
    files: list[str] = []
    for line in patch.splitlines():
        for prefix, verb in (
            ("*** Add File: ", "add"),
            ("*** Update File: ", "update"),
            ("*** Delete File: ", "delete"),
            ("+++ b/", "update"),
            ("+++ ", "update"),
        ):
            if line.startswith(prefix):
                path = line[len(prefix) :].strip()
                if path and path != "/dev/null":
                    files.append(f"{verb} {path}" if prefix.startswith("***") else path)
                break
    return ", ".join(dict.fromkeys(files)) or "(patch)"


def summarize_arguments(name: str, arguments: Any) -> str:
    """A one-line summary of a tool call's arguments, for humans: every control character shown
    as a symbol (a path or a command can carry them; see :mod:`ra.cli.terminal_text`)."""
    return visible(_summary(name, arguments)).replace("\n", "\u2424")


def tool_label(name: Any, arguments: Any) -> str:
    """``name summary``: how a tool call is named on screen."""
    tool = visible(str(name or ""))
    return f"{tool} {summarize_arguments(tool, arguments)}".rstrip()


def _summary(name: str, arguments: Any) -> str:
    if not isinstance(arguments, dict):
        return _one_line(str(arguments))
    a = arguments
    if name in ("shell_command", "shell"):
        text = _one_line(a.get("command", ""))
        if a.get("workdir"):
            text += f"  (in {a['workdir']})"
        return text
    if name == "read_file":
        path = str(a.get("file_path") or a.get("path") or "")
        if a.get("offset") or a.get("limit"):
            start = int(a.get("offset") or 1)
            path += f":{start}" + (f"-{start + int(a['limit']) - 1}" if a.get("limit") else "")
        return path
    if name in ("write_file", "edit_file"):
        path = str(a.get("file_path") or a.get("path") or "")
        return path + ("  (every occurrence)" if a.get("replace_all") else "")
    if name == "list_dir":
        return str(a.get("dir_path") or a.get("path") or ".")
    if name in ("grep_files", "grep"):
        text = repr(a.get("pattern", ""))
        if a.get("path"):
            text += f" in {a['path']}"
        if a.get("include"):
            text += f" ({a['include']})"
        return text
    if name == "apply_patch":
        return _one_line(_patch_files(str(a.get("patch") or a.get("input") or "")))
    if name == "web_search":
        return repr(a.get("query", ""))
    if name in ("web_open", "web_find"):
        text = str(a.get("url", ""))
        if name == "web_find":
            text += f" /{a.get('pattern', '')}/"
        return _one_line(text)
    if name == "submit":
        return _one_line(str(a.get("answer", "")), 60)
    return _one_line(json.dumps(a, ensure_ascii=False, default=str))


def output_preview(output: str, lines: int = _PREVIEW_LINES, width: int = 120) -> tuple[list[str], int]:
    """The first ``lines`` non-empty lines of ``output`` (each cut to ``width``) and how many more
    lines there are."""
    all_lines = [line.rstrip() for line in str(output).splitlines()]
    while all_lines and not all_lines[-1]:
        all_lines.pop()
    while all_lines and not all_lines[0]:
        all_lines.pop(0)
    shown = [printable(line) for line in all_lines[:lines]]
    shown = [line if len(line) <= width else line[: width - 1] + "…" for line in shown]
    return shown, max(0, len(all_lines) - len(shown))


def error_preview(output: str, verbose: bool = False) -> tuple[list[str], int]:
    """The lines of a failed call's result to show, and how many non-empty lines are left out.

    Without ``verbose``: the first :data:`_ERROR_LINES` non-empty lines (blank separators add
    nothing to a glance), each cut to :data:`_ERROR_LINE_CHARS`. With it: every line as it is,
    blank ones included, minus blank lines at either end."""
    lines = [line.rstrip() for line in str(output).splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    if verbose:
        return [printable(line) for line in lines], 0
    text = [line for line in lines if line.strip()]
    shown = [printable(line) for line in text[:_ERROR_LINES]]
    shown = [line if len(line) <= _ERROR_LINE_CHARS else line[: _ERROR_LINE_CHARS - 1] + "…" for line in shown]
    return shown, len(text) - len(shown)


def _more_error_lines(more: int) -> str:
    return f"… {more} more line{'s' if more != 1 else ''} (--verbose shows all)"


def split_shell_output(output: str) -> tuple[str | None, str]:
    """``(status, body)`` of a shell tool's result ("Exit code: N ... Output:" then the output);
    ``(None, output)`` for anything else. The preview shows the command's output, not the header."""
    if not output.startswith("Exit code:"):
        return None, output
    head, sep, body = output.partition("\nOutput:")
    if not sep:
        return None, output
    status = head.splitlines()[0].removeprefix("Exit code:").strip()
    return f"exit {status}", body.removeprefix(" (none)").lstrip("\n")


def _child_error(d: dict[str, Any]) -> list[str]:
    output = str(d.get("output") or "")
    return error_preview(split_shell_output(output)[1] or output)[0]


def _duration(ms: Any) -> str:
    try:
        seconds = float(ms) / 1000
    except (TypeError, ValueError):
        return ""
    return f"{seconds:.1f}s" if seconds >= 0.1 else f"{int(float(ms))}ms"


class RunSummary:
    """Totals for the closing line: steps, tool calls, tokens, cost, time."""

    __slots__ = (
        "cost",
        "elapsed",
        "price_source",
        "recorded",
        "session_id",
        "steps",
        "tool_calls",
        "unpriced",
        "usage",
    )

    def __init__(
        self,
        steps: int,
        tool_calls: int,
        usage: Any,
        cost: float | None,
        elapsed: float,
        *,
        price_source: str | None = None,
        unpriced: list[str] | None = None,
        session_id: str | None = None,
        recorded: bool = False,
    ) -> None:
        self.steps = steps
        self.tool_calls = tool_calls
        self.usage = usage
        self.cost = cost
        self.elapsed = elapsed
        #: Where the prices came from: "catalog", "configured", "genai-prices", "local", "unknown",
        #: "mixed"; None when nothing was priced.
        self.price_source = price_source
        #: Models without a known price.
        self.unpriced = unpriced or []
        #: The session, and whether it is recorded (then the line names it, for ``--resume``).
        self.session_id = session_id
        self.recorded = recorded

    def line(self) -> str:
        u = self.usage
        parts = [
            f"{self.steps} step{'s' if self.steps != 1 else ''}",
            f"{self.tool_calls} tool call{'s' if self.tool_calls != 1 else ''}",
            f"tokens {getattr(u, 'input_tokens', 0):,} in / {getattr(u, 'output_tokens', 0):,} out",
        ]
        if getattr(u, "cache_read_tokens", None):
            parts[-1] += f" ({u.cache_read_tokens:,} cached)"
        parts.append(self._cost_text())
        parts.append(f"{self.elapsed:.1f}s")
        if self.session_id is not None and self.recorded:
            parts.append(f"session {self.session_id}")
        return " · ".join(parts)

    def _cost_text(self) -> str:
        if self.cost is None:
            models = ", ".join(self.unpriced) or "a model"
            return f"cost unknown (no price for {models}; set one under [prices] in the config)"
        source = _PRICE_SOURCE_WORDS.get(self.price_source or "", "")
        return f"cost ${self.cost:.4f}" + (f" ({source})" if source else "")

    def record(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "usage": jsonable(self.usage),
            "cost_usd": self.cost,
            "price_source": self.price_source,
            "elapsed_s": round(self.elapsed, 3),
            "session_id": self.session_id,
        }


#: How the closing line says where a cost's prices came from.
_PRICE_SOURCE_WORDS = {
    "catalog": "catalogue prices",
    "configured": "configured prices",
    "genai-prices": "genai-prices",
    "local": "local model, free",
    "mixed": "prices from more than one source",
}


def hook_lines(d: dict[str, Any], verbose: bool) -> list[str]:
    """What a HOOK event shows: its ``systemMessage`` (meant for the user) always; with --verbose
    also what the hook printed, unless it answered ``"suppressOutput": true`` (then the event
    carries no output)."""
    where = f"hook {d.get('event')}"
    lines = [f"{where}: {_one_line(str(d['system_message']), 200)}"] if d.get("system_message") else []
    if verbose and d.get("output"):
        lines.append(f"{where} output: {_one_line(str(d['output']), 400)}")
    return lines


# -- renderers -------------------------------------------------------------------------------------


class Renderer:
    """Base: ignores events; errors and notices as one line on stderr; answer on stdout."""

    #: Whether streamed/final assistant text is shown as progress (submit mode: never final).
    submit_mode = False
    #: ``--verbose``: failed calls' results (and diffs) in full.
    verbose = False
    #: The run's working directory: file names under it are shown relative to it.
    cwd: str | None = None

    def __init__(self, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> None:
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        #: Files changed since the last summary (a run, or an interactive turn).
        self.changes = ChangeTally()

    def _track_changes(self, d: dict[str, Any]) -> list[Any]:
        """The file diffs a finished call reports (none for a failed or skipped one), tallied."""
        if d.get("is_error") or d.get("skipped"):
            return []
        diffs = file_diffs(d.get("metadata"))
        for diff in diffs:
            self.changes.add(diff)
        return diffs

    def __call__(self, event: SessionEvent) -> None:
        pass

    def start(self, header: str) -> None:
        pass

    @staticmethod
    def _child_call(d: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """A subagent's finished tool call, from a ``subagent_event`` (nested agents as ``a/b``):
        ``(agent path, the call's data)``, or None for any other child event."""
        path = [str(d.get("agent_id"))]
        event = d.get("event")
        while event is not None and event.kind.value == "subagent_event":
            path.append(str(event.data.get("agent_id")))
            event = event.data.get("event")
        if event is None or event.kind.value != "tool_call_end":
            return None
        return visible("/".join(path)), event.data

    def notice(self, text: str) -> None:
        self._err(f"ra: {text}")

    def error(self, text: str) -> None:
        self.pause()
        self._err(f"ra: error: {text}")

    def answer(self, text: str) -> None:
        if text:
            if _is_terminal(self.stdout):  # `ra "task" > answer.txt` keeps the answer exactly
                text = printable(text)
            self.stdout.write(text if text.endswith("\n") else text + "\n")
            self.stdout.flush()

    def summary(self, summary: RunSummary) -> None:
        pass

    def result(self, record: dict[str, Any]) -> None:
        """The run's outcome as a record (JSON mode prints it)."""

    def pause(self) -> None:
        """Stop any live display (before printing something else, or for an input prompt)."""

    def close(self) -> None:
        self.pause()

    def _err(self, line: str) -> None:
        try:
            self.stderr.write(printable(line) + "\n")
            self.stderr.flush()
        except (OSError, ValueError):
            pass


class QuietRenderer(Renderer):
    def notice(self, text: str) -> None:
        pass


class JsonRenderer(Renderer):
    """``--json``: every event as one JSON line on stdout; the answer is in the ``result`` record."""

    def __init__(self, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> None:
        super().__init__(stdout, stderr)
        self.writer = JsonlWriter(self.stdout)

    def __call__(self, event: SessionEvent) -> None:
        self.writer.write(event_record(event))

    def notice(self, text: str) -> None:
        self.writer.write({"type": "notice", "timestamp": time.time(), "message": text})

    def answer(self, text: str) -> None:
        pass  # part of the result record

    def result(self, record: dict[str, Any]) -> None:
        self.writer.write(record)


class PlainRenderer(Renderer):
    """Plain lines on stderr (no colour, no cursor movement)."""

    def start(self, header: str) -> None:
        self._err(f"ra: {header}")

    def __call__(self, event: SessionEvent) -> None:
        kind = event.kind.value
        d = event.data
        if kind == "assistant_text_end":
            text = (d.get("text") or "").strip()
            if text and (d.get("tool_calls") or self.submit_mode):
                self._err(text)
        elif kind == "tool_call_start":
            self._err(f"> {tool_label(d.get('tool_name'), d.get('arguments'))}")
        elif kind == "tool_call_end":
            self._tool_end(d)
        elif kind == "retry":
            self._err(f"  retrying in {float(d.get('delay') or 0):.1f}s: {_one_line(d.get('message', ''), 160)}")
        elif kind == "context_pruned":
            self._err(
                f"  context too long: dropped {d.get('dropped_messages')} old messages "
                f"({d.get('remaining_messages')} left), retrying"
            )
        elif kind in ("warning", "loop_detection"):
            self._err(f"  warning: {_one_line(d.get('message', ''), 200)}")
        elif kind == "hook":
            for line in hook_lines(d, self.verbose):
                self._err(f"  {line}")
        elif kind == "steering_injected" and self.submit_mode:
            self._err("  (no tool call: asked the model to continue until it calls submit)")
        elif kind == "subagent_event" and (child := self._child_call(d)) is not None:
            self._child_end(*child)

    def _child_end(self, agent: str, d: dict[str, Any]) -> None:
        """A subagent's call: one line (its edits count in the changed-files summary)."""
        name = visible(str(d.get("tool_name")))
        if d.get("skipped"):
            return
        if d.get("is_error"):
            lines = _child_error(d)
            self._err(f"  [{agent}] {name} error: {lines[0] if lines else '(no message)'}")
            return
        changed = self._track_changes(d)
        what = f": {', '.join(short_path(diff.path, self.cwd) for diff in changed)}" if changed else ""
        self._err(f"  [{agent}] {name} ok{what}")

    def _tool_end(self, d: dict[str, Any]) -> None:
        output = str(d.get("output") or "")
        if d.get("skipped"):
            self._err(f"  not executed: {_one_line(output, 160)}")
            return
        if d.get("is_error"):
            status, body = split_shell_output(output)
            facts = ", ".join(f for f in (status, _duration(d.get("duration_ms"))) if f)
            lines, more = error_preview(body or output, self.verbose)
            self._err(f"  error ({facts}): {lines[0] if lines else '(no message)'}")
            for line in lines[1:]:
                self._err(f"  | {line}".rstrip())
            if more:
                self._err(f"  | {_more_error_lines(more)}")
            return
        self._track_changes(d)
        status, body = split_shell_output(output)
        lines, more = output_preview(body)
        count = len(body.splitlines())
        facts = [f for f in (status, _duration(d.get("duration_ms")), f"{count} line{'s' if count != 1 else ''}") if f]
        self._err(f"  ok ({', '.join(facts)})")
        for line in lines:
            self._err(f"  | {line}")
        if more:
            self._err(f"  | ... {more} more line{'s' if more != 1 else ''}")

    def summary(self, summary: RunSummary) -> None:
        if self.changes:
            self._err(f"ra: {self.changes.line(self.cwd)}")
            self.changes.clear()
        self._err(f"ra: {summary.line()}")


class LiveRenderer(Renderer):
    """rich on a terminal: progress on stderr with a live region, the answer on stdout."""

    def __init__(self, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> None:
        super().__init__(stdout, stderr)
        from rich.console import Console

        self.console = Console(file=self.stderr, highlight=False, soft_wrap=False)
        self.out = Console(file=self.stdout, highlight=False)
        self._live: Any = None
        self._text = ""
        self._running: dict[str, tuple[str, str]] = {}  # call_id -> (label, last output line)
        self._status = ""

    # live region ------------------------------------------------------------------------------
    def _renderable(self) -> Any:
        from rich.console import Group
        from rich.spinner import Spinner
        from rich.text import Text

        parts: list[Any] = []
        if self._text:
            height = max(3, self.console.size.height // 2)
            tail = self._text.splitlines()[-height:]
            parts.append(Text("\n".join(tail)))
        for label, last in self._running.values():
            spinner = Spinner("dots", text=Text.assemble((label, "bold")))
            parts.append(spinner)
            if last:
                parts.append(Text("    " + last[: max(10, self.console.size.width - 6)], style="dim"))
        if not parts and self._status:
            parts.append(Spinner("dots", text=Text(self._status, style="dim")))
        return Group(*parts)

    def _refresh(self) -> None:
        if self._live is None:
            from rich.live import Live

            self._live = Live(
                self._renderable(),
                console=self.console,
                transient=True,
                refresh_per_second=12,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
        else:
            self._live.update(self._renderable(), refresh=True)

    def pause(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _print(self, *renderables: Any) -> None:
        self.console.print(*renderables)

    # events -----------------------------------------------------------------------------------
    def start(self, header: str) -> None:
        from rich.text import Text

        self._print(Text(header, style="dim"))

    def __call__(self, event: SessionEvent) -> None:
        from rich.text import Text

        kind = event.kind.value
        d = event.data
        if kind == "turn_start":
            self._status = "thinking"
            self._refresh()
        elif kind == "assistant_text_delta":
            self._text += printable(d.get("delta") or "")
            self._refresh()
        elif kind == "assistant_text_end":
            text = printable(d.get("text") or "").strip()
            self._text = ""
            self._status = ""
            self._refresh()  # drop the streamed copy from the live region first
            if text and (d.get("tool_calls") or self.submit_mode):
                from rich.markdown import Markdown

                self._print(Markdown(text, hyperlinks=False))
        elif kind == "tool_call_start":
            name = d.get("tool_name", "")
            label = tool_label(name, d.get("arguments"))
            self._running[str(d.get("call_id"))] = (label, "")
            self._refresh()
        elif kind == "tool_call_output_delta":
            key = str(d.get("call_id"))
            if key in self._running:
                lines = [line for line in str(d.get("delta") or "").splitlines() if line.strip()]
                if lines:
                    self._running[key] = (self._running[key][0], printable(lines[-1]).strip())
                    self._refresh()
        elif kind == "tool_call_end":
            label, _ = self._running.pop(str(d.get("call_id")), (visible(str(d.get("tool_name"))), ""))
            self._refresh()  # the spinner row goes before the result is printed
            self._tool_end(label, d)
        elif kind == "retry":
            if d.get("discard_partial"):
                self._text = ""  # the retried call streams its answer afresh: do not show both
            msg = f"retrying in {float(d.get('delay') or 0):.1f}s: {_one_line(d.get('message', ''), 160)}"
            self._print(Text(msg, style="yellow"))
        elif kind == "context_pruned":
            self._print(
                Text(
                    f"context too long: dropped {d.get('dropped_messages')} old messages, retrying",
                    style="yellow",
                )
            )
        elif kind in ("warning", "loop_detection"):
            self._print(Text(f"warning: {_one_line(d.get('message', ''), 200)}", style="yellow"))
        elif kind == "hook":
            for line in hook_lines(d, self.verbose):
                self._print(Text(line, style="dim"))
        elif kind == "steering_injected" and self.submit_mode:
            self._print(Text("no tool call: asking the model to continue until it calls submit", style="dim"))
        elif kind == "subagent_event" and (child := self._child_call(d)) is not None:
            self._child_end(*child)
        elif kind in ("processing_end", "session_end"):
            self._status = ""
            self.pause()

    def _child_end(self, agent: str, d: dict[str, Any]) -> None:
        """A subagent's call: one dim line under the parent's, with the diff of an edit."""
        from rich.text import Text

        if d.get("skipped"):
            return
        name = visible(str(d.get("tool_name")))
        if d.get("is_error"):
            lines = _child_error(d)
            reason = lines[0] if lines else "(no message)"
            self._print(
                Text.assemble(("  ↳ ", "dim"), (f"{agent} ", "dim"), ("✗ ", "red"), (name, "bold"), f"  {reason}")
            )
            return
        self._print(Text.assemble(("  ↳ ", "dim"), (f"{agent} ", "dim"), ("✓ ", "green"), (name, "bold")))
        diffs = self._track_changes(d)
        if diffs:
            self._diffs(diffs, "")

    def _tool_end(self, label: str, d: dict[str, Any]) -> None:
        from rich.text import Text

        output = str(d.get("output") or "")
        duration = _duration(d.get("duration_ms"))
        if d.get("skipped"):
            self._print(Text.assemble(("✗ ", "yellow"), (label, "bold"), ("  not executed", "yellow")))
            return
        status, body = split_shell_output(output)
        facts = "  " + " · ".join(f for f in (status, duration) if f)
        if d.get("is_error"):
            from rich.padding import Padding

            self._print(Text.assemble(("✗ ", "red"), (label, "bold"), (facts, "dim")))
            lines, more = error_preview(body or output, self.verbose)
            if lines:
                # Wrapped to the terminal, not cut at its edge: the reason is the point.
                self._print(Padding(Text("\n".join(lines), style="dim red"), (0, 0, 0, 4), expand=False))
            if more:
                self._print(Text("    " + _more_error_lines(more), style="dim"))
            return
        self._print(Text.assemble(("✓ ", "green"), (label, "bold"), (facts, "dim")))
        diffs = self._track_changes(d)
        if diffs:
            self._diffs(diffs, output)
            return
        lines, more = output_preview(body, width=max(20, self.console.size.width - 6))
        for line in lines:
            self._print(Text("    " + line, style="dim"))
        if more:
            self._print(Text(f"    … {more} more line{'s' if more != 1 else ''}", style="dim"))

    def _diffs(self, diffs: list[Any], output: str) -> None:
        """What the edit changed, instead of the tool's own "Updated the following files" text;
        its notes (a loose match, say) are kept."""
        from rich.text import Text

        for diff in diffs:
            rows = rows_for(diff, len(diffs), self.verbose)
            self._print(diff_renderable(diff, cwd=self.cwd, max_rows=rows))
        for line in output.splitlines():
            if line.startswith("Note: "):
                self._print(Text("    " + line, style="dim"))

    def notice(self, text: str) -> None:
        from rich.text import Text

        self._print(Text(printable(f"ra: {text}"), style="dim"))

    def error(self, text: str) -> None:
        from rich.text import Text

        self.pause()
        self.console.print(Text.assemble(("ra: error: ", "bold red"), (printable(text), "red")))

    def answer(self, text: str) -> None:
        self.pause()
        if text:
            from rich.markdown import Markdown

            self.out.print(Markdown(printable(text), hyperlinks=False))

    def summary(self, summary: RunSummary) -> None:
        from rich.text import Text

        self.pause()
        if self.changes:
            self._print(self.changes.renderable(self.cwd))
            self.changes.clear()
        self._print(Text(summary.line(), style="dim"))


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def use_live_output(stdout: IO[str], stderr: IO[str], environ: dict[str, str] | Any = None) -> bool:
    """Live (rich) output only on a real terminal, without NO_COLOR, and not for TERM=dumb."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    try:
        return stdout.isatty() and stderr.isatty()
    except (AttributeError, ValueError):
        return False


def choose_renderer(
    *, json_mode: bool, quiet: bool, submit_mode: bool, verbose: bool = False, cwd: str | None = None
) -> Renderer:
    renderer: Renderer
    if json_mode:
        renderer = JsonRenderer()
    elif quiet:
        renderer = QuietRenderer()
    elif use_live_output(sys.stdout, sys.stderr):
        renderer = LiveRenderer()
    else:
        renderer = PlainRenderer()
    renderer.submit_mode = submit_mode
    renderer.verbose = verbose
    renderer.cwd = cwd
    return renderer
