"""Where ``ra replay`` looks for the records of a session's subagents.

A subagent is recorded in a record of its own whose header names the session that spawned it
(``spawned_by``). Replaying a session id, they are in the session store. Replaying a record
*file*, they may also lie beside it: records copied out of the store into a directory of fixtures,
or sent along with the parent's. :func:`subagent_store` gives the replay both, the directory's
first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["subagent_store"]

#: The most files of a directory looked at, and the largest read (a directory of fixtures, not a
#: disk to scan).
MAX_FILES = 1000
MAX_BYTES = 64 * 1024 * 1024


async def subagent_store(record: str | None) -> Any:
    """The session store, and, when ``record`` is a file, the subagent records beside it."""
    import asyncio

    from ra.agent.store import MemorySessionStore, default_store

    store = default_store()
    if record is None:
        return store
    found = await asyncio.to_thread(_records_beside, record)
    if not found:
        return store
    beside = MemorySessionStore()
    for entries in found:
        try:
            await beside.append(entries[0]["id"], entries)
        except (ValueError, TypeError):  # an id that is no session id, a second record of one id
            continue
    return _FirstOf(beside, store)


def _records_beside(record: str) -> list[list[dict[str, Any]]]:
    """The entries of each ``*.jsonl`` file beside the file ``record`` whose header says a session
    spawned it. A file that is not a readable record is passed over: it is not what was asked to
    be replayed."""
    path = Path(record)
    if not path.is_file():
        return []
    own = path.resolve()
    try:
        paths = sorted(own.parent.glob("*.jsonl"))[:MAX_FILES]
    except OSError:
        return []
    return [entries for entries in (_read_subagent(p, own) for p in paths) if entries is not None]


def _read_subagent(path: Path, skip: Path) -> list[dict[str, Any]] | None:
    from ra.agent.store import StoreError
    from ra.agent.store.files import decode_record

    try:
        if path.resolve() == skip or not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        with path.open("rb") as f:
            head = json.loads(f.readline())
            if not (isinstance(head, dict) and head.get("type") == "session" and head.get("spawned_by")):
                return None
            f.seek(0)
            return decode_record(f.read(), path)
    except (OSError, ValueError, RecursionError, StoreError):
        return None


class _FirstOf:
    """Two stores read as one: a session in the first hides one of the same id in the second."""

    def __init__(self, first: Any, second: Any) -> None:
        self._stores = (first, second)

    def __repr__(self) -> str:
        return f"{self._stores[0]!r} and {self._stores[1]!r}"

    async def list(self, cwd: str | None = None) -> list[Any]:
        seen: set[str] = set()
        out = []
        for store in self._stores:
            for info in await store.list(cwd):
                if info.id not in seen:
                    seen.add(info.id)
                    out.append(info)
        return out

    async def load(self, session_id: str) -> list[dict[str, Any]] | None:
        for store in self._stores:
            entries = await store.load(session_id)
            if entries is not None:
                return entries
        return None
