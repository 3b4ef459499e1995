"""How a ra tool call looks in an editor: ACP's tool kind, a title, the files it touches.

Pure functions of the call's name and arguments, so the ``tool_call`` update, the permission
question and a replayed history all describe a call the same way.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["call_paths", "tool_kind", "tool_locations", "tool_title"]

_KINDS: dict[str, str] = {
    "read_file": "read",
    "read_many_files": "read",
    "list_dir": "search",
    "glob": "search",
    "grep": "search",
    "grep_files": "search",
    "edit_file": "edit",
    "write_file": "edit",
    "apply_patch": "edit",
    "shell": "execute",
    "shell_command": "execute",
    "web_fetch": "fetch",
    "web_open": "fetch",
    "web_find": "fetch",
    "web_search": "fetch",
    "spawn_agent": "think",
    "update_plan": "think",
}
_PATH_KEYS = ("file_path", "path", "dir_path")


def _patch_ops(arguments: dict[str, Any]) -> list[Any]:
    text = arguments.get("patch", arguments.get("input"))
    if not isinstance(text, str):
        return []
    from ra.tools.patch_parse import parse_patch

    try:
        return list(parse_patch(text).operations)
    except Exception:
        return []


def tool_kind(name: str, arguments: dict[str, Any]) -> str:
    """ACP's ``ToolKind`` for a call: read, edit, delete, move, search, execute, think, fetch or
    other. A patch that only deletes files is ``delete``, one that only moves them ``move``."""
    kind = _KINDS.get(name, "other")
    if name == "apply_patch":
        ops = _patch_ops(arguments)
        if ops and all(op.kind.value == "delete" for op in ops):
            return "delete"
        if ops and all(op.move_to and not op.hunks for op in ops):
            return "move"
    return kind


def call_paths(name: str, arguments: dict[str, Any]) -> list[str]:
    """The files a call names in its arguments (a patch: every file it adds, changes, deletes or
    moves), as given."""
    if name == "apply_patch":
        from ra.agent.permissions.rules import patch_paths

        text = arguments.get("patch", arguments.get("input"))
        return patch_paths(text) if isinstance(text, str) else []
    found = [arguments[key] for key in _PATH_KEYS if isinstance(arguments.get(key), str) and arguments[key]]
    paths = arguments.get("paths")
    if isinstance(paths, list):
        found.extend(p for p in paths if isinstance(p, str) and p)
    return found


def _absolute(path: str, cwd: str) -> str:
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))


def tool_locations(name: str, arguments: dict[str, Any], cwd: str) -> list[dict[str, Any]]:
    """``ToolCallLocation``s (absolute path, and the first line read when the call says)."""
    line = arguments.get("offset") if name == "read_file" else None
    out: list[dict[str, Any]] = []
    for path in call_paths(name, arguments):
        entry: dict[str, Any] = {"path": _absolute(path, cwd)}
        if isinstance(line, int) and line >= 1:
            entry["line"] = line
        out.append(entry)
    return out


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_title(name: str, arguments: dict[str, Any]) -> str:
    """A one-line title: the command for a shell call, the verb and file for file tools."""
    command = arguments.get("command")
    if isinstance(command, str) and _KINDS.get(name) == "execute":
        return _short(command)
    paths = call_paths(name, arguments)
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    verbs = {
        "read_file": "Read",
        "read_many_files": "Read",
        "list_dir": "List",
        "edit_file": "Edit",
        "write_file": "Write",
        "apply_patch": "Patch",
    }
    if name in verbs and shown:
        return f"{verbs[name]} {shown}"
    if name == "update_plan":  # shown as a call only when it failed or is asked about
        return "Update the plan"
    pattern = arguments.get("pattern")
    if isinstance(pattern, str) and _KINDS.get(name) == "search":
        return _short(f"{name} {pattern}" + (f" in {shown}" if shown else ""))
    for key in ("url", "query"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return _short(f"{name} {value}")
    return name
