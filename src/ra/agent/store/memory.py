"""A store that keeps records in memory: for tests, and for hosts that persist elsewhere.

Entries are copied through JSON on the way in and out, so a record here is exactly what a file
store would hold (a value that JSON cannot carry fails at ``append`` here too), and a caller
that changes an entry it appended or loaded changes nothing in the store.
"""

from __future__ import annotations

import json
import os
import time
import weakref
from collections.abc import Sequence
from typing import Any

from .base import SessionInfo, SessionInUseError, StoreError, check_session_id, info_from_entries
from .format import RecordFormatError, entry_type

__all__ = ["MemorySessionStore"]


class MemorySessionStore:
    """Records in a dict, by session id (one process; safe across its tasks: no await inside)."""

    def __init__(self) -> None:
        self._records: dict[str, list[str]] = {}
        self._updated: dict[str, float] = {}
        #: Sessions a live session holds (``acquire``): one at a time per id, as in a file store.
        self._held: set[str] = set()

    async def append(self, session_id: str, entries: Sequence[dict[str, Any]]) -> None:
        check_session_id(session_id)
        lines = [_encode(entry, session_id) for entry in entries]
        record = self._records.get(session_id)
        if record is None:
            if not entries or entry_type(entries[0]) != "session":
                raise StoreError(f"session {session_id}: the first append must start with the session header")
            record = self._records[session_id] = []
        elif record and entries and entry_type(entries[0]) == "session":
            raise StoreError(f"session {session_id} already has a record; a new session cannot start in it")
        record.extend(lines)
        self._updated[session_id] = time.time()

    async def load(self, session_id: str) -> list[dict[str, Any]] | None:
        check_session_id(session_id)
        record = self._records.get(session_id)
        return None if record is None else [json.loads(line) for line in record]

    async def list(self, cwd: str | None = None) -> list[SessionInfo]:
        out = []
        for sid, lines in self._records.items():
            try:
                info = info_from_entries([json.loads(line) for line in lines], self._updated[sid])
            except RecordFormatError:
                continue
            if cwd is None or info.cwd == cwd:
                out.append(info)
        out.sort(key=lambda info: info.updated, reverse=True)
        return out

    async def acquire(self, session_id: str) -> _MemoryLease:
        """Hold the session's record for a live session; SessionInUseError while another holds it."""
        check_session_id(session_id)
        if session_id in self._held:
            raise SessionInUseError(
                f"session {session_id} is in use by another session (pid {os.getpid()}); "
                "fork it with fork_session=True or wait until it ends"
            )
        self._held.add(session_id)
        return _MemoryLease(self._held, session_id)

    async def delete(self, session_id: str) -> bool:
        check_session_id(session_id)
        self._updated.pop(session_id, None)
        return self._records.pop(session_id, None) is not None


class _MemoryLease:
    """A held lease of a MemorySessionStore (released on ``release`` or when collected)."""

    def __init__(self, held: set[str], session_id: str) -> None:
        self._finalizer = weakref.finalize(self, held.discard, session_id)

    def release(self) -> None:
        self._finalizer()


def _encode(entry: dict[str, Any], session_id: str) -> str:
    if not isinstance(entry, dict):
        raise StoreError(f"session {session_id}: an entry must be a dict, got {type(entry).__name__}")
    try:
        return json.dumps(entry, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"session {session_id}: an entry cannot be written as JSON: {exc}") from None
