"""The default store: one JSON Lines file per session, grouped by working directory.

Files live under ``<root>/<cwd-slug>/<UTC time>_<session id>.jsonl``; the root is
``$RA_SESSIONS_DIR`` when set, else ``platformdirs.user_state_dir("ra")/sessions``. Directories
are made ``0700`` and files ``0600``: a record holds the code and output the agent saw. A folder
or record found with looser modes is made private before it is written to; one owned by another
user is refused, and so is a record that is a symbolic link (it is neither read nor written
through: a link planted in place of a record could point at any file the user can write).

**Appending** takes an exclusive ``flock`` on the file (so two processes writing one record
never interleave their lines), writes the batch with one ``write`` in append mode and releases
the lock - except for the store that holds the record's lease, which writes without the lock
while the file is as it left it (see ``_append_leased`` for what that relies on): the cost does
not depend on the file's size, and once ``append`` returns, the lines
survive the process being killed (not a power loss: there is no fsync). The file stays open
for the session's next append (at most 16 per store; ``release(id)`` / ``close()`` close them);
a record deleted meanwhile is noticed (its link count is 0) and not written to. A write that fails
half-way (a full disk) is cut back to where it started. ``append_lines`` takes lines already
encoded (the recorder's), ``append_lines_now`` the same without waiting for another writer.

**A torn last line** - a process killed in the middle of a write - is skipped by ``load`` with
a logged WARNING. The next ``append`` repairs it under the lock before writing (a fragment that
is a whole JSON object gets its newline, any other fragment is cut off), so a torn line never
ends up in the middle of a record. An unended last line while another live session holds the
record's lease is that session's write in progress (it appends without the lock, and a write
becomes visible a page at a time): it is waited for, never cut.

**A lease** (``acquire``): a session holds an exclusive, non-blocking ``flock`` on
``<root>/.leases/<session id>.lock`` (which holds its pid) for as long as it records; a second
session asking for it gets :class:`SessionInUseError` naming that pid. The operating system drops
the lock when the process dies (``kill -9`` then ``--continue`` works); a lease file is removed
when its lease is released; ``delete`` refuses a record whose lease is held (SessionInUseError)
unless ``force=True``. ``load`` refuses a record larger than ``max_record_bytes`` (checked
before reading it). A line in the middle that is not a JSON object was put there
by something else: ``load`` raises :class:`StoreError` naming the file and line, and changes
nothing (the record is not silently shortened).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import itertools
import json
import logging
import os
import re
import stat
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .base import SessionInfo, SessionInUseError, StoreError, check_session_id, info_from_entries
from .encoding import EntryEncodeError, encode_entry, lines_bytes
from .format import RecordFormatError, entry_type

__all__ = ["ENV_VAR", "FileSessionStore", "cwd_slug", "decode_record", "default_root"]

_log = logging.getLogger("ra.agent.store")

#: The environment variable that overrides the root directory.
ENV_VAR = "RA_SESSIONS_DIR"
_SLUG_MAX = 80
_LOCK_POLL_S = 0.005
#: Record files a store keeps open for appends (least recently used ones are closed).
_MAX_OPEN = 16
_TAIL_CHUNK = 65536
#: Lines ``list`` decodes at most from each end of a record looking for its title and model (a
#: record of a million entries without a user message must not make a listing decode them all).
_INFO_SCAN = 1000
#: The largest record ``load`` reads by default.
MAX_RECORD_BYTES = 512 * 1024 * 1024
_LEASES = ".leases"


def default_root() -> Path:
    """``$RA_SESSIONS_DIR``, else the platform's state directory for ra, ``sessions`` below it."""
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_state_dir("ra")) / "sessions"


