"""Reading a child process's output pipes in large pieces, with few wake-ups.

asyncio's own pipe transports read at most 256 KiB at a time from a pipe the kernel sizes at
64 KiB, and wake the event loop for every write the child makes: a command that prints fast costs
one loop iteration per 64 KiB or less, and a program that writes many small records (ripgrep's
threads, one line per file) one per record. The pipes made here are enlarged to
:data:`PIPE_SIZE` where the system allows (Linux ``F_SETPIPE_SZ``; elsewhere, or past the
per-user limit, they stay as they are) and read :data:`READ_SIZE` bytes at a time, so a fast
producer is drained in a few large reads.

Both readers here also stop waking up for every small write once a child has been trickling:
after a few short reads in a row, each next read waits :data:`_SETTLE_S` (1 ms) so the writes
gather in the pipe. The bytes and their order within a stream are the same, only taken in fewer
pieces; a command's first reads, and every read while output comes fast, are not delayed. On two
cores this matters more than the Python per read: each wake-up of the reader takes the CPU from
the very processes producing the output (200 MB of ``yes | head``: ~3,000 reads -> ~300).

:class:`OutputPipes` hands every piece to a callback (command capture: a live ``on_output``
observer sees output within a millisecond), or moves it into a file the consumer names with
``os.splice`` (the spill file, past the memory cap); :class:`PipeReader` is awaited piece by piece
(a search that stops reading once it has enough).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Callable

__all__ = ["PIPE_SIZE", "READ_SIZE", "OutputPipes", "PipeReader", "make_pipe"]

#: The capacity asked for each pipe (the unprivileged maximum on Linux by default,
#: ``/proc/sys/fs/pipe-max-size``). Pages are only allocated as data is written.
PIPE_SIZE = 1024 * 1024
#: The most read at once.
READ_SIZE = 1024 * 1024
#: A read of less than this part of the pipe's capacity is a trickle: the reader is keeping up
#: with ease (with the pipe enlarged, under 256 KiB) ...
_SMALL_PART = 4
#: ... and after this many in a row, the reader waits :data:`_SETTLE_S` before the next read, so
#: that many small writes are taken in one read instead of one wake-up each. The first reads are
#: never delayed: a small search or a short command ends without waiting. A writer faster than
#: the reader fills the pipe past the threshold, and is read again at once.
_SMALL_READS_BEFORE_SETTLING = 4
_SETTLE_S = 0.001
_F_SETPIPE_SZ = 1031  # Linux; fcntl.F_SETPIPE_SZ from Python 3.10 on Linux only
_F_GETPIPE_SZ = 1032
_DEFAULT_PIPE_SIZE = 64 * 1024  # where the capacity cannot be asked for


def make_pipe() -> tuple[int, int]:
    """A new pipe ``(read_fd, write_fd)``, not inherited by children unless passed to them
    (``os.pipe`` makes both ends non-inheritable), enlarged to :data:`PIPE_SIZE` when allowed."""
    read_fd, write_fd = os.pipe()
    if sys.platform.startswith("linux"):
        import fcntl

        with contextlib.suppress(OSError):  # EPERM past pipe-max-size or the user's pipe quota
            fcntl.fcntl(read_fd, getattr(fcntl, "F_SETPIPE_SZ", _F_SETPIPE_SZ), PIPE_SIZE)
    return read_fd, write_fd


#: One read buffer per thread, reused: ``os.read(fd, READ_SIZE)`` allocates (and the kernel
#: zero-fills and maps) a fresh MiB for every read, however little it returns - about 200 µs
#: for a 100 KB read; reading into a buffer already mapped and copying out what came costs a
#: quarter of that. The copy is taken at once, so readers of one thread can share it.
_buffers = threading.local()


def _read(fd: int) -> bytes:
    """Up to :data:`READ_SIZE` bytes from ``fd`` (``b""`` at its end); raises as ``os.read``."""
    view: memoryview | None = getattr(_buffers, "view", None)
    if view is None:
        view = _buffers.view = memoryview(bytearray(READ_SIZE))
    return bytes(view[: os.readv(fd, [view])])


def _small_read(fd: int) -> int:
    """The size under which a read from this pipe counts as a trickle."""
    capacity = _DEFAULT_PIPE_SIZE
    if sys.platform.startswith("linux"):
        import fcntl

        with contextlib.suppress(OSError):
            capacity = fcntl.fcntl(fd, getattr(fcntl, "F_GETPIPE_SZ", _F_GETPIPE_SZ))
    return max(1, capacity // _SMALL_PART)


class OutputPipes:
    """A command's stdout and stderr pipes, read by the event loop.

    ``open()`` makes the pipes and returns the write ends to give the child; ``started()`` (once
    the child exists) closes the parent's write ends and starts reading; every piece goes to
    ``on_data(index, data)`` (0 stdout, 1 stderr) at once, and ``on_closed()`` runs once both
    pipes reached their end (every process holding them closed them or exited). ``close()`` stops
    reading and closes what is still open; a process still writing then gets EPIPE/SIGPIPE, as
    with asyncio's transports.

    ``splice_target(index)``, when given, names a file descriptor the next bytes of that pipe
    should go to instead (Linux ``os.splice``: the kernel moves them from the pipe into the file,
    no copy through Python); ``on_spliced(index, count)`` then reports how many went, and
    ``on_splice_error(exc)`` a failed move, whose bytes stay in the pipe for the next read.
    """

    __slots__ = (
        "_loop",
        "_on_closed",
        "_on_data",
        "_on_splice_error",
        "_on_spliced",
        "_open",
        "_read_fds",
        "_resume",
        "_small",
        "_small_read",
        "_splice_target",
        "_write_fds",
    )

    def __init__(
        self,
        on_data: Callable[[int, bytes], None],
        on_closed: Callable[[], None],
        *,
        splice_target: Callable[[int], int | None] | None = None,
        on_spliced: Callable[[int, int], None] | None = None,
        on_splice_error: Callable[[OSError], None] | None = None,
    ) -> None:
        self._on_data = on_data
        self._on_closed = on_closed
        self._splice_target = splice_target if hasattr(os, "splice") else None
        self._on_spliced = on_spliced
        self._on_splice_error = on_splice_error
        self._read_fds: list[int | None] = [None, None]
        self._write_fds: list[int] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open = 0
        self._small = [0, 0]  # short reads in a row, per pipe
        self._small_read = [1, 1]
        self._resume: list[asyncio.TimerHandle | None] = [None, None]

    def open(self) -> tuple[int, int]:
        try:
            for index in range(2):
                read_fd, write_fd = make_pipe()
                self._read_fds[index] = read_fd
                self._small_read[index] = _small_read(read_fd)
                self._write_fds.append(write_fd)
        except BaseException:
            self.close()
            raise
        return self._write_fds[0], self._write_fds[1]

    def close_write_ends(self) -> None:
        """The child has its copies now (or was never started): the parent's must go, or the
        pipes never reach their end."""
        fds, self._write_fds = self._write_fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def started(self, loop: asyncio.AbstractEventLoop) -> None:
        self.close_write_ends()
        self._loop = loop
        for index, fd in enumerate(self._read_fds):
            if fd is not None:
                os.set_blocking(fd, False)
                loop.add_reader(fd, self._read_ready, index)
                self._open += 1

    def _read_ready(self, index: int) -> None:
        fd = self._read_fds[index]
        if fd is None:
            return
        target = self._splice_target(index) if self._splice_target is not None else None
        if target is not None:
            # Straight into the file the consumer named, without passing through Python.
            try:
                size = os.splice(fd, target, READ_SIZE, flags=os.SPLICE_F_NONBLOCK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if self._on_splice_error is not None:
                    self._on_splice_error(exc)  # the bytes are still in the pipe: read next time
                return
            if size and self._on_spliced is not None:
                self._on_spliced(index, size)
        else:
            try:
                data = _read(fd)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""  # a read error ends the pipe, as asyncio's transport does
            size = len(data)
            if data:
                self._on_data(index, data)
        if size:
            if size >= self._small_read[index]:
                self._small[index] = 0
            else:
                self._small[index] += 1
                if self._small[index] >= _SMALL_READS_BEFORE_SETTLING and self._loop is not None:
                    # A trickle: let it gather for a moment instead of waking for every write.
                    self._loop.remove_reader(fd)
                    self._resume[index] = self._loop.call_later(_SETTLE_S, self._read_again, index)
            return
        self._close_one(index)
        self._open -= 1
        if self._open == 0:
            self._on_closed()

    def _read_again(self, index: int) -> None:
        self._resume[index] = None
        fd = self._read_fds[index]
        if fd is not None and self._loop is not None:
            self._loop.add_reader(fd, self._read_ready, index)

    def _close_one(self, index: int) -> None:
        resume, self._resume[index] = self._resume[index], None
        if resume is not None:
            resume.cancel()
        fd, self._read_fds[index] = self._read_fds[index], None
        if fd is None:
            return
        if self._loop is not None:
            self._loop.remove_reader(fd)
        with contextlib.suppress(OSError):
            os.close(fd)

    def close(self) -> None:
        """Stop reading; close every end still open (idempotent)."""
        self.close_write_ends()
        for index in range(2):
            self._close_one(index)


class PipeReader:
    """The read end of a pipe, read piece by piece from a coroutine: ``await read()`` returns
    the next piece, ``b""`` at the end. Once the writer has been trickling (several short reads in
    a row), each read first waits :data:`_SETTLE_S` so the small writes gather; the output is the
    same, only taken in fewer, larger pieces."""

    __slots__ = ("_fd", "_loop", "_small", "_small_read")

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._loop = asyncio.get_running_loop()
        self._small = 0
        self._small_read = _small_read(fd)
        os.set_blocking(fd, False)

    async def read(self) -> bytes:
        fd = self._fd
        if fd is None:
            return b""
        if self._small >= _SMALL_READS_BEFORE_SETTLING:
            await asyncio.sleep(_SETTLE_S)
        while True:
            try:
                data = _read(fd)
            except (BlockingIOError, InterruptedError):
                await self._readable(fd)
                continue
            self._small = self._small + 1 if len(data) < self._small_read else 0
            return data

    async def _readable(self, fd: int) -> None:
        ready = self._loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        self._loop.add_reader(fd, wake)
        try:
            await ready
        finally:
            self._loop.remove_reader(fd)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
