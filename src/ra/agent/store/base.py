"""What a session store is: the protocol a host implements to keep records where it wants.

A store keeps *records*: per session, the list of JSON objects that :mod:`.format` defines (a
header, then entries). It knows nothing of ra's types - a host's database or object store only
ever sees plain dicts - and it interprets only the header (for :meth:`SessionStore.list`).
:class:`~ra.agent.store.files.FileSessionStore` (one JSONL file per session) is the default;
:class:`~ra.agent.store.memory.MemorySessionStore` keeps records in memory;
:func:`ra.agent.store.conformance.check_store` checks any implementation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import SessionError
from .format import RecordFormatError, entry_type, parse_time

__all__ = [
    "Lease",
    "SessionInUseError",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStore",
    "StoreError",
    "acquire_lease",
    "check_session_id",
    "info_from_entries",
    "shorten_title",
]

#: Session ids a store accepts: they become file names, so no separators, no leading dot.
_SAFE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
_TITLE_LENGTH = 80


class StoreError(SessionError):
    """The store could not keep or read a record (a disk error, a corrupt record). The message
    names the session, and for a file store the file and line."""


class SessionNotFoundError(SessionError):
    """No record for the session id asked for (``resume=``), or no entry with the id asked for
    (``resume_at=``)."""


class SessionInUseError(SessionError):
    """Another live session records to the session asked for (``resume=`` without a fork): two
    sessions going on from one record would each start from its spend (together spending the
    budget twice) and write two branches into it."""


@runtime_checkable
class Lease(Protocol):
    """A session's hold on its record (see :meth:`SessionStore.acquire`)."""

    def release(self) -> None:
        """Let the record go (idempotent; must not block)."""
        ...


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session as :meth:`SessionStore.list` shows it (read from its header and entries)."""

    id: str
    cwd: str
    #: Seconds since the epoch: when the record started, and when it was last written.
    created: float
    updated: float
    #: The model in force at the end of the record (the last config or assistant entry's).
    model: str
    #: The first user message, on one line, shortened.
    title: str
    #: The session this one was forked from, or None.
    parent_id: str | None = None
    #: Entries in the record (the header not counted), or None when the store cannot tell cheaply.
    entries: int | None = None
    #: For a subagent's record: its agent id (``continue_conversation`` skips these).
    agent_id: str | None = None
    #: For a subagent's record: the id of the session that spawned it (its header's ``spawned_by``).
    spawned_by: str | None = None


@runtime_checkable
class SessionStore(Protocol):
    """Where records live. Every method is async; implementations must be safe to call from
    several sessions (and, for shared media, several processes) at once."""

    async def append(self, session_id: str, entries: Sequence[dict[str, Any]]) -> None:
        """Add ``entries`` at the end of the session's record, in order. The first append of a
        session starts with its header (``{"type": "session", ...}``). Raises StoreError when
        they cannot be kept."""
        ...

    async def load(self, session_id: str) -> list[dict[str, Any]] | None:
        """The record in order (header first), or None when there is none. A torn last entry (a
        crash mid-write) is left out with a logged WARNING, never an error."""
        ...

    async def list(self, cwd: str | None = None) -> list[SessionInfo]:
        """The sessions (of working directory ``cwd``, or all), newest first."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Remove the session's record; False when there was none."""
        ...

    # Optional (not part of the runtime check): ``async def acquire(session_id) -> Lease``. A
    # session that records to the store holds the lease of its record from when it is opened (a
    # resume or fork) or started (a new session) until it closes; ``acquire`` raises
    # SessionInUseError while another session holds it. A store without ``acquire`` gives no
    # lease: two sessions may then resume one record at once (see docs/sessions.md).


async def acquire_lease(store: Any, session_id: str) -> Lease | None:
    """``store.acquire(session_id)`` when the store has leases, else None."""
    acquire = getattr(store, "acquire", None)
    if not callable(acquire):
        return None
    lease: Lease | None = await acquire(session_id)
    return lease


def check_session_id(session_id: Any) -> str:
    """``session_id`` if it can name a record (letters, digits, ``.``, ``_``, ``-``; not starting
    with a dot; at most 128 characters), else ValueError: ids become file names."""
    if not isinstance(session_id, str) or not _SAFE_ID.fullmatch(session_id):
        raise ValueError(
            f"invalid session id {session_id!r}: use letters, digits, '.', '_' and '-' (not first), "
            "at most 128 characters"
        )
    return session_id


def shorten_title(text: str) -> str:
    """A user message as a one-line title of at most 80 characters."""
    line = " ".join(text.split())
    return line if len(line) <= _TITLE_LENGTH else line[: _TITLE_LENGTH - 1] + "\u2026"


def info_from_entries(entries: Sequence[dict[str, Any]], updated: float | None = None) -> SessionInfo:
    """The :class:`SessionInfo` of a record (header first). ``updated`` defaults to the time of
    the last entry. Raises RecordFormatError for a record that does not start with a header."""
    if not entries or entry_type(entries[0]) != "session":
        raise RecordFormatError("record: the first entry is not a session header")
    head = entries[0]
    sid = head.get("id")
    if not isinstance(sid, str):
        raise RecordFormatError("header.id: expected a string")
    created = parse_time(head.get("timestamp"), "header.timestamp")
    title = ""
    for entry in entries[1:]:
        if entry_type(entry) == "user" and isinstance(entry.get("content"), str):
            title = shorten_title(entry["content"])
            break
    model = head.get("model") if isinstance(head.get("model"), str) else ""
    for entry in reversed(entries[1:]):
        if entry_type(entry) in ("assistant", "config") and isinstance(entry.get("model"), str):
            model = entry["model"]
            break
    if updated is None:
        updated = created
        for entry in reversed(entries[1:]):
            stamp = entry.get("timestamp")
            if isinstance(stamp, str):
                try:
                    updated = parse_time(stamp, "entry.timestamp")
                except RecordFormatError:
                    continue
                break
    parent = head.get("parent_session")
    agent_id = head.get("agent_id")
    spawned_by = head.get("spawned_by")
    return SessionInfo(
        id=sid,
        cwd=head.get("cwd") if isinstance(head.get("cwd"), str) else "",
        created=created,
        updated=updated,
        model=model or "",
        title=title,
        parent_id=parent.get("id") if isinstance(parent, dict) and isinstance(parent.get("id"), str) else None,
        entries=len(entries) - 1,
        agent_id=agent_id if isinstance(agent_id, str) else None,
        spawned_by=spawned_by if isinstance(spawned_by, str) else None,
    )