def cwd_slug(cwd: str) -> str:
    """The directory name for a working directory: its path with every run of characters other
    than letters, digits, ``.``, ``_`` and ``-`` turned into ``-``; long ones are cut and end with
    a hash of the whole path. Two directories may share a slug; ``list(cwd)`` compares the
    header's cwd itself."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", cwd).strip("-.") or "root"
    if len(slug) > _SLUG_MAX:
        digest = hashlib.sha256(cwd.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        slug = f"{slug[: _SLUG_MAX - 13]}-{digest}"
    return slug


class FileSessionStore:
    """Records as JSONL files under ``root`` (see the module doc for layout and guarantees)."""

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        lock_timeout: float = 10.0,
        max_record_bytes: int = MAX_RECORD_BYTES,
    ) -> None:
        self.root = Path(root).expanduser() if root is not None else default_root()
        #: Seconds ``append`` waits for another writer's lock before raising StoreError.
        self.lock_timeout = lock_timeout
        #: ``load`` raises StoreError for a record file larger than this (a record is read whole).
        self.max_record_bytes = max_record_bytes
        self._paths: dict[str, Path] = {}
        #: Files kept open for appends, least recently used first (at most ``_MAX_OPEN``).
        self._open: OrderedDict[str, _Open] = OrderedDict()
        #: Sessions whose lease this store holds (``acquire``): their appends need no file lock.
        self._leased: set[str] = set()
        self._mutex = threading.Lock()
        weakref.finalize(self, _close_all, self._open)

    def __repr__(self) -> str:
        return f"FileSessionStore({str(self.root)!r})"

    # -- where records are --------------------------------------------------------------------------
    def path_of(self, session_id: str) -> Path | None:
        """The file of a session's record, or None when there is none."""
        check_session_id(session_id)
        known = self._paths.get(session_id)
        if known is not None and known.exists():
            return known
        self._paths.pop(session_id, None)
        name = f"{session_id}.jsonl"
        try:
            # The time before the first "_" has none, so the rest of the name is exactly the id
            # (an id may hold "_": "a_b" must not find session "b").
            found = sorted(p for p in self.root.glob(f"*/*_{name}") if p.name.split("_", 1)[1] == name)
        except OSError:
            return None
        if not found:
            return None
        self._paths[session_id] = found[0]
        return found[0]

    def _new_path(self, session_id: str, header: dict[str, Any]) -> Path:
        cwd = header.get("cwd") if isinstance(header.get("cwd"), str) else ""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        folder = self.root / cwd_slug(cwd or "")
        try:
            # The root too (mkdir gives parents the default mode): its listing names your projects.
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            folder.mkdir(exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(f"session {session_id}: cannot create {folder}: {exc}") from exc
        return folder / f"{stamp}_{session_id}.jsonl"

    @staticmethod
    def _check_folder(session_id: str, folder: Path) -> None:
        """The record's folder must be the user's own; a looser mode than 0700 is tightened (a
        folder others can write lets them put links where records are)."""
        try:
            info = os.stat(folder)
            if info.st_uid != os.geteuid():
                raise StoreError(f"session {session_id}: {folder} is owned by another user (uid {info.st_uid})")
            if info.st_mode & 0o077:
                os.chmod(folder, 0o700)
        except OSError as exc:
            raise StoreError(f"session {session_id}: cannot use {folder}: {exc}") from exc

    # -- the protocol -----------------------------------------------------------------------------------
    async def append(self, session_id: str, entries: Sequence[dict[str, Any]]) -> None:
        check_session_id(session_id)
        if not entries:
            return
        first = entries[0]
        await self.append_lines(
            session_id, _encode(entries, session_id), first if entry_type(first) == "session" else None
        )

    async def append_lines(self, session_id: str, data: bytes, header: dict[str, Any] | None = None) -> None:
        """Append entries already encoded the way this store writes them: compact JSON objects,
        one a line, each ended by a newline, UTF-8 (``encoding.lines_bytes``). ``header``: the
        first entry, when the batch starts a record. The recorder's path: a step's lines are
        written as it made them, without a dict to decode or encode again."""
        check_session_id(session_id)
        if not data.endswith(b"\n"):
            raise ValueError("append_lines: the data must be whole lines, each ended by a newline")
        deadline = None
        while True:
            # No await between taking the lock and releasing it, and a mutex for threads that
            # share this store: the file's lock then orders writers across processes.
            with self._mutex:
                handle = self._handle(session_id, header)
                if header is None and session_id in self._leased and self._append_leased(session_id, handle, data):
                    return
                if self._append_locked(session_id, handle, data, header is not None):
                    return
            if deadline is None:
                deadline = time.monotonic() + self.lock_timeout
            elif time.monotonic() >= deadline:
                raise StoreError(
                    f"{handle.path}: another writer held the lock, or the live session's last line stayed "
                    f"unfinished, for over {self.lock_timeout:g} s"
                )
            await asyncio.sleep(_LOCK_POLL_S)

    def append_lines_now(self, session_id: str, data: bytes) -> bool:
        """:meth:`append_lines` to a record this store has open (it has appended to it), without
        waiting: False, with nothing written, when the file is not open here or another writer
        holds its lock. The recorder's per-step write: one locked append, no await."""
        if not data.endswith(b"\n"):
            raise ValueError("append_lines_now: the data must be whole lines, each ended by a newline")
        with self._mutex:
            handle = self._open.get(session_id)
            if handle is None:
                return False
            self._open.move_to_end(session_id)
            if session_id in self._leased and self._append_leased(session_id, handle, data):
                return True
            return self._append_locked(session_id, handle, data)

    def release(self, session_id: str) -> None:
        """Close the file kept open for the session's appends (the next append opens it again)."""
        with self._mutex:
            self._forget(session_id)

    def close(self) -> None:
        """Close every file kept open for appends."""
        with self._mutex:
            _close_all(self._open)

    def _handle(self, session_id: str, header: dict[str, Any] | None) -> _Open:
        """The session's open file, opened (or created, for a first append) when not yet open."""
        handle = self._open.get(session_id)
        if handle is not None:
            self._open.move_to_end(session_id)
            return handle
        path = self.path_of(session_id)
        if path is None:
            if header is None:
                raise StoreError(f"session {session_id}: the first append must start with the session header")
            path = self._new_path(session_id, header)
        self._check_folder(session_id, path.parent)
        fd = _open_private(session_id, path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        self._paths[session_id] = path
        handle = self._open[session_id] = _Open(fd, path)
        while len(self._open) > _MAX_OPEN:
            _, oldest = self._open.popitem(last=False)
            _close(oldest.fd)
        return handle

    def _append_leased(self, session_id: str, handle: _Open, data: bytes) -> bool:
        """The lease holder's append: no ``flock``, one ``fstat`` and one ``write``. Only while the
        file is as this store left it (its size is that after our last write, so no one else wrote
        since and there is no torn line to repair, and it is not deleted); False, with nothing
        written, otherwise: the caller takes the locked way, which looks at the end first.

        Why no lock is needed: holding the lease, this store is the only ra session writing the
        record. Another writer (a host's second store, a test) still takes the file's lock, and its
        batch is one ``write`` too: with ``O_APPEND``, the kernel puts each ``write`` on a regular
        file at the end and (Linux, local file systems: the inode lock is held for the whole call)
        never interleaves two of them, so lines of the two writers cannot mix."""
        fd, path = handle.fd, handle.path
        try:
            info = os.fstat(fd)
            if info.st_nlink == 0 or info.st_size != handle.end:
                return False
            handle.end = -1
            try:
                done = os.write(fd, data)
            except OSError as exc:
                raise _write_error(path, exc) from exc
            # The whole batch in one write, nearly always; else the rest, or none of it.
            handle.end = info.st_size + done if done == len(data) else _write_rest(fd, data, done, path, info.st_size)
        except OSError as exc:
            self._forget(session_id)
            raise StoreError(f"session {session_id}: cannot write {path}: {exc}") from exc
        except BaseException:
            self._forget(session_id)
            raise
        return True

    def _append_locked(self, session_id: str, handle: _Open, data: bytes, starts: bool = False) -> bool:
        """Lock, repair, write, unlock; False when another process holds the lock. ``starts``:
        the batch begins with a header, which only an empty file may take (a second session
        given an id that is taken must not write into the first one's record)."""
        fd, path = handle.fd, handle.path
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError as exc:
            self._forget(session_id)
            raise StoreError(f"session {session_id}: cannot lock {path}: {exc}") from exc
        gone = False
        try:
            info = os.fstat(fd)
            if info.st_nlink == 0:
                gone = True  # deleted since it was opened: start again from the path
            else:
                # The last write was ours and whole unless the size moved: then look at the end.
                if info.st_size == handle.end:
                    start = info.st_size
                elif _tail_open(fd, info.st_size) and self._lease_held_elsewhere(session_id):
                    # The lease holder appends without this lock (_append_leased), and a line it
                    # is writing can show half-written: the file's size grows a page at a time
                    # during the write. That is no torn line to cut off: wait for the write to
                    # end, as for the lock (a crashed holder's lease is gone, and then it is).
                    return False
                else:
                    start = _repair_tail(fd, path, info.st_size)
                if starts and start > 0:
                    raise _Taken
                handle.end = -1
                handle.end = _write_all(fd, data, path, start)
        except OSError as exc:
            self._forget(session_id)
            raise StoreError(f"session {session_id}: cannot write {path}: {exc}") from exc
        except _Taken:
            self._forget(session_id)
            raise StoreError(
                f"session {session_id} already has a record ({path}); a new session cannot start in it"
            ) from None
        except BaseException:
            self._forget(session_id)
            raise
        finally:
            if session_id in self._open:
                try:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                except OSError:
                    pass
        if gone:
            self._forget(session_id)
            self._paths.pop(session_id, None)
            raise StoreError(f"session {session_id}: {path} was deleted while the session was recorded to it")
        return True

    def _forget(self, session_id: str) -> None:
        handle = self._open.pop(session_id, None)
        if handle is not None:
            _close(handle.fd)

    async def load(self, session_id: str) -> list[dict[str, Any]] | None:
        path = self.path_of(session_id)
        if path is None:
            return None
        try:
            fd = _open_private(session_id, path, os.O_RDONLY)
        except _Gone:
            return None
        try:
            size = os.fstat(fd).st_size
        except OSError as exc:
            _close(fd)
            raise StoreError(f"session {session_id}: cannot read {path}: {exc}") from exc
        if size > self.max_record_bytes:
            _close(fd)
            raise StoreError(
                f"session {session_id}: {path} is {size} bytes, over the {self.max_record_bytes}-byte limit "
                "for a record (FileSessionStore(max_record_bytes=...))"
            )
        try:
            data = _read_all(fd)
        except OSError as exc:
            raise StoreError(f"session {session_id}: cannot read {path}: {exc}") from exc
        return decode_record(data, path)

    async def list(self, cwd: str | None = None) -> list[SessionInfo]:
        folders: Iterator[Path]
        if cwd is not None:
            folders = iter([self.root / cwd_slug(cwd)])
        else:
            try:
                folders = iter([p for p in self.root.iterdir() if p.is_dir()])
            except OSError:
                return []
        out = []
        for folder in folders:
            try:
                files = list(folder.glob("*_*.jsonl"))
            except OSError:
                continue
            for path in files:
                info = _info(path, self.max_record_bytes)
                if info is not None and (cwd is None or info.cwd == cwd):
                    out.append(info)
        out.sort(key=lambda info: info.updated, reverse=True)
        return out

    async def delete(self, session_id: str, *, force: bool = False) -> bool:
        """Remove the record; False when there is none. A record whose lease a live session holds
        (in this process or another, this store included) is refused with SessionInUseError
        naming its pid, unless ``force``: that session then stops recording with a warning. The
        lease is held while the file is removed, so no session starts on it in between."""
        check_session_id(session_id)
        lease = None if force else self._try_lease(session_id)
        try:
            with self._mutex:
                self._forget(session_id)
            path = self.path_of(session_id)
            self._paths.pop(session_id, None)
            if path is None:
                return False
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise StoreError(f"session {session_id}: cannot delete {path}: {exc}") from exc
            return True
        finally:
            if lease is not None:
                _drop_lease([lease], self.root / _LEASES / f"{session_id}.lock")

    def _lease_held_elsewhere(self, session_id: str) -> bool:
        """Whether a live session other than this store's holds the record's lease (another
        process, or another store object of this one: ``flock`` tells them apart)."""
        if session_id in self._leased:
            return False
        path = self.root / _LEASES / f"{session_id}.lock"
        try:
            fd = _open_private(session_id, path, os.O_RDONLY)
        except (_Gone, StoreError):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        finally:
            _close(fd)  # closing drops a lock taken here
        return False

    def _try_lease(self, session_id: str) -> int | None:
        """The fd of the session's lease file, locked, when it exists and no one holds it (None
        when there is no lease file); SessionInUseError when a live session holds it."""
        path = self.root / _LEASES / f"{session_id}.lock"
        try:
            fd = _open_private(session_id, path, os.O_RDWR)
        except _Gone:
            return None
        _lock_lease(fd, session_id, path, "a live session", "its record is not deleted while that session runs")
        return fd

    async def acquire(self, session_id: str) -> _FileLease:
        """Hold the session's record for a live session (see the module doc); SessionInUseError
        while another session, in this process or another, holds it."""
        check_session_id(session_id)
        folder = self.root / _LEASES
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            folder.mkdir(exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(f"session {session_id}: cannot create {folder}: {exc}") from exc
        self._check_folder(session_id, folder)
        path = folder / f"{session_id}.lock"
        for _ in range(8):  # another session may remove the file between our open and our lock
            fd = _open_private(session_id, path, os.O_RDWR | os.O_CREAT)
            _lock_lease(fd, session_id, path, "another session", "fork it with fork_session=True or wait until it ends")
            try:
                same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except OSError:
                same = False
            if not same:
                _close(fd)
                continue
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            except OSError as exc:
                _close(fd)
                raise StoreError(f"session {session_id}: cannot write {path}: {exc}") from exc
            self._leased.add(session_id)
            return _FileLease(fd, path, self._leased, session_id)
        raise StoreError(f"session {session_id}: {path} kept changing; cannot take the lease")


class _FileLease:
    """A held lease: the lock file's fd (closing it drops the lock; so does the process dying)."""

    def __init__(self, fd: int, path: Path, leased: set[str] | None = None, session_id: str = "") -> None:
        self.path = path
        self._state = [fd]
        self._finalizer = weakref.finalize(self, _drop_lease, self._state, path, leased, session_id)

    def release(self) -> None:
        self._finalizer()

    def __repr__(self) -> str:
        return f"<lease {self.path}{'' if self._state else ' (released)'}>"


def _drop_lease(state: list[int], path: Path, leased: set[str] | None = None, session_id: str = "") -> None:
    """Remove the lease file while it is still locked (a newcomer that opened it before then
    sees a different inode after locking, and starts again), then unlock by closing. The store
    stops appending without the file lock first (``leased``: its set of held leases)."""
    if not state:
        return
    if leased is not None:
        leased.discard(session_id)
    fd = state.pop()
    with contextlib.suppress(OSError):
        if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
            os.unlink(path)
    _close(fd)


class _Taken(Exception):
    """A batch that starts a record was about to be written into one that exists."""


class _Gone(Exception):
    """The record's file is not there (any more)."""


def _open_private(session_id: str, path: Path, flags: int) -> int:
    """Open a record without following a symbolic link, check that it is a regular file of this
    user, and make it 0600 if it is looser; StoreError otherwise (_Gone: no such file, for a read)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except FileNotFoundError:
        if flags & os.O_CREAT:
            raise StoreError(f"session {session_id}: cannot open {path}: no such directory") from None
        raise _Gone from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"session {session_id}: {path} is a symbolic link; ra does not follow it") from None
        raise StoreError(f"session {session_id}: cannot open {path}: {exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"session {session_id}: {path} is not a regular file")
        if info.st_uid != os.geteuid():
            raise StoreError(f"session {session_id}: {path} is owned by another user (uid {info.st_uid})")
        if info.st_mode & 0o077 and flags & os.O_CREAT:
            os.fchmod(fd, 0o600)
        os.set_blocking(fd, True)
    except OSError as exc:
        _close(fd)
        raise StoreError(f"session {session_id}: cannot use {path}: {exc}") from exc
    except BaseException:
        _close(fd)
        raise
    return fd


def _read_all(fd: int) -> bytes:
    """The whole file behind ``fd`` (closed after)."""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        _close(fd)
    return b"".join(chunks)


class _Open:
    """A record's file kept open for appends, and its size after this store's last write to it
    (-1: unknown), so an append checks the end of the file only when someone else wrote there."""

    __slots__ = ("end", "fd", "path")

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path
        self.end = -1


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)  # also releases its lock


def _close_all(handles: OrderedDict[str, _Open]) -> None:
    while handles:
        _close(handles.popitem()[1].fd)


def _encode(entries: Sequence[dict[str, Any]], session_id: str) -> bytes:
    """The lines of ``entries`` (compact, UTF-8, strict JSON; see :mod:`.encoding`)."""
    try:
        return lines_bytes([encode_entry(entry) for entry in entries])
    except EntryEncodeError as exc:
        raise StoreError(f"session {session_id}: {exc}") from None


def _write_all(fd: int, data: bytes, path: Path, start: int) -> int:
    """Write ``data`` at the end (``start`` bytes): all of it, or nothing; returns the new size."""
    try:
        done = os.write(fd, data)
    except OSError as exc:
        raise _write_error(path, exc) from exc
    if done == len(data):
        return start + done
    return _write_rest(fd, data, done, path, start)


def _write_error(path: Path, exc: OSError) -> StoreError:
    reason = "the disk is full" if exc.errno == errno.ENOSPC else str(exc)
    return StoreError(f"cannot write {path}: {reason}")


def _write_rest(fd: int, data: bytes, done: int, path: Path, start: int) -> int:
    """The rest of ``data`` after a first write that took only ``done`` bytes of it: all of it,
    or nothing (what was written is undone); returns the new size."""
    pieces: list[tuple[int, int]] = []  # where each part of a write cut short went (offset, length)
    try:
        pieces.append((os.lseek(fd, 0, os.SEEK_CUR) - done, done))
        view = memoryview(data)[done:]
        while view:
            done = os.write(fd, view)
            pieces.append((os.lseek(fd, 0, os.SEEK_CUR) - done, done))
            view = view[done:]
    except OSError as exc:
        _undo(fd, path, pieces)
        raise _write_error(path, exc) from exc
    return start + len(data)


def _undo(fd: int, path: Path, pieces: list[tuple[int, int]]) -> None:
    """Leave no half batch behind (a full disk still lets a file shrink or be overwritten). When
    the file ends with the parts written, it is cut back to before them; when another writer has
    written after them (the lease holder takes no lock), cutting would take its lines too, so the
    parts are overwritten with spaces instead: a line of spaces is skipped, and spaces before
    another writer's JSON object leave it whole. Best effort: an error here is not raised."""
    if not pieces:
        return
    with contextlib.suppress(OSError):
        first, (last, length) = pieces[0][0], pieces[-1]
        whole = all(at + n == nxt for (at, n), (nxt, _) in itertools.pairwise(pieces))
        info = os.fstat(fd)
        if whole and info.st_size == last + length:
            os.ftruncate(fd, first)
            return
        # Through a descriptor without O_APPEND (where pwrite would append on Linux).
        other = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            if os.fstat(other).st_ino == info.st_ino:
                for at, n in pieces:
                    os.pwrite(other, b" " * n, at)
        finally:
            os.close(other)


def _tail_open(fd: int, size: int) -> bool:
    """Whether the file's last line has no newline yet (torn, or still being written)."""
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def _repair_tail(fd: int, path: Path, size: int) -> int:
    """Under the lock: end a torn last line before appending after it (see the module doc);
    returns the file's size after the repair."""
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    start = size
    fragment = b""
    while start > 0:
        step = min(_TAIL_CHUNK, start)
        chunk = os.pread(fd, step, start - step)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            fragment = chunk[cut + 1 :] + fragment
            start = start - step + cut + 1
            break
        fragment = chunk + fragment
        start -= step
    try:
        whole = isinstance(json.loads(fragment), dict)
    except ValueError:
        whole = False
    try:
        if whole:
            os.write(fd, b"\n")
            return size + 1
        os.ftruncate(fd, start)
        _log.warning("%s: cut off a torn last line (%d bytes) before appending", path, len(fragment))
        return start
    except OSError as exc:
        raise StoreError(f"cannot repair the torn last line of {path}: {exc}") from exc


def decode_record(data: bytes, path: Path) -> list[dict[str, Any]]:
    """A record file's bytes as its entries: a torn last line skipped with a warning, anything
    else that is not a JSON object a StoreError naming ``path`` and the line."""
    lines = data.split(b"\n")
    last = len(lines) - 1  # the part after the final newline: empty unless the last line is torn
    out: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            entry, error = None, str(exc)
        except RecursionError:
            raise StoreError(f"{path}:{number}: not a record entry (JSON nested too deeply to read)") from None
        else:
            error = "" if isinstance(entry, dict) else f"a JSON {type(entry).__name__}, not an object"
        if error:
            if number - 1 == last:
                _log.warning("%s:%d: skipped a torn last line (%d bytes): %s", path, number, len(line), error)
                continue
            raise StoreError(f"{path}:{number}: not a record entry ({error}); the file was changed by something else")
        out.append(entry)  # type: ignore[arg-type]
    return out


def _info(path: Path, max_bytes: int = MAX_RECORD_BYTES) -> SessionInfo | None:
    """A record's SessionInfo from its file: the header, the first user entry, the last entry
    that names a model, and the line count. Only those few lines are decoded (a listing of long
    records reads their bytes, but does not parse or split them), and at most ``_INFO_SCAN`` from
    each end: a title or model further in is not looked for (the header's model stands)."""
    try:
        found = path.stat()
        if found.st_size > max_bytes:  # not listed: it could not be loaded either (nor read for a title)
            _log.warning(
                "%s: %d bytes, over the %d-byte limit for a record; not listed", path, found.st_size, max_bytes
            )
            return None
        data = path.read_bytes()
        updated = found.st_mtime
    except OSError:
        return None
    picked: list[dict[str, Any]] = []
    scanned_to = 0
    for scanned, (start, end) in enumerate(_forward(data)):
        if scanned >= _INFO_SCAN:
            break
        scanned_to = end
        entry = _loads(data[start:end])
        if entry is None:
            continue
        if not picked and entry_type(entry) != "session":
            return None
        picked.append(entry)
        if entry_type(entry) == "user":
            break
    for scanned, (start, end) in enumerate(_backward(data, scanned_to)):
        if scanned >= _INFO_SCAN:
            break
        entry = _loads(data[start:end])
        if entry is not None and entry_type(entry) in ("assistant", "config") and "model" in entry:
            picked.append(entry)
            break
    try:
        info = info_from_entries(picked, updated)
    except RecordFormatError:
        return None
    lines = data.count(b"\n")
    tail = data[data.rfind(b"\n") + 1 :]
    if tail.strip() and _loads(tail) is not None:
        lines += 1  # a whole last entry without its newline; a torn one is not counted
    return dataclasses.replace(info, entries=max(0, lines - 1))


def _forward(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each non-blank line, first to last."""
    pos, size = 0, len(data)
    while pos < size:
        end = data.find(b"\n", pos)
        if end < 0:
            end = size
        if data[pos:end].strip():
            yield pos, end
        pos = end + 1


def _backward(data: bytes, stop: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each non-blank line after offset ``stop``, last to first."""
    end = len(data)
    while end > stop:
        cut = data.rfind(b"\n", stop, end)
        start = cut + 1 if cut >= 0 else stop
        if data[start:end].strip():
            yield start, end
        if cut < 0:
            break
        end = cut


def _loads(line: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return entry if isinstance(entry, dict) else None


def _lock_lease(fd: int, session_id: str, path: Path, holder_kind: str, advice: str) -> None:
    """Lock a lease file without waiting; on failure the fd is closed and the error names the
    holder's pid (which it wrote into the file)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        _close(fd)
        raise SessionInUseError(
            f"session {session_id} is in use by {holder_kind} (pid {holder or 'unknown'}); {advice}"
        ) from None
    except OSError as exc:
        _close(fd)
        raise StoreError(f"session {session_id}: cannot lock {path}: {exc}") from exc
