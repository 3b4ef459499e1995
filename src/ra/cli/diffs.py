"""File changes on the terminal: a compact coloured diff after each edit, a tally at the end.

The editing tools (``apply_patch``, ``edit_file``, ``write_file``) put a unified diff record per
file in their ``TOOL_CALL_END`` metadata (:mod:`ra.tools.file_diff`); this module only reads those
records, so it works for any tool that returns them and never touches the files itself.

What is shown, and why:

* A changed file: its name with ``+added -removed``, then the hunks as numbered lines (``-`` lines
  red with their old number, ``+`` lines green and context dim with their new one), hunks apart
  by a ``⋮`` row. Long diffs stop after a few dozen rows with "… N more lines", since the point is
  a glance at what happened (``--verbose`` shows them whole; ``--json`` has the full record).
* A new file: its first lines only; a deleted file: its name and line count.
* At the end of a run (or an interactive turn): "3 files changed: a.py (+4 -1), b.py (new, +20)".

rich is imported only when something is drawn (``import ra`` stays light).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from .terminal_text import visible

__all__ = ["ChangeTally", "FileDiff", "diff_renderable", "file_diffs", "short_path"]

#: Rows (diff lines) shown per changed file, and for a new file, before "… N more lines".
DIFF_ROWS = 30
NEW_FILE_ROWS = 10
#: With more files than this in one call, each gets fewer rows.
MANY_FILES = 3
MANY_FILES_ROWS = 10
MANY_NEW_FILE_ROWS = 5

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass(slots=True)
class FileDiff:
    """One file's change as a tool reported it."""

    path: str
    #: "created", "modified" or "deleted".
    status: str
    added: int | None
    removed: int | None
    #: The unified diff; None when it could not be made (binary or unreadable earlier content).
    unified: str | None
    old_path: str | None = None
    truncated: bool = False

    @classmethod
    def from_record(cls, record: Any) -> FileDiff | None:
        if not isinstance(record, dict) or not isinstance(record.get("path"), str):
            return None
        added, removed, unified = record.get("added"), record.get("removed"), record.get("unified")
        old_path = record.get("old_path")
        return cls(
            path=record["path"],
            status=str(record.get("status") or "modified"),
            added=added if isinstance(added, int) else None,
            removed=removed if isinstance(removed, int) else None,
            unified=unified if isinstance(unified, str) else None,
            old_path=old_path if isinstance(old_path, str) else None,
            truncated=bool(record.get("truncated")),
        )


def file_diffs(metadata: Any) -> list[FileDiff]:
    """The diff records in a tool result's metadata: ``metadata["diff"]`` (edit_file,
    write_file) or ``metadata["changes"][i]["diff"]`` (apply_patch)."""
    if not isinstance(metadata, dict):
        return []
    records: list[Any] = []
    if "diff" in metadata:
        records.append(metadata["diff"])
    changes = metadata.get("changes")
    if isinstance(changes, list):
        records.extend(change.get("diff") for change in changes if isinstance(change, dict))
    return [d for d in (FileDiff.from_record(r) for r in records) if d is not None]


def short_path(path: str, cwd: str | None) -> str:
    """``path`` relative to ``cwd`` when it is inside it (what a user typed), else as given."""
    if cwd and os.path.isabs(path):
        try:
            if os.path.commonpath([path, cwd]) == cwd:
                return os.path.relpath(path, cwd)
        except ValueError:
            pass
    return path


def _name(diff: FileDiff, cwd: str | None) -> str:
    name = short_path(diff.path, cwd)
    if diff.old_path:
        name = f"{short_path(diff.old_path, cwd)} → {name}"
    return _clean(name)


def _counts(diff: FileDiff) -> list[tuple[str, str]]:
    """``(text, style)`` pieces for the parenthesis after a file name."""
    if diff.status == "deleted":
        return [("deleted", "red")] + ([(f", -{diff.removed}", "red")] if diff.removed is not None else [])
    if diff.added is None or diff.removed is None:
        return [("replaced; no diff: binary or unreadable", "dim")]
    if diff.status == "created":
        return [("new", "green"), (f", +{diff.added}", "green")]
    return [(f"+{diff.added}", "green"), (" ", ""), (f"-{diff.removed}", "red")]


def _plain_counts(diff: FileDiff) -> str:
    return "".join(text for text, _ in _counts(diff))


# -- one file's diff -------------------------------------------------------------------------------


def _rows(unified: str) -> list[tuple[str, int, str]]:
    """``(kind, line number, text)`` per diff line; kind ``" "``, ``"-"``, ``"+"`` or ``"⋮"``
    (between hunks)."""
    rows: list[tuple[str, int, str]] = []
    old = new = 0
    lines = unified.split("\n")  # not splitlines(): a form feed or U+2028 inside a line is text
    if len(lines) >= 2 and lines[0].startswith("--- ") and lines[1].startswith("+++ "):
        lines = lines[2:]  # the file headers
    for line in lines:
        match = _HUNK.match(line)
        if match:
            if rows:
                rows.append(("⋮", 0, ""))
            old, new = int(match[1]), int(match[2])
            continue
        marker, text = line[:1], line[1:]
        if marker == " ":
            rows.append((" ", new, text))
            old, new = old + 1, new + 1
        elif marker == "-":
            rows.append(("-", old, text))
            old += 1
        elif marker == "+":
            rows.append(("+", new, text))
            new += 1
    return rows


