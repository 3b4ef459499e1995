"""Session records: the format (:mod:`.format`), stores that keep them, and resuming from them.

See docs/sessions.md for the format and what a host can plug in. Names load lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "SessionStore": ".base",
    "SessionInfo": ".base",
    "StoreError": ".base",
    "SessionNotFoundError": ".base",
    "SessionInUseError": ".base",
    "Lease": ".base",
    "FileSessionStore": ".files",
    "MemorySessionStore": ".memory",
    "SessionRecord": ".record",
    "load_record": ".record",
    "Recorder": ".recorder",
    "RecordFormatError": ".format",
    "FORMAT_VERSION": ".format",
    "check_store": ".conformance",
}

_names, __getattr__, _dir = lazy_exports(__name__, _EXPORTS)
__all__ = sorted([*_names, "default_store"])


def __dir__() -> list[str]:
    return __all__


def default_store() -> FileSessionStore:
    """The store ``ra.sdk`` and the ``ra`` command record to: a :class:`FileSessionStore` at
    ``$RA_SESSIONS_DIR`` or the platform's state directory (read when called)."""
    from .files import FileSessionStore

    return FileSessionStore()


if TYPE_CHECKING:  # pragma: no cover
    from .base import Lease, SessionInfo, SessionInUseError, SessionNotFoundError, SessionStore, StoreError
    from .conformance import check_store
    from .files import FileSessionStore
    from .format import FORMAT_VERSION, RecordFormatError
    from .memory import MemorySessionStore
    from .record import SessionRecord, load_record
    from .recorder import Recorder
