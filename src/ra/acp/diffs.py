"""Edits as ACP diffs: each edited file's text before and after the call.

A control, so it runs where the tool runs: ``before_tool`` (after every permission check let the
call through) reads the files the call names, ``after_tool`` reads them again, and the pair is
what the editor's diff view shows (``old_text`` / ``new_text``: the whole file, so the editor can
place the change). Reads go through the session's environment, so with the editor's file system
they are its buffers. The same hook tells the editor the call is now running (``in_progress``),
and tells an :class:`~ra.acp.environment.AcpEnvironment` which commands are the model's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ra.agent.controls.chain import Control
from ra.tools.registry import ToolEffect

from .tools import call_paths

if TYPE_CHECKING:
    from ra.agent.state import RunState
    from ra.env.base import ExecutionEnvironment
    from ra.llm.types import ToolCall
    from ra.tools.pipeline import ToolCallOutcome
    from ra.tools.registry import RegisteredTool

__all__ = ["EditSnapshots", "FileDiff"]

#: Files larger than this are not snapshotted (the diff would be too large to be useful to send).
MAX_DIFF_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileDiff:
    path: str
    #: None: the file did not exist before the call.
    old_text: str | None
    #: "" for a file the call deleted.
    new_text: str


class _Unknown:
    """A file whose text cannot be shown (binary, too large, unreadable)."""


_UNKNOWN = _Unknown()


async def _text(env: ExecutionEnvironment, path: str) -> str | _Unknown | None:
    try:
        data = await env.read_bytes(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return _UNKNOWN
    if len(data) > MAX_DIFF_BYTES:
        return _UNKNOWN
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _UNKNOWN


def _record_paths(metadata: dict[str, Any] | None) -> list[str]:
    """Paths in the editing tools' diff records (``ra.tools.file_diff``), moves' targets included."""
    if not metadata:
        return []
    records: list[Any] = []
    if isinstance(metadata.get("diff"), dict):
        records.append(metadata["diff"])
    changes = metadata.get("changes") or ()
    records.extend(c["diff"] for c in changes if isinstance(c, dict) and isinstance(c.get("diff"), dict))
    return [r[key] for r in records for key in ("old_path", "path") if isinstance(r.get(key), str)]


class EditSnapshots(Control):
    """Snapshots of the files an editing call touches; ``diffs.pop(call_id)`` after it ran."""

    def __init__(self, started: Callable[[str], None]) -> None:
        self._started = started
        self._before: dict[str, dict[str, str | _Unknown | None]] = {}
        #: Call id -> the files it changed (filled by ``after_tool``, taken by the update sender).
        self.diffs: dict[str, list[FileDiff]] = {}

    async def before_tool(self, run: RunState, call: ToolCall, tool: RegisteredTool) -> None:
        self._started(call.id)
        begin = getattr(run.env, "begin_tool", None)
        if begin is not None and tool.effect in (ToolEffect.EXECUTE, None):
            begin(call.id)  # its commands may go to the editor's terminal
        if tool.effect is not ToolEffect.EDIT:
            return None
        env = run.env
        snapshot: dict[str, str | _Unknown | None] = {}
        for path in call_paths(call.name, call.arguments):
            try:
                full = env.resolve(path)
            except ValueError:
                continue
            if full not in snapshot:
                snapshot[full] = await _text(env, full)
        self._before[call.id] = snapshot
        return None

    async def after_tool(self, run: RunState, outcome: ToolCallOutcome, tool: RegisteredTool | None) -> ToolCallOutcome:
        end = getattr(run.env, "end_tool", None)
        if end is not None:
            end(outcome.call.id)
        snapshot = self._before.pop(outcome.call.id, None)
        if snapshot is None or outcome.is_error:
            return outcome
        env = run.env
        for path in _record_paths(outcome.metadata):
            try:
                full = env.resolve(path)
            except ValueError:
                continue
            snapshot.setdefault(full, None)
        diffs: list[FileDiff] = []
        for full, old in snapshot.items():
            if isinstance(old, _Unknown):
                continue
            new = await _text(env, full)
            if isinstance(new, _Unknown) or new == old:
                continue
            diffs.append(FileDiff(full, old, new or ""))
        self.diffs[outcome.call.id] = diffs
        return outcome