def _clean(text: str) -> str:
    """A file's line or name for a diff row: control characters (C1 and direction overrides
    included) shown as symbols, as everywhere ra displays text (:mod:`ra.cli.terminal_text`)."""
    return visible(text.rstrip("\r\n").expandtabs(4)).replace("\n", "\u2424")


def diff_renderable(diff: FileDiff, *, cwd: str | None, max_rows: int | None, indent: int = 4) -> Any:
    """The file's name, counts and (up to ``max_rows``; None: all) numbered diff rows, for rich.
    A row longer than the terminal ends in "…" rather than wrapping into the next."""
    from rich.console import Group
    from rich.text import Text

    pad = " " * indent
    head = Text.assemble(pad, (_name(diff, cwd), "bold"), " (", *_counts(diff), ")")
    parts: list[Any] = [head]
    if diff.status == "deleted" or not diff.unified:
        return Group(*parts)
    rows = _rows(diff.unified)
    shown = rows if max_rows is None else rows[:max_rows]
    if shown and shown[-1][0] == "⋮":
        shown = shown[:-1]
    numbers = [n for kind, n, _ in shown if kind != "⋮"]
    digits = len(str(max(numbers))) if numbers else 1
    styles = {" ": "dim", "-": "red", "+": "green"}
    for kind, number, text in shown:
        if kind == "⋮":
            parts.append(Text(f"{pad}  {'⋮':>{digits}}", style="dim"))
            continue
        number_cell = (f"{number:>{digits}} ", "dim")
        row = Text.assemble(pad, "  ", number_cell, (f"{kind} {_clean(text)}", styles[kind]), no_wrap=True)
        row.overflow = "ellipsis"
        parts.append(row)
    more = sum(1 for kind, _, _ in rows[len(shown) :] if kind != "⋮")
    if more:
        parts.append(Text(f"{pad}  … {more} more line{'s' if more != 1 else ''}", style="dim"))
    if diff.truncated:
        parts.append(Text(f"{pad}  … (the rest of this diff was not recorded)", style="dim"))
    return Group(*parts)


def rows_for(diff: FileDiff, files: int, verbose: bool) -> int | None:
    """How many rows a file's diff gets: all with ``--verbose``, fewer when one call changed many files."""
    if verbose:
        return None
    many = files > MANY_FILES
    if diff.status == "created":
        return MANY_NEW_FILE_ROWS if many else NEW_FILE_ROWS
    return MANY_FILES_ROWS if many else DIFF_ROWS


# -- the tally -------------------------------------------------------------------------------------


class ChangeTally:
    """Files changed so far (by their final path), summed over every edit, for the closing line.

    Counts are the edits' sums (two edits of one line are ``+2 -2``), not a fresh diff of the
    first and last versions: the records hold diffs, not whole files.
    """

    def __init__(self) -> None:
        self._files: dict[str, FileDiff] = {}

    def __bool__(self) -> bool:
        return bool(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def clear(self) -> None:
        self._files.clear()

    def add(self, diff: FileDiff) -> None:
        old_key = diff.old_path if diff.old_path and diff.old_path != diff.path else None
        known = self._files.pop(old_key, None) if old_key else self._files.get(diff.path)
        if known is None:
            self._files[diff.path] = FileDiff(diff.path, diff.status, diff.added, diff.removed, None, diff.old_path)
            return
        if known.status == "created" and diff.status == "deleted":
            self._files.pop(diff.path, None)  # made and removed in the same run: nothing to report
            return
        status = diff.status if diff.status == "deleted" else known.status if known.status != "deleted" else "modified"
        added = None if known.added is None or diff.added is None else known.added + diff.added
        removed = None if known.removed is None or diff.removed is None else known.removed + diff.removed
        self._files[diff.path] = FileDiff(diff.path, status, added, removed, None, known.old_path or old_key)

    def _heading(self) -> str:
        n = len(self._files)
        return f"{n} file{'s' if n != 1 else ''} changed: "

    def line(self, cwd: str | None) -> str:
        """``"2 files changed: a.py (+4 -1), b.py (new, +20)"``."""
        items = [f"{_name(d, cwd)} ({_plain_counts(d)})" for d in self._files.values()]
        return self._heading() + ", ".join(items)

    def renderable(self, cwd: str | None) -> Any:
        from rich.text import Text

        text = Text(self._heading())
        for i, d in enumerate(self._files.values()):
            if i:
                text.append(", ")
            text.append(_name(d, cwd), style="bold")
            text.append_text(Text.assemble(" (", *_counts(d), ")"))
        return text
