"""The files a conversation read and changed, taken from its tool calls' arguments.

A summary written by a model forgets file names; these lists are collected by ra itself and
carried from one compaction to the next in ``CompactionTurn.details`` (``read_files``,
``modified_files``), so that after many compactions the model still knows what it touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..history import AssistantTurn, ToolResultsTurn, Turn

__all__ = ["touched_files"]

#: Tools that read one file or several, by the argument that names them (ra's and Claude Code's names).
_READ = {"read_file": ("file_path", "path"), "Read": ("file_path",), "read_many_files": ("paths",)}
#: Tools that change files, by the argument that names them; apply_patch names them in its patch.
_WRITE = {
    "write_file": ("file_path", "path"),
    "edit_file": ("file_path", "path"),
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",),
}
_PATCH = ("apply_patch",)


def touched_files(turns: Iterable[Turn], previous: Mapping[str, Any] | None = None) -> dict[str, list[str]]:
    """``{"read_files": [...], "modified_files": [...]}``: ``previous`` lists, then the files the
    tool calls in ``turns`` name, each once, in the order they were first named. Calls that
    failed (an error result) touched nothing and are left out."""
    turns = list(turns)
    failed = {r.tool_call_id for t in turns if isinstance(t, ToolResultsTurn) for r in t.results if r.is_error}
    read = _ordered(previous.get("read_files") if previous else None)
    modified = _ordered(previous.get("modified_files") if previous else None)
    for turn in turns:
        if not isinstance(turn, AssistantTurn):
            continue
        for call in turn.tool_calls:
            if call.id in failed:
                continue
            args = call.arguments if isinstance(call.arguments, dict) else {}
            if call.name in _READ:
                _add(read, _named(args, _READ[call.name]))
            elif call.name in _WRITE:
                _add(modified, _named(args, _WRITE[call.name]))
            elif call.name in _PATCH:
                _add(modified, _patched(args.get("patch")))
    return {"read_files": list(read), "modified_files": list(modified)}


def _ordered(value: Any) -> dict[str, None]:
    return dict.fromkeys(v for v in value if isinstance(v, str)) if isinstance(value, list) else {}


def _add(into: dict[str, None], names: Iterable[str]) -> None:
    for name in names:
        if name and name not in into:
            into[name] = None


def _named(args: Mapping[str, Any], keys: tuple[str, ...]) -> list[str]:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str):
            return [value]
        if isinstance(value, list):
            return [v for v in value if isinstance(v, str)]
    return []


def _patched(patch: Any) -> list[str]:
    if not isinstance(patch, str):
        return []
    from ra.tools.patch_parse import PatchError, parse_patch

    try:
        operations = parse_patch(patch).operations
    except PatchError:
        return []  # the call failed too: it changed nothing
    names: list[str] = []
    for op in operations:
        names.append(op.path)
        if op.move_to:
            names.append(op.move_to)
    return names
